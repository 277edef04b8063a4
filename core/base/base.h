/*
 * core/base: services every other module uses: logging, parameters, error propagation, system and
 * CUDA call wrappers. This is the only header of the module meant for the rest of the core.
 */
#ifndef CHOIR_BASE_H
#define CHOIR_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"

/* ---- Logging ---------------------------------------------------------------------------- */

/* Current level and subsystem mask; -1 until the log is initialized from the environment. */
extern int log_level_;
extern uint64_t log_mask_;

void log_init(void);
/* Forget the log settings so that the next message re-reads NCCL_DEBUG* (ncclResetDebugInit). */
void log_reset(void);
void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) __attribute__((format(printf, 5, 6)));
void log_vmessage(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, va_list ap);
/* The logger handed to plugins (ncclDebugLogger_t). */
void log_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* fmt, ...) __attribute__((format(printf, 5, 6)));
/* Device shown in log lines of this thread ([dev]); -1 when none. */
void log_set_thread_device(int dev);

static inline bool log_enabled(int level, unsigned long flags) {
  if (__builtin_expect(log_level_ < 0, 0)) log_init();
  return level <= log_level_ && (level <= NCCL_LOG_WARN || (flags & log_mask_));
}

/* WARN also records the message as the text ncclGetLastError returns. */
#define WARN(...) log_message(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(flags, ...)                                                              \
  do {                                                                                \
    if (log_enabled(NCCL_LOG_INFO, (flags)))                                          \
      log_message(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__);           \
  } while (0)
#define TRACE(flags, ...)                                                             \
  do {                                                                                \
    if (log_enabled(NCCL_LOG_TRACE, (flags)))                                         \
      log_message(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

/* ---- Errors ------------------------------------------------------------------------------ */

const char* err_string(ncclResult_t res);
/* Record `fmt` as the last error without logging it (WARN does both). */
void err_set_last(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* err_last(void);
void err_clear_last(void);

/* Propagate a failure, leaving a file:line trail at INFO. ncclInProgress is not a failure. */
#define CHECK(call)                                                                   \
  do {                                                                                \
    ncclResult_t res_ = (call);                                                       \
    if (res_ != ncclSuccess && res_ != ncclInProgress) {                              \
      INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, res_);                        \
      return res_;                                                                    \
    }                                                                                 \
  } while (0)

#define CHECK_GOTO(call, res, label)                                                  \
  do {                                                                                \
    (res) = (call);                                                                   \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                            \
      INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res));                       \
      goto label;                                                                     \
    }                                                                                 \
  } while (0)

/* A system call that returns -1 and sets errno. */
#define SYSCHECK(call, name)                                                          \
  do {                                                                                \
    if ((call) == -1) {                                                               \
      WARN("%s failed: %m", (name));                                                  \
      return ncclSystemError;                                                         \
    }                                                                                 \
  } while (0)

/* ---- Parameters -------------------------------------------------------------------------- */

/* Tests build the module with their own table (which includes this one) to exercise every type. */
#ifndef PARAM_TABLE_HEADER
#define PARAM_TABLE_HEADER "base_param_table.h"
#endif

typedef enum {
#define PARAM_INT(id, env, def, help) PARAM_##id,
#define PARAM_STR(id, env, def, help) PARAM_##id,
#include PARAM_TABLE_HEADER
#undef PARAM_INT
#undef PARAM_STR
  PARAM_COUNT
} param_id_t;

typedef enum { PARAM_TYPE_INT, PARAM_TYPE_STR } param_type_t;

typedef struct {
  const char* env;
  param_type_t type;
  int64_t def_int;
  const char* def_str;
  const char* help;
} param_desc_t;

/* Values are read at first use (a net plugin may set variables during its init) and then kept. */
int64_t param_int(param_id_t id);
/* NULL when unset and without default. The string lives until the process ends. */
const char* param_str(param_id_t id);
/* True when the environment (or a conf file) gave a value. */
bool param_is_set(param_id_t id);
const param_desc_t* param_desc(param_id_t id);
/* Apply NCCL_CONF_FILE (or ~/.nccl.conf, then /etc/nccl.conf) to the environment, once. */
void param_load_conf_files(void);
/* One NCCL_CONF_FILE line, edited in place: "KEY = value" gives true with both trimmed; blank
 * lines, comments (#), lines without '=' or with an empty key give false. */
