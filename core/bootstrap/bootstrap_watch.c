/*
 * Liveness of a communicator's ranks (bootstrap_watch_*, see bootstrap.h).
 *
 * Each rank keeps two TCP connections of its own, outside the message engine: one to the next
 * rank of the ring (rank + 1 mod n) and one from the previous. Both ends send a heartbeat frame on
 * both every interval. One thread per process polls the connections of every watch. What it learns
 * about a rank is reported to the watch's owner once, and passed on to both neighbours as a
 * notice, so that it travels around the ring to every rank:
 *   - the connection ended without a goodbye: the process exited without closing the
 *     communicator, was killed or crashed (the kernel closes its sockets) -> EXITED;
 *   - nothing arrived for CHOIR_PEER_TIMEOUT: the process is stopped or hung, or its host or
 *     network is down -> SILENT;
 *   - a goodbye: the rank destroyed (LEFT) or aborted (ABORTED) the communicator, or its process
 *     exited normally with the communicator still open (QUIT: sent from an atexit handler).
 * A rank that left is no longer in the ring: its two neighbours are not linked to each other, so
 * notices still reach every rank after one departure, but a second one splits the ring in two.
 *
 * Locking: wm.lock guards the registry and the state of every watch. After setup only the thread
 * touches a watch's sockets, and only the thread unlinks a watch (bootstrap_watch_stop asks it to
 * and waits), so the thread never looks at a freed watch, and the owner's callback never runs
 * after bootstrap_watch_stop returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "bootstrap_internal.h"

#define WATCH_MAGIC 0x48435457u /* "WTCH" */

enum { WATCH_HELLO = 1, WATCH_HEARTBEAT, WATCH_BYE, WATCH_NOTICE };

/* One frame; every message on a watch connection is exactly one. */
typedef struct {
  uint32_t magic;
  uint16_t kind;
  uint16_t event;   /* BYE, NOTICE: a bootstrap_peer_event_t */
  int32_t subject;  /* HELLO, BYE: the sender's rank; NOTICE: the rank the event is about */
  int32_t reporter; /* NOTICE: the rank that saw the event */
  uint64_t token;   /* HELLO: the token the receiver handed out (keeps strangers out) */
  uint64_t colls;   /* BYE, NOTICE: bootstrap_peer_report_t's colls and busy of the subject */
  uint32_t busy;
  int32_t cause;    /* BYE, NOTICE: bootstrap_peer_report_t's cause (-1: none) */
} watch_frame_t;
_Static_assert(sizeof(watch_frame_t) == 40, "watch frames are 40 bytes on the wire");

/* Frames a connection may have waiting to be written (heartbeats are not queued behind others). */
#define WATCH_OUTQ 16

/* What a rank hands its previous neighbour: where to connect, and the token to present. */
typedef struct {
  sock_addr_t addr;
  uint32_t pad;
  uint64_t token;
} watch_addr_t;

typedef struct {
  sock_t sock; /* fd -1 once closed */
  int peer;
  uint64_t last_rx_ns;
  uint64_t last_tx_ns;
  unsigned char in[sizeof(watch_frame_t)];
  size_t in_got;
  unsigned char out[WATCH_OUTQ * sizeof(watch_frame_t)];
  size_t out_len;
} watch_conn_t;

struct bootstrap_watch {
  struct bootstrap_watch* next; /* registry */
  int rank;
  int nranks;
  const bootstrap_watch_ops_t* ops;
  void* ctx;
  watch_conn_t conn[2]; /* [0] to the next rank, [1] from the previous one */
  uint8_t* known;       /* per rank: the event reported about it (0: none yet) */
  int stop_how;         /* -1 while running; else the bootstrap_leave_t asked for */
  bool released;        /* the thread let go of it: sockets closed, callback never again */
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond; /* broadcast when a watch is released */
  bootstrap_watch_t* head;
  bool running; /* the thread exists (it exits when the registry becomes empty) */
  int wake[2];  /* pipe: a byte makes the thread look at the registry now */
  bool hooks;   /* atexit and atfork handlers installed */
} wm = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false, {-1, -1}, false};

