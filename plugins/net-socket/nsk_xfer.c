/*
 * net-socket transfers: comms, requests, helper threads, test().
 *
 * Threads: the caller (NCCL's proxy thread) owns the request ring and the control socket; each
 * helper thread owns its data sockets' I/O. They share, per data socket, a ring of pieces under
 * the helper's lock (the caller appends, the helper retires), a request's `pending` count (the
 * helper decrements it with release order once the piece's bytes are in or out, test() reads it
 * with acquire order), and the comm's sticky `error`.
 * A helper with nothing to move polls for CHOIR_SOCKET_SPIN_US after its last move, then sleeps in
 * poll() on its sockets and an eventfd; the caller writes the eventfd when it hands work to a
 * sleeping helper, and at close.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "nsk.h"

/* ---- Errors --------------------------------------------------------------------------------- */

static void nsk_comm_fail(nsk_comm_t* c, ncclResult_t res) {
  int expected = 0;
  __atomic_compare_exchange_n(&c->error, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

static ncclResult_t nsk_comm_error(nsk_comm_t* c) {
  ncclResult_t res = (ncclResult_t)__atomic_load_n(&c->error, __ATOMIC_ACQUIRE);
  if (res != ncclSuccess && !c->error_logged) {
    c->error_logged = true;
    NSK_WARN("net-socket: %s connection with %s failed; its requests will not complete",
             c->is_send ? "send" : "receive", c->peer);
  }
  return res;
}

/* ---- Helper threads ------------------------------------------------------------------------- */

/* The piece at the head of each of w's sockets, taken under w->lock. */
static int nsk_worker_snapshot(nsk_worker_t* w, nsk_task_t** tasks, int* socks) {
  int n = 0;
  for (int s = w->first; s < w->first + w->count; s++) {
    nsk_sock_t* so = &w->comm->socks[s];
    if (so->head != so->tail) {
      tasks[n] = &so->ring[so->head % NSK_MAX_REQS];
      socks[n++] = s;
    }
  }
  return n;
}

/* Moves what socket fd takes now in the comm's direction (send or receive); *n: bytes moved. */
static ncclResult_t nsk_move(const nsk_comm_t* c, int fd, char* buf, size_t len, size_t* n,
                             const char* what_send, const char* what_recv) {
  return c->is_send ? nsk_try_send(fd, buf, len, n, what_send, c->peer)
                    : nsk_try_recv(fd, buf, len, n, what_recv, c->peer);
}

/* Moves what the sockets take now; retires finished pieces. Returns whether anything moved. */
static bool nsk_worker_move(nsk_worker_t* w, nsk_task_t** tasks, const int* socks, int n) {
  nsk_comm_t* c = w->comm;
  bool progressed = false;
  for (int i = 0; i < n; i++) {
    nsk_task_t* t = tasks[i];
    nsk_sock_t* so = &c->socks[socks[i]];
    size_t moved = 0, len = t->len - t->done;
#ifdef NSK_PLANT_SHORT_WRITE
    /* Planted bug, in test/plugin's libnccl-net-socketshort.so only: the last byte of every
     * data-socket piece is never written, yet the piece counts as sent (a short write taken for
     * a whole one). transport-net-catches-short-write must fail on it. */
    if (c->is_send) len -= 1;
#endif
    ncclResult_t res = nsk_move(c, so->fd, t->buf + t->done, len, &moved, "send", "receive");
    if (res != ncclSuccess) {
      nsk_comm_fail(c, res);
      return true;
    }
    t->done += moved;
#ifdef NSK_PLANT_SHORT_WRITE
    if (c->is_send && t->done + 1 == t->len) t->done = t->len;
#endif
    if (moved > 0) progressed = true;
    if (t->done == t->len) {
      nsk_req_t* r = t->req;
      pthread_mutex_lock(&w->lock);
      so->head++;
      pthread_mutex_unlock(&w->lock);
      __atomic_sub_fetch(&r->pending, 1, __ATOMIC_RELEASE);
      progressed = true;
    }
  }
  return progressed;
}

static uint64_t nsk_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void* nsk_worker_main(void* arg) {
  nsk_worker_t* w = arg;
  nsk_comm_t* c = w->comm;
  nsk_task_t* tasks[NSK_MAX_SOCKS];
  int socks[NSK_MAX_SOCKS];
  struct pollfd pfd[NSK_MAX_SOCKS + 1];
  bool progressed = true;
  /* A helper that moved data recently polls instead of sleeping: the next piece of a collective
   * usually follows within tens of microseconds, and waking a sleeping thread costs about as
   * much (far more on virtual machines). */
  const uint64_t spin_ns = (uint64_t)nsk_g.spin_us * 1000u;
  uint64_t last_move = 0;
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    bool failed = __atomic_load_n(&c->error, __ATOMIC_ACQUIRE) != 0;
    int n = failed ? 0 : nsk_worker_snapshot(w, tasks, socks);
    bool idle = !progressed || n == 0;
    bool spin = false;
    if (idle && !failed && spin_ns > 0) spin = nsk_now_ns() - last_move < spin_ns;
    w->sleeping = idle && !spin;
    pthread_mutex_unlock(&w->lock);
    if (spin) {
      sched_yield();
    } else if (idle) {
      pfd[0] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
      for (int i = 0; i < n; i++)
        pfd[i + 1] = (struct pollfd){.fd = c->socks[socks[i]].fd,
                                     .events = (short)(c->is_send ? POLLOUT : POLLIN)};
      if (poll(pfd, (nfds_t)n + 1, 1000) > 0 && (pfd[0].revents & POLLIN)) {
        uint64_t v;
        if (read(w->wake_fd, &v, sizeof(v)) < 0) { /* nothing to drain */
        }
      }
    }
    progressed = n > 0 && nsk_worker_move(w, tasks, socks, n);
    if (progressed && spin_ns > 0) last_move = nsk_now_ns();
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static void nsk_worker_wake(nsk_worker_t* w) {
  uint64_t one = 1;
  if (write(w->wake_fd, &one, sizeof(one)) < 0) { /* counter saturated: already awake */
  }
}

/* ---- Comms ---------------------------------------------------------------------------------- */

ncclResult_t nsk_comm_create(bool is_send, int ctrl_fd, const int* data_fds, int nthreads,
                             int nsocks, size_t inline_max, const char* peer, nsk_comm_t** comm_p) {
  nsk_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NSK_WARN("net-socket: out of memory creating a comm");
    return ncclSystemError;
  }
  c->is_send = is_send;
  c->ctrl_fd = ctrl_fd;
  c->nthreads = nthreads;
  c->inline_max = inline_max;
  c->nsocks_total = nthreads > 0 ? nthreads * nsocks : nsocks;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  for (int s = 0; s < c->nsocks_total; s++) c->socks[s].fd = data_fds[s];
  c->nworkers = nthreads > 0 ? nthreads : 1;
  for (int i = 0; i < c->nworkers; i++) {
    nsk_worker_t* w = &c->workers[i];
    w->comm = c;
    w->first = nthreads > 0 ? i * nsocks : 0;
    w->count = nthreads > 0 ? nsocks : c->nsocks_total;
    w->wake_fd = -1;
    pthread_mutex_init(&w->lock, NULL);
  }
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nthreads; i++) {
    nsk_worker_t* w = &c->workers[i];
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0) {
      NSK_WARN("net-socket: eventfd failed: %s", strerror(errno));
      res = ncclSystemError;
      goto err_destroy;
    }
    int rc = pthread_create(&w->thread, NULL, nsk_worker_main, w);
    if (rc != 0) {
      NSK_WARN("net-socket: starting a helper thread failed: %s", strerror(rc));
      res = ncclSystemError;
      goto err_destroy;
    }
    w->started = true;
  }
  NSK_INFO(NCCL_NET,
           "net-socket: %s comm with %s: %d data socket(s), %d helper thread(s), requests up to "
           "%zu bytes on the control socket",
           is_send ? "send" : "receive", c->peer, c->nsocks_total, nthreads, inline_max);
  *comm_p = c;
  return ncclSuccess;
err_destroy:
  /* The caller still owns the sockets on failure. */
  c->ctrl_fd = -1;
  for (int s = 0; s < c->nsocks_total; s++) c->socks[s].fd = -1;
  nsk_comm_destroy(c);
  return res;
}

