/*
 * net-ucx connections: listen, and the non-blocking connect / accept handshakes.
 *
 * A UCP worker address (hundreds of bytes with several transports) does not fit NCCL's 128-byte
 * handle, so listen() opens a small TCP listener on the device's handshake address and the handle
 * carries that address. Per connection:
 *   connect: TCP connect, send nux_hello_t + the sender worker's address; read nux_reply_t + the
 *            receiver worker's address; create the endpoint; once UCX has wired it up, send
 *            nux_wired_t; the send comm is ready once the receiver's nux_wired_t is in;
 *   accept:  read the hello, assign a comm id on the receiver's worker (the connection's tag
 *            space), create an endpoint back to the sender (only to hear of its death), send the
 *            reply; once that endpoint is wired up and the sender's nux_wired_t is in, send ours:
 *            the receive comm is then ready.
 * So each side waits for the other's wireup only while the other is still inside connect/accept
 * (progressing its worker), and no wireup is left in flight when data starts moving: UCX 1.13's
 * tcp transport aborts the process (an assertion in wireup_ep.c) when a peer dies while one of
 * its wireup messages waits for the connection, which a dead peer's survivor must never do.
 * The hello also carries the send comm's id on the sender's worker and the reply the receive comm's
 * id on the receiver's: each side's close notice goes to the other's (nux_notice_t).
 * Every step is a non-blocking socket call; connect and accept return a NULL comm until their
 * step is done, and progress their worker (UCX wireup) on every call. connect keeps its state
 * behind a pointer inside the caller's handle buffer, which NCCL passes again on every retry.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nux.h"

#define NUX_MAX_PENDING 64

/* A handshake message being moved: header + address. */
typedef struct {
  int fd;
  sock_msg_t in;     /* hello: header first, then grown to header + address */
  sock_msg_t out;    /* reply */
  nux_comm_t* comm; /* created once the hello is in */
  nux_wired_t wired_mine, wired_theirs;
  sock_msg_t wired_out, wired_in; /* over wired_mine, wired_theirs */
} nux_pending_t;

typedef struct {
  int fd;
  nux_worker_t* worker;
  uint64_t listen_id;
  nux_pending_t pend[NUX_MAX_PENDING];
  int npend;
} nux_listen_t;

typedef struct {
  int fd;
  bool connected;
  nux_worker_t* worker;
  uint64_t conn_id;
  uint32_t send_id; /* the send comm's id on our worker (close notices from the receiver) */
  sock_msg_t out;    /* hello */
  sock_msg_t in;  /* reply */
  nux_comm_t* comm; /* once the reply is in; handed out once the receiver's wired message is in */
  nux_wired_t wired_mine, wired_theirs;
  sock_msg_t wired_out, wired_in; /* over wired_mine, wired_theirs */
  char peer[64];
} nux_connecting_t;

typedef struct {
  nux_handle_t h;
  nux_connecting_t* state;
} nux_handle_wire_t;

_Static_assert(sizeof(nux_handle_wire_t) <= NCCL_NET_HANDLE_MAXSIZE,
               "net-ucx handle must fit NCCL_NET_HANDLE_MAXSIZE");

static uint64_t nux_random64(const void* salt) {
  uint64_t v;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
    v = (uint64_t)(uintptr_t)salt ^ ((uint64_t)getpid() << 32);
  return v;
}

/* Moves what the socket takes now. Closed or reset peer: ncclRemoteError; other failures
 * ncclSystemError (each WARNed). */
static ncclResult_t nux_msg_move(int fd, sock_msg_t* m, bool out, const char* what,
                                 const char* peer) {
  int r = sock_msg_move(fd, m, out);
  if (r == SOCK_MSG_OK) return ncclSuccess;
  if (r == SOCK_MSG_CLOSED) {
    NUX_WARN("net-ucx: %s with %s: connection closed by the peer", what, peer);
    return ncclRemoteError;
  }
  int err = errno;
  NUX_WARN("net-ucx: %s with %s failed: %s", what, peer, strerror(err));
  return sock_err_remote(err) ? ncclRemoteError : ncclSystemError;
}

