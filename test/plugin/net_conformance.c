/*
 * net-conformance: checks any net plugin shared object (Choir's or a vendor's) against the ncclNet
 * ABI contract, driven through the core's net_t API (core/plugin/plugin_net.h), so that every
 * version v6..v12 is exercised exactly the way the core drives it.
 *
 *   net-conformance [--case NAME[,NAME...]|all] [--dev N] [--max-bytes N] [--timeout S]
 *                   [--death-timeout S] [--role listen|connect (--rendezvous DIR | --peer-addr
 *                   HOST:PORT)] [--list] PLUGIN_SO
 *
 * Output: one line per case, "PASS name", "FAIL name: why" or "SKIP name: why"; notes start with
 * "# ". Exit status: 0 when nothing failed, 1 on any failure, 77 when the plugin has no device,
 * 2 on a usage error.
 *
 * Process model. Every case runs between two worker processes, side A and side B, joined by a
 * control stream (handles, barriers) that is not the network under test:
 *   - default: this program forks both workers of each case and joins them with a socketpair;
 *   - --role listen|connect: this process runs one side (listen = A, connect = B); the other side
 *     is another instance of the program, in another network namespace or on another host. The
 *     control streams go through a unix socket in --rendezvous DIR, or TCP at --peer-addr
 *     HOST:PORT (bound by the listen role, connected to by the connect role).
 * A worker opens the plugin itself, after the fork, so no plugin thread is ever forked; it runs
 * its side of the case and reports through a pipe to its supervisor (this program's main
 * process). The supervisor owns the case's deadline: a worker that has not finished by then is
 * killed and the case FAILs as a hang, so one stuck plugin call never stops the suite. It also
 * kills a worker with SIGKILL when a peer-death case asks for it, mid-transfer.
 * Workers are disposable: on a failure they report and exit without releasing anything.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin_net.h"

#define SKIP_CODE 77
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
/* A plugin call that takes longer than this blocked, which the data path and connection setup
 * must never do. */
#define BLOCK_LIMIT_S 2.0
/* Connection setup (listen/connect/accept loops) must finish within this. */
#define CONNECT_LIMIT_S 20.0
/* connect() or accept() polls before the peer is told to go on (connect-first, accept-first). */
#define CONNECT_POLLS 20
/* Largest single request the suite posts: test() reports sizes as int (page multiple). */
#define REQUEST_CAP ((size_t)INT_MAX / (4 * KIB) * (4 * KIB))
/* Guard bytes after the listen handle: a plugin writing past NCCL_NET_HANDLE_MAXSIZE trips it. */
#define HANDLE_GUARD 64
#define COMM_ID 0x63686f6972ULL /* both sides are ranks of one pretend communicator */

enum { SIDE_A = 0, SIDE_B = 1 }; /* A: receiver/listener in most cases; B: sender/connector */
static const char* const side_names[2] = {"A", "B"};

typedef struct opts {
  const char* plugin;
  const char* cases; /* comma list or "all" */
  int dev;
  size_t max_bytes; /* cap on the bytes one case moves in one message */
  double timeout_s; /* base deadline of a case */
  double death_s;   /* peer-death bar: an error must come within this */
  int role;         /* -1: both sides here (fork); SIDE_A / SIDE_B */
  const char* rendezvous;
  const char* peer_addr;
} opts_t;

/* ---------------------------------------------------------------------------------------------
 * Worker side: one process playing side A or B of one case.
 * ------------------------------------------------------------------------------------------- */

typedef struct worker {
  const opts_t* o;
  int side;
  int ctl;    /* control stream to the peer worker */
  int report; /* pipe to the supervisor */
  net_t* net;
  ncclNetProperties_v12_t props;
  double deadline; /* of the whole case, monotonic seconds */
} worker_t;

typedef struct case_def {
  const char* name;
  bool (*run)(worker_t* w);
  /* Deadline: base timeout plus the time to move this many bytes at 50 MiB/s (slow CI). */
  size_t (*bytes)(const opts_t* o);
} case_def_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_all_fd(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, buf, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    buf += k;
    n -= (size_t)k;
  }
}

/* One line to the supervisor: kind letter, then text. */
static void report_line(worker_t* w, char kind, const char* text) {
  char line[1024];
  int n = snprintf(line, sizeof(line), "%c %s\n", kind, text);
  if (n > (int)sizeof(line) - 1) {
    n = (int)sizeof(line) - 1;
    line[n - 1] = '\n';
  }
  write_all_fd(w->report, line, (size_t)n);
}

/* Notes go straight to stdout, one write per line, tagged with the side. */
__attribute__((format(printf, 2, 3))) static void note(worker_t* w, const char* fmt, ...) {
  char line[768];
  int n = snprintf(line, sizeof(line), "# [%s] ", side_names[w->side]);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  write_all_fd(STDOUT_FILENO, line, (size_t)n);
}

/* Reports the verdict (kind 'F' or 'S') to the supervisor and ends the worker with code. */
__attribute__((noreturn)) static void finish(worker_t* w, char kind, int code, const char* fmt,
                                             va_list ap) {
  char why[900];
  vsnprintf(why, sizeof(why), fmt, ap);
  report_line(w, kind, why);
  _exit(code);
}

/* Records the failure with the supervisor and ends the worker: nothing after a failure is
 * trustworthy, and the supervisor reports it. */
__attribute__((format(printf, 2, 3), noreturn)) static void fail(worker_t* w, const char* fmt,
                                                                 ...) {
  va_list ap;
  va_start(ap, fmt);
  finish(w, 'F', 1, fmt, ap);
}

__attribute__((format(printf, 2, 3), noreturn)) static void skip(worker_t* w, const char* fmt,
                                                                 ...) {
  va_list ap;
  va_start(ap, fmt);
  finish(w, 'S', SKIP_CODE, fmt, ap);
}

#define REQUIRE(w, cond, ...)          \
  do {                                 \
    if (!(cond)) fail(w, __VA_ARGS__); \
  } while (0)

static void check_net(worker_t* w, ncclResult_t res, const char* what) {
  if (res != ncclSuccess) {
    const char* last = err_last();
    fail(w, "%s returned %d (%s)%s%s", what, (int)res, err_string(res), last && *last ? ": " : "",
         last ? last : "");
  }
}

/* A plugin call, timed: it must succeed and must not block. */
#define NET_CALL(w, call)                                                                      \
  do {                                                                                         \
    double t0_ = now_s();                                                                      \
    check_net((w), (call), #call);                                                             \
    double dt_ = now_s() - t0_;                                                                \
    REQUIRE((w), dt_ < BLOCK_LIMIT_S, "%s blocked for %.1f s (it must return at once)", #call, \
            dt_);                                                                              \
  } while (0)

static void check_deadline(worker_t* w, double deadline, const char* what) {
  if (now_s() > deadline) fail(w, "%s did not finish in time (a hang)", what);
}

/* ---- control stream ---- */

static void ctl_io(worker_t* w, bool out, void* buf, size_t n, const char* what) {
  char* p = buf;
  while (n > 0) {
    struct pollfd pfd = {.fd = w->ctl, .events = out ? POLLOUT : POLLIN};
    int ms = (int)((w->deadline - now_s()) * 1000);
    if (ms <= 0) fail(w, "control stream: timed out %s %s", out ? "sending" : "waiting for", what);
    int r = poll(&pfd, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t k = out ? send(w->ctl, p, n, MSG_NOSIGNAL) : recv(w->ctl, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0)
      fail(w, "control stream: peer side gone while %s %s (it failed or died)",
           out ? "sending" : "waiting for", what);
    p += k;
    n -= (size_t)k;
  }
}

static void ctl_send(worker_t* w, const void* buf, size_t n, const char* what) {
  ctl_io(w, true, (void*)buf, n, what);
}
static void ctl_recv(worker_t* w, void* buf, size_t n, const char* what) {
  ctl_io(w, false, buf, n, what);
}

/* Both sides reach point `tag` before either goes on. */
static void ctl_sync(worker_t* w, uint32_t tag) {
  uint32_t peer = 0;
  ctl_send(w, &tag, sizeof(tag), "barrier");
  ctl_recv(w, &peer, sizeof(peer), "barrier");
  REQUIRE(w, peer == tag, "control stream out of step (barrier %u, peer at %u)", tag, peer);
}

/* True when the peer's end of the control stream is closed (the peer process is gone). */
static bool ctl_peer_gone(worker_t* w) {
  struct pollfd pfd = {.fd = w->ctl, .events = POLLIN};
  if (poll(&pfd, 1, 0) <= 0) return false;
  char c;
  ssize_t k = recv(w->ctl, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR);
}

/* ---- data patterns: byte i of a message with seed s is a fixed function of (s, i) ---- */

static inline uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t v = (i + seed * 0x100000001b3ULL) * 0x9e3779b97f4a7c15ULL;
  return v ^ (v >> 29);
}

/* Buffers may be unaligned (the regmr case): words go through memcpy. */
static void pattern_fill(void* buf, size_t n, uint64_t seed) {
  char* cp = buf;
  size_t nw = n / 8;
  for (size_t i = 0; i < nw; i++) {
    uint64_t w = pattern_word(seed, i);
    memcpy(cp + i * 8, &w, sizeof(w));
  }
  if (n % 8) {
    uint64_t v = pattern_word(seed, nw);
    memcpy((char*)buf + nw * 8, &v, n % 8);
  }
}

/* Offset of the first byte that differs from the pattern, or n (any alignment). */
static size_t pattern_check(const void* buf, size_t n, uint64_t seed) {
  const char* cp = buf;
  size_t nw = n / 8;
  for (size_t i = 0; i < nw; i++) {
    uint64_t v = pattern_word(seed, i), w;
    memcpy(&w, cp + i * 8, sizeof(w));
    if (w != v) {
      for (size_t b = 0; b < 8; b++)
        if (((const unsigned char*)&w)[b] != ((const unsigned char*)&v)[b]) return i * 8 + b;
    }
  }
  if (n % 8) {
    uint64_t v = pattern_word(seed, nw);
    for (size_t b = 0; b < n % 8; b++)
      if (((const unsigned char*)buf)[nw * 8 + b] != ((const unsigned char*)&v)[b])
        return nw * 8 + b;
  }
  return n;
}

static void* buf_alloc(worker_t* w, size_t n) {
  void* p = NULL;
  size_t sz = n < 4 * KIB ? 4 * KIB : (n + 4 * KIB - 1) / (4 * KIB) * (4 * KIB);
  if (posix_memalign(&p, 4 * KIB, sz) != 0 || p == NULL)
    fail(w, "cannot allocate %zu bytes of host memory", sz);
  memset(p, 0xa5, sz); /* touched up front, as the core's preallocated buffers are */
  return p;
}

static void* reg(worker_t* w, void* comm, void* buf, size_t n) {
  void* mh = NULL;
  NET_CALL(w, net_reg_mr(w->net, comm, buf, n ? n : 1, NCCL_PTR_HOST, &mh));
  return mh;
}

/* ---- connections ---- */

typedef struct conn {
  void* comm;   /* send comm (connector) or recv comm (listener) */
  void* listen; /* listener only, when kept open */
} conn_t;

/* Listener: listen, hand the handle to the peer, poll accept. Connector: take the handle, poll
 * connect. Both sides poll at the same time; no single call may block. */
static conn_t conn_open(worker_t* w, bool listener, bool keep_listen) {
  conn_t c = {NULL, NULL};
  double limit = now_s() + CONNECT_LIMIT_S;
  if (listener) {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE + HANDLE_GUARD];
    memset(handle, 0x5a, sizeof(handle));
    NET_CALL(w, net_listen(w->net, w->o->dev, handle, &c.listen));
    REQUIRE(w, c.listen != NULL, "listen succeeded without a listen comm");
    for (size_t i = NCCL_NET_HANDLE_MAXSIZE; i < sizeof(handle); i++)
      REQUIRE(w, handle[i] == 0x5a, "listen wrote past the %d-byte handle (byte %zu)",
              NCCL_NET_HANDLE_MAXSIZE, i);
    ctl_send(w, handle, NCCL_NET_HANDLE_MAXSIZE, "listen handle");
    while (c.comm == NULL) {
      check_deadline(w, limit, "accept loop");
      NET_CALL(w, net_accept(w->net, c.listen, &c.comm));
    }
    if (!keep_listen) {
      NET_CALL(w, net_close_listen(w->net, c.listen)); /* as the core does, right after accept */
      c.listen = NULL;
    }
  } else {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
    ctl_recv(w, handle, sizeof(handle), "listen handle");
    while (c.comm == NULL) {
      check_deadline(w, limit, "connect loop");
      NET_CALL(w, net_connect(w->net, w->o->dev, handle, &c.comm));
    }
  }
  return c;
}