void nsk_comm_destroy(nsk_comm_t* c) {
  for (int i = 0; i < c->nworkers; i++) {
    nsk_worker_t* w = &c->workers[i];
    if (w->started) {
      pthread_mutex_lock(&w->lock);
      w->stop = true;
      pthread_mutex_unlock(&w->lock);
      nsk_worker_wake(w);
      pthread_join(w->thread, NULL);
    }
    if (w->wake_fd >= 0) close(w->wake_fd);
    pthread_mutex_destroy(&w->lock);
  }
  for (int s = 0; s < c->nsocks_total; s++)
    if (c->socks[s].fd >= 0) close(c->socks[s].fd);
  if (c->ctrl_fd >= 0) close(c->ctrl_fd);
  /* Requests never completed (receives posted ahead of data that never came): their events
   * end with the comm. */
  ncclProfilerCallback_t cb = __atomic_load_n(&nsk_prof_cb, __ATOMIC_ACQUIRE);
  for (unsigned i = c->rq_head; cb != NULL && i != c->rq_tail; i++) {
    nsk_req_t* r = &c->reqs[i % NSK_MAX_REQS];
    if (r->state == NSK_REQ_FREE || r->pev == NULL) continue;
    (void)cb(&r->pev, ncclProfilerNetEventStop, NULL, 0, &r->pdesc);
    r->pev = NULL;
  }
  free(c);
}

