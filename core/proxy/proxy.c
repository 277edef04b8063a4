/*
 * The proxy thread (see proxy.h). Every connection end keeps two counts of slots: posted (handed
 * to the plugin) and done (completed by it); the kernel's counters bound them:
 *   send end:    done <= posted <= tail (kernel-filled), and head = done is published;
 *   receive end: done <= posted <= head + KERN_NSLOTS (slots free), and tail = done is
 *                published.
 * Requests of slot i sit in reqs[i % KERN_NSLOTS]: at most KERN_NSLOTS per end, within the
 * ABI's NCCL_NET_MAX_REQUESTS.
 */
#include "proxy.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"

_Static_assert(KERN_NSLOTS <= NCCL_NET_MAX_REQUESTS, "a connection end's requests fit the ABI");

/* Sweeps without progress before the thread yields the CPU between sweeps. */
#define PROXY_SPINS_BEFORE_YIELD 64

/* Ops announced for one end (proxy_prof_op), in a ring filled by the launching thread and
 * consumed by the proxy thread. */
#define PROXY_PROF_OPS 256
typedef struct proxy_prof_op {
  void* parent;
  void* ev;        /* the ProxyOp event, from its first post */
  uint32_t nsteps;
  uint32_t posted; /* its steps posted so far (proxy thread) */
  uint32_t done;   /* and completed */
  int chunk;
  int channel;
} proxy_prof_op_t;

typedef struct proxy_end {
  proxy_conn_t c;
  uint64_t posted;
  uint64_t done;
  void* reqs[KERN_NSLOTS];
  void* flush_req; /* receive end: the flush of slot `done`, in flight */
  int flushing;    /* receive end: slot `done` completed, its flush not yet */
  int step_size;   /* receive end: bytes of slot `done` (for its ProxyStep's last state) */
  /* Profiling: the announced ops (NULL until the first), pushed count (atomic, launching
   * thread), the op whose steps are being posted and the one being completed (atomic: read by
   * the launching thread to see room), and per slot in flight its ProxyStep event and op. */
  proxy_prof_op_t* ops;
  uint32_t op_push;
  uint32_t op_post;
  uint32_t op_done;
  int ops_lost;
  prof_net_parent_t step[KERN_NSLOTS];
  proxy_prof_op_t* step_op[KERN_NSLOTS];
} proxy_end_t;

/* CHOIR_PROXY_TRACE: one record per slot event, kept in memory and written at destruction. */
enum {
  TRACE_SEND_POST,
  TRACE_SEND_DONE,
  TRACE_RECV_POST,
  TRACE_RECV_DONE,
  TRACE_LAUNCH_BEGIN,
  TRACE_LAUNCH_END
};
#define PROXY_TRACE_MAX (1u << 21)

typedef struct proxy_trace_ev {
  uint64_t ns;
  uint64_t slot;
  const struct proxy_end* end; /* NULL for launch marks */
  uint32_t bytes;
  uint8_t ev;
} proxy_trace_ev_t;

struct proxy {
  net_t* net;
  int rank;
  volatile uint32_t* comm_abort;
  volatile uint32_t* kernel_abort;
  pthread_t thread;
  /* The lock guards only the hand-over of new ends and going to sleep: the sweeps run without
   * it, so a launching thread never waits for one (a waiter woken by an unlock would mostly find
   * the lock taken again, and a wake-up costs up to hundreds of microseconds on VMs). */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;           /* atomic; set under lock */
  int sleeping;       /* atomic: the thread is (about to be) in cond_wait; set under lock */
  int active;         /* atomic: launches begun and not ended */
  int error;          /* atomic: ncclResult_t of the first failure */
  int fail_ready;     /* atomic: fail_msg and fail_peer are written (after error) */
  int fail_peer;
  char fail_msg[512];
  uint64_t sweeps;    /* atomic */
  proxy_end_t** ends; /* the thread's own */
  int nends;
  int cap;
  proxy_end_t** incoming; /* under lock: ends added, not yet taken by the thread */
  int nincoming;
  int incap;
  int has_incoming;        /* atomic */
  proxy_trace_ev_t* trace; /* NULL unless CHOIR_PROXY_TRACE */
  uint32_t ntrace;
  prof_t* prof;           /* the communicator's profiler, or NULL (fixed at creation) */
  void* ctrl_ev;          /* the thread's ProxyCtrl event, or NULL */
  int ctrl_state;         /* the last state recorded on it */
  proxy_end_t** all;      /* under lock: every end ever added (proxy_prof_op's lookup) */
  int nall;
  int allcap;
};