/* ---- transfers ---- */

typedef struct msg {
  char* buf;
  size_t size; /* send: bytes sent; receive: bytes posted */
  int tag;
  void* mh;
  void* req;
  int got; /* size test() reported */
  bool done;
} msg_t;

static void test_one(worker_t* w, msg_t* m, const char* what) {
  int done = 0, size = -1;
  NET_CALL(w, net_test(w->net, m->req, &done, &size));
  if (done) {
    m->done = true;
    m->got = size;
    REQUIRE(w, size >= 0, "%s: test() completed without writing the size", what);
  }
}

/* One round of progress on m[0..n) of one comm: posts what the window allows, in order (a post
 * that returns no request stops this round's posts; it is retried next round), then tests what
 * is in flight. *posted counts the messages posted so far; returns how many of m[0..n) are done,
 * counted from the first (completion is reported in posting order). */
static int msgs_step(worker_t* w, void* comm, bool send, msg_t* m, int n, int window, int* posted) {
  const char* what = send ? "isend" : "irecv";
  int completed = 0;
  while (completed < *posted && m[completed].done) completed++;
  while (*posted < n && *posted - completed < window) {
    msg_t* p = &m[*posted];
    p->req = NULL;
    if (send) {
      NET_CALL(w, net_isend(w->net, comm, p->buf, p->size, p->tag, p->mh, NULL, &p->req));
    } else {
      NET_CALL(
          w, net_irecv(w->net, comm, 1, (void**)&p->buf, &p->size, &p->tag, &p->mh, NULL, &p->req));
    }
    if (p->req == NULL) break; /* retry later */
    (*posted)++;
  }
  for (int i = completed; i < *posted; i++)
    if (!m[i].done) test_one(w, &m[i], what);
  while (completed < *posted && m[completed].done) completed++;
  return completed;
}

/* Posts m[0..n) in order on one comm, at most `window` in flight, and tests them to completion.
 * A post that returns no request is retried (while testing what is in flight) until the deadline.
 */
static void run_msgs(worker_t* w, void* comm, bool send, msg_t* m, int n, int window,
                     double deadline) {
  int posted = 0, completed = 0;
  while (completed < n) {
    check_deadline(w, deadline, send ? "sends" : "receives");
    completed = msgs_step(w, comm, send, m, n, window, &posted);
  }
}

/* Checks sizes reported by test() and the data of received messages. */
static void check_msgs(worker_t* w, bool send, const msg_t* m, int n, const size_t* sent,
                       const uint64_t* seeds) {
  for (int i = 0; i < n; i++) {
    size_t expect = sent[i];
    REQUIRE(w, m[i].got >= 0 && (size_t)m[i].got == expect,
            "%s #%d: test() reported %d bytes, expected %zu", send ? "send" : "receive", i,
            m[i].got, expect);
    if (!send) {
      size_t bad = pattern_check(m[i].buf, expect, seeds[i]);
      REQUIRE(w, bad == expect, "receive #%d (%zu bytes): wrong data at byte %zu", i, expect, bad);
    }
  }
}

/* One message of `size` bytes from B to A (A listens), checked byte by byte and size by size.
 * Messages above the request cap are cut into chunks, as the core does with maxP2pBytes. */
static size_t chunk_cap(worker_t* w) {
  size_t cap = w->props.maxP2pBytes;
  if (cap == 0 || cap > REQUEST_CAP) cap = REQUEST_CAP;
  return cap;
}

static void transfer(worker_t* w, conn_t* c, size_t size, size_t posted_extra, uint64_t seed,
                     const char* label) {
  bool send = w->side == SIDE_B;
  size_t cap = chunk_cap(w);
  int n = size == 0 ? 1 : (int)((size + cap - 1) / cap);
  char* buf = buf_alloc(w, size + posted_extra);
  msg_t* m = calloc((size_t)n, sizeof(*m));
  size_t* sent = calloc((size_t)n, sizeof(*sent));
  REQUIRE(w, m && sent, "out of memory");
  if (send) pattern_fill(buf, size, seed);
  for (int i = 0; i < n; i++) {
    size_t off = (size_t)i * cap, len = size - off < cap ? size - off : cap;
    m[i].buf = buf + off;
    m[i].size = len + (send || i < n - 1 ? 0 : posted_extra);
    m[i].mh = reg(w, c->comm, m[i].buf, m[i].size);
    sent[i] = len;
  }
  double t0 = now_s();
  run_msgs(w, c->comm, send, m, n, 4, w->deadline);
  double dt = now_s() - t0;
  if (!send) {
    /* The pattern runs over the whole message: check it in one pass. */
    for (int i = 0; i < n; i++)
      REQUIRE(w, m[i].got >= 0 && (size_t)m[i].got == sent[i],
              "%s: receive #%d: test() reported %d bytes, expected %zu", label, i, m[i].got,
              sent[i]);
    size_t bad = pattern_check(buf, size, seed);
    REQUIRE(w, bad == size, "%s: wrong data at byte %zu of %zu", label, bad, size);
  } else {
    for (int i = 0; i < n; i++)
      REQUIRE(w, m[i].got >= 0 && (size_t)m[i].got == sent[i],
              "%s: send #%d: test() reported %d bytes, expected %zu", label, i, m[i].got, sent[i]);
  }
  if (size >= 64 * MIB && !send)
    note(w, "%s: %zu bytes in %d request(s), %.2f s, %.0f MB/s", label, size, n, dt,
         (double)size / dt / 1e6);
  for (int i = 0; i < n; i++) NET_CALL(w, net_dereg_mr(w->net, c->comm, m[i].mh));
  free(buf);
  free(m);
  free(sent);
}

static void close_conn(worker_t* w, conn_t* c, bool listener) {
  if (listener) {
    NET_CALL(w, net_close_recv(w->net, c->comm));
    if (c->listen) NET_CALL(w, net_close_listen(w->net, c->listen));
  } else {
    NET_CALL(w, net_close_send(w->net, c->comm));
  }
  c->comm = c->listen = NULL;
}

/* After a peer death or with requests pending, a close may report an error; it must return
 * (within the case's deadline, which the supervisor enforces) and not crash. */
static void close_tolerant(worker_t* w, conn_t* c, bool listener) {
  ncclResult_t res = listener ? net_close_recv(w->net, c->comm) : net_close_send(w->net, c->comm);
  if (res != ncclSuccess)
    note(w, "close%s returned %d (%s)", listener ? "Recv" : "Send", (int)res, err_string(res));
  if (c->listen) {
    res = net_close_listen(w->net, c->listen);
    if (res != ncclSuccess) note(w, "closeListen returned %d (%s)", (int)res, err_string(res));
  }
  c->comm = c->listen = NULL;
}

/* ---- cases ---- */

static bool case_props(worker_t* w) {
  int ndev = net_ndev(w->net);
  REQUIRE(w, ndev > 0, "devices() reported %d devices", ndev);
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v12_t p;
    memset(&p, 0, sizeof(p));
    NET_CALL(w, net_props(w->net, d, &p));
    REQUIRE(w, p.name != NULL, "device %d: name is NULL", d);
    REQUIRE(w, p.ptrSupport & NCCL_PTR_HOST, "device %d (%s): ptrSupport 0x%x lacks NCCL_PTR_HOST",
            d, p.name, p.ptrSupport);
    REQUIRE(w, p.maxRecvs >= 1, "device %d (%s): maxRecvs %d < 1", d, p.name, p.maxRecvs);
    REQUIRE(w, p.speed > 0, "device %d (%s): speed %d Mbps is not positive", d, p.name, p.speed);
    REQUIRE(w, p.maxComms >= 1, "device %d (%s): maxComms %d < 1", d, p.name, p.maxComms);
    REQUIRE(w, p.maxP2pBytes > 0, "device %d (%s): maxP2pBytes is 0", d, p.name);
    REQUIRE(w, p.latency >= 0, "device %d (%s): negative latency %f", d, p.name, (double)p.latency);
    if (w->side == SIDE_A)
      note(w,
           "dev %d: %s pci %s speed %d Mbps ptr 0x%x maxRecvs %d maxComms %d maxP2pBytes %zu "
           "type %d",
           d, p.name, p.pciPath ? p.pciPath : "(none)", p.speed, p.ptrSupport, p.maxRecvs,
           p.maxComms, p.maxP2pBytes, (int)p.netDeviceType);
    if (p.netDeviceType != NCCL_NET_DEVICE_HOST && w->side == SIDE_A)
      note(w, "dev %d offloads to the device (type %d): only the host path is checked here", d,
           (int)p.netDeviceType);
  }
  return true;
}

/* A 4 KiB message each way over a fresh connection proves it carries data. */
static void prove_conn(worker_t* w, conn_t* c, uint64_t seed) {
  transfer(w, c, 4 * KIB, 0, seed, "first message");
}

