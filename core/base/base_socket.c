/*
 * TCP sockets between processes: addresses, interface selection as NCCL documents it
 * (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), listen/accept/connect, and transfers bounded by a
 * deadline and an abort flag. Every socket is non-blocking; all waiting is poll(), in slices of
 * SOCK_POLL_SLICE_MS while an abort flag is watched, so that nothing blocks forever and nothing
 * spins.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

/* ---- Deadlines ------------------------------------------------------------------------------ */

uint64_t sock_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

sock_deadline_t sock_deadline(uint64_t timeout_ms, volatile uint32_t* abort_flag) {
  /* A century is "forever" and keeps the sum below 2^64. */
  const uint64_t max_ms = 100ull * 365 * 24 * 3600 * 1000;
  if (timeout_ms > max_ms) timeout_ms = max_ms;
  sock_deadline_t dl = {sock_clock_ns() + timeout_ms * 1000000ull, timeout_ms, abort_flag};
  return dl;
}

static bool sock_aborted(const sock_deadline_t* dl) {
  return dl->abort_flag != NULL && __atomic_load_n(dl->abort_flag, __ATOMIC_ACQUIRE) != 0;
}

ncclResult_t sock_deadline_check(const sock_deadline_t* dl, const char* what, const char* peer) {
  if (sock_aborted(dl)) {
    WARN("%s %s: aborted", what, peer);
    return ncclInternalError;
  }
  if (sock_clock_ns() >= dl->end_ns) {
    WARN("%s %s: timed out after %.3g s", what, peer, (double)dl->timeout_ms / 1000.0);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

int sock_deadline_poll_ms(const sock_deadline_t* dl) {
  uint64_t now = sock_clock_ns();
  if (now >= dl->end_ns) return 0;
  uint64_t ms = (dl->end_ns - now + 999999) / 1000000;
  if (dl->abort_flag != NULL && ms > SOCK_POLL_SLICE_MS) ms = SOCK_POLL_SLICE_MS;
  /* Wake at least once a second anyway: the callers re-check their own conditions. */
  if (ms > 1000) ms = 1000;
  return (int)ms;
}

/* ---- Addresses ------------------------------------------------------------------------------ */

bool sock_addr_equal(const sock_addr_t* a, const sock_addr_t* b) {
  if (a->sa.sa_family != b->sa.sa_family) return false;
  if (a->sa.sa_family == AF_INET)
    return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  if (a->sa.sa_family == AF_INET6)
    return a->sin6.sin6_port == b->sin6.sin6_port &&
           a->sin6.sin6_scope_id == b->sin6.sin6_scope_id &&
           memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr)) == 0;
  return false;
}

bool sock_addr_valid(const sock_addr_t* addr, bool port_may_be_zero) {
  if (addr->sa.sa_family == AF_INET) return port_may_be_zero || addr->sin.sin_port != 0;
  if (addr->sa.sa_family == AF_INET6) return port_may_be_zero || addr->sin6.sin6_port != 0;
  return false;
}

void sock_addr_set_port(sock_addr_t* addr, uint16_t port) {
  if (addr->sa.sa_family == AF_INET)
    addr->sin.sin_port = htons(port);
  else
    addr->sin6.sin6_port = htons(port);
}

int sock_family_param(void) {
  static int warned;
  const char* v = param_str(PARAM_SOCKET_FAMILY);
  if (v == NULL) return AF_UNSPEC;
  if (sys_strcasecmp(v, "AF_INET") == 0) return AF_INET;
  if (sys_strcasecmp(v, "AF_INET6") == 0) return AF_INET6;
  if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) == 0)
    WARN("NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6; ignoring it", v);
  return AF_UNSPEC;
}

ncclResult_t sock_addr_parse(const char* str, sock_addr_t* addr_p) {
  return sock_addr_parse_flags(str, 0, addr_p);
}