static void proxy_trace(proxy_t* p, const proxy_end_t* e, int ev, uint64_t slot, uint32_t bytes) {
  if (p->trace == NULL) return;
  const uint32_t at = __atomic_fetch_add(&p->ntrace, 1, __ATOMIC_RELAXED);
  if (at >= PROXY_TRACE_MAX) return;
  p->trace[at] = (proxy_trace_ev_t){
      .ns = sock_clock_ns(), .slot = slot, .end = e, .bytes = bytes, .ev = (uint8_t)ev};
}

/* Lines "ns event rank peer id slot bytes", event one of SP SD RP RD LB LE (peer and id -1 for
 * the launch marks LB/LE). */
static void proxy_trace_write(const proxy_t* p) {
  const char* prefix = param_str(PARAM_PROXY_TRACE);
  if (p->trace == NULL || prefix == NULL) return;
  char path[4096];
  snprintf(path, sizeof(path), "%s.%d.%d", prefix, p->rank, (int)getpid());
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    WARN("proxy: cannot write the trace %s: %s", path, strerror(errno));
    return;
  }
  static const char* names[] = {"SP", "SD", "RP", "RD", "LB", "LE"};
  const uint32_t n = p->ntrace < PROXY_TRACE_MAX ? p->ntrace : PROXY_TRACE_MAX;
  for (uint32_t i = 0; i < n; i++) {
    const proxy_trace_ev_t* t = &p->trace[i];
    const proxy_end_t* e = t->end;
    fprintf(f, "%llu %s %d %d %d %llu %u\n", (unsigned long long)t->ns, names[t->ev], p->rank,
            e != NULL ? e->c.peer : -1, e != NULL ? e->c.id : -1, (unsigned long long)t->slot,
            t->bytes);
  }
  fclose(f);
  INFO(NCCL_NET, "proxy: rank %d wrote %u trace records to %s", p->rank, n, path);
}