/* connect() runs (and returns) before the peer calls accept(). */
static bool case_connect_first(worker_t* w) {
  conn_t c = {NULL, NULL};
  double limit = now_s() + CONNECT_LIMIT_S;
  if (w->side == SIDE_A) {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
    NET_CALL(w, net_listen(w->net, w->o->dev, handle, &c.listen));
    ctl_send(w, handle, sizeof(handle), "listen handle");
    uint32_t called = 0;
    /* A connect() that waits for accept() never sends this: the barrier's timeout says so. */
    double save = w->deadline;
    w->deadline = now_s() + 10;
    ctl_recv(w, &called, sizeof(called), "word that connect() returned before accept()");
    w->deadline = save;
    /* The connector keeps polling, unaccepted, until it says it has (or is connected). */
    uint32_t polled = 0;
    ctl_recv(w, &polled, sizeof(polled), "word that connect() was polled before accept()");
    while (c.comm == NULL) {
      check_deadline(w, limit, "accept loop (connect first)");
      NET_CALL(w, net_accept(w->net, c.listen, &c.comm));
    }
    NET_CALL(w, net_close_listen(w->net, c.listen));
    c.listen = NULL;
  } else {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
    ctl_recv(w, handle, sizeof(handle), "listen handle");
    NET_CALL(w, net_connect(w->net, w->o->dev, handle, &c.comm));
    uint32_t called = 1, polls = 0;
    ctl_send(w, &called, sizeof(called), "connect() returned");
    while (c.comm == NULL) {
      check_deadline(w, limit, "connect loop (connect first)");
      NET_CALL(w, net_connect(w->net, w->o->dev, handle, &c.comm));
      if (c.comm == NULL) usleep(1000);
      if (++polls == CONNECT_POLLS) ctl_send(w, &polls, sizeof(polls), "connect() polled");
    }
    if (polls < CONNECT_POLLS) ctl_send(w, &polls, sizeof(polls), "connect() polled");
  }
  prove_conn(w, &c, 11);
  ctl_sync(w, 1);
  close_conn(w, &c, w->side == SIDE_A);
  return true;
}

/* accept() is polled before the peer connects. */
static bool case_accept_first(worker_t* w) {
  conn_t c = {NULL, NULL};
  double limit = now_s() + CONNECT_LIMIT_S;
  if (w->side == SIDE_A) {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
    NET_CALL(w, net_listen(w->net, w->o->dev, handle, &c.listen));
    NET_CALL(w, net_accept(w->net, c.listen, &c.comm));
    REQUIRE(w, c.comm == NULL, "accept() returned a comm before anyone connected");
    ctl_send(w, handle, sizeof(handle), "listen handle");
    uint32_t polls = 0;
    while (c.comm == NULL) {
      check_deadline(w, limit, "accept loop (accept first)");
      NET_CALL(w, net_accept(w->net, c.listen, &c.comm));
      if (c.comm == NULL) usleep(1000);
      /* The connector starts once accept() has been polled alone this many times. */
      if (++polls == CONNECT_POLLS) ctl_send(w, &polls, sizeof(polls), "accept() polled alone");
    }
    REQUIRE(w, polls >= CONNECT_POLLS, "accept() returned a comm before anyone connected");
    NET_CALL(w, net_close_listen(w->net, c.listen));
    c.listen = NULL;
  } else {
    unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
    ctl_recv(w, handle, sizeof(handle), "listen handle");
    uint32_t polled = 0;
    ctl_recv(w, &polled, sizeof(polled), "word that accept() was polled alone");
    while (c.comm == NULL) {
      check_deadline(w, limit, "connect loop (accept first)");
      NET_CALL(w, net_connect(w->net, w->o->dev, handle, &c.comm));
    }
  }
  prove_conn(w, &c, 12);
  ctl_sync(w, 1);
  close_conn(w, &c, w->side == SIDE_A);
  return true;
}

/* Sends of different sizes and contents, all posted at once, received in posting order. */
static bool case_order(worker_t* w) {
  static const size_t sizes[] = {1,     7,   4096, 100000,  0, 65539, MIB,  13,
                                 12345, 512, 0,    3 * MIB, 8, 4095,  4097, 200000};
  enum { N = sizeof(sizes) / sizeof(sizes[0]) };
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  msg_t m[N];
  uint64_t seeds[N];
  memset(m, 0, sizeof(m));
  for (int i = 0; i < N; i++) {
    seeds[i] = 100 + (uint64_t)i;
    m[i].buf = buf_alloc(w, sizes[i]);
    m[i].size = sizes[i];
    if (send) pattern_fill(m[i].buf, sizes[i], seeds[i]);
    m[i].mh = reg(w, c.comm, m[i].buf, sizes[i]);
  }
  run_msgs(w, c.comm, send, m, N, N, w->deadline);
  check_msgs(w, send, m, N, sizes, seeds);
  for (int i = 0; i < N; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, m[i].mh));
  ctl_sync(w, 1);
  close_conn(w, &c, !send);
  return true;
}

/* One receive of several buffers told apart by tags; the sends come in reverse tag order. */
static bool case_multirecv(worker_t* w) {
  int n = w->props.maxRecvs < 8 ? w->props.maxRecvs : 8;
  if (n <= 1) skip(w, "props.maxRecvs is %d: no multi-receive to check", w->props.maxRecvs);
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  char* bufs[8];
  void* mhs[8];
  size_t sizes[8];
  int tags[8];
  for (int i = 0; i < n; i++) {
    sizes[i] = 1000 * (size_t)(i + 1) + (size_t)i;
    tags[i] = 40 + i * 3;
    bufs[i] = buf_alloc(w, sizes[i]);
    mhs[i] = reg(w, c.comm, bufs[i], sizes[i]);
  }
  if (!send) {
    void* req = NULL;
    int got[8];
    for (int i = 0; i < n; i++) got[i] = -1;
    while (req == NULL) {
      check_deadline(w, w->deadline, "multi-receive post");
      NET_CALL(w, net_irecv(w->net, c.comm, n, (void**)bufs, sizes, tags, mhs, NULL, &req));
    }
    ctl_sync(w, 1);
    int done = 0;
    while (!done) {
      check_deadline(w, w->deadline, "multi-receive");
      NET_CALL(w, net_test(w->net, req, &done, got));
    }
    for (int i = 0; i < n; i++) {
      REQUIRE(w, got[i] == (int)sizes[i],
              "multi-receive slot %d (tag %d): test() reported %d, "
              "expected %zu",
              i, tags[i], got[i], sizes[i]);
      size_t bad = pattern_check(bufs[i], sizes[i], (uint64_t)tags[i]);
      REQUIRE(w, bad == sizes[i], "multi-receive slot %d (tag %d): wrong data at byte %zu", i,
              tags[i], bad);
    }
  } else {
    msg_t m[8];
    size_t sent[8];
    uint64_t seeds[8];
    memset(m, 0, sizeof(m));
    ctl_sync(w, 1);
    for (int k = 0; k < n; k++) {
      int i = n - 1 - k;
      pattern_fill(bufs[i], sizes[i], (uint64_t)tags[i]);
      m[k] = (msg_t){.buf = bufs[i], .size = sizes[i], .tag = tags[i], .mh = mhs[i]};
      sent[k] = sizes[i];
      seeds[k] = (uint64_t)tags[i];
    }
    run_msgs(w, c.comm, true, m, n, n, w->deadline);
    check_msgs(w, true, m, n, sent, seeds);
  }
  ctl_sync(w, 2);
  for (int i = 0; i < n; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, mhs[i]));
  close_conn(w, &c, !send);
  return true;
}

/* Receives posted larger than the sends: test() reports what was sent. */
static bool case_recv_larger(worker_t* w) {
  static const size_t sent[] = {0, 1, 1000, 4096, 70000, MIB + 5};
  enum { N = sizeof(sent) / sizeof(sent[0]) };
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  msg_t m[N];
  uint64_t seeds[N];
  memset(m, 0, sizeof(m));
  for (int i = 0; i < N; i++) {
    size_t posted = send ? sent[i] : 2 * sent[i] + 123;
    seeds[i] = 300 + (uint64_t)i;
    m[i].buf = buf_alloc(w, posted);
    m[i].size = posted;
    if (send) pattern_fill(m[i].buf, sent[i], seeds[i]);
    m[i].mh = reg(w, c.comm, m[i].buf, posted);
  }
  run_msgs(w, c.comm, send, m, N, N, w->deadline);
  check_msgs(w, send, m, N, sent, seeds);
  if (!send)
    for (int i = 0; i < N; i++)
      for (size_t b = sent[i]; b < m[i].size && b < sent[i] + 64; b++)
        if ((unsigned char)m[i].buf[b] != 0xa5) {
          note(w, "receive #%d: bytes past the %zu sent were written (byte %zu)", i, sent[i], b);
          break;
        }
  for (int i = 0; i < N; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, m[i].mh));
  ctl_sync(w, 1);
  close_conn(w, &c, !send);
  return true;
}

static bool case_sizes(worker_t* w) {
  static const size_t sizes[] = {0, 1, 4095, MIB, 64 * MIB};
  conn_t c = conn_open(w, w->side == SIDE_A, false);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    if (sizes[i] > w->o->max_bytes) {
      if (w->side == SIDE_A) note(w, "size %zu above --max-bytes: not sent", sizes[i]);
      continue;
    }
    char label[64];
    snprintf(label, sizeof(label), "size %zu", sizes[i]);
    transfer(w, &c, sizes[i], 0, 500 + i, label);
  }
  ctl_sync(w, 1);
  close_conn(w, &c, w->side == SIDE_A);
  return true;
}

/* One request of the largest size the plugin advertises (capped), not chunked. */
static size_t bytes_max_request(const opts_t* o) {
  return o->max_bytes < REQUEST_CAP ? o->max_bytes : REQUEST_CAP;
}

static bool case_max_request(worker_t* w) {
  size_t n = chunk_cap(w);
  if (n > w->o->max_bytes) {
    if (w->side == SIDE_A)
      note(w, "largest request %zu bytes capped by --max-bytes to %zu", n, w->o->max_bytes);
    n = w->o->max_bytes;
  }
  conn_t c = conn_open(w, w->side == SIDE_A, false);
  char label[64];
  snprintf(label, sizeof(label), "one request of %zu bytes", n);
  transfer(w, &c, n, 0, 600, label);
  ctl_sync(w, 1);
  close_conn(w, &c, w->side == SIDE_A);
  return true;
}

/* Several GB, cut into requests of maxP2pBytes (at most REQUEST_CAP) as the core would. */
#define LARGE_BYTES (3 * GIB)
static size_t bytes_large(const opts_t* o) {
  return o->max_bytes < LARGE_BYTES ? o->max_bytes : LARGE_BYTES;
}

static size_t mem_available(void) {
  FILE* f = fopen("/proc/meminfo", "r");
  char line[256];
  size_t kb = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
  fclose(f);
  return kb * KIB;
}

static bool case_large(worker_t* w) {
  size_t n = bytes_large(w->o);
  if (n < 2 * GIB)
    skip(w, "--max-bytes %zu is below the 2 GiB this case needs (it moves 3 GiB)", w->o->max_bytes);
  size_t avail = mem_available();
  /* Both sides may share this machine: two buffers, plus room for the rest of the system. */
  if (avail < 2 * n + GIB)
    skip(w, "%zu MiB of memory available, %zu MiB needed", avail / MIB, (2 * n + GIB) / MIB);
  conn_t c = conn_open(w, w->side == SIDE_A, false);
  char label[64];
  snprintf(label, sizeof(label), "%zu bytes", n);
  transfer(w, &c, n, 0, 700, label);
  ctl_sync(w, 1);
  close_conn(w, &c, w->side == SIDE_A);
  return true;
}

