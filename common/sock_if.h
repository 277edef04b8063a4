/*
 * Network interface selection as NCCL documents it (NCCL_SOCKET_IFNAME syntax, NCCL_SOCKET_FAMILY
 * families, the default order), libc only. Shared by the core (core/base, for bootstrap sockets)
 * and by Choir's socket-based plugins, which may not link the core: no logging, no params here;
 * callers read their variables and report errors themselves.
 */
#ifndef CHOIR_COMMON_SOCK_IF_H
#define CHOIR_COMMON_SOCK_IF_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 socket address; `sa.sa_family` tells which member is valid. */
typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} sock_addr_t;

#define SOCK_IFNAME_MAX 16

typedef struct {
  char name[SOCK_IFNAME_MAX];
  sock_addr_t addr; /* port 0 */
} sock_if_t;

#define SOCK_IF_SPEC_MAX 32

/* A parsed NCCL_SOCKET_IFNAME value. */
typedef struct {
  bool exclude; /* '^': the list names interfaces NOT to use */
  bool exact;   /* '=': names, not prefixes */
  int n;
  char tok[SOCK_IF_SPEC_MAX][64];
} sock_if_spec_t;

struct ifaddrs;

/* Parses a comma-separated list of name prefixes; a leading '^' excludes them instead, a leading
 * '=' (after '^' if both) makes them exact names. Spaces around names are dropped; names too long
 * and names past the SOCK_IF_SPEC_MAX-th are ignored. */
void sock_if_spec_parse(const char* spec, sock_if_spec_t* s);
bool sock_if_spec_match(const sock_if_spec_t* s, const char* name);
/* Usable for a socket between hosts: up, an address of `family`, a name that fits, not IPv6
 * link-local (it would need a scope). */
bool sock_if_usable(const struct ifaddrs* ifa, int family);
/* Name and address (port 0) of ifa, which sock_if_usable accepted. */
void sock_if_fill(const struct ifaddrs* ifa, sock_if_t* out);
/* Interfaces that are usable and match `spec`; NULL spec: the default order (ib*, then anything
 * but docker* and lo, then docker*, then lo: the first group that is not empty). family:
 * AF_UNSPEC (IPv4 before IPv6), AF_INET or AF_INET6. One address per interface. Fills up to max
 * entries and writes the count to *n_p. Returns 0, or the errno of a failed getifaddrs. */
int sock_if_scan(const char* spec, int family, sock_if_t* ifs, int max, int* n_p);

/* "a.b.c.d:port" or "[x::y%scope]:port" into buf, for messages; returns buf. */
const char* sock_addr_str(const sock_addr_t* addr, char* buf, size_t size);
/* The sockaddr length of a's family. */
socklen_t sock_addr_len(const sock_addr_t* addr);

/* A message moved piecewise over a non-blocking stream socket. */
typedef struct {
  char* buf;
  size_t len, done;
} sock_msg_t;

enum { SOCK_MSG_OK = 0, SOCK_MSG_CLOSED = 1, SOCK_MSG_ERROR = -1 };
/* Sends (out) or receives what the socket takes now, without blocking. SOCK_MSG_OK: progress
 * made or none possible yet (done == len once complete); SOCK_MSG_CLOSED: the peer closed the
 * connection (a receive read end-of-stream); SOCK_MSG_ERROR: errno says why. */
int sock_msg_move(int fd, sock_msg_t* m, bool out);
/* Starts a non-blocking TCP connection to addr (TCP_NODELAY set): the socket in *fd_p (-1 on
 * failure), *connected when it completed at once. Returns 0, or the errno of the failed socket()
 * (*remote false) or connect() (*remote true). */
int sock_connect_start(const sock_addr_t* addr, int* fd_p, bool* connected, bool* remote);
/* Whether a started connection is up, without blocking: 1 up, 0 not yet, -1 failed (errno). */
int sock_connect_poll(int fd);
/* Whether a socket errno means the peer went away (reset, refused, broken pipe, timed out). */
bool sock_err_remote(int err);

#endif