/* A header + worker address message (hello or reply). */
static ncclResult_t nux_msg_build(const void* hdr, size_t hlen, const nux_worker_t* w,
                                  sock_msg_t* m) {
  m->len = hlen + w->addr_len;
  m->done = 0;
  m->buf = malloc(m->len);
  if (m->buf == NULL) {
    NUX_WARN("net-ucx: out of memory in a connection handshake");
    return ncclSystemError;
  }
  memcpy(m->buf, hdr, hlen);
  memcpy(m->buf + hlen, w->addr, w->addr_len);
  return ncclSuccess;
}

/* The wired messages of connection conn_id, mine out and theirs in. */
static void nux_wired_init(uint64_t conn_id, nux_wired_t* mine, nux_wired_t* theirs,
                           sock_msg_t* out, sock_msg_t* in) {
  *mine = (nux_wired_t){.magic = NUX_WIRED_MAGIC, .conn_id = conn_id};
  memset(theirs, 0, sizeof(*theirs));
  *out = (sock_msg_t){.buf = (char*)mine, .len = sizeof(*mine), .done = 0};
  *in = (sock_msg_t){.buf = (char*)theirs, .len = sizeof(*theirs), .done = 0};
}

/* Whether comm's endpoint is wired up: 1 yes, 0 not yet; failed: WARNed, ncclRemoteError. */
static ncclResult_t nux_wired_check(nux_comm_t* comm, const char* what, int* wired) {
  *wired = nux_comm_wired(comm);
  if (*wired >= 0) return ncclSuccess;
  NUX_WARN("net-ucx: %s with %s: UCX could not connect the endpoint: %s (peer gone?)", what,
           comm->peer, ucs_status_string(comm->wire_status));
  return ncclRemoteError;
}

static void nux_worker_poke(nux_worker_t* w) {
  pthread_mutex_lock(&w->lock);
  nux_worker_progress_locked(w);
  pthread_mutex_unlock(&w->lock);
}

/* ---- listen --------------------------------------------------------------------------------- */

ncclResult_t nux_listen(nux_ctx_t* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = NULL;
  nux_worker_t* w = NULL;
  ncclResult_t res = nux_worker_get(ctx, dev, &w);
  if (res != ncclSuccess) return res;
  sock_addr_t addr = nux_g.dev[dev].hs;
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len = sock_addr_len(&addr);
  if (fd < 0 || bind(fd, &addr.sa, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, &addr.sa, &len) != 0) {
    NUX_WARN("net-ucx: listen on %s (handshake interface %s): %s", nux_g.dev[dev].name,
             nux_g.dev[dev].hs_if, strerror(errno));
    if (fd >= 0) close(fd);
    nux_worker_put(w);
    return ncclSystemError;
  }
  nux_listen_t* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    NUX_WARN("net-ucx: listen: out of memory");
    close(fd);
    nux_worker_put(w);
    return ncclSystemError;
  }
  l->fd = fd;
  l->worker = w;
  l->listen_id = nux_random64(l);
  nux_handle_wire_t* hw = handle;
  memset(hw, 0, sizeof(*hw));
  hw->h.magic = NUX_MAGIC;
  hw->h.listen_id = l->listen_id;
  hw->h.addr = addr;
  *listen_comm = l;
  return ncclSuccess;
}

/* ---- connect -------------------------------------------------------------------------------- */

static void nux_connecting_free(nux_connecting_t* c) {
  if (c->comm != NULL) nux_comm_destroy(c->comm);
  if (c->fd >= 0) close(c->fd);
  free(c->out.buf);
  free(c->in.buf);
  if (c->worker != NULL) nux_worker_put(c->worker);
  free(c);
}