/* NCCL_NET_MAX_REQUESTS receives and sends outstanding on one comm, both directions at once. */
static bool case_outstanding(worker_t* w) {
  enum { N = NCCL_NET_MAX_REQUESTS };
  /* Connection 1: B sends to A. Connection 2: A sends to B. */
  conn_t c1 = conn_open(w, w->side == SIDE_A, false);
  conn_t c2 = conn_open(w, w->side == SIDE_B, false);
  conn_t* rc = w->side == SIDE_A ? &c1 : &c2;
  conn_t* sc = w->side == SIDE_A ? &c2 : &c1;
  msg_t r[N], s[N];
  size_t sizes[N];
  uint64_t rseeds[N];
  memset(r, 0, sizeof(r));
  memset(s, 0, sizeof(s));
  for (int i = 0; i < N; i++) {
    sizes[i] = 4 * KIB * (size_t)(1 + i % 5) + (size_t)i;
    rseeds[i] = (uint64_t)(w->side == SIDE_A ? 1000 : 2000) + (uint64_t)i;
    r[i] = (msg_t){.buf = buf_alloc(w, sizes[i]), .size = sizes[i]};
    r[i].mh = reg(w, rc->comm, r[i].buf, sizes[i]);
    s[i] = (msg_t){.buf = buf_alloc(w, sizes[i]), .size = sizes[i]};
    pattern_fill(s[i].buf, sizes[i], (uint64_t)(w->side == SIDE_A ? 2000 : 1000) + (uint64_t)i);
    s[i].mh = reg(w, sc->comm, s[i].buf, sizes[i]);
  }
  /* All receives first, none tested: a plugin must hold NCCL_NET_MAX_REQUESTS of them. */
  for (int i = 0; i < N; i++) {
    double limit = now_s() + 5;
    while (r[i].req == NULL) {
      REQUIRE(w, now_s() < limit,
              "irecv #%d gave no request for 5 s with %d outstanding "
              "(NCCL_NET_MAX_REQUESTS is %d)",
              i, i, N);
      NET_CALL(w, net_irecv(w->net, rc->comm, 1, (void**)&r[i].buf, &r[i].size, &r[i].tag, &r[i].mh, NULL,
                            &r[i].req));
      if (r[i].req == NULL) usleep(1000);
    }
  }
  ctl_sync(w, 1);
  /* Then all sends, none tested; the peer's receives are all posted. While a send gives no
   * request yet, the receives are tested (that is progress the core would make too). */
  for (int i = 0; i < N; i++) {
    double limit = now_s() + 10;
    while (s[i].req == NULL) {
      REQUIRE(w, now_s() < limit,
              "isend #%d gave no request for 10 s with %d outstanding and "
              "all %d receives posted at the peer",
              i, i, N);
      NET_CALL(w, net_isend(w->net, sc->comm, s[i].buf, s[i].size, 0, s[i].mh, NULL, &s[i].req));
      if (s[i].req == NULL) {
        for (int k = 0; k < N; k++)
          if (!r[k].done) test_one(w, &r[k], "irecv");
        usleep(100);
      }
    }
  }
  int rdone = 0, sdone = 0;
  while (rdone < N || sdone < N) {
    check_deadline(w, w->deadline, "outstanding requests");
    rdone = sdone = 0;
    for (int i = 0; i < N; i++) {
      if (!r[i].done) test_one(w, &r[i], "irecv");
      if (!s[i].done) test_one(w, &s[i], "isend");
      rdone += r[i].done;
      sdone += s[i].done;
    }
  }
  check_msgs(w, false, r, N, sizes, rseeds);
  check_msgs(w, true, s, N, sizes, rseeds);
  ctl_sync(w, 2);
  for (int i = 0; i < N; i++) {
    NET_CALL(w, net_dereg_mr(w->net, rc->comm, r[i].mh));
    NET_CALL(w, net_dereg_mr(w->net, sc->comm, s[i].mh));
  }
  close_conn(w, &c1, w->side == SIDE_A);
  close_conn(w, &c2, w->side == SIDE_B);
  return true;
}

/* Registration of host buffers of several sizes and alignments, use, deregistration; and the
 * NCCL_PTR_CUDA error path where the device lacks CUDA support. */
static bool case_regmr(worker_t* w) {
  static const size_t sizes[] = {1, 4096, MIB + 1, 64 * MIB};
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  char* big = buf_alloc(w, 64 * MIB + 64);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    for (size_t off = 0; off <= 3; off += 3) {
      void* mh = NULL;
      NET_CALL(w, net_reg_mr(w->net, c.comm, big + off, sizes[i], NCCL_PTR_HOST, &mh));
      NET_CALL(w, net_dereg_mr(w->net, c.comm, mh));
    }
  }
  /* Two overlapping registrations alive at once, and a message through an unaligned one. */
  void* mh1 = reg(w, c.comm, big, 8 * MIB);
  void* mh2 = reg(w, c.comm, big + 3, MIB);
  msg_t m = {.buf = big + 3, .size = MIB, .mh = mh2};
  if (send) pattern_fill(m.buf, MIB, 77);
  run_msgs(w, c.comm, send, &m, 1, 1, w->deadline);
  size_t one = MIB;
  uint64_t seed = 77;
  check_msgs(w, send, &m, 1, &one, &seed);
  NET_CALL(w, net_dereg_mr(w->net, c.comm, mh2));
  NET_CALL(w, net_dereg_mr(w->net, c.comm, mh1));
  if (!(w->props.ptrSupport & NCCL_PTR_CUDA)) {
    void* mh = NULL;
    ncclResult_t res = net_reg_mr(w->net, c.comm, big, 4096, NCCL_PTR_CUDA, &mh);
    if (res != ncclSuccess) {
      if (w->side == SIDE_A)
        note(w, "regMr(NCCL_PTR_CUDA) without CUDA support: error %d (%s), as it should", (int)res,
             err_string(res));
    } else {
      note(w, "regMr(NCCL_PTR_CUDA) without CUDA support in ptrSupport reported success");
      NET_CALL(w, net_dereg_mr(w->net, c.comm, mh));
    }
  }
  ctl_sync(w, 1);
  close_conn(w, &c, !send);
  return true;
}

/* iflush on a host buffer just received: success, and a NULL request or one that completes. */
static bool case_flush(worker_t* w) {
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  msg_t m = {.buf = buf_alloc(w, MIB), .size = MIB};
  m.mh = reg(w, c.comm, m.buf, MIB);
  if (send) pattern_fill(m.buf, MIB, 88);
  run_msgs(w, c.comm, send, &m, 1, 1, w->deadline);
  if (!send) {
    void* req = NULL;
    int size = m.got;
    NET_CALL(w, net_iflush(w->net, c.comm, 1, (void**)&m.buf, &size, &m.mh, &req));
    double limit = now_s() + 10;
    int done = req == NULL;
    while (!done) {
      check_deadline(w, limit, "flush request");
      NET_CALL(w, net_test(w->net, req, &done, NULL));
    }
    size_t bad = pattern_check(m.buf, MIB, 88);
    REQUIRE(w, bad == MIB, "data wrong at byte %zu after flush", bad);
  }
  NET_CALL(w, net_dereg_mr(w->net, c.comm, m.mh));
  ctl_sync(w, 1);
  close_conn(w, &c, !send);
  return true;
}

/* Closing in a given order after a completed exchange. */
static void close_in_order(worker_t* w, bool sender_first, bool keep_listen) {
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, keep_listen);
  transfer(w, &c, 64 * KIB, 0, 900, "message before close");
  ctl_sync(w, 1);
  if (send == sender_first) {
    close_conn(w, &c, !send);
    ctl_sync(w, 2);
  } else {
    ctl_sync(w, 2);           /* the peer's close has returned */
    close_conn(w, &c, !send); /* with keep_listen: the accepted comm first, the listen comm last */
  }
  ctl_sync(w, 3);
}

static bool case_close_send_first(worker_t* w) {
  close_in_order(w, true, false);
  return true;
}
static bool case_close_recv_first(worker_t* w) {
  close_in_order(w, false, false);
  return true;
}
static bool case_close_listen_last(worker_t* w) {
  close_in_order(w, false, true);
  return true;
}

/* A listen comm nobody connected to, and one with a connection never accepted. */
static bool case_close_unaccepted(worker_t* w) {
  if (w->side == SIDE_A) {
    void* l1 = NULL;
    void* l2 = NULL;
    unsigned char h1[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE];
    NET_CALL(w, net_listen(w->net, w->o->dev, h1, &l1));
    NET_CALL(w, net_close_listen(w->net, l1));
    NET_CALL(w, net_listen(w->net, w->o->dev, h2, &l2));
    ctl_send(w, h2, sizeof(h2), "listen handle");
    ctl_sync(w, 1); /* the peer has connected (or polled connect() for a while) */
    NET_CALL(w, net_close_listen(w->net, l2));
    ctl_sync(w, 2);
  } else {
    unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
    void* sc = NULL;
    ctl_recv(w, h, sizeof(h), "listen handle");
    /* connect() may complete without accept(); if it does, that comm must close cleanly. The
     * listener is closed once it has (its connection then waits unaccepted), or once connect()
     * has been polled CONNECT_POLLS times (plugins whose connect waits for accept). */
    NET_CALL(w, net_connect(w->net, w->o->dev, h, &sc));
    for (int i = 0; i < CONNECT_POLLS && sc == NULL; i++) {
      usleep(1000);
      NET_CALL(w, net_connect(w->net, w->o->dev, h, &sc));
    }
    ctl_sync(w, 1);
    ctl_sync(w, 2);
    if (sc) NET_CALL(w, net_close_send(w->net, sc));
  }
  return true;
}

/* Comms closed with requests still pending on both sides and in both directions. */
static bool case_close_pending(worker_t* w) {
  /* c1: B sends 4 x 16 MiB to A, which posts one receive: B keeps 3 pending sends.
   * c2: A sends one 64 KiB message to B, which posts 3 receives: B keeps 2 pending receives,
   * and A's receive on c1 may still be pending too. Nobody tests anything. */
  conn_t c1 = conn_open(w, w->side == SIDE_A, false);
  conn_t c2 = conn_open(w, w->side == SIDE_B, false);
  size_t big = 16 * MIB < w->o->max_bytes ? 16 * MIB : w->o->max_bytes;
  if (big == 0) big = 1;
  int nsend = w->side == SIDE_B ? 4 : 1;
  int nrecv = w->side == SIDE_B ? 3 : 1;
  size_t ssize = w->side == SIDE_B ? big : 64 * KIB;
  size_t rsize = w->side == SIDE_B ? 64 * KIB : big;
  conn_t* sc = w->side == SIDE_A ? &c2 : &c1;
  conn_t* rc = w->side == SIDE_A ? &c1 : &c2;
  char* sbuf = buf_alloc(w, ssize);
  char* rbuf = buf_alloc(w, rsize * (size_t)nrecv);
  void* smh = reg(w, sc->comm, sbuf, ssize);
  void* rmh = reg(w, rc->comm, rbuf, rsize * (size_t)nrecv);
  int posted_r = 0, posted_s = 0;
  for (int i = 0; i < nrecv; i++) {
    void* req = NULL;
    char* p = rbuf + (size_t)i * rsize;
    size_t sz = rsize;
    int tag = 0;
    for (int k = 0; k < 100 && req == NULL; k++) {
      NET_CALL(w, net_irecv(w->net, rc->comm, 1, (void**)&p, &sz, &tag, &rmh, NULL, &req));
      if (req == NULL) usleep(1000);
    }
    posted_r += req != NULL;
  }
  ctl_sync(w, 1);
  for (int i = 0; i < nsend; i++) {
    void* req = NULL;
    for (int k = 0; k < 100 && req == NULL; k++) {
      NET_CALL(w, net_isend(w->net, sc->comm, sbuf, ssize, 0, smh, NULL, &req));
      if (req == NULL) usleep(1000);
    }
    posted_s += req != NULL;
  }
  note(w, "closing with %d receive(s) and %d send(s) posted, none tested", posted_r, posted_s);
  ctl_sync(w, 2);
  /* Opposite orders on the two sides; buffers stay allocated (a plugin may touch them until
   * close returns, and this process exits right after). Registrations are not released: the
   * core deregisters before closing, but the point here is the close itself. */
  if (w->side == SIDE_A) {
    close_tolerant(w, &c1, true);
    close_tolerant(w, &c2, false);
  } else {
    close_tolerant(w, &c1, false);
    close_tolerant(w, &c2, true);
  }
  ctl_sync(w, 3);
  return true;
}