uint64_t bootstrap_peer_timeout_ms(void) {
  static int warned;
  int64_t s = param_int(PARAM_PEER_TIMEOUT);
  if (s < 0) {
    int64_t def = param_desc(PARAM_PEER_TIMEOUT)->def_int;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) == 0)
      WARN(
          "CHOIR_PEER_TIMEOUT=%lld is negative; use seconds, or 0 to turn the check off; using "
          "%lld",
          (long long)s, (long long)def);
    s = def;
  }
  return (uint64_t)s * 1000;
}

/* Heartbeats go out four times per timeout, at least once a second. */
static uint64_t watch_interval_ms(uint64_t timeout_ms) {
  uint64_t ms = timeout_ms / 4;
  return ms == 0 || ms > 1000 ? 1000 : ms;
}

const char* bootstrap_peer_event_str(int event) {
  switch (event) {
    case BOOTSTRAP_PEER_EXITED:
      return "exited without closing the communicator (killed, crashed, or its connection broke)";
    case BOOTSTRAP_PEER_SILENT:
      return "stopped answering (no heartbeat within CHOIR_PEER_TIMEOUT: the process is stopped "
             "or hung, or its host or network is down)";
    case BOOTSTRAP_PEER_ABORTED: return "aborted the communicator (ncclCommAbort)";
    case BOOTSTRAP_PEER_LEFT: return "destroyed the communicator (ncclCommDestroy)";
    case BOOTSTRAP_PEER_QUIT: return "exited with the communicator still open";
    default: return "failed";
  }
}

/* ---- Frames (thread, under wm.lock) --------------------------------------------------------- */

static void watch_queue(watch_conn_t* c, uint16_t kind, const bootstrap_peer_report_t* r) {
  if (c->sock.fd < 0 || c->out_len + sizeof(watch_frame_t) > sizeof(c->out)) return;
  /* A heartbeat behind queued frames adds nothing: they prove life just as well. */
  if (kind == WATCH_HEARTBEAT && c->out_len > 0) return;
  watch_frame_t f = {WATCH_MAGIC, kind, 0, -1, -1, 0, 0, 0, -1};
  if (r != NULL) {
    f.event = (uint16_t)r->event;
    f.subject = r->rank;
    f.reporter = r->reporter;
    f.colls = r->colls;
    f.busy = (uint32_t)r->busy;
    f.cause = r->cause;
  }
  memcpy(c->out + c->out_len, &f, sizeof(f));
  c->out_len += sizeof(f);
}

/* Write what is queued, as far as the socket takes it. false: the connection broke. */
static bool watch_flush(watch_conn_t* c, uint64_t now) {
  while (c->sock.fd >= 0 && c->out_len > 0) {
    struct iovec iov = {c->out, c->out_len};
    size_t n = 0;
    int err = 0;
    if (sock_try_sendv(&c->sock, &iov, 1, &n, &err) != ncclSuccess) return false;
    if (n == 0) break;
    memmove(c->out, c->out + n, c->out_len - n);
    c->out_len -= n;
    c->last_tx_ns = now;
  }
  return true;
}

static void watch_conn_close(watch_conn_t* c) {
  sock_close(&c->sock);
  c->out_len = 0;
  c->in_got = 0;
}

/* Tell the owner (once per rank) and both neighbours. */
static void watch_event(bootstrap_watch_t* w, const bootstrap_peer_report_t* r) {
  if (r->rank < 0 || r->rank >= w->nranks || w->known[r->rank] != 0) return;
  w->known[r->rank] = (uint8_t)r->event;
  for (int i = 0; i < 2; i++) watch_queue(&w->conn[i], WATCH_NOTICE, r);
  w->ops->report(w->ctx, r);
}

/* The connection to c->peer ended or misbehaved: unless it said goodbye first, it is gone (and
 * nothing is known of what it had done). */
static void watch_conn_lost(bootstrap_watch_t* w, watch_conn_t* c, int event) {
  bootstrap_peer_report_t r = {c->peer, event, w->rank, 0, 1, -1};
  watch_conn_close(c);
  watch_event(w, &r);
}