ncclResult_t nsk_close_send(void* send_comm) {
  if (send_comm != NULL) nsk_comm_destroy(send_comm);
  return ncclSuccess;
}

ncclResult_t nsk_close_recv(void* recv_comm) {
  if (recv_comm != NULL) nsk_comm_destroy(recv_comm);
  return ncclSuccess;
}

/* ---- Requests ------------------------------------------------------------------------------- */

/* Cuts r into one piece per data socket (NSK_MIN_CHUNK at least) and hands them out. */
static void nsk_req_dispatch(nsk_comm_t* c, nsk_req_t* r) {
  size_t size = r->nbytes;
  size_t nsock = (size_t)c->nsocks_total;
  size_t chunk = (size + nsock - 1) / nsock;
  chunk = (chunk + 4095) & ~(size_t)4095;
  if (chunk < NSK_MIN_CHUNK) chunk = NSK_MIN_CHUNK;
  int npieces = size == 0 ? 0 : (int)((size + chunk - 1) / chunk);
  __atomic_store_n(&r->pending, npieces, __ATOMIC_RELAXED);
  for (int s = 0; s < npieces; s++) {
    size_t off = (size_t)s * chunk;
    size_t len = size - off < chunk ? size - off : chunk;
    nsk_worker_t* w = &c->workers[c->nthreads > 0 ? s / (c->nsocks_total / c->nthreads) : 0];
    nsk_sock_t* so = &c->socks[s];
    pthread_mutex_lock(&w->lock);
    so->ring[so->tail % NSK_MAX_REQS] = (nsk_task_t){.req = r, .buf = r->data + off, .len = len};
    so->tail++;
    bool wake = w->sleeping;
    w->sleeping = false;
    pthread_mutex_unlock(&w->lock);
    if (wake && c->nthreads > 0) nsk_worker_wake(w);
  }
}

/* Whether a request of nbytes travels on the control socket, after its header. */
static bool nsk_inline(const nsk_comm_t* c, size_t nbytes) {
  return nbytes > 0 && nbytes <= c->inline_max;
}