/* Peer death mid-transfer: the side `victim` is killed with SIGKILL while a large message is
 * moving; the survivor's test() must return an error within the death bar, not hang. */
static size_t death_size(worker_t* w) {
  size_t n = chunk_cap(w);
  if (n > w->o->max_bytes) n = w->o->max_bytes;
  if (n > 256 * MIB) n = 256 * MIB;
  return n < MIB ? MIB : n;
}

static void peer_death(worker_t* w, int victim) {
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  size_t n = death_size(w);
  msg_t m = {.buf = buf_alloc(w, n), .size = n};
  m.mh = reg(w, c.comm, m.buf, n);
  if (send) pattern_fill(m.buf, n, 990);
  ctl_sync(w, 1);
  if (w->side == victim) {
    /* Post, let some bytes move, then ask the supervisor for SIGKILL and keep progressing. */
    while (m.req == NULL) {
      check_deadline(w, w->deadline, "post before death");
      if (send)
        NET_CALL(w, net_isend(w->net, c.comm, m.buf, n, 0, m.mh, NULL, &m.req));
      else
        NET_CALL(w, net_irecv(w->net, c.comm, 1, (void**)&m.buf, &m.size, &m.tag, &m.mh, NULL, &m.req));
    }
    for (int i = 0; i < 3 && !m.done; i++) test_one(w, &m, send ? "isend" : "irecv");
    report_line(w, 'K', "kill me");
    for (;;) {
      if (!m.done)
        test_one(w, &m, send ? "isend" : "irecv");
      else
        usleep(1000);
    }
  }
  /* Survivor. A request that completes before the peer is gone is followed by another one,
   * which can never complete: what counts is the first request pending after the death. */
  double died = 0;
  int requests = 0;
  for (;;) {
    if (died == 0 && ctl_peer_gone(w)) died = now_s();
    if (died != 0 && now_s() - died > w->o->death_s)
      fail(w, "peer killed %.0f s ago, and %s still reports no error (a hang, not an error)",
           now_s() - died, m.req ? "test()" : (send ? "isend()" : "irecv()"));
    check_deadline(w, w->deadline, "waiting for the peer's death");
    ncclResult_t res;
    if (m.req == NULL) {
      m.done = false;
      res = send ? net_isend(w->net, c.comm, m.buf, n, 0, m.mh, NULL, &m.req)
                 : net_irecv(w->net, c.comm, 1, (void**)&m.buf, &m.size, &m.tag, &m.mh, NULL, &m.req);
      if (res == ncclSuccess && m.req != NULL) requests++;
      if (res == ncclSuccess && m.req == NULL) usleep(1000);
    } else {
      int done = 0;
      res = net_test(w->net, m.req, &done, NULL);
      if (res == ncclSuccess && done) {
        m.req = NULL; /* completed before the death: post the next one */
        if (died != 0) note(w, "a request completed after the peer died (data already in flight)");
      }
    }
    if (res != ncclSuccess) {
      if (died == 0) {
        /* The error may come before the control stream shows the death: wait for it. */
        double limit = now_s() + 10;
        while (!ctl_peer_gone(w) && now_s() < limit) usleep(1000);
        died = now_s();
      }
      note(w, "peer death seen as error %d (%s) after %d request(s)", (int)res, err_string(res),
           requests);
      break;
    }
  }
  /* Closing what is left after the error must not crash either. */
  close_tolerant(w, &c, !send);
}

static bool case_kill_sender(worker_t* w) {
  peer_death(w, SIDE_B);
  return true;
}
static bool case_kill_receiver(worker_t* w) {
  peer_death(w, SIDE_A);
  return true;
}

/* Sends that complete before their receives are posted (the "unexpected" path: the data waits
 * inside the plugin or its transport until irecv). Each message must then come out with the size
 * sent and its bytes, whether irecv finds it at once (a receive that completes inside irecv, whose
 * size a plugin may forget to record: net-ucx once did) or test() does. The receives are posted
 * once at their sizes and once larger, so that neither the posted size nor 0 passes for the size
 * sent. A plugin whose sends wait for the receiver (a rendezvous, as NCCL's IB plugin does, which
 * the ABI allows) cannot take this path: the case says so and checks the exchange only. */
#define UNEXPECTED_WAIT_S 2.0 /* how long the sender tries to complete its sends alone */
static bool case_recv_unexpected(worker_t* w) {
  static const size_t sizes[] = {0, 1, 7, 4095, 0, 1, 7, 4095};
  enum { N = sizeof(sizes) / sizeof(sizes[0]) };
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  /* A first exchange completes whatever setup the transport finishes lazily (UCX's wireup needs
   * the receiver's progress), as the core's connections have by the time data is unexpected. */
  prove_conn(w, &c, 1100);
  msg_t m[N];
  uint64_t seeds[N];
  memset(m, 0, sizeof(m));
  for (int i = 0; i < N; i++) {
    size_t posted = send || i < N / 2 ? sizes[i] : sizes[i] + 4 * KIB + 3;
    seeds[i] = 1110 + (uint64_t)i;
    m[i].buf = buf_alloc(w, posted);
    m[i].size = posted;
    if (send) pattern_fill(m[i].buf, sizes[i], seeds[i]);
    m[i].mh = reg(w, c.comm, m[i].buf, posted);
  }
  uint32_t early = 0; /* sends done (test() said so) before any receive was posted */
  if (send) {
    int posted = 0, completed = 0;
    double limit = now_s() + UNEXPECTED_WAIT_S;
    while (completed < N && now_s() < limit)
      completed = msgs_step(w, c.comm, true, m, N, N, &posted);
    early = (uint32_t)completed;
    ctl_send(w, &early, sizeof(early), "count of sends done before the receives");
    if (early < N)
      note(w,
           "%u of %d sends completed before the receives were posted (the rest wait for the "
           "receiver, which the ABI allows): only those took the unexpected path",
           early, N);
    while (completed < N) {
      check_deadline(w, w->deadline, "sends");
      completed = msgs_step(w, c.comm, true, m, N, N, &posted);
    }
  } else {
    /* Called nothing until every send that could complete has: now let the bytes land. */
    ctl_recv(w, &early, sizeof(early), "count of sends done before the receives");
    usleep(100 * 1000);
    run_msgs(w, c.comm, false, m, N, N, w->deadline);
  }
  check_msgs(w, send, m, N, sizes, seeds);
  for (int i = 0; i < N; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, m[i].mh));
  ctl_sync(w, 1);
  close_conn(w, &c, !send);
  return true;
}

/* Messages sent, completed and closed before the receiver posts anything are still delivered:
 * a send comm's close must not drop what its completed sends carried, and a plugin that tells
 * the receiver of the close (so that its later receives fail) must not fail the receives that
 * still have a message to match. Only the sends that completed before the close count (the ABI
 * lets a send wait for the receiver); those messages must all arrive intact, in order. */
static bool case_recv_after_close(worker_t* w) {
  static const size_t sizes[] = {1, 0, 4095, 7, 1024, 0, 64, 3};
  enum { N = sizeof(sizes) / sizeof(sizes[0]) };
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  prove_conn(w, &c, 1600);
  msg_t m[N];
  uint64_t seeds[N];
  memset(m, 0, sizeof(m));
  for (int i = 0; i < N; i++) {
    seeds[i] = 1610 + (uint64_t)i;
    m[i].buf = buf_alloc(w, sizes[i]);
    m[i].size = sizes[i];
    if (send) pattern_fill(m[i].buf, sizes[i], seeds[i]);
    m[i].mh = reg(w, c.comm, m[i].buf, sizes[i]);
  }
  uint32_t early = 0;
  if (send) {
    int posted = 0, completed = 0;
    double limit = now_s() + UNEXPECTED_WAIT_S;
    while (completed < N && now_s() < limit)
      completed = msgs_step(w, c.comm, true, m, N, N, &posted);
    early = (uint32_t)completed;
    if (early < N)
      note(w,
           "%u of %d sends completed before the receives were posted (the rest wait for the "
           "receiver, which the ABI allows): only those are checked after the close",
           early, N);
    /* Pending sends die with the comm: the buffers stay allocated (close may abandon them). */
    if (early == N)
      for (int i = 0; i < N; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, m[i].mh));
    close_conn(w, &c, false);
    ctl_send(w, &early, sizeof(early), "count of sends done before the close");
  } else {
    ctl_recv(w, &early, sizeof(early), "count of sends done before the close");
    usleep(100 * 1000); /* let the close, and any notice of it, land first */
    run_msgs(w, c.comm, false, m, (int)early, N, w->deadline);
    check_msgs(w, false, m, (int)early, sizes, seeds);
    for (int i = 0; i < N; i++) NET_CALL(w, net_dereg_mr(w->net, c.comm, m[i].mh));
    close_conn(w, &c, true);
  }
  return true;
}

/* A close whose peer calls nothing (it waits on the control stream) returns at once: NCCL's peer
 * may be busy elsewhere, or closing other comms one by one, when a comm closes, so a close that
 * waits for the peer to progress (a flush, a goodbye handshake) costs its whole timeout per comm
 * (a flushing close in net-ucx once cost its whole 1 s timeout per comm this way). Two connections,
 * B sending to A: on the first the send side closes first, on the second the receive side does. */
#define IDLE_CLOSE_LIMIT_S 0.25
static void close_before_idle_peer(worker_t* w, conn_t* c, bool sender_first, uint32_t tag) {
  bool send = w->side == SIDE_B;
  if (send == sender_first) {
    double t0 = now_s();
    close_conn(w, c, !send);
    double dt = now_s() - t0;
    REQUIRE(w, dt < IDLE_CLOSE_LIMIT_S,
            "close%s took %.3f s while the peer called nothing (limit %.2f s): a close must not "
            "wait for the peer",
            send ? "Send" : "Recv", dt, IDLE_CLOSE_LIMIT_S);
    ctl_sync(w, tag);
  } else {
    ctl_sync(w, tag); /* idle: no plugin call until the peer's close has returned */
    close_conn(w, c, !send);
  }
}