ncclResult_t sock_addr_parse_flags(const char* str, int ai_flags, sock_addr_t* addr_p) {
  char host[256];
  const char* port_s;
  int family = sock_family_param();
  if (str == NULL || str[0] == '\0') {
    WARN("empty socket address; expected host:port or [ipv6]:port");
    return ncclInvalidArgument;
  }
  if (str[0] == '[') {
    const char* close = strchr(str, ']');
    if (close == NULL || close[1] != ':' || (size_t)(close - str - 1) >= sizeof(host)) {
      WARN("socket address '%s' is malformed; expected [ipv6]:port", str);
      return ncclInvalidArgument;
    }
    memcpy(host, str + 1, (size_t)(close - str - 1));
    host[close - str - 1] = '\0';
    port_s = close + 2;
    family = AF_INET6;
  } else {
    const char* colon = strrchr(str, ':');
    if (colon == NULL || colon == str || (size_t)(colon - str) >= sizeof(host)) {
      WARN("socket address '%s' is malformed; expected host:port or [ipv6]:port", str);
      return ncclInvalidArgument;
    }
    if (strchr(str, ':') != colon) {
      WARN("socket address '%s': write an IPv6 address in brackets, as [ipv6]:port", str);
      return ncclInvalidArgument;
    }
    memcpy(host, str, (size_t)(colon - str));
    host[colon - str] = '\0';
    port_s = colon + 1;
  }
  char* end = NULL;
  errno = 0;
  long port = strtol(port_s, &end, 10);
  if (errno != 0 || end == port_s || *end != '\0' || port < 1 || port > 65535) {
    WARN("socket address '%s': port '%s' is not a number in 1..65535", str, port_s);
    return ncclInvalidArgument;
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ai_flags;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || res == NULL) {
    WARN("socket address '%s': cannot resolve '%s': %s", str, host,
         rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    if (res != NULL) freeaddrinfo(res);
    return ncclInvalidArgument;
  }
  sock_addr_t addr;
  memset(&addr, 0, sizeof(addr));
  ncclResult_t ret = ncclSuccess;
  if ((res->ai_family == AF_INET || res->ai_family == AF_INET6) &&
      res->ai_addrlen <= sizeof(addr)) {
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    sock_addr_set_port(&addr, (uint16_t)port);
    *addr_p = addr;
  } else {
    WARN("socket address '%s': '%s' resolves to neither IPv4 nor IPv6", str, host);
    ret = ncclInvalidArgument;
  }
  freeaddrinfo(res);
  return ret;
}

/* ---- Interfaces ----------------------------------------------------------------------------- */

ncclResult_t sock_if_list(const char* spec, int family, sock_if_t* ifs, int max, int* n_p) {
  int err = sock_if_scan(spec, family, ifs, max, n_p);
  if (err != 0) {
    WARN("listing network interfaces: getifaddrs failed: %s", strerror(err));
    return ncclSystemError;
  }
  return ncclSuccess;
}

/* The first usable interface whose subnet holds `remote` (NCCL_COMM_ID's host). */
static ncclResult_t sock_if_subnet(const sock_addr_t* remote, int family, sock_if_t* if_p,
                                   bool* found_p) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) {
    WARN("listing network interfaces: getifaddrs failed: %m");
    return ncclSystemError;
  }
  int fam = remote->sa.sa_family;
  *found_p = false;
  for (struct ifaddrs* ifa = list; ifa != NULL && !*found_p; ifa = ifa->ifa_next) {
    if ((family != AF_UNSPEC && family != fam) || !sock_if_usable(ifa, fam) ||
        ifa->ifa_netmask == NULL)
      continue;
    const unsigned char *a, *m, *r;
    size_t len;
    if (fam == AF_INET) {
      a = (const unsigned char*)&((const struct sockaddr_in*)(const void*)ifa->ifa_addr)->sin_addr;
      m = (const unsigned char*)&((const struct sockaddr_in*)(const void*)ifa->ifa_netmask)
              ->sin_addr;
      r = (const unsigned char*)&remote->sin.sin_addr;
      len = 4;
    } else {
      a = (const unsigned char*)&((const struct sockaddr_in6*)(const void*)ifa->ifa_addr)
              ->sin6_addr;
      m = (const unsigned char*)&((const struct sockaddr_in6*)(const void*)ifa->ifa_netmask)
              ->sin6_addr;
      r = (const unsigned char*)&remote->sin6.sin6_addr;
      len = 16;
    }
    bool same = true;
    for (size_t i = 0; i < len && same; i++) same = ((a[i] ^ r[i]) & m[i]) == 0;
    if (same) {
      sock_if_fill(ifa, if_p);
      *found_p = true;
    }
  }
  freeifaddrs(list);
  return ncclSuccess;
}