/* Moves headers (and small requests' data) on the control socket in posting order; without
 * helpers, moves the data sockets' pieces too. */
static ncclResult_t nsk_comm_progress(nsk_comm_t* c) {
  ncclResult_t res = nsk_comm_error(c);
  if (res != ncclSuccess) return res;
  while (c->hdr_next != c->rq_tail) {
    nsk_req_t* r = &c->reqs[c->hdr_next % NSK_MAX_REQS];
    size_t n = 0;
    if (c->hdr_done < sizeof(c->hdr_buf)) {
      if (c->is_send && c->hdr_done == 0) c->hdr_buf = r->nbytes;
      res = nsk_move(c, c->ctrl_fd, (char*)&c->hdr_buf + c->hdr_done,
                     sizeof(c->hdr_buf) - c->hdr_done, &n, "send header", "receive header");
      if (res != ncclSuccess) goto err_fail;
      c->hdr_done += n;
      if (c->hdr_done < sizeof(c->hdr_buf)) break;
      c->inline_done = 0;
      if (!c->is_send) {
        if (c->hdr_buf > r->size) {
          NSK_WARN(
              "net-socket: message truncated: %s sent %llu bytes but the matching receive "
              "posted only %zu (ncclInvalidUsage)",
              c->peer, (unsigned long long)c->hdr_buf, r->size);
          res = ncclInvalidUsage;
          goto err_fail;
        }
        r->nbytes = (size_t)c->hdr_buf;
        if (!nsk_inline(c, r->nbytes)) nsk_req_dispatch(c, r);
      }
    }
    if (nsk_inline(c, r->nbytes)) {
      res = nsk_move(c, c->ctrl_fd, r->data + c->inline_done, r->nbytes - c->inline_done, &n,
                     "send", "receive");
      if (res != ncclSuccess) goto err_fail;
      c->inline_done += n;
      if (c->inline_done < r->nbytes) break;
    }
    c->hdr_done = 0;
    c->hdr_next++;
    r->header_done = true;
  }
  if (c->nthreads == 0) {
    nsk_worker_t* w = &c->workers[0];
    nsk_task_t* tasks[NSK_MAX_SOCKS];
    int socks[NSK_MAX_SOCKS];
    pthread_mutex_lock(&w->lock);
    int n = nsk_worker_snapshot(w, tasks, socks);
    pthread_mutex_unlock(&w->lock);
    if (n > 0) nsk_worker_move(w, tasks, socks, n);
  }
  return nsk_comm_error(c);
err_fail:
  nsk_comm_fail(c, res);
  c->error_logged = true; /* the cause is logged already */
  return res;
}