static bool case_close_idle_peer(worker_t* w) {
  bool send = w->side == SIDE_B;
  conn_t c1 = conn_open(w, !send, false);
  conn_t c2 = conn_open(w, !send, false);
  transfer(w, &c1, 64 * KIB, 0, 1200, "message before close (send side first)");
  transfer(w, &c2, 64 * KIB, 0, 1201, "message before close (receive side first)");
  ctl_sync(w, 1);
  close_before_idle_peer(w, &c1, true, 2);
  close_before_idle_peer(w, &c2, false, 3);
  ctl_sync(w, 4);
  return true;
}

/* A peer that calls nothing for a while is not a dead peer: a request whose match the peer posts
 * only after IDLE_S must complete, with its data. Guards against a liveness probe (or keepalive)
 * that needs the peer's progress to be answered, and so declares an idle peer dead. First a small
 * receive posted by A, tested throughout, while B sleeps before sending; then a large send posted
 * by B, tested throughout, while A sleeps before receiving. */
#define IDLE_S 3.0
#define IDLE_POST_TRY_S 0.5
static size_t idle_large(const opts_t* o) {
  return o->max_bytes < 64 * MIB ? o->max_bytes : 64 * MIB;
}

static void idle_exchange(worker_t* w, conn_t* c, size_t n, int poster, uint64_t seed, uint32_t tag,
                          const char* label) {
  bool send = w->side == SIDE_B;
  if (n > chunk_cap(w)) n = chunk_cap(w);
  msg_t m = {.buf = buf_alloc(w, n), .size = n};
  m.mh = reg(w, c->comm, m.buf, n);
  if (send) pattern_fill(m.buf, n, seed);
  if (w->side == poster) {
    /* A send may return no request until the receiver has posted (receiver-driven transports
     * such as NCCL's IB): try for a while, then let the peer go idle and keep trying. */
    int posted = 0;
    double p0 = now_s();
    while (posted == 0 && now_s() - p0 < IDLE_POST_TRY_S) {
      check_deadline(w, w->deadline, label);
      msgs_step(w, c->comm, send, &m, 1, 1, &posted);
    }
    ctl_sync(w, tag); /* the peer starts its idle time now */
    double t0 = now_s();
    while (!m.done) {
      check_deadline(w, w->deadline, label);
      msgs_step(w, c->comm, send, &m, 1, 1, &posted);
    }
    /* A send may complete early where the transport buffers it; a receive never may. */
    REQUIRE(w, send || now_s() - t0 >= IDLE_S * 0.9,
            "%s: the receive completed %.2f s after the peer went idle, before it posted its send",
            label, now_s() - t0);
  } else {
    ctl_sync(w, tag);
    usleep((useconds_t)(IDLE_S * 1e6)); /* calls nothing */
    run_msgs(w, c->comm, send, &m, 1, 1, w->deadline);
  }
  uint64_t seeds = seed;
  check_msgs(w, send, &m, 1, &n, &seeds);
  NET_CALL(w, net_dereg_mr(w->net, c->comm, m.mh));
  free(m.buf);
}

static bool case_idle_peer(worker_t* w) {
  bool send = w->side == SIDE_B;
  conn_t c = conn_open(w, !send, false);
  prove_conn(w, &c, 1300);
  idle_exchange(w, &c, 1000, SIDE_A, 1301, 1, "small receive, sender idle");
  size_t big = idle_large(w->o);
  idle_exchange(w, &c, big ? big : 1, SIDE_B, 1302, 2, "large send, receiver idle");
  ctl_sync(w, 3);
  close_conn(w, &c, !send);
  return true;
}

/* The peer closes its comm in an orderly way (closeSend/closeRecv; its process stays alive and
 * calls nothing more) before the survivor posts: the survivor's request can never be matched, so
 * it must fail (an error from isend/irecv or test()) within the death bar; completing is wrong,
 * and so is a hang. First B closes its send comm and A posts a receive; then A closes its receive
 * comm and B posts a send. The send is large (as in kill-receiver: up to 256 MiB): a send may
 * complete once its bytes are handed to the transport (completion only frees the buffer; for
 * net-socket, bytes in the kernel count as sent), so a small one to a closed receiver could
 * complete without a bug, but no transport buffers 16 MiB or more for a peer that is gone. Below
 * 16 MiB (--max-bytes) a completed send is only noted. */
#define CLOSED_PEER_MIN_BYTES (16 * MIB)
/* The survivor's side: true when its request failed (or a small send completed); otherwise
 * false with the reason in why, so that the other half of the case still runs and reports. */
static bool survivor_expects_error(worker_t* w, conn_t* c, size_t n, const char* label, char* why,
                                   size_t why_size) {
  bool send = w->side == SIDE_B;
  msg_t m = {.buf = buf_alloc(w, n), .size = n};
  m.mh = reg(w, c->comm, m.buf, n);
  if (send) pattern_fill(m.buf, n, 1400);
  double t0 = now_s();
  ncclResult_t res = ncclSuccess;
  const char* call = send ? "isend" : "irecv";
  bool ok = false;
  while (res == ncclSuccess) {
    if (now_s() - t0 > w->o->death_s) {
      snprintf(why, why_size,
               "%s: the peer closed its comm %.0f s ago and %s still reports no error (a hang)",
               label, now_s() - t0, m.req ? "test()" : call);
      break;
    }
    check_deadline(w, w->deadline, label);
    double c0 = now_s();
    if (m.req == NULL) {
      res = send ? net_isend(w->net, c->comm, m.buf, n, 0, m.mh, NULL, &m.req)
                 : net_irecv(w->net, c->comm, 1, (void**)&m.buf, &m.size, &m.tag, &m.mh, NULL,
                             &m.req);
      if (res == ncclSuccess && m.req == NULL) usleep(1000);
    } else {
      int done = 0, size = -1;
      res = net_test(w->net, m.req, &done, &size);
      call = "test()";
      if (res == ncclSuccess && done) {
        if (send && n < CLOSED_PEER_MIN_BYTES) {
          note(w, "%s: a send of %zu bytes (--max-bytes) completed after the receiver closed",
               label, n);
          ok = true;
        } else {
          snprintf(why, why_size,
                   "%s: the %s of %zu bytes completed (test() reported %d bytes) although the "
                   "peer had closed its comm before it was posted and never posted a match",
                   label, send ? "send" : "receive", n, size);
        }
        break;
      }
    }
    REQUIRE(w, now_s() - c0 < BLOCK_LIMIT_S, "%s: %s blocked for %.1f s (it must return at once)",
            label, call, now_s() - c0);
  }
  if (res != ncclSuccess) {
    note(w, "%s: error %d (%s) from %s after %.2f s", label, (int)res, err_string(res), call,
         now_s() - t0);
    ok = true;
  }
  /* The buffer is left alone: the comm's close may still abandon the request. */
  close_tolerant(w, c, !send);
  return ok;
}

static bool case_peer_close_pending(worker_t* w) {
  bool send = w->side == SIDE_B;
  char why[512] = "";
  bool ok = true;
  conn_t c1 = conn_open(w, !send, false);
  conn_t c2 = conn_open(w, !send, false);
  prove_conn(w, &c1, 1401);
  prove_conn(w, &c2, 1402);
  ctl_sync(w, 1);
  /* c1: the sender closes, the receiver posts. */
  if (send) {
    close_conn(w, &c1, false);
    ctl_sync(w, 2);
    ctl_sync(w, 3); /* idle until the receiver has its answer */
  } else {
    ctl_sync(w, 2);
    ok = survivor_expects_error(w, &c1, 64 * KIB, "receive after the sender closed", why,
                                sizeof(why));
    ctl_sync(w, 3);
  }
  /* c2: the receiver closes, the sender posts. */
  if (!send) {
    close_conn(w, &c2, true);
    ctl_sync(w, 4);
    ctl_sync(w, 5);
  } else {
    ctl_sync(w, 4);
    ok = survivor_expects_error(w, &c2, death_size(w), "send after the receiver closed", why,
                                sizeof(why));
    ctl_sync(w, 5);
  }
  REQUIRE(w, ok, "%s", why);
  return true;
}

static int unload_report_fd = -1;

/* A fault while the plugin is closed is code of the closed plugin still running: say so (the
 * supervisor would only see a signal). Async-signal-safe: constant strings and write(). */
static void unload_fault(int sig) {
  const char* what = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : "SIGILL";
  const char* msg = "F a plugin thread ran after net_close (finalize, then dlclose) and faulted: ";
  write_all_fd(unload_report_fd, msg, strlen(msg));
  write_all_fd(unload_report_fd, what, strlen(what));
  write_all_fd(unload_report_fd, "\n", 1);
  _exit(1);
}

static void unload_watch(worker_t* w, bool on) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL};
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on ? unload_fault : SIG_DFL;
  unload_report_fd = w->report;
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &sa, NULL);
}

/* The plugin closed (finalize, then dlclose) and opened again in the same process, with a complete
 * exchange before and after: a plugin thread that outlives finalize runs unmapped code after the
 * dlclose (a crash), and state kept across the reload (a global init done once, a stale worker)
 * shows in the second exchange. A plugin linked -z nodelete stays mapped, which is its fix for
 * libraries (UCX) whose threads outlive dlclose. */
static bool case_unload(worker_t* w) {
  bool send = w->side == SIDE_B;
  for (int round = 0; round < 2; round++) {
    conn_t c = conn_open(w, !send, false);
    transfer(w, &c, 64 * KIB, 0, 1500 + (uint64_t)round,
             round ? "message after the reload" : "message before the reload");
    ctl_sync(w, 1 + 2 * (uint32_t)round);
    close_conn(w, &c, !send);
    ctl_sync(w, 2 + 2 * (uint32_t)round);
    if (round == 0) {
      unload_watch(w, true);
      net_close(w->net);
      w->net = NULL;
      usleep(500 * 1000); /* plugin threads left behind run into unmapped code here */
      unload_watch(w, false);
      check_net(w, net_open(w->o->plugin, COMM_ID, NCCL_NET_TRAFFIC_CLASS_UNDEF, &w->net),
                "net_open (again, after net_close)");
      int ndev = net_ndev(w->net);
      REQUIRE(w, w->o->dev < ndev, "after the reload the plugin has %d device(s) (--dev %d)", ndev,
              w->o->dev);
      check_net(w, net_props(w->net, w->o->dev, &w->props), "net_props (after the reload)");
    }
  }
  return true;
}

static size_t bytes_small(const opts_t* o) {
  (void)o;
  return 0;
}
static size_t bytes_sizes(const opts_t* o) {
  return o->max_bytes < 64 * MIB ? o->max_bytes : 66 * MIB;
}

