/*
 * net-socket connections: listen, and the non-blocking connect / accept state machines.
 *
 * connect opens the control socket and every data socket at once (non-blocking connect), and
 * writes a hello on each (nsk_hello_t: the listener's id, a connection id, the socket's index and
 * the sender's thread / socket counts). The sender's comm exists as soon as every hello is out;
 * TCP buffers whatever it sends before the receiver accepts. Until then its state lives behind a
 * pointer inside the caller's handle buffer, which NCCL passes again on every retry.
 *
 * accept takes every pending connection, reads hellos without blocking, and builds a comm when a
 * control socket and all the data sockets of its connection id have arrived; sockets of other
 * connections stay pending for later accepts on the same listener.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nsk.h"

/* Up to two connections' worth of sockets may wait for their accept. */
#define NSK_MAX_PENDING (2 * (NSK_MAX_SOCKS + 1))

typedef struct {
  int fd;
  nsk_hello_t hello;
  size_t got;
} nsk_pending_t;

typedef struct {
  int fd;
  int dev;
  uint64_t listen_id;
  nsk_pending_t pend[NSK_MAX_PENDING];
  int npend;
} nsk_listen_t;

typedef struct {
  int nfds; /* 1 + data sockets */
  int fd[NSK_MAX_SOCKS + 1];
  bool connected[NSK_MAX_SOCKS + 1];
  size_t sent[NSK_MAX_SOCKS + 1];
  nsk_hello_t hello[NSK_MAX_SOCKS + 1];
  int nthreads, nsocks;
  char peer[64];
} nsk_connecting_t;

/* The handle as listen writes it; connect keeps its state pointer after it. */
typedef struct {
  nsk_handle_t h;
  nsk_connecting_t* state;
} nsk_handle_wire_t;

_Static_assert(sizeof(nsk_handle_wire_t) <= NCCL_NET_HANDLE_MAXSIZE,
               "net-socket handle must fit NCCL_NET_HANDLE_MAXSIZE");

static void nsk_sock_tune(int fd) {
  int one = 1;
  /* Headers are 8 bytes and must not wait for Nagle. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

ncclResult_t nsk_try_send(int fd, const void* buf, size_t len, size_t* n_p, const char* what,
                          const char* peer) {
  *n_p = 0;
  while (*n_p < len) {
    ssize_t r = send(fd, (const char*)buf + *n_p, len - *n_p, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      *n_p += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    int err = errno;
    bool remote = err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT;
    NSK_WARN("net-socket: %s to %s failed: %s", what, peer, strerror(err));
    return remote ? ncclRemoteError : ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t nsk_try_recv(int fd, void* buf, size_t len, size_t* n_p, const char* what,
                          const char* peer) {
  *n_p = 0;
  while (*n_p < len) {
    ssize_t r = recv(fd, (char*)buf + *n_p, len - *n_p, MSG_DONTWAIT);
    if (r > 0) {
      *n_p += (size_t)r;
      continue;
    }
    if (r == 0) {
      NSK_WARN("net-socket: %s from %s: connection closed by the peer", what, peer);
      return ncclRemoteError;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
    int err = errno;
    bool remote = err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT;
    NSK_WARN("net-socket: %s from %s failed: %s", what, peer, strerror(err));
    return remote ? ncclRemoteError : ncclSystemError;
  }
  return ncclSuccess;
}

/* ---- listen --------------------------------------------------------------------------------- */

ncclResult_t nsk_listen(int dev, void* handle, void** listen_comm) {
  if (dev < 0 || dev >= nsk_g.ndev) {
    NSK_WARN("net-socket: listen: device %d does not exist (%d devices)", dev, nsk_g.ndev);
    return ncclInvalidArgument;
  }
  sock_addr_t addr = nsk_g.dev[dev].iface.addr;
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    NSK_WARN("net-socket: listen on %s: socket failed: %s", nsk_g.dev[dev].iface.name,
             strerror(errno));
    return ncclSystemError;
  }
  socklen_t len = sock_addr_len(&addr);
  if (bind(fd, &addr.sa, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, &addr.sa, &len) != 0) {
    NSK_WARN("net-socket: listen on %s: %s", nsk_g.dev[dev].iface.name, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  nsk_listen_t* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    NSK_WARN("net-socket: listen: out of memory");
    return ncclSystemError;
  }
  l->fd = fd;
  l->dev = dev;
  if (getrandom(&l->listen_id, sizeof(l->listen_id), 0) != sizeof(l->listen_id))
    l->listen_id = (uint64_t)(uintptr_t)l ^ ((uint64_t)getpid() << 32);
  nsk_handle_wire_t* w = handle;
  memset(w, 0, sizeof(*w));
  w->h.magic = NSK_MAGIC;
  w->h.listen_id = l->listen_id;
  w->h.addr = addr;
  *listen_comm = l;
  return ncclSuccess;
}

/* ---- connect -------------------------------------------------------------------------------- */

static void nsk_connecting_free(nsk_connecting_t* c) {
  for (int i = 0; i < c->nfds; i++)
    if (c->fd[i] >= 0) close(c->fd[i]);
  free(c);
}

static ncclResult_t nsk_connecting_start(const nsk_handle_wire_t* w, nsk_connecting_t** c_p) {
  nsk_connecting_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NSK_WARN("net-socket: connect: out of memory");
    return ncclSystemError;
  }
  c->nthreads = nsk_g.nthreads;
  c->nsocks = nsk_g.nsocks;
  int ndata = c->nthreads > 0 ? c->nthreads * c->nsocks : c->nsocks;
  c->nfds = 1 + ndata;
  sock_addr_str(&w->h.addr, c->peer, sizeof(c->peer));
  uint64_t conn_id;
  if (getrandom(&conn_id, sizeof(conn_id), 0) != sizeof(conn_id))
    conn_id = (uint64_t)(uintptr_t)c ^ ((uint64_t)getpid() << 32);
  for (int i = 0; i < c->nfds; i++) c->fd[i] = -1;
  for (int i = 0; i < c->nfds; i++) {
    c->hello[i] = (nsk_hello_t){.magic = NSK_MAGIC,
                                .listen_id = w->h.listen_id,
                                .conn_id = conn_id,
                                .index = (uint32_t)i,
                                .nthreads = (uint16_t)c->nthreads,
                                .nsocks = (uint16_t)c->nsocks,
                                .inline_max = (uint32_t)nsk_g.inline_max};
    int fd = socket(w->h.addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      NSK_WARN("net-socket: connect to %s: socket failed: %s", c->peer, strerror(errno));
      nsk_connecting_free(c);
      return ncclSystemError;
    }
    c->fd[i] = fd;
    nsk_sock_tune(fd);
    if (connect(fd, &w->h.addr.sa, sock_addr_len(&w->h.addr)) == 0) {
      c->connected[i] = true;
    } else if (errno != EINPROGRESS && errno != EINTR) {
      NSK_WARN("net-socket: connect to %s: %s", c->peer, strerror(errno));
      nsk_connecting_free(c);
      return ncclRemoteError;
    }
  }
  *c_p = c;
  return ncclSuccess;
}