static pthread_mutex_t sock_if_lock = PTHREAD_MUTEX_INITIALIZER;
static bool sock_if_chosen;
static sock_if_t sock_if_choice;

ncclResult_t sock_if_bootstrap(sock_if_t* if_p) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&sock_if_lock);
  if (sock_if_chosen) goto out_copy;
  const char* spec = param_str(PARAM_SOCKET_IFNAME);
  const char* comm_id = param_str(PARAM_COMM_ID);
  int family = sock_family_param();
  const char* fam_note = family == AF_INET    ? " (NCCL_SOCKET_FAMILY=AF_INET)"
                         : family == AF_INET6 ? " (NCCL_SOCKET_FAMILY=AF_INET6)"
                                              : "";
  sock_if_t found;
  int n = 0;
  const char* how = "default order";
  if (spec != NULL) {
    CHECK_GOTO(sock_if_list(spec, family, &found, 1, &n), res, out_unlock);
    if (n == 0) {
      WARN(
          "no network interface that is up and has a usable address matches "
          "NCCL_SOCKET_IFNAME=%s%s",
          spec, fam_note);
      res = ncclSystemError;
      goto out_unlock;
    }
    how = "NCCL_SOCKET_IFNAME";
  } else if (comm_id != NULL) {
    sock_addr_t root;
    bool found_one = false;
    CHECK_GOTO(sock_addr_parse(comm_id, &root), res, out_unlock);
    CHECK_GOTO(sock_if_subnet(&root, family, &found, &found_one), res, out_unlock);
    n = found_one ? 1 : 0;
    how = "subnet of NCCL_COMM_ID";
  }
  if (n == 0) {
    CHECK_GOTO(sock_if_list(NULL, family, &found, 1, &n), res, out_unlock);
    how = "default order";
  }
  if (n == 0) {
    WARN(
        "no network interface is up with a usable IPv4 or IPv6 address%s; set "
        "NCCL_SOCKET_IFNAME",
        fam_note);
    res = ncclSystemError;
    goto out_unlock;
  }
  sock_if_choice = found;
  sock_if_chosen = true;
  char a[SOCK_ADDR_STRLEN];
  INFO(NCCL_INIT | NCCL_BOOTSTRAP, "bootstrap: using interface %s, address %s (%s)", found.name,
       sock_addr_str(&found.addr, a, sizeof(a)), how);
out_copy:
  *if_p = sock_if_choice;
out_unlock:
  pthread_mutex_unlock(&sock_if_lock);
  return res;
}

/* ---- Sockets -------------------------------------------------------------------------------- */

/* "name (address)", or the address alone for an unnamed socket. */
static const char* sock_peer(const sock_t* s, char* buf, size_t size) {
  char a[SOCK_ADDR_STRLEN];
  sock_addr_str(&s->addr, a, sizeof(a));
  if (s->name[0] != '\0')
    snprintf(buf, size, "%s (%s)", s->name, a);
  else
    snprintf(buf, size, "%s", a);
  return buf;
}

#define SOCK_PEER_STRLEN (SOCK_NAME_MAX + SOCK_ADDR_STRLEN + 4)