static const case_def_t cases[] = {
    {"props", case_props, bytes_small},
    {"connect-first", case_connect_first, bytes_small},
    {"accept-first", case_accept_first, bytes_small},
    {"order", case_order, bytes_small},
    {"multirecv", case_multirecv, bytes_small},
    {"recv-larger", case_recv_larger, bytes_small},
    {"sizes", case_sizes, bytes_sizes},
    {"max-request", case_max_request, bytes_max_request},
    {"large", case_large, bytes_large},
    {"outstanding", case_outstanding, bytes_small},
    {"regmr", case_regmr, bytes_small},
    {"flush", case_flush, bytes_small},
    {"close-send-first", case_close_send_first, bytes_small},
    {"close-recv-first", case_close_recv_first, bytes_small},
    {"close-listen-last", case_close_listen_last, bytes_small},
    {"close-unaccepted", case_close_unaccepted, bytes_small},
    {"close-pending", case_close_pending, bytes_small},
    {"kill-sender", case_kill_sender, bytes_small},
    {"kill-receiver", case_kill_receiver, bytes_small},
    {"recv-unexpected", case_recv_unexpected, bytes_small},
    {"close-idle-peer", case_close_idle_peer, bytes_small},
    {"idle-peer", case_idle_peer, idle_large},
    {"peer-close-pending", case_peer_close_pending, bytes_small},
    {"recv-after-close", case_recv_after_close, bytes_small},
    {"unload", case_unload, bytes_small},
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

static double case_timeout(const opts_t* o, const case_def_t* c) {
  double t = o->timeout_s + (double)c->bytes(o) / (50.0 * MIB);
  if (c->run == case_kill_sender || c->run == case_kill_receiver) t += o->death_s;
  /* Two survivors, one after the other. */
  if (c->run == case_peer_close_pending) t += 2 * o->death_s;
  if (c->run == case_idle_peer) t += 2 * IDLE_S;
  return t;
}

/* Body of a worker process. Never returns. */
static void worker_main(const opts_t* o, const case_def_t* c, int side, int ctl, int report,
                        double timeout) {
  worker_t w = {.o = o, .side = side, .ctl = ctl, .report = report};
  w.deadline = now_s() + timeout;
  alarm((unsigned)timeout + 10); /* backstop: the supervisor normally acts first */
  check_net(&w, net_open(o->plugin, COMM_ID, NCCL_NET_TRAFFIC_CLASS_UNDEF, &w.net), "net_open");
  int ndev = net_ndev(w.net);
  REQUIRE(&w, o->dev < ndev, "--dev %d but the plugin has %d device(s)", o->dev, ndev);
  check_net(&w, net_props(w.net, o->dev, &w.props), "net_props");
  c->run(&w);
  net_close(w.net);
  report_line(&w, 'P', "");
  _exit(0);
}

/* ---------------------------------------------------------------------------------------------
 * Supervisor: runs workers, enforces deadlines, prints results.
 * ------------------------------------------------------------------------------------------- */

typedef enum { R_PASS, R_SKIP, R_FAIL } result_kind_t;
typedef struct result {
  int kind; /* result_kind_t */
  char why[900];
} result_t;

typedef struct child {
  pid_t pid;
  int report; /* read end */
  char buf[2048];
  size_t len;
  bool eof, reaped, killed_on_request, killed_for_hang;
  int status;
  result_t res; /* from the report lines */
  bool reported;
} child_t;

static void child_lines(child_t* ch) {
  char* nl;
  while ((nl = memchr(ch->buf, '\n', ch->len)) != NULL) {
    *nl = '\0';
    char kind = ch->buf[0];
    const char* text = nl - ch->buf >= 2 ? ch->buf + 2 : "";
    if (kind == 'K') {
      kill(ch->pid, SIGKILL);
      ch->killed_on_request = true;
    } else if (kind == 'F' || kind == 'S' || kind == 'P') {
      ch->reported = true;
      ch->res.kind = kind == 'F' ? R_FAIL : kind == 'S' ? R_SKIP : R_PASS;
      snprintf(ch->res.why, sizeof(ch->res.why), "%s", text);
    }
    size_t used = (size_t)(nl - ch->buf) + 1;
    memmove(ch->buf, nl + 1, ch->len - used);
    ch->len -= used;
  }
}

/* Waits for every child to report and exit, or for the deadline. */
static void supervise(child_t* ch, int n, double deadline) {
  for (;;) {
    struct pollfd pfd[2];
    int np = 0, idx[2];
    for (int i = 0; i < n; i++)
      if (!ch[i].eof) {
        pfd[np] = (struct pollfd){.fd = ch[i].report, .events = POLLIN};
        idx[np++] = i;
      }
    bool all_reaped = true;
    for (int i = 0; i < n; i++) {
      if (!ch[i].reaped && ch[i].eof) {
        if (waitpid(ch[i].pid, &ch[i].status, WNOHANG) == ch[i].pid) ch[i].reaped = true;
      }
      all_reaped = all_reaped && ch[i].reaped;
    }
    if (all_reaped) return;
    double left = deadline - now_s();
    if (left <= 0) {
      for (int i = 0; i < n; i++)
        if (!ch[i].reaped) {
          kill(ch[i].pid, SIGKILL);
          ch[i].killed_for_hang = !ch[i].killed_on_request;
          waitpid(ch[i].pid, &ch[i].status, 0);
          ch[i].reaped = true;
          ch[i].eof = true;
        }
      return;
    }
    int ms = np ? (int)(left * 1000) + 1 : 10;
    if (ms > 50 && np < n) ms = 50; /* someone is exiting: poll waitpid */
    int r = poll(pfd, (nfds_t)np, ms);
    if (r < 0 && errno != EINTR) return;
    for (int k = 0; k < np && r > 0; k++) {
      if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      child_t* c = &ch[idx[k]];
      ssize_t got = read(c->report, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
      if (got <= 0) {
        c->eof = true;
        close(c->report);
      } else {
        c->len += (size_t)got;
        child_lines(c);
      }
    }
  }
}

/* The result of one side, from what it reported and how it ended. */
static result_t child_result(const child_t* ch, double timeout) {
  result_t r = {R_FAIL, ""};
  if (ch->killed_on_request) {
    r.kind = R_PASS;
    return r;
  }
  if (ch->killed_for_hang) {
    snprintf(r.why, sizeof(r.why), "no result after %.0f s: killed (a hang)%s%.600s", timeout,
             ch->reported ? "; it had reported: " : "", ch->reported ? ch->res.why : "");
    return r;
  }
  if (WIFSIGNALED(ch->status)) {
    int sig = WTERMSIG(ch->status);
    snprintf(r.why, sizeof(r.why), "died of signal %d (%s)%s", sig, strsignal(sig),
             sig == SIGPIPE ? ": the plugin wrote to a closed socket without MSG_NOSIGNAL" : "");
    return r;
  }
  if (!ch->reported) {
    snprintf(r.why, sizeof(r.why), "exited with status %d without a result",
             WIFEXITED(ch->status) ? WEXITSTATUS(ch->status) : -1);
    return r;
  }
  return ch->res;
}

static void print_result(const char* name, const result_t* r) {
  if (r->kind == R_PASS)
    printf("PASS %s\n", name);
  else
    printf("%s %s: %s\n", r->kind == R_SKIP ? "SKIP" : "FAIL", name, r->why);
  fflush(stdout);
}

/* A side that failed only because its peer went away (the control stream broke) says nothing
 * more when the peer has a result of its own: the peer's failure or skip is the cause. */
static bool consequence_only(const result_t* r, const result_t* other) {
  return r->kind == R_FAIL && strncmp(r->why, "control stream:", 15) == 0 && other->kind != R_PASS;
}

/* Appends "[; ]side: why" to buf (len bytes used so far), truncating; returns the new length. */
static size_t why_append(char* buf, size_t size, size_t len, const char* side, const char* why) {
  int n = snprintf(buf + len, size - len, "%s%s: ", len ? "; " : "", side);
  len = n < 0 ? len : len + (size_t)n < size ? len + (size_t)n : size - 1;
  size_t w = strlen(why);
  if (w > size - 1 - len) w = size - 1 - len;
  memcpy(buf + len, why, w);
  buf[len + w] = '\0';
  return len + w;
}

/* Combines the two sides' results: any failure wins, then any skip. */
static result_t combine(const result_t* a_in, const result_t* b_in) {
  result_t r = {R_PASS, ""};
  result_t a = *a_in, b = *b_in;
  if (consequence_only(&a, &b) && !consequence_only(&b, &a)) a.kind = R_PASS;
  if (consequence_only(&b, &a) && !consequence_only(&a, &b)) b.kind = R_PASS;
  const result_t* s[2] = {&a, &b};
  for (int kind = R_FAIL; kind >= R_SKIP; kind--) {
    size_t len = 0;
    for (int i = 0; i < 2; i++)
      if (s[i]->kind == kind) {
        r.kind = kind;
        len = why_append(r.why, sizeof(r.why), len, side_names[i], s[i]->why);
      }
    if (r.kind != R_PASS) {
      /* Both sides saying the same thing: say it once. */
      if (s[0]->kind == s[1]->kind && strcmp(s[0]->why, s[1]->why) == 0)
        snprintf(r.why, sizeof(r.why), "%s", s[0]->why);
      return r;
    }
  }
  return r;
}

static pid_t spawn(const opts_t* o, const case_def_t* c, int side, int ctl, int close_fd,
                   double timeout, child_t* ch) {
  int p[2];
  if (pipe(p) != 0) {
    perror("net-conformance: pipe");
    exit(1);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("net-conformance: fork");
    exit(1);
  }
  if (pid == 0) {
    close(p[0]);
    if (close_fd >= 0) close(close_fd);
    worker_main(o, c, side, ctl, p[1], timeout);
  }
  close(p[1]);
  memset(ch, 0, sizeof(*ch));
  ch->pid = pid;
  ch->report = p[0];
  return pid;
}

static result_t run_case_fork(const opts_t* o, const case_def_t* c) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("net-conformance: socketpair");
    exit(1);
  }
  double timeout = case_timeout(o, c);
  child_t ch[2];
  spawn(o, c, SIDE_A, sv[0], sv[1], timeout, &ch[0]);
  spawn(o, c, SIDE_B, sv[1], sv[0], timeout, &ch[1]);
  /* Only the workers hold the control stream: a dead worker's end closes for its peer. */
  close(sv[0]);
  close(sv[1]);
  supervise(ch, 2, now_s() + timeout);
  result_t a = child_result(&ch[0], timeout), b = child_result(&ch[1], timeout);
  return combine(&a, &b);
}

/* ---- two-instance mode (--role) ---- */

typedef struct session {
  int listen_fd; /* listen role: control listener */
  int fd;        /* persistent stream between the supervisors */
} session_t;