/* One pass over the sockets; *ready_p once every hello is out. */
static ncclResult_t nsk_connecting_step(nsk_connecting_t* c, bool* ready_p) {
  bool ready = true;
  for (int i = 0; i < c->nfds; i++) {
    if (!c->connected[i]) {
      struct pollfd p = {.fd = c->fd[i], .events = POLLOUT};
      if (poll(&p, 1, 0) <= 0) {
        ready = false;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(c->fd[i], SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == EINPROGRESS || err == EALREADY) {
        ready = false;
        continue;
      }
      if (err != 0) {
        NSK_WARN("net-socket: connect to %s: %s", c->peer, strerror(err));
        return ncclRemoteError;
      }
      c->connected[i] = true;
    }
    if (c->sent[i] < sizeof(nsk_hello_t)) {
      size_t n = 0;
      ncclResult_t res = nsk_try_send(c->fd[i], (const char*)&c->hello[i] + c->sent[i],
                                      sizeof(nsk_hello_t) - c->sent[i], &n, "connect", c->peer);
      if (res != ncclSuccess) return res;
      c->sent[i] += n;
      if (c->sent[i] < sizeof(nsk_hello_t)) ready = false;
    }
  }
  *ready_p = ready;
  return ncclSuccess;
}

ncclResult_t nsk_connect(int dev, void* handle, void** send_comm) {
  (void)dev; /* the route to the peer's address picks the local interface */
  *send_comm = NULL;
  nsk_handle_wire_t* w = handle;
  if (w->h.magic != NSK_MAGIC) {
    NSK_WARN("net-socket: connect: the handle was not written by net-socket's listen");
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclSuccess;
  if (w->state == NULL) {
    res = nsk_connecting_start(w, &w->state);
    if (res != ncclSuccess) return res;
  }
  nsk_connecting_t* c = w->state;
  bool ready = false;
  res = nsk_connecting_step(c, &ready);
  if (res != ncclSuccess) goto err_free;
  if (!ready) return ncclSuccess;
  nsk_comm_t* comm = NULL;
  res = nsk_comm_create(true, c->fd[0], &c->fd[1], c->nthreads, c->nsocks, c->hello[0].inline_max,
                        c->peer, &comm);
  if (res != ncclSuccess) goto err_free;
  c->nfds = 0; /* the comm owns the sockets now */
  nsk_connecting_free(c);
  w->state = NULL;
  *send_comm = comm;
  return ncclSuccess;
err_free:
  nsk_connecting_free(c);
  w->state = NULL;
  return res;
}

/* ---- accept --------------------------------------------------------------------------------- */

static void nsk_pending_drop(nsk_listen_t* l, int i, bool close_fd) {
  if (close_fd) close(l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

/* Data sockets of a connection (besides its control socket) by the sender's counts. */
static int nsk_hello_ndata(const nsk_hello_t* h) {
  return h->nthreads > 0 ? h->nthreads * h->nsocks : h->nsocks;
}

bool nsk_hello_ok(const nsk_hello_t* h, uint64_t listen_id) {
  return h->magic == NSK_MAGIC && h->listen_id == listen_id && h->nsocks >= 1 &&
         h->nthreads <= NSK_MAX_THREADS && nsk_hello_ndata(h) <= NSK_MAX_SOCKS &&
         h->index <= (uint32_t)nsk_hello_ndata(h) && h->inline_max <= NSK_MAX_INLINE;
}

/* Whether socket hello s belongs to the connection whose control socket said c: the same
 * connection id, and the same counts (a socket that disagrees is not part of it). */
static bool nsk_hello_same_conn(const nsk_hello_t* c, const nsk_hello_t* s) {
  return s->conn_id == c->conn_id && s->nthreads == c->nthreads && s->nsocks == c->nsocks &&
         s->inline_max == c->inline_max;
}

/* Takes new connections and reads hellos; drops sockets that fail or are not ours. */
static ncclResult_t nsk_listen_poll(nsk_listen_t* l) {
  while (l->npend < NSK_MAX_PENDING) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      NSK_WARN("net-socket: accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    nsk_sock_tune(fd);
    l->pend[l->npend++] = (nsk_pending_t){.fd = fd};
  }
  for (int i = 0; i < l->npend;) {
    nsk_pending_t* p = &l->pend[i];
    if (p->got < sizeof(p->hello)) {
      size_t n = 0;
      ncclResult_t res = nsk_try_recv(p->fd, (char*)&p->hello + p->got, sizeof(p->hello) - p->got,
                                      &n, "accept", "a connecting peer");
      if (res != ncclSuccess) {
        nsk_pending_drop(l, i, true);
        continue;
      }
      p->got += n;
      if (p->got == sizeof(p->hello)) {
        if (!nsk_hello_ok(&p->hello, l->listen_id)) {
          NSK_WARN(
              "net-socket: accept: dropping a connection that is not a net-socket peer of "
              "this listener");
          nsk_pending_drop(l, i, true);
          continue;
        }
      }
    }
    i++;
  }
  return ncclSuccess;
}

ncclResult_t nsk_accept(void* listen_comm, void** recv_comm) {
  nsk_listen_t* l = listen_comm;
  *recv_comm = NULL;
  ncclResult_t res = nsk_listen_poll(l);
  if (res != ncclSuccess) return res;
  for (int i = 0; i < l->npend; i++) {
    const nsk_pending_t* ctrl = &l->pend[i];
    if (ctrl->got < sizeof(nsk_hello_t) || ctrl->hello.index != 0) continue;
    nsk_hello_t h = ctrl->hello;
    int ndata = nsk_hello_ndata(&h);
    int fds[NSK_MAX_SOCKS + 1];
    int found = 0;
    for (int j = 0; j <= NSK_MAX_SOCKS; j++) fds[j] = -1;
    /* Every hello was checked against its own counts (index <= its ndata); one that claims the
     * same connection with other counts is somebody else's, not a socket of this one. */
    for (int j = 0; j < l->npend; j++) {
      const nsk_pending_t* p = &l->pend[j];
      if (p->got == sizeof(nsk_hello_t) && nsk_hello_same_conn(&h, &p->hello) &&
          fds[p->hello.index] < 0) {
        fds[p->hello.index] = p->fd;
        found++;
      }
    }
    if (found < ndata + 1) continue;
    char peer[64];
    sock_addr_t a;
    socklen_t len = sizeof(a);
    if (getpeername(fds[0], &a.sa, &len) == 0)
      sock_addr_str(&a, peer, sizeof(peer));
    else
      snprintf(peer, sizeof(peer), "peer");
    nsk_comm_t* comm = NULL;
    res = nsk_comm_create(false, fds[0], &fds[1], h.nthreads, h.nsocks, h.inline_max, peer, &comm);
    /* Either way, these sockets leave the pending list: the comm owns them, or they are closed. */
    for (int j = 0; j < l->npend;) {
      if (l->pend[j].got == sizeof(nsk_hello_t) && nsk_hello_same_conn(&h, &l->pend[j].hello))
        nsk_pending_drop(l, j, res != ncclSuccess || fds[l->pend[j].hello.index] != l->pend[j].fd);
      else
        j++;
    }
    if (res != ncclSuccess) return res;
    *recv_comm = comm;
    return ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t nsk_close_listen(void* listen_comm) {
  nsk_listen_t* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  for (int i = 0; i < l->npend; i++) close(l->pend[i].fd);
  close(l->fd);
  free(l);
  return ncclSuccess;
}