static void sock_init(sock_t* s, int fd, const sock_addr_t* addr, const char* name) {
  memset(s, 0, sizeof(*s));
  s->fd = fd;
  if (addr != NULL) s->addr = *addr;
  if (name != NULL) sys_strlcpy(s->name, name, sizeof(s->name));
}

/* Small control messages must not wait for Nagle's algorithm. Failing is harmless. */
static void sock_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

ncclResult_t sock_listen(const sock_addr_t* addr, const char* name, sock_t* sock_p) {
  char a[SOCK_ADDR_STRLEN];
  sock_addr_str(addr, a, sizeof(a));
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    WARN("%s: socket() for listening on %s failed: %m", name, a);
    return ncclSystemError;
  }
  /* A fixed port (NCCL_COMM_ID) must be reusable while old connections sit in TIME_WAIT. */
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sock_addr_t bound;
  socklen_t len = sizeof(bound);
  /* The backlog holds every rank of a large job connecting at once; the kernel caps it at
   * net.core.somaxconn. */
  if (bind(fd, &addr->sa, sock_addr_len(addr)) != 0) {
    WARN("%s: cannot bind to %s: %m", name, a);
    goto err_close;
  }
  if (listen(fd, 16384) != 0) {
    WARN("%s: listen on %s failed: %m", name, a);
    goto err_close;
  }
  memset(&bound, 0, sizeof(bound));
  if (getsockname(fd, &bound.sa, &len) != 0) {
    WARN("%s: getsockname on %s failed: %m", name, a);
    goto err_close;
  }
  sock_init(sock_p, fd, &bound, name);
  return ncclSuccess;
err_close:
  close(fd);
  return ncclSystemError;
}

ncclResult_t sock_accept(sock_t* listener, sock_t* sock_p) {
  sock_addr_t peer;
  for (;;) {
    memset(&peer, 0, sizeof(peer));
    socklen_t len = sizeof(peer);
    int fd = accept4(listener->fd, &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      sock_nodelay(fd);
      sock_init(sock_p, fd, &peer, NULL);
      return ncclSuccess;
    }
    if (errno == EINTR) continue;
    /* A connection that was reset before we took it is simply gone. */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO) {
      sock_init(sock_p, -1, NULL, NULL);
      return ncclSuccess;
    }
    char p[SOCK_PEER_STRLEN];
    WARN("%s: accept failed: %m", sock_peer(listener, p, sizeof(p)));
    return ncclSystemError;
  }
}

static bool sock_connect_retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED ||
         err == EAGAIN;
}

/* Sleep ms milliseconds in poll() slices, giving up at the deadline or on abort. */
static ncclResult_t sock_sleep(uint64_t ms, const sock_deadline_t* dl, const char* what,
                               const char* peer) {
  uint64_t end = sock_clock_ns() + ms * 1000000ull;
  for (;;) {
    CHECK(sock_deadline_check(dl, what, peer));
    uint64_t now = sock_clock_ns();
    if (now >= end) return ncclSuccess;
    int wait = sock_deadline_poll_ms(dl);
    uint64_t left = (end - now + 999999) / 1000000;
    if ((uint64_t)wait > left) wait = (int)left;
    poll(NULL, 0, wait);
  }
}