/* A frame's cause: a rank of the communicator, or -1. */
static int watch_cause(const bootstrap_watch_t* w, int32_t cause) {
  return cause >= 0 && cause < w->nranks ? cause : -1;
}

static void watch_frame(bootstrap_watch_t* w, watch_conn_t* c, const watch_frame_t* f) {
  if (f->magic != WATCH_MAGIC ||
      (f->kind != WATCH_HEARTBEAT && f->kind != WATCH_BYE && f->kind != WATCH_NOTICE)) {
    WARN(
        "rank %d: the liveness connection with rank %d carried garbage (magic 0x%08x, kind %u); "
        "treating the rank as gone",
        w->rank, c->peer, f->magic, (unsigned)f->kind);
    watch_conn_lost(w, c, BOOTSTRAP_PEER_EXITED);
    return;
  }
  if (f->kind == WATCH_BYE) {
    int event = f->event >= BOOTSTRAP_PEER_ABORTED && f->event <= BOOTSTRAP_PEER_QUIT
                    ? f->event
                    : BOOTSTRAP_PEER_ABORTED;
    bootstrap_peer_report_t r = {c->peer, event, w->rank, f->colls, f->busy != 0,
                                 watch_cause(w, f->cause)};
    watch_conn_close(c);
    watch_event(w, &r);
  } else if (f->kind == WATCH_NOTICE) {
    bootstrap_peer_report_t r = {f->subject, f->event, f->reporter, f->colls, f->busy != 0,
                                 watch_cause(w, f->cause)};
    if (f->event >= BOOTSTRAP_PEER_EXITED && f->event <= BOOTSTRAP_PEER_QUIT) watch_event(w, &r);
  }
}

static void watch_read(bootstrap_watch_t* w, watch_conn_t* c, uint64_t now) {
  while (c->sock.fd >= 0) {
    size_t n = 0;
    int err = 0;
    ncclResult_t res =
        sock_try_recv(&c->sock, c->in + c->in_got, sizeof(c->in) - c->in_got, &n, &err);
    if (res != ncclSuccess) {
      watch_conn_lost(w, c, BOOTSTRAP_PEER_EXITED);
      return;
    }
    if (n == 0) return;
    c->last_rx_ns = now;
    c->in_got += n;
    if (c->in_got == sizeof(c->in)) {
      watch_frame_t f;
      memcpy(&f, c->in, sizeof(f));
      c->in_got = 0;
      watch_frame(w, c, &f);
    }
  }
}

/* ---- The thread ------------------------------------------------------------------------------ */

static void watch_wake(void) {
  char b = 1;
  if (wm.wake[1] >= 0) (void)!write(wm.wake[1], &b, 1);
}