static ncclResult_t nux_connecting_start(nux_ctx_t* ctx, int dev, const nux_handle_wire_t* hw,
                                         nux_connecting_t** c_p) {
  nux_connecting_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NUX_WARN("net-ucx: connect: out of memory");
    return ncclSystemError;
  }
  c->fd = -1;
  sock_addr_str(&hw->h.addr, c->peer, sizeof(c->peer));
  ncclResult_t res = nux_worker_get(ctx, dev, &c->worker);
  if (res != ncclSuccess) goto err_free;
  c->conn_id = nux_random64(c);
  pthread_mutex_lock(&c->worker->lock);
  c->send_id = nux_comm_id_next(&c->worker->next_comm_id);
  pthread_mutex_unlock(&c->worker->lock);
  nux_hello_t hello = {.magic = NUX_MAGIC,
                       .listen_id = hw->h.listen_id,
                       .conn_id = c->conn_id,
                       .addr_len = (uint32_t)c->worker->addr_len,
                       .send_id = c->send_id};
  res = nux_msg_build(&hello, sizeof(hello), c->worker, &c->out);
  if (res != ncclSuccess) goto err_free;
  c->in.len = sizeof(nux_reply_t);
  c->in.buf = malloc(c->in.len);
  if (c->in.buf == NULL) {
    NUX_WARN("net-ucx: connect: out of memory");
    res = ncclSystemError;
    goto err_free;
  }
  bool remote = false;
  int err = sock_connect_start(&hw->h.addr, &c->fd, &c->connected, &remote);
  if (err != 0) {
    NUX_WARN("net-ucx: connect to %s: %s%s", c->peer, remote ? "" : "socket: ", strerror(err));
    res = remote ? ncclRemoteError : ncclSystemError;
    goto err_free;
  }
  *c_p = c;
  return ncclSuccess;
err_free:
  nux_connecting_free(c);
  return res;
}

/* The hello out and the reply in: then c->comm, with its endpoint (being wired up). */
static ncclResult_t nux_connecting_reply(nux_connecting_t* c) {
  if (!c->connected) {
    int up = sock_connect_poll(c->fd);
    if (up == 0) return ncclSuccess;
    if (up < 0) {
      NUX_WARN("net-ucx: connect to %s: %s", c->peer, strerror(errno));
      return ncclRemoteError;
    }
    c->connected = true;
  }
  ncclResult_t res = nux_msg_move(c->fd, &c->out, true, "connect (hello)", c->peer);
  if (res != ncclSuccess || c->out.done < c->out.len) return res;
  res = nux_msg_move(c->fd, &c->in, false, "connect (reply)", c->peer);
  if (res != ncclSuccess || c->in.done < c->in.len) return res;
  nux_reply_t r;
  memcpy(&r, c->in.buf, sizeof(r));
  if (r.magic != NUX_MAGIC || r.conn_id != c->conn_id || r.comm_id == 0 ||
      r.comm_id > NUX_COMM_ID_MAX || r.addr_len == 0 || r.addr_len > NUX_MAX_ADDR) {
    NUX_WARN("net-ucx: connect to %s: the peer's reply is not a net-ucx handshake", c->peer);
    return ncclRemoteError;
  }
  if (c->in.len == sizeof(r)) { /* header in: now the address */
    char* grown = realloc(c->in.buf, sizeof(r) + r.addr_len);
    if (grown == NULL) {
      NUX_WARN("net-ucx: connect: out of memory");
      return ncclSystemError;
    }
    c->in.buf = grown;
    c->in.len = sizeof(r) + r.addr_len;
    res = nux_msg_move(c->fd, &c->in, false, "connect (reply)", c->peer);
    if (res != ncclSuccess || c->in.done < c->in.len) return res;
  }
  res = nux_comm_create(c->worker, true, r.comm_id, c->send_id, r.comm_id, c->in.buf + sizeof(r),
                        c->peer, &c->comm);
  if (res == ncclSuccess)
    nux_wired_init(c->conn_id, &c->wired_mine, &c->wired_theirs, &c->wired_out, &c->wired_in);
  return res;
}