ncclResult_t sock_connect(const sock_addr_t* addr, const char* name, bool retry,
                          const sock_deadline_t* dl, sock_t* sock_p) {
  sock_t s;
  sock_init(&s, -1, addr, name);
  char p[SOCK_PEER_STRLEN];
  sock_peer(&s, p, sizeof(p));
  int64_t retries = retry ? param_int(PARAM_SOCKET_RETRY_CNT) : 0;
  int64_t sleep_ms = param_int(PARAM_SOCKET_RETRY_SLEEP_MSEC);
  if (retries < 0) retries = 0;
  if (sleep_ms < 0) sleep_ms = 0;
  for (int64_t attempt = 0;; attempt++) {
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      WARN("connecting to %s: socket() failed: %m", p);
      return ncclSystemError;
    }
    int err = 0;
    if (connect(fd, &addr->sa, sock_addr_len(addr)) != 0) err = errno;
    while (err == EINPROGRESS || err == EINTR) {
      struct pollfd pfd = {fd, POLLOUT, 0};
      int r = poll(&pfd, 1, sock_deadline_poll_ms(dl));
      if (r < 0 && errno != EINTR) {
        WARN("connecting to %s: poll failed: %m", p);
        close(fd);
        return ncclSystemError;
      }
      if (r > 0) {
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        break;
      }
      ncclResult_t res = sock_deadline_check(dl, "connecting to", p);
      if (res != ncclSuccess) {
        close(fd);
        return res;
      }
    }
    if (err == 0) {
      sock_nodelay(fd);
      s.fd = fd;
      *sock_p = s;
      return ncclSuccess;
    }
    close(fd);
    if (sock_connect_retryable(err) && attempt < retries) {
      TRACE(NCCL_BOOTSTRAP, "connecting to %s: %s; retry %lld of %lld", p, strerror(err),
            (long long)attempt + 1, (long long)retries);
      CHECK(sock_sleep((uint64_t)(attempt + 1) * (uint64_t)sleep_ms, dl, "connecting to", p));
      continue;
    }
    errno = err;
    WARN("connecting to %s failed after %lld attempt(s): %m", p, (long long)attempt + 1);
    return (err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH ||
            err == ENETUNREACH || err == EHOSTDOWN || err == ECONNABORTED)
               ? ncclRemoteError
               : ncclSystemError;
  }
}

/* The errors that mean "the peer (or the path to it) is gone", as opposed to a local failure. */
static bool sock_remote_errno(int err) {
  return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EHOSTDOWN || err == ECONNABORTED || err == ENOTCONN;
}

ncclResult_t sock_try_sendv(sock_t* sock, const struct iovec* iov, int niov, size_t* n_p,
                            int* err_p) {
  struct msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = (struct iovec*)(uintptr_t)iov;
  mh.msg_iovlen = (size_t)niov;
  for (;;) {
    ssize_t r = sendmsg(sock->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      *n_p = (size_t)r;
      return ncclSuccess;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *n_p = 0;
      return ncclSuccess;
    }
    if (sock_remote_errno(errno)) {
      *err_p = errno;
      return ncclRemoteError;
    }
    char p[SOCK_PEER_STRLEN];
    WARN("sending to %s failed: %m", sock_peer(sock, p, sizeof(p)));
    return ncclSystemError;
  }
}

ncclResult_t sock_try_recv(sock_t* sock, void* buf, size_t size, size_t* n_p, int* err_p) {
  if (size == 0) {
    *n_p = 0;
    return ncclSuccess;
  }
  for (;;) {
    ssize_t r = recv(sock->fd, buf, size, MSG_DONTWAIT);
    if (r > 0) {
      *n_p = (size_t)r;
      return ncclSuccess;
    }
    if (r == 0) {
      *err_p = 0;
      return ncclRemoteError;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *n_p = 0;
      return ncclSuccess;
    }
    if (sock_remote_errno(errno)) {
      *err_p = errno;
      return ncclRemoteError;
    }
    char p[SOCK_PEER_STRLEN];
    WARN("receiving from %s failed: %m", sock_peer(sock, p, sizeof(p)));
    return ncclSystemError;
  }
}

/* The WARN for a peer that closed or reset, found by a blocking transfer. */
static ncclResult_t sock_remote_failure(const sock_t* sock, const char* what, int err) {
  char p[SOCK_PEER_STRLEN];
  sock_peer(sock, p, sizeof(p));
  if (err == 0) {
    WARN("%s %s: the connection was closed by the peer", what, p);
  } else {
    errno = err;
    WARN("%s %s: %m", what, p);
  }
  return ncclRemoteError;
}