/* Under wm.lock: say goodbye (best effort), close, unlink. */
static void watch_release(bootstrap_watch_t* w, uint64_t now) {
  bootstrap_peer_report_t self = {w->rank, w->stop_how, w->rank, 0, 0, -1};
  if (w->conn[0].sock.fd >= 0 || w->conn[1].sock.fd >= 0)
    w->ops->state(w->ctx, &self.colls, &self.busy, &self.cause);
  for (int i = 0; i < 2; i++) {
    watch_conn_t* c = &w->conn[i];
    if (c->sock.fd < 0) continue;
    c->out_len = 0; /* the goodbye must not wait behind anything */
    watch_queue(c, WATCH_BYE, &self);
    (void)watch_flush(c, now);
    watch_conn_close(c);
  }
  for (bootstrap_watch_t** p = &wm.head; *p != NULL; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  w->released = true;
  pthread_cond_broadcast(&wm.cond);
}

static void* watch_main(void* arg) {
  (void)arg;
  struct pollfd* pfds = NULL;
  watch_conn_t** pconn = NULL;
  bootstrap_watch_t** pwatch = NULL;
  int cap = 0;
  const uint64_t timeout_ms = bootstrap_peer_timeout_ms();
  const uint64_t interval_ns = watch_interval_ms(timeout_ms) * 1000000ull;
  pthread_mutex_lock(&wm.lock);
  for (;;) {
    uint64_t now = sock_clock_ns();
    for (bootstrap_watch_t *w = wm.head, *next; w != NULL; w = next) {
      next = w->next;
      if (w->stop_how >= 0) watch_release(w, now);
    }
    if (wm.head == NULL) break;
    int n = 1, need = 1;
    for (bootstrap_watch_t* w = wm.head; w != NULL; w = w->next) need += 2;
    if (need > cap) {
      struct pollfd* np = realloc(pfds, (size_t)need * sizeof(*pfds));
      watch_conn_t** nc = realloc(pconn, (size_t)need * sizeof(*pconn));
      bootstrap_watch_t** nw = realloc(pwatch, (size_t)need * sizeof(*pwatch));
      if (np) pfds = np;
      if (nc) pconn = nc;
      if (nw) pwatch = nw;
      if (np == NULL || nc == NULL || nw == NULL) {
        /* Out of memory: try again shortly rather than losing the watch. */
        pthread_mutex_unlock(&wm.lock);
        usleep(100000);
        pthread_mutex_lock(&wm.lock);
        continue;
      }
      cap = need;
    }
    pfds[0] = (struct pollfd){wm.wake[0], POLLIN, 0};
    for (bootstrap_watch_t* w = wm.head; w != NULL; w = w->next) {
      for (int i = 0; i < 2; i++) {
        watch_conn_t* c = &w->conn[i];
        if (c->sock.fd < 0) continue;
        if (timeout_ms > 0 && now - c->last_rx_ns > timeout_ms * 1000000ull) {
          watch_conn_lost(w, c, BOOTSTRAP_PEER_SILENT);
          continue;
        }
        if (now - c->last_tx_ns >= interval_ns) watch_queue(c, WATCH_HEARTBEAT, NULL);
        if (!watch_flush(c, now)) {
          watch_conn_lost(w, c, BOOTSTRAP_PEER_EXITED);
          continue;
        }
        pfds[n] = (struct pollfd){c->sock.fd, (short)(POLLIN | (c->out_len ? POLLOUT : 0)), 0};
        pconn[n] = c;
        pwatch[n] = w;
        n++;
      }
    }
    pthread_mutex_unlock(&wm.lock);
    (void)poll(pfds, (nfds_t)n, (int)(interval_ns / 2000000ull));
    pthread_mutex_lock(&wm.lock);
    if (pfds[0].revents & POLLIN) {
      char buf[64];
      while (read(wm.wake[0], buf, sizeof(buf)) > 0) {
      }
    }
    now = sock_clock_ns();
    /* Only this thread unlinks watches and closes their sockets, so the entries are still valid;
     * a connection closed meanwhile by an event of this round has fd -1 and is skipped. */
    for (int i = 1; i < n; i++) {
      watch_conn_t* c = pconn[i];
      if (c->sock.fd != pfds[i].fd || pfds[i].revents == 0) continue;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) watch_read(pwatch[i], c, now);
      if (c->sock.fd >= 0 && !watch_flush(c, now))
        watch_conn_lost(pwatch[i], c, BOOTSTRAP_PEER_EXITED);
    }
  }
  wm.running = false;
  pthread_mutex_unlock(&wm.lock);
  free(pfds);
  free(pconn);
  free(pwatch);
  return NULL;
}

/* A process that exits with communicators still open says goodbye on them (QUIT), so that their
 * peers can tell a normal exit from a crash. */