static uint64_t load_acq(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_rel(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static int proxy_aborted(const proxy_t* p) {
  return (p->comm_abort != NULL && *p->comm_abort != 0) ||
         __atomic_load_n(&p->error, __ATOMIC_ACQUIRE);
}

/* The first failure stops the proxy and releases the kernels. */
static void proxy_fail(proxy_t* p, const proxy_end_t* e, const char* what, ncclResult_t res) {
  int expected = ncclSuccess;
  if (__atomic_compare_exchange_n(&p->error, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    /* What the plugin said on this thread, if anything: its own words name the cause. */
    const char* said = err_last();
    snprintf(p->fail_msg, sizeof(p->fail_msg),
             "the network %s connection %d with rank %d: %s failed (%s)", e->c.is_send ? "send" : "receive", e->c.id, e->c.peer, what,
             said[0] != '\0' ? said : err_string(res));
    p->fail_peer = e->c.peer;
    __atomic_store_n(&p->fail_ready, 1, __ATOMIC_RELEASE);
    WARN("proxy: rank %d, %s; the communicator's kernels are stopped, ncclCommGetAsyncError "
         "reports it",
         p->rank, p->fail_msg);
  }
  if (p->kernel_abort != NULL) __atomic_store_n(p->kernel_abort, 1u, __ATOMIC_SEQ_CST);
}

/* ---- Profiling (proxy thread) ---------------------------------------------------------------- */

/* The announced op that step `e->posted` belongs to, or NULL (none announced, or lost). */
static proxy_prof_op_t* proxy_prof_cur(proxy_end_t* e) {
  /* The acquire of op_push first: it publishes ops (allocated before the first push). */
  const uint32_t pushed = __atomic_load_n(&e->op_push, __ATOMIC_ACQUIRE);
  if (pushed == e->op_post || __atomic_load_n(&e->ops_lost, __ATOMIC_ACQUIRE)) return NULL;
  while (e->op_post != pushed) {
    proxy_prof_op_t* op = &e->ops[e->op_post % PROXY_PROF_OPS];
    if (op->posted < op->nsteps) return op;
    e->op_post++;
  }
  return NULL;
}

/* Before posting slot `slot` (step e->posted): its op's ProxyOp event at the op's first step,
 * the step's ProxyStep event; the pHandle for the plugin (NULL: none). */
static void* proxy_prof_post(proxy_t* p, proxy_end_t* e, uint64_t slot) {
  e->step[slot].step = NULL;
  e->step_op[slot] = NULL;
  if (p->prof == NULL) return NULL;
  proxy_prof_op_t* op = proxy_prof_cur(e);
  if (op != NULL && op->posted == 0 && op->ev == NULL && prof_on(p->prof, ncclProfileProxyOp)) {
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileProxyOp;
    d.parentObj = op->parent;
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)op->channel;
    d.proxyOp.peer = e->c.peer;
    d.proxyOp.nSteps = (int)op->nsteps;
    d.proxyOp.chunkSize = op->chunk;
    d.proxyOp.isSend = e->c.is_send;
    op->ev = prof_start(p->prof, &d);
  }
  e->step_op[slot] = op;
  if (!prof_on(p->prof, ncclProfileProxyStep)) return NULL;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileProxyStep;
  d.parentObj = op != NULL ? op->ev : NULL;
  d.proxyStep.step = op != NULL ? (int)op->posted : (int)e->posted;
  e->step[slot].prof = p->prof;
  e->step[slot].step = prof_start(p->prof, &d);
  return e->step[slot].step != NULL ? &e->step[slot] : NULL;
}

/* The plugin took no request: the step is posted again later. */
static void proxy_prof_unpost(proxy_t* p, proxy_end_t* e, uint64_t slot) {
  if (p->prof == NULL) return;
  prof_stop(p->prof, e->step[slot].step);
  e->step[slot].step = NULL;
  e->step_op[slot] = NULL;
}

static void proxy_prof_posted(proxy_t* p, proxy_end_t* e, uint64_t slot, int state) {
  if (p->prof == NULL) return;
  if (e->step_op[slot] != NULL) e->step_op[slot]->posted++;
  prof_record(p->prof, e->step[slot].step, (ncclProfilerEventState_t)state, NULL);
}

static void proxy_prof_state(proxy_t* p, proxy_end_t* e, uint64_t slot, int state) {
  if (p->prof != NULL)
    prof_record(p->prof, e->step[slot].step, (ncclProfilerEventState_t)state, NULL);
}

/* Slot `slot` completed with `bytes`: its ProxyStep ends, and its op with its last step. */
static void proxy_prof_done(proxy_t* p, proxy_end_t* e, uint64_t slot, uint32_t bytes) {
  if (p->prof == NULL) return;
  if (e->step[slot].step != NULL) {
    ncclProfilerEventStateArgs_v6_t a;
    memset(&a, 0, sizeof(a));
    a.proxyStep.transSize = bytes;
    prof_record(p->prof, e->step[slot].step,
                e->c.is_send ? ncclProfilerProxyStepSendWait : ncclProfilerProxyStepRecvWait, &a);
    prof_stop(p->prof, e->step[slot].step);
    e->step[slot].step = NULL;
  }
  proxy_prof_op_t* op = e->step_op[slot];
  e->step_op[slot] = NULL;
  if (op == NULL) return;
  if (++op->done == op->nsteps) {
    prof_stop(p->prof, op->ev);
    op->ev = NULL;
    /* Ops complete in order: the oldest ones done make room for the launching thread. */
    uint32_t d = __atomic_load_n(&e->op_done, __ATOMIC_RELAXED);
    while (d != e->op_post && e->ops[d % PROXY_PROF_OPS].done == e->ops[d % PROXY_PROF_OPS].nsteps)
      d++;
    __atomic_store_n(&e->op_done, d, __ATOMIC_RELEASE);
  }
}

/* The thread's ProxyCtrl event (started with the first state it records) enters `state`. */
static void proxy_ctrl(proxy_t* p, int state) {
  if (p->ctrl_state == state || !prof_on(p->prof, ncclProfileProxyCtrl)) return;
  if (p->ctrl_ev == NULL) {
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileProxyCtrl;
    p->ctrl_ev = prof_start(p->prof, &d);
  }
  p->ctrl_state = state;
  prof_record(p->prof, p->ctrl_ev, (ncclProfilerEventState_t)state, NULL);
}

/* One look at a send end. *pending_p: data the kernel handed over is not all sent yet. */
static int proxy_send(proxy_t* p, proxy_end_t* e, int* pending_p) {
  int progress = 0;
  const uint64_t tail = load_acq(e->c.tail);
  while (e->posted < tail && e->posted - e->done < KERN_NSLOTS) {
    const uint64_t slot = e->posted % KERN_NSLOTS;
    const uint32_t bytes = __atomic_load_n(&e->c.sizes[slot], __ATOMIC_ACQUIRE);
    if (bytes > e->c.slot_bytes) {
      WARN(
          "proxy: rank %d, send connection %d with rank %d: the kernel published %u bytes in "
          "a slot of %u",
          p->rank, e->c.id, e->c.peer, bytes, e->c.slot_bytes);
      proxy_fail(p, e, "a slot size check", ncclInternalError);
      return progress;
    }
    void* req = NULL;
    void* ph = proxy_prof_post(p, e, slot);
    ncclResult_t res = net_isend(p->net, e->c.comm, e->c.buff + slot * e->c.slot_bytes, bytes, 0,
                                 e->c.mhandle, ph, &req);
    if (res != ncclSuccess) {
      proxy_fail(p, e, "isend", res);
      return progress;
    }
    if (req == NULL) { /* the plugin is full: again next sweep */
      proxy_prof_unpost(p, e, slot);
      break;
    }
    proxy_prof_posted(p, e, slot, ncclProfilerProxyStepSendWait);
    e->reqs[slot] = req;
    proxy_trace(p, e, TRACE_SEND_POST, e->posted, bytes);
    e->posted++;
    progress = 1;
  }
  while (e->done < e->posted) {
    int done = 0;
    ncclResult_t res = net_test(p->net, e->reqs[e->done % KERN_NSLOTS], &done, NULL);
    if (res != ncclSuccess) {
      proxy_fail(p, e, "test of a send", res);
      return progress;
    }
    if (!done) break;
    e->reqs[e->done % KERN_NSLOTS] = NULL;
    proxy_prof_done(p, e, e->done % KERN_NSLOTS,
                    __atomic_load_n(&e->c.sizes[e->done % KERN_NSLOTS], __ATOMIC_RELAXED));
    proxy_trace(p, e, TRACE_SEND_DONE, e->done, 0);
    e->done++;
    store_rel(e->c.head, e->done);
    progress = 1;
  }
  if (e->done < tail) *pending_p = 1;
  return progress;
}

/* One look at a receive end. */
static int proxy_recv(proxy_t* p, proxy_end_t* e) {
  int progress = 0;
  const uint64_t head = load_acq(e->c.head);
  while (e->posted < head + KERN_NSLOTS) {
    const uint64_t slot = e->posted % KERN_NSLOTS;
    void* data = e->c.buff + slot * e->c.slot_bytes;
    size_t size = e->c.slot_bytes;
    int tag = 0;
    void* mh = e->c.mhandle;
    void* req = NULL;
    void* ph = proxy_prof_post(p, e, slot);
    ncclResult_t res = net_irecv(p->net, e->c.comm, 1, &data, &size, &tag, &mh, &ph, &req);
    if (res != ncclSuccess) {
      proxy_fail(p, e, "irecv", res);
      return progress;
    }
    if (req == NULL) {
      proxy_prof_unpost(p, e, slot);
      break;
    }
    proxy_prof_posted(p, e, slot, ncclProfilerProxyStepRecvWait);
    e->reqs[slot] = req;
    proxy_trace(p, e, TRACE_RECV_POST, e->posted, 0);
    e->posted++;
    progress = 1;
  }
  while (e->done < e->posted) {
    const uint64_t slot = e->done % KERN_NSLOTS;
    if (!e->flushing) {
      int done = 0, size = 0;
      ncclResult_t res = net_test(p->net, e->reqs[slot], &done, &size);
      if (res != ncclSuccess) {
        proxy_fail(p, e, "test of a receive", res);
        return progress;
      }
      if (!done) break;
      e->reqs[slot] = NULL;
      progress = 1;
      e->step_size = size;
      if (e->c.flush && size > 0) {
        proxy_prof_state(p, e, slot, ncclProfilerProxyStepRecvFlushWait);
        void* data = e->c.buff + slot * e->c.slot_bytes;
        void* mh = e->c.mhandle;
        e->flush_req = NULL;
        res = net_iflush(p->net, e->c.comm, 1, &data, &size, &mh, &e->flush_req);
        if (res != ncclSuccess) {
          proxy_fail(p, e, "iflush", res);
          return progress;
        }
        e->flushing = e->flush_req != NULL;
      }
    }
    if (e->flushing) {
      int done = 0;
      ncclResult_t res = net_test(p->net, e->flush_req, &done, NULL);
      if (res != ncclSuccess) {
        proxy_fail(p, e, "test of a flush", res);
        return progress;
      }
      if (!done) break;
      e->flushing = 0;
      e->flush_req = NULL;
    }
    proxy_prof_done(p, e, slot, (uint32_t)e->step_size);
    proxy_trace(p, e, TRACE_RECV_DONE, e->done, 0);
    e->done++;
    store_rel(e->c.tail, e->done);
    progress = 1;
  }
  return progress;
}

/* Room for `need` ends in *v (capacity *cap, doubled from 16 as needed). False without memory. */
static bool proxy_reserve(proxy_end_t*** v, int* cap, int need) {
  if (need <= *cap) return true;
  int c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  proxy_end_t** nv = realloc(*v, (size_t)c * sizeof(*nv));
  if (nv == NULL) return false;
  *v = nv;
  *cap = c;
  return true;
}

/* Takes the ends proxy_add handed over (proxy thread); without memory, again next sweep. */
static void proxy_take_incoming(proxy_t* p) {
  pthread_mutex_lock(&p->lock);
  const int n = p->nincoming;
  if (!proxy_reserve(&p->ends, &p->cap, p->nends + n)) {
    pthread_mutex_unlock(&p->lock);
    return;
  }
  if (n > 0) memcpy(p->ends + p->nends, p->incoming, sizeof(*p->incoming) * (size_t)n);
  p->nends += n;
  p->nincoming = 0;
  __atomic_store_n(&p->has_incoming, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&p->lock);
}

/* A launch without network progress for this long gets its connection state logged: the
 * counters tell whether the kernel, this thread or the network is waiting. First as INFO (a
 * peer may just be late to launch), then once more as WARN. */
#define PROXY_STALL_INFO_NS 5000000000ull
#define PROXY_STALL_WARN_NS 60000000000ull

static void proxy_report_stall(const proxy_t* p, uint64_t ns, int warn) {
  const ncclDebugLogLevel level = warn ? NCCL_LOG_WARN : NCCL_LOG_INFO;
  const unsigned long flags = warn ? NCCL_ALL : NCCL_NET;
  log_message(level, flags, __FILE__, __LINE__,
              "proxy: rank %d: no network progress for %.1f s with %d launch(es) active; "
              "connection ends follow (posted/done by the proxy, tail/head by the kernel)",
              p->rank, (double)ns * 1e-9, __atomic_load_n(&p->active, __ATOMIC_ACQUIRE));
  for (int i = 0; i < p->nends; i++) {
    const proxy_end_t* e = p->ends[i];
    log_message(level, flags, __FILE__, __LINE__,
                "proxy: rank %d %s end %d peer %d id %d: posted %llu done %llu tail %llu head "
                "%llu%s",
                p->rank, e->c.is_send ? "send" : "recv", i, e->c.peer, e->c.id,
                (unsigned long long)e->posted, (unsigned long long)e->done,
                (unsigned long long)load_acq(e->c.tail), (unsigned long long)load_acq(e->c.head),
                e->flushing ? " (flushing)" : "");
  }
}

static void* proxy_main(void* arg) {
  proxy_t* p = (proxy_t*)arg;
  unsigned idle = 0;
  uint64_t last_progress = 0; /* when the current run without progress began; 0: none */
  int stall_reported = 0;
  while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
    if (__atomic_load_n(&p->has_incoming, __ATOMIC_ACQUIRE)) proxy_take_incoming(p);
    int progress = 0, pending = 0;
    /* Read before the sweep: a launch that ended before this read has its last tail seen by the
     * sweep. Read after, a kernel could publish a slot and end between the sweep's read of its
     * tail and this one, and the thread would sleep on data the peer waits for. */
    const int active = __atomic_load_n(&p->active, __ATOMIC_SEQ_CST);
    if (!proxy_aborted(p)) {
      for (int i = 0; i < p->nends && !proxy_aborted(p); i++) {
        proxy_end_t* e = p->ends[i];
        progress |= e->c.is_send ? proxy_send(p, e, &pending) : proxy_recv(p, e);
      }
      __atomic_add_fetch(&p->sweeps, 1, __ATOMIC_RELAXED);
    }
    if (proxy_aborted(p) || (!pending && !progress && active == 0)) {
      /* Nothing can move until the next launch (or ever, after a failure): sleep. `sleeping` is
       * raised before active is read again, and proxy_launch_begin raises active before it
       * reads `sleeping`: one of the two sees the other, so no launch is missed. */
      pthread_mutex_lock(&p->lock);
      __atomic_store_n(&p->sleeping, 1, __ATOMIC_SEQ_CST);
      if (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE) &&
          (proxy_aborted(p) || (!pending && __atomic_load_n(&p->active, __ATOMIC_SEQ_CST) == 0))) {
        proxy_ctrl(p, ncclProfilerProxyCtrlSleep);
        pthread_cond_wait(&p->cond, &p->lock);
        proxy_ctrl(p, ncclProfilerProxyCtrlWakeup);
      }
      __atomic_store_n(&p->sleeping, 0, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&p->lock);
      idle = 0;
      last_progress = 0;
      continue;
    }
    if (progress) {
      proxy_ctrl(p, ncclProfilerProxyCtrlActive);
      idle = 0;
      last_progress = 0;
      stall_reported = 0;
    } else if (++idle >= PROXY_SPINS_BEFORE_YIELD) {
      proxy_ctrl(p, ncclProfilerProxyCtrlIdle);
      if (idle % PROXY_SPINS_BEFORE_YIELD == 0) {
        const uint64_t now = sock_clock_ns();
        if (last_progress == 0) last_progress = now;
        const uint64_t stalled = now - last_progress;
        if (stall_reported < 1 && stalled >= PROXY_STALL_INFO_NS) {
          proxy_report_stall(p, stalled, 0);
          stall_reported = 1;
        } else if (stall_reported < 2 && stalled >= PROXY_STALL_WARN_NS) {
          proxy_report_stall(p, stalled, 1);
          stall_reported = 2;
        }
      }
      sched_yield();
    }
  }
  prof_stop(p->prof, p->ctrl_ev); /* the thread's last event ends with it */
  p->ctrl_ev = NULL;
  return NULL;
}