/* One step; *comm_p once the endpoint is wired up and the receiver said its own is. */
static ncclResult_t nux_connecting_step(nux_connecting_t* c, nux_comm_t** comm_p) {
  ncclResult_t res;
  if (c->comm == NULL) {
    res = nux_connecting_reply(c);
    if (res != ncclSuccess || c->comm == NULL) return res;
  }
  int wired = 0;
  res = nux_wired_check(c->comm, "connect", &wired);
  if (res != ncclSuccess || !wired) return res;
  res = nux_msg_move(c->fd, &c->wired_out, true, "connect (wired)", c->peer);
  if (res != ncclSuccess || c->wired_out.done < c->wired_out.len) return res;
  res = nux_msg_move(c->fd, &c->wired_in, false, "connect (wired)", c->peer);
  if (res != ncclSuccess || c->wired_in.done < c->wired_in.len) return res;
  if (c->wired_theirs.magic != NUX_WIRED_MAGIC || c->wired_theirs.conn_id != c->conn_id) {
    NUX_WARN("net-ucx: connect to %s: the peer's last handshake message is not net-ucx's",
             c->peer);
    return ncclRemoteError;
  }
  *comm_p = c->comm;
  c->comm = NULL;
  return ncclSuccess;
}

ncclResult_t nux_connect(nux_ctx_t* ctx, int dev, void* handle, void** send_comm) {
  *send_comm = NULL;
  nux_handle_wire_t* hw = handle;
  if (hw->h.magic != NUX_MAGIC) {
    NUX_WARN("net-ucx: connect: the handle was not written by net-ucx's listen");
    return ncclInvalidArgument;
  }
  ncclResult_t res;
  if (hw->state == NULL) {
    res = nux_connecting_start(ctx, dev, hw, &hw->state);
    if (res != ncclSuccess) return res;
  }
  nux_connecting_t* c = hw->state;
  nux_comm_t* comm = NULL;
  res = nux_connecting_step(c, &comm);
  if (res == ncclSuccess && comm == NULL) {
    nux_worker_poke(c->worker);
    return ncclSuccess;
  }
  nux_connecting_free(c);
  hw->state = NULL;
  *send_comm = comm;
  return res;
}

/* ---- accept --------------------------------------------------------------------------------- */

static void nux_pending_drop(nux_listen_t* l, int i) {
  nux_pending_t* p = &l->pend[i];
  if (p->fd >= 0) close(p->fd);
  free(p->in.buf);
  free(p->out.buf);
  if (p->comm != NULL) nux_comm_destroy(p->comm);
  l->pend[i] = l->pend[--l->npend];
}

/* Advances pending connection i; *ready_p once its reply and wired message are out (the comm is
 * then p->comm). */