/* Wait for events on up to two sockets within the deadline; returns when either is ready. */
static ncclResult_t sock_wait2(sock_t* a, short ea, sock_t* b, short eb, const sock_deadline_t* dl,
                               const char* what, const sock_t* blame) {
  struct pollfd pfd[2];
  int n = 0;
  if (a != NULL) pfd[n++] = (struct pollfd){a->fd, ea, 0};
  if (b != NULL) pfd[n++] = (struct pollfd){b->fd, eb, 0};
  int r = poll(pfd, (nfds_t)n, sock_deadline_poll_ms(dl));
  char p[SOCK_PEER_STRLEN];
  if (r < 0 && errno != EINTR) {
    WARN("%s %s: poll failed: %m", what, sock_peer(blame, p, sizeof(p)));
    return ncclSystemError;
  }
  if (r <= 0) CHECK(sock_deadline_check(dl, what, sock_peer(blame, p, sizeof(p))));
  return ncclSuccess;
}

ncclResult_t sock_send(sock_t* sock, const void* buf, size_t size, const sock_deadline_t* dl) {
  size_t done = 0;
  while (done < size) {
    struct iovec iov = {(char*)(uintptr_t)buf + done, size - done};
    size_t n = 0;
    int err = 0;
    ncclResult_t res = sock_try_sendv(sock, &iov, 1, &n, &err);
    if (res == ncclRemoteError) return sock_remote_failure(sock, "sending to", err);
    CHECK(res);
    done += n;
    if (n == 0) CHECK(sock_wait2(sock, POLLOUT, NULL, 0, dl, "sending to", sock));
  }
  return ncclSuccess;
}

ncclResult_t sock_recv(sock_t* sock, void* buf, size_t size, const sock_deadline_t* dl) {
  size_t done = 0;
  while (done < size) {
    size_t n = 0;
    int err = 0;
    ncclResult_t res = sock_try_recv(sock, (char*)buf + done, size - done, &n, &err);
    if (res == ncclRemoteError) return sock_remote_failure(sock, "receiving from", err);
    CHECK(res);
    done += n;
    if (n == 0) CHECK(sock_wait2(sock, POLLIN, NULL, 0, dl, "receiving from", sock));
  }
  return ncclSuccess;
}

ncclResult_t sock_exchange(sock_t* out, const void* sbuf, size_t ssize, sock_t* in, void* rbuf,
                           size_t rsize, const sock_deadline_t* dl) {
  size_t sdone = 0, rdone = 0;
  while (sdone < ssize || rdone < rsize) {
    size_t n = 0, moved = 0;
    int err = 0;
    ncclResult_t res;
    if (sdone < ssize) {
      struct iovec iov = {(char*)(uintptr_t)sbuf + sdone, ssize - sdone};
      res = sock_try_sendv(out, &iov, 1, &n, &err);
      if (res == ncclRemoteError) return sock_remote_failure(out, "sending to", err);
      CHECK(res);
      sdone += n;
      moved += n;
    }
    if (rdone < rsize) {
      n = 0;
      res = sock_try_recv(in, (char*)rbuf + rdone, rsize - rdone, &n, &err);
      if (res == ncclRemoteError) return sock_remote_failure(in, "receiving from", err);
      CHECK(res);
      rdone += n;
      moved += n;
    }
    if (moved == 0) {
      /* Blame the side we still wait to hear from: a silent peer is the usual culprit. */
      sock_t* blame = rdone < rsize ? in : out;
      CHECK(sock_wait2(sdone < ssize ? out : NULL, POLLOUT, rdone < rsize ? in : NULL, POLLIN, dl,
                       rdone < rsize ? "receiving from" : "sending to", blame));
    }
  }
  return ncclSuccess;
}

void sock_close(sock_t* sock) {
  if (sock->fd >= 0) close(sock->fd);
  sock->fd = -1;
}