ncclResult_t proxy_create(net_t* net, int rank, volatile uint32_t* comm_abort,
                          volatile uint32_t* kernel_abort, prof_t* prof, proxy_t** proxy_p) {
  proxy_t* p = NULL;
  CHECK(MEM_CALLOC(&p, 1));
  p->net = net;
  p->rank = rank;
  p->comm_abort = comm_abort;
  p->kernel_abort = kernel_abort;
  p->prof = prof;
  if (param_str(PARAM_PROXY_TRACE) != NULL &&
      (p->trace = calloc(PROXY_TRACE_MAX, sizeof(*p->trace))) == NULL)
    WARN("proxy: no memory for CHOIR_PROXY_TRACE; rank %d runs without it", rank);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  int err = pthread_create(&p->thread, NULL, proxy_main, p);
  if (err != 0) {
    WARN("proxy: rank %d cannot start its proxy thread: %s", rank, strerror(err));
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->trace);
    free(p);
    return ncclSystemError;
  }
  (void)pthread_setname_np(p->thread, "choir-proxy");
  *proxy_p = p;
  return ncclSuccess;
}

static void proxy_end_close(proxy_t* p, proxy_end_t* e) {
  if (e->c.mhandle != NULL) (void)net_dereg_mr(p->net, e->c.comm, e->c.mhandle);
  if (e->c.is_send)
    (void)net_close_send(p->net, e->c.comm);
  else
    (void)net_close_recv(p->net, e->c.comm);
  /* Events of steps and ops still open (receives posted ahead, a communicator destroyed
   * mid-transfer) end after the plugin's own under them. */
  if (p->prof != NULL) {
    for (int s = 0; s < KERN_NSLOTS; s++) prof_stop(p->prof, e->step[s].step);
    if (e->ops != NULL)
      for (int i = 0; i < PROXY_PROF_OPS; i++) prof_stop(p->prof, e->ops[i].ev);
  }
  free(e->ops);
  free(e);
}