static ncclResult_t nux_pending_step(nux_listen_t* l, nux_pending_t* p, bool* ready_p) {
  *ready_p = false;
  if (p->comm == NULL) {
    ncclResult_t res = nux_msg_move(p->fd, &p->in, false, "accept (hello)", "a connecting peer");
    if (res != ncclSuccess || p->in.done < p->in.len) return res;
    nux_hello_t h;
    memcpy(&h, p->in.buf, sizeof(h));
    if (h.magic != NUX_MAGIC || h.listen_id != l->listen_id || h.addr_len == 0 ||
        h.addr_len > NUX_MAX_ADDR || h.send_id == 0 || h.send_id > NUX_COMM_ID_MAX) {
      NUX_WARN(
          "net-ucx: accept: dropping a connection that is not a net-ucx peer of this "
          "listener");
      return ncclRemoteError;
    }
    if (p->in.len == sizeof(h)) {
      char* grown = realloc(p->in.buf, sizeof(h) + h.addr_len);
      if (grown == NULL) {
        NUX_WARN("net-ucx: accept: out of memory");
        return ncclSystemError;
      }
      p->in.buf = grown;
      p->in.len = sizeof(h) + h.addr_len;
      res = nux_msg_move(p->fd, &p->in, false, "accept (hello)", "a connecting peer");
      if (res != ncclSuccess || p->in.done < p->in.len) return res;
    }
    char peer[64];
    sock_addr_t a;
    socklen_t alen = sizeof(a);
    if (getpeername(p->fd, &a.sa, &alen) == 0)
      sock_addr_str(&a, peer, sizeof(peer));
    else
      snprintf(peer, sizeof(peer), "peer");
    pthread_mutex_lock(&l->worker->lock);
    uint32_t comm_id = nux_comm_id_next(&l->worker->next_comm_id);
    pthread_mutex_unlock(&l->worker->lock);
    res = nux_comm_create(l->worker, false, comm_id, comm_id, h.send_id, p->in.buf + sizeof(h),
                          peer, &p->comm);
    if (res != ncclSuccess) return res;
    nux_reply_t r = {.magic = NUX_MAGIC,
                     .conn_id = h.conn_id,
                     .comm_id = comm_id,
                     .addr_len = (uint32_t)l->worker->addr_len};
    res = nux_msg_build(&r, sizeof(r), l->worker, &p->out);
    if (res != ncclSuccess) return res;
    nux_wired_init(h.conn_id, &p->wired_mine, &p->wired_theirs, &p->wired_out, &p->wired_in);
  }
  ncclResult_t res = nux_msg_move(p->fd, &p->out, true, "accept (reply)", p->comm->peer);
  if (res != ncclSuccess || p->out.done < p->out.len) return res;
  res = nux_msg_move(p->fd, &p->wired_in, false, "accept (wired)", p->comm->peer);
  if (res != ncclSuccess || p->wired_in.done < p->wired_in.len) return res;
  if (p->wired_theirs.magic != NUX_WIRED_MAGIC ||
      p->wired_theirs.conn_id != p->wired_mine.conn_id) {
    NUX_WARN("net-ucx: accept: %s's last handshake message is not net-ucx's", p->comm->peer);
    return ncclRemoteError;
  }
  int wired = 0;
  res = nux_wired_check(p->comm, "accept", &wired);
  if (res != ncclSuccess || !wired) return res;
  res = nux_msg_move(p->fd, &p->wired_out, true, "accept (wired)", p->comm->peer);
  if (res != ncclSuccess) return res;
  *ready_p = p->wired_out.done == p->wired_out.len;
  return ncclSuccess;
}

ncclResult_t nux_accept(void* listen_comm, void** recv_comm) {
  nux_listen_t* l = listen_comm;
  *recv_comm = NULL;
  while (l->npend < NUX_MAX_PENDING) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      NUX_WARN("net-ucx: accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    nux_pending_t* p = &l->pend[l->npend];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->in.len = sizeof(nux_hello_t);
    p->in.buf = malloc(p->in.len);
    if (p->in.buf == NULL) {
      close(fd);
      NUX_WARN("net-ucx: accept: out of memory");
      return ncclSystemError;
    }
    l->npend++;
  }
  for (int i = 0; i < l->npend;) {
    bool ready = false;
    ncclResult_t res = nux_pending_step(l, &l->pend[i], &ready);
    if (res != ncclSuccess) {
      /* One bad or vanished connector must not fail the listener: drop it (WARNed). */
      nux_pending_drop(l, i);
      continue;
    }
    if (ready) {
      nux_comm_t* comm = l->pend[i].comm;
      l->pend[i].comm = NULL;
      nux_pending_drop(l, i);
      *recv_comm = comm;
      return ncclSuccess;
    }
    i++;
  }
  nux_worker_poke(l->worker);
  return ncclSuccess;
}

ncclResult_t nux_close_listen(void* listen_comm) {
  nux_listen_t* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  while (l->npend > 0) nux_pending_drop(l, 0);
  close(l->fd);
  nux_worker_put(l->worker);
  free(l);
  return ncclSuccess;
}