static int sock_from_addr(const opts_t* o, bool listener, struct sockaddr_storage* ss,
                          socklen_t* len) {
  if (o->rendezvous) {
    struct sockaddr_un* un = (struct sockaddr_un*)ss;
    memset(un, 0, sizeof(*un));
    un->sun_family = AF_UNIX;
    int n = snprintf(un->sun_path, sizeof(un->sun_path), "%s/net-conformance.sock", o->rendezvous);
    if (n >= (int)sizeof(un->sun_path)) {
      fprintf(stderr, "net-conformance: --rendezvous path too long\n");
      exit(2);
    }
    *len = sizeof(*un);
    return AF_UNIX;
  }
  char host[256];
  const char* colon = strrchr(o->peer_addr, ':');
  if (colon == NULL || (size_t)(colon - o->peer_addr) >= sizeof(host)) {
    fprintf(stderr, "net-conformance: --peer-addr wants HOST:PORT or [V6]:PORT, got %s\n",
            o->peer_addr);
    exit(2);
  }
  const char* h = o->peer_addr;
  size_t hl = (size_t)(colon - h);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = listener ? AI_PASSIVE : 0};
  struct addrinfo* ai = NULL;
  int rc = getaddrinfo(host, colon + 1, &hints, &ai);
  if (rc != 0 || ai == NULL) {
    fprintf(stderr, "net-conformance: --peer-addr %s: %s\n", o->peer_addr, gai_strerror(rc));
    exit(2);
  }
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  int fam = ai->ai_family;
  freeaddrinfo(ai);
  return fam;
}

/* Listen role: accept the next stream. Connect role: connect, retrying until the peer listens. */
static int session_stream(const opts_t* o, session_t* s, double timeout) {
  double limit = now_s() + timeout;
  if (o->role == SIDE_A) {
    struct pollfd pfd = {.fd = s->listen_fd, .events = POLLIN};
    int ms = (int)(timeout * 1000);
    if (poll(&pfd, 1, ms) <= 0) return -1;
    return accept(s->listen_fd, NULL, NULL);
  }
  struct sockaddr_storage ss;
  socklen_t len;
  int fam = sock_from_addr(o, false, &ss, &len);
  while (now_s() < limit) {
    int fd = socket(fam, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr*)&ss, len) == 0) return fd;
    if (fd >= 0) close(fd);
    usleep(100 * 1000);
  }
  return -1;
}

static void session_open(const opts_t* o, session_t* s) {
  s->listen_fd = -1;
  if (o->role == SIDE_A) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sock_from_addr(o, true, &ss, &len);
    if (fam == AF_UNIX) unlink(((struct sockaddr_un*)&ss)->sun_path);
    s->listen_fd = socket(fam, SOCK_STREAM, 0);
    int one = 1;
    if (s->listen_fd >= 0) setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr*)&ss, len) != 0 ||
        listen(s->listen_fd, 8) != 0) {
      fprintf(stderr, "net-conformance: control listener: %s\n", strerror(errno));
      exit(1);
    }
  }
  s->fd = session_stream(o, s, 60);
  if (s->fd < 0) {
    fprintf(stderr, "net-conformance: no peer instance on the control %s within 60 s\n",
            o->rendezvous ? "socket" : "address");
    exit(1);
  }
}

static bool sess_io(int fd, bool out, void* buf, size_t n, double timeout) {
  char* p = buf;
  double limit = now_s() + timeout;
  while (n > 0) {
    struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
    int ms = (int)((limit - now_s()) * 1000);
    if (ms <= 0) return false;
    if (poll(&pfd, 1, ms) <= 0) continue;
    ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

/* Both supervisors exchange a record; false when the peer is gone. */
static bool sess_exchange(session_t* s, const void* mine, void* theirs, size_t n, double timeout) {
  return sess_io(s->fd, true, (void*)mine, n, timeout) && sess_io(s->fd, false, theirs, n, timeout);
}

static result_t run_case_role(const opts_t* o, session_t* s, const case_def_t* c) {
  result_t mine = {R_FAIL, ""}, theirs = {R_FAIL, ""};
  char name[64] = {0}, peer_name[64] = {0};
  snprintf(name, sizeof(name), "%s", c->name);
  double timeout = case_timeout(o, c);
  if (!sess_exchange(s, name, peer_name, sizeof(name), 120) || strcmp(name, peer_name) != 0) {
    snprintf(mine.why, sizeof(mine.why), "peer instance %s",
             peer_name[0] ? "runs another case" : "gone");
    print_result(c->name, &mine);
    exit(1);
  }
  int ctl = session_stream(o, s, 30);
  if (ctl < 0) {
    snprintf(mine.why, sizeof(mine.why), "no control stream to the peer instance");
    print_result(c->name, &mine);
    exit(1);
  }
  child_t ch;
  spawn(o, c, o->role, ctl, -1, timeout, &ch);
  close(ctl);
  supervise(&ch, 1, now_s() + timeout);
  mine = child_result(&ch, timeout);
  if (!sess_exchange(s, &mine, &theirs, sizeof(mine), timeout + 60)) {
    theirs.kind = R_FAIL;
    snprintf(theirs.why, sizeof(theirs.why), "peer instance gone");
  }
  theirs.why[sizeof(theirs.why) - 1] = '\0';
  return o->role == SIDE_A ? combine(&mine, &theirs) : combine(&theirs, &mine);
}

/* ---- main ---- */

/* Opens the plugin in a throwaway process: 0 usable, 77 no device, 1 broken. */
static int probe(const opts_t* o) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    net_t* net = NULL;
    alarm((unsigned)o->timeout_s);
    ncclResult_t res = net_open(o->plugin, COMM_ID, NCCL_NET_TRAFFIC_CLASS_UNDEF, &net);
    if (res != ncclSuccess) {
      const char* last = err_last();
      printf("FAIL load: net_open(%s) returned %d (%s)%s%s\n", o->plugin, (int)res, err_string(res),
             last && *last ? ": " : "", last ? last : "");
      fflush(stdout);
      _exit(1);
    }
    int ndev = net_ndev(net);
    printf("# plugin %s: net \"%s\", ABI v%d, %d device(s)\n", net_lib_path(net), net_name(net),
           net_version(net), ndev);
    if (ndev <= 0) {
      printf("SKIP all: plugin %s has no device\n", net_name(net));
      fflush(stdout);
      _exit(SKIP_CODE);
    }
    if (o->dev >= ndev) {
      printf("FAIL args: --dev %d but the plugin has %d device(s)\n", o->dev, ndev);
      fflush(stdout);
      _exit(1);
    }
    fflush(stdout);
    net_close(net);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
  if (WIFSIGNALED(status)) {
    printf("FAIL load: opening the plugin died of signal %d (%s)\n", WTERMSIG(status),
           strsignal(WTERMSIG(status)));
    return 1;
  }
  return WEXITSTATUS(status);
}

static void usage(FILE* f) {
  fprintf(
      f,
      "usage: net-conformance [--case NAME[,NAME...]|all] [--dev N] [--max-bytes N[K|M|G]]\n"
      "                       [--timeout S] [--death-timeout S] [--list]\n"
      "                       [--role listen|connect (--rendezvous DIR | --peer-addr "
      "HOST:PORT)]\n"
      "                       PLUGIN_SO\n"
      "Checks a net plugin against the ncclNet ABI contract between two processes.\n"
      "  --max-bytes   cap on the bytes of one case's message (default 3G; the large case\n"
      "                needs 2G or more)\n"
      "  --role        run one side only; the peer is another instance: listen binds the\n"
      "                control socket (unix socket in DIR, or TCP HOST:PORT), connect joins it\n");
}

static size_t parse_bytes(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  size_t mult = 1;
  if (end && (*end == 'k' || *end == 'K')) mult = KIB;
  if (end && (*end == 'm' || *end == 'M')) mult = MIB;
  if (end && (*end == 'g' || *end == 'G')) mult = GIB;
  if (end == s || v < 0) {
    fprintf(stderr, "net-conformance: bad size %s\n", s);
    exit(2);
  }
  return (size_t)(v * (double)mult);
}

static bool case_selected(const char* list, const char* name) {
  if (strcmp(list, "all") == 0) return true;
  size_t n = strlen(name);
  for (const char* p = list; p && *p;) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    p = comma ? comma + 1 : NULL;
  }
  return false;
}

int main(int argc, char** argv) {
  opts_t o = {.cases = "all",
              .dev = 0,
              .max_bytes = LARGE_BYTES,
              .timeout_s = 30,
              .death_s = 30,
              .role = -1};
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--list") == 0) {
      for (int k = 0; k < NCASES; k++) printf("%s\n", cases[k].name);
      return 0;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (v == NULL && a[0] == '-' && a[1] == '-') {
      usage(stderr);
      return 2;
    } else if (strcmp(a, "--case") == 0) {
      o.cases = v, i++;
    } else if (strcmp(a, "--dev") == 0) {
      o.dev = atoi(v), i++;
    } else if (strcmp(a, "--max-bytes") == 0) {
      o.max_bytes = parse_bytes(v), i++;
    } else if (strcmp(a, "--timeout") == 0) {
      o.timeout_s = atof(v), i++;
    } else if (strcmp(a, "--death-timeout") == 0) {
      o.death_s = atof(v), i++;
    } else if (strcmp(a, "--rendezvous") == 0) {
      o.rendezvous = v, i++;
    } else if (strcmp(a, "--peer-addr") == 0) {
      o.peer_addr = v, i++;
    } else if (strcmp(a, "--role") == 0) {
      o.role = strcmp(v, "listen") == 0 ? SIDE_A : strcmp(v, "connect") == 0 ? SIDE_B : -2;
      i++;
    } else if (a[0] == '-') {
      usage(stderr);
      return 2;
    } else {
      o.plugin = a;
    }
  }
  if (o.plugin == NULL || o.role == -2 || o.dev < 0 || o.timeout_s <= 0 || o.death_s <= 0 ||
      (o.role >= 0 && !o.rendezvous == !o.peer_addr)) {
    usage(stderr);
    return 2;
  }
  int selected = 0;
  for (int k = 0; k < NCASES; k++) selected += case_selected(o.cases, cases[k].name);
  if (selected == 0) {
    fprintf(stderr, "net-conformance: no case named %s (--list shows them)\n", o.cases);
    return 2;
  }

  session_t s = {-1, -1};
  if (o.role >= 0) session_open(&o, &s);
  int pr = probe(&o);
  if (o.role >= 0) {
    int peer_pr = 1;
    if (!sess_exchange(&s, &pr, &peer_pr, sizeof(pr), 120)) {
      printf("FAIL session: peer instance gone\n");
      return 1;
    }
    if (pr == 0 && peer_pr != 0) printf("# peer instance could not use its plugin (%d)\n", peer_pr);
    if (pr == 0) pr = peer_pr;
  }
  if (pr != 0) return pr == SKIP_CODE ? SKIP_CODE : 1;

  int failed = 0, passed = 0, skipped = 0;
  for (int k = 0; k < NCASES; k++) {
    if (!case_selected(o.cases, cases[k].name)) continue;
    result_t r = o.role >= 0 ? run_case_role(&o, &s, &cases[k]) : run_case_fork(&o, &cases[k]);
    print_result(cases[k].name, &r);
    failed += r.kind == R_FAIL;
    passed += r.kind == R_PASS;
    skipped += r.kind == R_SKIP;
  }
  printf("# %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (s.listen_fd >= 0 && o.rendezvous) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/net-conformance.sock", o.rendezvous);
    unlink(path);
  }
  return failed ? 1 : 0;
}