void proxy_destroy(proxy_t* p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  proxy_trace_write(p);
  free(p->trace);
  for (int i = 0; i < p->nends; i++) proxy_end_close(p, p->ends[i]);
  for (int i = 0; i < p->nincoming; i++) proxy_end_close(p, p->incoming[i]);
  free(p->ends);
  free(p->incoming);
  free(p->all);
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

ncclResult_t proxy_add(proxy_t* p, const proxy_conn_t* conns, int n) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&p->lock);
  if (!proxy_reserve(&p->incoming, &p->incap, p->nincoming + n)) {
    WARN("proxy: out of memory for %d connection ends", p->nincoming + n);
    res = ncclSystemError;
    goto out;
  }
  for (int i = 0; i < n; i++) {
    proxy_end_t* e = calloc(1, sizeof(*e));
    if (e == NULL) {
      WARN("proxy: out of memory for a connection end");
      res = ncclSystemError;
      goto out;
    }
    e->c = conns[i];
    if (!proxy_reserve(&p->all, &p->allcap, p->nall + 1)) {
      free(e);
      WARN("proxy: out of memory for a connection end");
      res = ncclSystemError;
      goto out;
    }
    p->all[p->nall++] = e;
    /* Counters start where the kernels' steps start: 0 (fresh connections). */
    p->incoming[p->nincoming++] = e;
  }