static nsk_req_t* nsk_req_alloc(nsk_comm_t* c) {
  if (c->rq_tail - c->rq_head >= NSK_MAX_REQS) return NULL;
  nsk_req_t* r = &c->reqs[c->rq_tail % NSK_MAX_REQS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->state = NSK_REQ_POSTED;
  c->rq_tail++;
  return r;
}

ncclProfilerCallback_t nsk_prof_cb;

/* The request's NetPlugin event, when the core gave a profiler handle. */
static void nsk_prof_start(nsk_req_t* r, void* phandle, int op, size_t length) {
  ncclProfilerCallback_t cb = __atomic_load_n(&nsk_prof_cb, __ATOMIC_ACQUIRE);
  if (cb == NULL || phandle == NULL) return;
  r->pdesc.type = ncclProfileSocket;
  r->pdesc.sock.fd = r->comm->ctrl_fd;
  r->pdesc.sock.op = op;
  r->pdesc.sock.length = length;
  (void)cb(&r->pev, ncclProfilerNetEventStart, phandle,
           (int64_t)(NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER), &r->pdesc);
}

ncclResult_t nsk_isend(void* send_comm, void* data, size_t size, void* phandle, void** request) {
  nsk_comm_t* c = send_comm;
  *request = NULL;
  if (size > NSK_MAX_BYTES) {
    NSK_WARN("net-socket: isend of %zu bytes exceeds maxP2pBytes %zu", size, NSK_MAX_BYTES);
    return ncclInvalidArgument;
  }
  ncclResult_t res = nsk_comm_error(c);
  if (res != ncclSuccess) return res;
  nsk_req_t* r = nsk_req_alloc(c);
  if (r == NULL) return nsk_comm_progress(c); /* full: the caller retries */
  r->data = data;
  r->size = size;
  r->nbytes = size;
  nsk_prof_start(r, phandle, NSK_PROF_OP_SEND, size);
  if (!nsk_inline(c, size)) nsk_req_dispatch(c, r);
  *request = r;
  return nsk_comm_progress(c);
}

ncclResult_t nsk_irecv(void* recv_comm, int n, void** data, const size_t* sizes, void* phandle,
                       void** request) {
  nsk_comm_t* c = recv_comm;
  *request = NULL;
  if (n != 1) {
    NSK_WARN("net-socket: irecv of %d buffers; this plugin's maxRecvs is 1", n);
    return ncclInvalidArgument;
  }
  ncclResult_t res = nsk_comm_error(c);
  if (res != ncclSuccess) return res;
  nsk_req_t* r = nsk_req_alloc(c);
  if (r == NULL) return nsk_comm_progress(c);
  r->data = data[0];
  r->size = sizes[0];
  nsk_prof_start(r, phandle, NSK_PROF_OP_RECV, sizes[0]);
  *request = r;
  return nsk_comm_progress(c);
}

ncclResult_t nsk_iflush(void* recv_comm, int n, void** request) {
  (void)recv_comm;
  (void)n;
  *request = NULL; /* host memory only: nothing to make visible */
  return ncclSuccess;
}

ncclResult_t nsk_test(void* request, int* done, int* sizes) {
  nsk_req_t* r = request;
  nsk_comm_t* c = r->comm;
  *done = 0;
  ncclResult_t res = nsk_comm_progress(c);
  if (res != ncclSuccess) return res;
  if (!r->header_done || __atomic_load_n(&r->pending, __ATOMIC_ACQUIRE) != 0) return ncclSuccess;
  *done = 1;
  if (sizes != NULL) sizes[0] = (int)r->nbytes;
  if (r->pev != NULL) {
    /* A receive learns its length from the sender: the event gets it before it ends. */
    r->pdesc.sock.length = r->nbytes;
    ncclProfilerCallback_t cb = __atomic_load_n(&nsk_prof_cb, __ATOMIC_ACQUIRE);
    (void)cb(&r->pev, c->is_send ? ncclProfilerNetEventStop : ncclProfilerNetEventUpdateAndStop,
             NULL, 0, &r->pdesc);
    r->pev = NULL;
  }
  r->state = NSK_REQ_FREE;
  while (c->rq_head != c->rq_tail && c->reqs[c->rq_head % NSK_MAX_REQS].state == NSK_REQ_FREE)
    c->rq_head++;
  return ncclSuccess;
}

/* ---- Memory registration: host memory needs none ----------------------------------------------
 */

static int nsk_mr_host; /* every host registration's handle */

ncclResult_t nsk_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm;
  (void)data;
  (void)size;
  if (type != NCCL_PTR_HOST) {
    NSK_WARN("net-socket: regMr of memory type %d; this plugin supports host memory only (%d)",
             type, NCCL_PTR_HOST);
    return ncclInvalidArgument;
  }
  *mhandle = &nsk_mr_host;
  return ncclSuccess;
}

ncclResult_t nsk_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle) {
  (void)comm;
  (void)data;
  (void)size;
  (void)offset;
  (void)fd;
  (void)mhandle;
  NSK_WARN("net-socket: regMrDmaBuf (memory type %d): dma-buf is not supported", type);
  return ncclInvalidArgument;
}

ncclResult_t nsk_dereg_mr(void* comm, void* mhandle) {
  (void)comm;
  (void)mhandle;
  return ncclSuccess;
}