static void watch_atexit(void) {
  pthread_mutex_lock(&wm.lock);
  for (bootstrap_watch_t* w = wm.head; w != NULL; w = w->next)
    if (w->stop_how < 0) w->stop_how = BOOTSTRAP_LEAVE_QUIT;
  if (wm.head != NULL && wm.running) {
    watch_wake();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    while (wm.head != NULL && wm.running)
      if (pthread_cond_timedwait(&wm.cond, &wm.lock, &until) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&wm.lock);
}

/* The child of a fork has no watch thread: it drops the parent's watches, closing its copies of
 * their sockets so that they do not keep the parent's connections alive. */
static void watch_atfork_child(void) {
  pthread_mutex_init(&wm.lock, NULL);
  pthread_cond_init(&wm.cond, NULL);
  for (bootstrap_watch_t* w = wm.head; w != NULL; w = w->next) {
    for (int i = 0; i < 2; i++) watch_conn_close(&w->conn[i]);
    w->released = true;
  }
  wm.head = NULL;
  wm.running = false;
}

/* Under wm.lock: the wake pipe, the hooks, and the thread if it is not running. */
static ncclResult_t watch_thread_ensure(void) {
  if (wm.wake[0] < 0 && pipe2(wm.wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    WARN("rank liveness: cannot create a pipe: %m");
    wm.wake[0] = wm.wake[1] = -1;
    return ncclSystemError;
  }
  if (!wm.hooks) {
    atexit(watch_atexit);
    pthread_atfork(NULL, NULL, watch_atfork_child);
    wm.hooks = true;
  }
  if (wm.running) return ncclSuccess;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int err = pthread_create(&t, &attr, watch_main, NULL);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    WARN("rank liveness: cannot start its thread: %s", strerror(err));
    return ncclSystemError;
  }
  pthread_setname_np(t, "choir-watch");
  wm.running = true;
  return ncclSuccess;
}

/* ---- Setup ---------------------------------------------------------------------------------- */

/* Accept connections on `listener` until rank `peer` presents `token`; strangers are dropped. */
static ncclResult_t watch_accept(bootstrap_t* bs, sock_t* listener, int peer, uint64_t token,
                                 const sock_deadline_t* dl, sock_t* sock_p) {
  char what[64];
  snprintf(what, sizeof(what), "liveness connection from rank %d", peer);
  for (;;) {
    sock_t s;
    CHECK(sock_accept(listener, &s));
    if (s.fd < 0) {
      CHECK(sock_deadline_check(dl, "waiting for the", what));
      struct pollfd p = {listener->fd, POLLIN, 0};
      (void)poll(&p, 1, sock_deadline_poll_ms(dl));
      continue;
    }
    snprintf(s.name, sizeof(s.name), "rank %d (liveness)", peer);
    watch_frame_t f;
    ncclResult_t res = sock_recv(&s, &f, sizeof(f), dl);
    if (res == ncclSuccess && f.magic == WATCH_MAGIC && f.kind == WATCH_HELLO &&
        f.subject == peer && f.token == token) {
      *sock_p = s;
      return ncclSuccess;
    }
    char a[SOCK_ADDR_STRLEN];
    WARN(
        "bootstrap rank %d: dropped a connection from %s to its liveness socket: it is not rank "
        "%d of this communicator",
        bs->rank, sock_addr_str(&s.addr, a, sizeof(a)), peer);
    sock_close(&s);
    CHECK(sock_deadline_check(dl, "waiting for the", what));
  }
}

ncclResult_t bootstrap_watch_start(bootstrap_t* bs, const bootstrap_watch_ops_t* ops, void* ctx,
                                   bootstrap_watch_t** w_p) {
  if (bs->nranks == 1) {
    *w_p = NULL;
    return ncclSuccess;
  }
  const int rank = bs->rank, n = bs->nranks;
  const int prev = (rank + n - 1) % n, next = (rank + 1) % n;
  ncclResult_t res = ncclSuccess;
  bootstrap_watch_t* w = NULL;
  sock_t listener = {.fd = -1};
  CHECK(MEM_CALLOC(&w, 1));
  w->rank = rank;
  w->nranks = n;
  w->ops = ops;
  w->ctx = ctx;
  w->stop_how = -1;
  w->released = true; /* until registered */
  w->conn[0].sock.fd = w->conn[1].sock.fd = -1;
  w->conn[0].peer = next;
  w->conn[1].peer = prev;
  CHECK_GOTO(MEM_CALLOC(&w->known, (size_t)n), res, err_free);

  /* Our listening socket, on the bootstrap's interface; its address and a token go to prev. */
  watch_addr_t mine = {.token = 0}, theirs;
  sock_addr_t la = bs->addrs[rank];
  sock_addr_set_port(&la, 0);
  char name[SOCK_NAME_MAX];
  snprintf(name, sizeof(name), "liveness rank %d", rank);
  CHECK_GOTO(sock_listen(&la, name, &listener), res, err_free);
  mine.addr = listener.addr;
  if (getrandom(&mine.token, sizeof(mine.token), 0) != (ssize_t)sizeof(mine.token))
    mine.token = sock_clock_ns() ^ ((uint64_t)getpid() << 32);
  struct iovec siov = {&mine, sizeof(mine)}, riov = {&theirs, sizeof(theirs)};
  CHECK_GOTO(bs_send(bs, prev, BS_MSG_WATCH, 0, 0, &siov, 1, bs->abort_flag), res, err_free);
  CHECK_GOTO(bs_recv(bs, next, BS_MSG_WATCH, 0, 0, &riov, 1, bs->abort_flag), res, err_free);
  if (!sock_addr_valid(&theirs.addr, false)) {
    WARN("bootstrap rank %d: rank %d sent an invalid liveness address", rank, next);
    res = ncclRemoteError;
    goto err_free;
  }

  /* Connect to next and present its token, then take prev's connection. Connections complete in
   * the kernel's backlog and the hello fits in the socket buffer, so no rank waits for another
   * to accept first. */
  sock_deadline_t dl = sock_deadline(bs->timeout_ms, bs->abort_flag);
  snprintf(name, sizeof(name), "rank %d (liveness)", next);
  CHECK_GOTO(sock_connect(&theirs.addr, name, true, &dl, &w->conn[0].sock), res, err_free);
  watch_frame_t hello = {WATCH_MAGIC, WATCH_HELLO, 0, rank, rank, theirs.token, 0, 0, -1};
  CHECK_GOTO(sock_send(&w->conn[0].sock, &hello, sizeof(hello), &dl), res, err_free);
  CHECK_GOTO(watch_accept(bs, &listener, prev, mine.token, &dl, &w->conn[1].sock), res, err_free);
  sock_close(&listener);

  uint64_t now = sock_clock_ns();
  for (int i = 0; i < 2; i++) w->conn[i].last_rx_ns = w->conn[i].last_tx_ns = now;
  pthread_mutex_lock(&wm.lock);
  res = watch_thread_ensure();
  if (res == ncclSuccess) {
    w->released = false;
    w->next = wm.head;
    wm.head = w;
    watch_wake();
  }
  pthread_mutex_unlock(&wm.lock);
  if (res != ncclSuccess) goto err_free;
  INFO(NCCL_INIT | NCCL_BOOTSTRAP,
       "bootstrap rank %d: watching ranks %d and %d (CHOIR_PEER_TIMEOUT %llu s)", rank, prev, next,
       (unsigned long long)(bootstrap_peer_timeout_ms() / 1000));
  *w_p = w;
  return ncclSuccess;

err_free:
  sock_close(&listener);
  for (int i = 0; i < 2; i++) sock_close(&w->conn[i].sock);
  free(w->known);
  free(w);
  return res;
}

void bootstrap_watch_stop(bootstrap_watch_t* w, bootstrap_leave_t how) {
  if (w == NULL) return;
  pthread_mutex_lock(&wm.lock);
  if (!w->released) {
    if (w->stop_how < 0) w->stop_how = (int)how;
    watch_wake();
    while (!w->released) pthread_cond_wait(&wm.cond, &wm.lock);
  }
  pthread_mutex_unlock(&wm.lock);
  free(w->known);
  free(w);
}

int bootstrap_watch_event(bootstrap_watch_t* w, int rank) {
  if (w == NULL || rank < 0 || rank >= w->nranks) return 0;
  pthread_mutex_lock(&wm.lock);
  int e = w->known[rank];
  pthread_mutex_unlock(&wm.lock);
  return e;
}