out:
  /* The thread takes them before its next sweep; a launch that uses them wakes it. */
  __atomic_store_n(&p->has_incoming, p->nincoming > 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&p->lock);
  return res;
}

void proxy_prof_op(proxy_t* p, const void* key, void* parent, uint32_t nsteps, int chunk,
                   int channel) {
  if (p == NULL || p->prof == NULL || key == NULL || nsteps == 0) return;
  proxy_end_t* e = NULL;
  pthread_mutex_lock(&p->lock);
  for (int i = 0; i < p->nall && e == NULL; i++)
    if (p->all[i]->c.key == key) e = p->all[i];
  pthread_mutex_unlock(&p->lock);
  if (e == NULL || __atomic_load_n(&e->ops_lost, __ATOMIC_ACQUIRE)) return;
  if (e->ops == NULL) {
    /* Published to the proxy thread by the release store of op_push below. */
    e->ops = calloc(PROXY_PROF_OPS, sizeof(*e->ops));
    if (e->ops == NULL) {
      __atomic_store_n(&e->ops_lost, 1, __ATOMIC_RELEASE);
      return;
    }
  }
  const uint32_t push = e->op_push; /* only this thread writes it */
  if (push - __atomic_load_n(&e->op_done, __ATOMIC_ACQUIRE) >= PROXY_PROF_OPS) {
    /* The thread is that far behind: attributing later steps would go wrong from here on. */
    INFO(NCCL_NET, "proxy: rank %d: more than %d launches ahead of the network on connection %d "
         "with rank %d; its ProxyOp events stop here", p->rank, PROXY_PROF_OPS, e->c.id,
         e->c.peer);
    __atomic_store_n(&e->ops_lost, 1, __ATOMIC_RELEASE);
    return;
  }
  proxy_prof_op_t* op = &e->ops[push % PROXY_PROF_OPS];
  *op = (proxy_prof_op_t){.parent = parent, .nsteps = nsteps, .chunk = chunk, .channel = channel};
  __atomic_store_n(&e->op_push, push + 1, __ATOMIC_RELEASE);
}