bool param_conf_line(char* line, char** key_p, char** val_p);
/* An integer knob value: strtoll base 0 (decimal, 0x hex, 0 octal), trailing blanks allowed,
 * nothing else; false when malformed or out of range. */
bool param_int_parse(const char* s, long long* out);

/* ---- System helpers ---------------------------------------------------------------------- */

/* Host name up to the first '.', never fails (falls back to "unknown"). */
const char* sys_hostname(void);
/* Case-insensitive comparison of ASCII strings. */
int sys_strcasecmp(const char* a, const char* b);
/* Copy with truncation and guaranteed termination; returns the length that was wanted. */
size_t sys_strlcpy(char* dst, const char* src, size_t size);

/* 64-bit hash of bytes (FNV-1a, then mixed), and of a 64-bit value combined into a hash. */
uint64_t sys_hash(const void* data, size_t size);
uint64_t sys_hash_mix(uint64_t h, uint64_t v);
/* Identifies this host (host name and boot id) and this process on it. */
uint64_t sys_host_hash(void);
/* NCCL's LSA block for nranks ranks whose host hashes are at host_hash, host_hash + stride bytes,
 * ...: ranks of one host in blocks of consecutive world ranks, the same size everywhere: the
 * greatest common divisor of the runs of consecutive ranks that share a host (1 when hosts
 * interleave ranks). The LSA team of rank r is the block holding r. */
int sys_lsa_block(const uint64_t* host_hash, size_t stride, int nranks);
uint64_t sys_pid_hash(void);

/* ---- CUDA runtime wrappers (base_cuda.c) -------------------------------------------------- */

/* A CUDA runtime call's result (a cudaError_t as int): ncclSuccess, or a WARN naming the call and
 * the error and ncclUnhandledCudaError (base_cuda_err.c). */
ncclResult_t cuda_result(int err, const char* call);
#define CUDA_CHECK(call)                                                                  \
  do {                                                                                    \
    ncclResult_t cuda_res_ = cuda_result((int)(call), #call);                             \
    if (cuda_res_ != ncclSuccess) return cuda_res_;                                       \
  } while (0)

ncclResult_t cuda_get_device(int* dev_p);
ncclResult_t cuda_set_device(int dev);
ncclResult_t cuda_device_count(int* n_p);
/* PCI location as one number: domain << 20 | bus << 12 | device << 4 | function. */
ncclResult_t cuda_bus_id(int dev, int64_t* bus_id_p);
ncclResult_t cuda_mem_get_info(size_t* free_p, size_t* total_p);
/* Compute capability as major * 10 + minor. */
ncclResult_t cuda_device_sm(int dev, int* sm_p);
/* Multiprocessors of the device, and whether this process's context on it is an MPS client
 * (kernels of several processes then run at the same time). */
ncclResult_t cuda_device_mp_count(int dev, int* n_p);
ncclResult_t cuda_device_mps(int dev, int* on_p);

/* ncclMemAlloc / ncclMemFree (base_cumem.c): cuMem allocations on the current device, mapped for
 * its peers; cudaMalloc with NCCL_CUMEM_ENABLE=0. */
ncclResult_t cumem_alloc(void** ptr_p, size_t size);
ncclResult_t cumem_free(void* ptr);
/* The live ncclMemAlloc allocation holding ptr: its base, size as asked, and whether it is a
 * cuMem one (else cudaMalloc, NCCL_CUMEM_ENABLE=0). ncclInvalidArgument (no message) if none. */
ncclResult_t cumem_find(const void* ptr, void** base_p, size_t* size_p, bool* cumem_p);
/* A file descriptor for the cuMem allocation at base (the caller's to close) and the bytes it
 * maps (its size rounded to the granularity). */
ncclResult_t cumem_export_fd(void* base, size_t* mapped_p, int* fd_p);
/* A reserved virtual range with nmaps allocations mapped into it, each imported from a
 * descriptor, readable and writable by one device. */
typedef struct {
  void* va;
  size_t size;
  int nmaps;
  struct {
    unsigned long long handle; /* CUmemGenericAllocationHandle */
    size_t off, size;          /* size 0: not mapped */
  } * maps;
} cumem_flat_t;
ncclResult_t cumem_flat_reserve(cumem_flat_t* f, size_t size, int nmaps);
/* Map the allocation behind fd (fd stays the caller's) as part i at offset off, for device dev. */
ncclResult_t cumem_flat_map(cumem_flat_t* f, int i, size_t off, size_t size, int fd, int dev);
/* Unmap and release every part, free the range. */
void cumem_flat_free(cumem_flat_t* f);

/* ---- Allocation -------------------------------------------------------------------------- */

/* calloc that logs and returns ncclSystemError on failure; *ptr_p written only on success. */
ncclResult_t mem_calloc(void** ptr_p, size_t nmemb, size_t size);
#define MEM_CALLOC(ptr_p, n) mem_calloc((void**)(ptr_p), (n), sizeof(**(ptr_p)))

/* ---- Descriptors between local processes (base_ipcsock.c) -------------------------------- */

/* A datagram Unix socket in the abstract namespace named by (key, rank): the processes of one
 * host hand each other file descriptors (SCM_RIGHTS) through it. */
typedef struct {
  int fd; /* -1 when closed */
  uint64_t key;
  int rank;
  int dropped; /* malformed messages received and thrown away */
} ipcsock_t;

/* Binds (key, rank); ncclInvalidUsage when that name is taken in this network namespace. */
ncclResult_t ipcsock_open(ipcsock_t* s, uint64_t key, int rank);
void ipcsock_close(ipcsock_t* s);
/* Sends a duplicate of fd with tag to rank peer of the same key, waiting up to timeout_ms for
 * its socket to exist and have room; ncclRemoteError naming the peer after that. */
ncclResult_t ipcsock_send_fd(ipcsock_t* s, int peer, int fd, uint64_t tag, int timeout_ms);
/* The next well-formed message of this key: sender's rank, the descriptor (the caller's to
 * close) and the tag; malformed ones are dropped (counted in s->dropped). ncclRemoteError after
 * timeout_ms without one. */
ncclResult_t ipcsock_recv_fd(ipcsock_t* s, int* peer_p, int* fd_p, uint64_t* tag_p,
                             int timeout_ms);

/* ---- Sockets (base_socket.c) ------------------------------------------------------------- */

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* sock_addr_t, sock_if_t and the NCCL_SOCKET_IFNAME matching live in common/sock_if.h, shared
 * with the plugins. */
#include "sock_if.h"

/* Room for "[v6-address%scope]:port" and every shorter form. */
#define SOCK_ADDR_STRLEN 80
#define SOCK_NAME_MAX 40

/* A TCP socket (always non-blocking), the address it is connected to or listens on, and what the
 * peer is ("bootstrap root", "rank 3"), so that every message about it names both. */
typedef struct {
  int fd; /* -1 when closed */
  sock_addr_t addr;
  char name[SOCK_NAME_MAX];
} sock_t;

/* The bound of a blocking operation: it gives up with ncclRemoteError at end_ns (CLOCK_MONOTONIC),
 * and with ncclInternalError ("aborted") soon after *abort_flag becomes non-zero. */
typedef struct {
  uint64_t end_ns;
  uint64_t timeout_ms;           /* what end_ns was derived from, for messages */
  volatile uint32_t* abort_flag; /* may be NULL */
} sock_deadline_t;

/* How long one poll() waits at most while an abort flag is watched: the abort latency. */
#define SOCK_POLL_SLICE_MS 20

uint64_t sock_clock_ns(void);
sock_deadline_t sock_deadline(uint64_t timeout_ms, volatile uint32_t* abort_flag);
/* Checks one deadline; WARNs "<what> <peer>: timed out after N s" or "... aborted". */
ncclResult_t sock_deadline_check(const sock_deadline_t* dl, const char* what, const char* peer);
/* Milliseconds a poll() may wait now: up to the deadline, and one slice when aborts are watched. */
int sock_deadline_poll_ms(const sock_deadline_t* dl);

/* sock_addr_str and sock_addr_len: common/sock_if.h. */
bool sock_addr_equal(const sock_addr_t* a, const sock_addr_t* b);
/* Set the port (host byte order) of an IPv4 or IPv6 address; 0 for "any" when listening. */
void sock_addr_set_port(sock_addr_t* addr, uint16_t port);
/* An address from the wire is usable: IPv4 or IPv6, and a port unless port_may_be_zero. */
bool sock_addr_valid(const sock_addr_t* addr, bool port_may_be_zero);
/* "host:port", "ipv4:port" or "[ipv6]:port"; the host is resolved (NCCL_SOCKET_FAMILY applies). */
ncclResult_t sock_addr_parse(const char* str, sock_addr_t* addr_p);
/* The same with getaddrinfo flags (AI_NUMERICHOST: no name lookups, for the fuzz target). */
ncclResult_t sock_addr_parse_flags(const char* str, int ai_flags, sock_addr_t* addr_p);

/* NCCL_SOCKET_FAMILY as AF_INET, AF_INET6 or AF_UNSPEC (unset or invalid, with a WARN). */
int sock_family_param(void);
/* Interfaces that are up and match `spec`, in NCCL_SOCKET_IFNAME syntax: a comma-separated list of
 * name prefixes; a leading '^' excludes them instead, a leading '=' (after '^' if both) makes them
 * exact names. NULL spec: the default order (ib*, then anything but docker* and lo, then docker*,
 * then lo). family: AF_UNSPEC (IPv4 before IPv6), AF_INET or AF_INET6. One address per interface;
 * IPv6 link-local addresses are skipped (they need a scope). Fills up to max, *n_p = count. */
ncclResult_t sock_if_list(const char* spec, int family, sock_if_t* ifs, int max, int* n_p);
/* The interface bootstrap sockets use: NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY when set, else
 * the one on the subnet of NCCL_COMM_ID when that is set, else the default order. Decided at the
 * first successful call, then kept for the life of the process. */
ncclResult_t sock_if_bootstrap(sock_if_t* if_p);

/* Listen on addr (port 0: an ephemeral port); sock_p->addr is the bound address. */
ncclResult_t sock_listen(const sock_addr_t* addr, const char* name, sock_t* sock_p);
/* Accept one pending connection without blocking; *sock_p->fd is -1 when there was none. */
ncclResult_t sock_accept(sock_t* listener, sock_t* sock_p);
/* Connect to addr. With retry, refused or timed-out attempts are retried NCCL_SOCKET_RETRY_CNT
 * times, the i-th after i * NCCL_SOCKET_RETRY_SLEEP_MSEC ms; everything within the deadline. */
ncclResult_t sock_connect(const sock_addr_t* addr, const char* name, bool retry,
                          const sock_deadline_t* dl, sock_t* sock_p);
/* Move all bytes, waiting with poll() within the deadline. The peer closing or resetting is
 * ncclRemoteError. */
ncclResult_t sock_send(sock_t* sock, const void* buf, size_t size, const sock_deadline_t* dl);
ncclResult_t sock_recv(sock_t* sock, void* buf, size_t size, const sock_deadline_t* dl);
/* Send on `out` and receive on `in` at the same time, so that a ring of peers doing the same
 * cannot deadlock on full socket buffers. */
ncclResult_t sock_exchange(sock_t* out, const void* sbuf, size_t ssize, sock_t* in, void* rbuf,
                           size_t rsize, const sock_deadline_t* dl);
/* Non-blocking transfers for callers with their own poll loop: *n_p bytes moved (0: would block).
 * A peer that closed or reset returns ncclRemoteError WITHOUT a message, errno in *err_p (0 for an
 * orderly close): only the caller knows whether that is an error and what to call the peer. Local
 * failures WARN and return ncclSystemError. */
ncclResult_t sock_try_sendv(sock_t* sock, const struct iovec* iov, int niov, size_t* n_p,
                            int* err_p);
ncclResult_t sock_try_recv(sock_t* sock, void* buf, size_t size, size_t* n_p, int* err_p);
void sock_close(sock_t* sock);

#endif