void proxy_launch_begin(proxy_t* p) {
  __atomic_add_fetch(&p->active, 1, __ATOMIC_SEQ_CST);
  proxy_trace(p, NULL, TRACE_LAUNCH_BEGIN, 0, 0);
  if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST)) {
    pthread_mutex_lock(&p->lock);
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
  }
}

void proxy_launch_end(proxy_t* p) {
  /* No signal needed: the thread notices at its next sweep and goes to sleep by itself. */
  proxy_trace(p, NULL, TRACE_LAUNCH_END, 0, 0);
  __atomic_sub_fetch(&p->active, 1, __ATOMIC_ACQ_REL);
}

ncclResult_t proxy_error(const proxy_t* p, char* msg, size_t size, int* peer_p) {
  if (msg != NULL && size > 0) msg[0] = '\0';
  if (peer_p != NULL) *peer_p = -1;
  if (p == NULL) return ncclSuccess;
  ncclResult_t res = (ncclResult_t)__atomic_load_n(&p->error, __ATOMIC_ACQUIRE);
  if (res != ncclSuccess && __atomic_load_n(&p->fail_ready, __ATOMIC_ACQUIRE)) {
    if (msg != NULL && size > 0) snprintf(msg, size, "%s", p->fail_msg);
    if (peer_p != NULL) *peer_p = p->fail_peer;
  }
  return res;
}

int proxy_active(const proxy_t* p) { return __atomic_load_n(&p->active, __ATOMIC_ACQUIRE); }
uint64_t proxy_sweeps(const proxy_t* p) { return __atomic_load_n(&p->sweeps, __ATOMIC_RELAXED); }
