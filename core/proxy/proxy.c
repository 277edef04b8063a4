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
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

_Static_assert(KERN_NSLOTS <= NCCL_NET_MAX_REQUESTS, "a connection end's requests fit the ABI");

/* Sweeps without progress before the thread yields the CPU between sweeps. */
#define PROXY_SPINS_BEFORE_YIELD 64

typedef struct proxy_end {
  proxy_conn_t c;
  uint64_t posted;
  uint64_t done;
  void* reqs[KERN_NSLOTS];
  void* flush_req;   /* receive end: the flush of slot `done`, in flight */
  int flushing;      /* receive end: slot `done` completed, its flush not yet */
} proxy_end_t;

struct proxy {
  net_t* net;
  int rank;
  volatile uint32_t* comm_abort;
  volatile uint32_t* kernel_abort;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;          /* under lock */
  int active;        /* atomic: launches begun and not ended */
  int error;         /* atomic: ncclResult_t of the first failure */
  uint64_t sweeps;   /* atomic */
  proxy_end_t** ends;/* under lock */
  int nends;
  int cap;
};

static uint64_t load_acq(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_rel(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static int proxy_aborted(const proxy_t* p) {
  return (p->comm_abort != NULL && *p->comm_abort != 0) || __atomic_load_n(&p->error,
                                                                           __ATOMIC_ACQUIRE);
}

/* The first failure stops the proxy and releases the kernels. */
static void proxy_fail(proxy_t* p, const proxy_end_t* e, const char* what, ncclResult_t res) {
  int expected = ncclSuccess;
  if (__atomic_compare_exchange_n(&p->error, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    WARN("proxy: rank %d, %s connection %d with rank %d: %s failed (%s); the communicator's "
         "kernels are stopped, ncclCommGetAsyncError reports it",
         p->rank, e->c.is_send ? "send" : "receive", e->c.id, e->c.peer, what,
         err_string(res));
  if (p->kernel_abort != NULL) __atomic_store_n(p->kernel_abort, 1u, __ATOMIC_SEQ_CST);
}

/* One look at a send end. *pending_p: data the kernel handed over is not all sent yet. */
static int proxy_send(proxy_t* p, proxy_end_t* e, int* pending_p) {
  int progress = 0;
  const uint64_t tail = load_acq(e->c.tail);
  while (e->posted < tail && e->posted - e->done < KERN_NSLOTS) {
    const uint64_t slot = e->posted % KERN_NSLOTS;
    const uint32_t bytes = __atomic_load_n(&e->c.sizes[slot], __ATOMIC_ACQUIRE);
    if (bytes > e->c.slot_bytes) {
      WARN("proxy: rank %d, send connection %d with rank %d: the kernel published %u bytes in "
           "a slot of %u",
           p->rank, e->c.id, e->c.peer, bytes, e->c.slot_bytes);
      proxy_fail(p, e, "a slot size check", ncclInternalError);
      return progress;
    }
    void* req = NULL;
    ncclResult_t res = net_isend(p->net, e->c.comm, e->c.buff + slot * e->c.slot_bytes, bytes,
                                 0, e->c.mhandle, &req);
    if (res != ncclSuccess) {
      proxy_fail(p, e, "isend", res);
      return progress;
    }
    if (req == NULL) break; /* the plugin is full: again next sweep */
    e->reqs[slot] = req;
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
    ncclResult_t res = net_irecv(p->net, e->c.comm, 1, &data, &size, &tag, &mh, &req);
    if (res != ncclSuccess) {
      proxy_fail(p, e, "irecv", res);
      return progress;
    }
    if (req == NULL) break;
    e->reqs[slot] = req;
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
      if (e->c.flush && size > 0) {
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
    e->done++;
    store_rel(e->c.tail, e->done);
    progress = 1;
  }
  return progress;
}

static void* proxy_main(void* arg) {
  proxy_t* p = (proxy_t*)arg;
  int idle = 0;
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    int progress = 0, pending = 0;
    if (!proxy_aborted(p)) {
      for (int i = 0; i < p->nends && !proxy_aborted(p); i++) {
        proxy_end_t* e = p->ends[i];
        progress |= e->c.is_send ? proxy_send(p, e, &pending) : proxy_recv(p, e);
      }
      __atomic_add_fetch(&p->sweeps, 1, __ATOMIC_RELAXED);
    }
    if (proxy_aborted(p) ||
        (!pending && __atomic_load_n(&p->active, __ATOMIC_ACQUIRE) == 0)) {
      /* Nothing can move until the next launch (or ever, after a failure): sleep. */
      idle = 0;
      pthread_cond_wait(&p->cond, &p->lock);
      continue;
    }
    if (progress) {
      idle = 0;
    } else if (++idle >= PROXY_SPINS_BEFORE_YIELD) {
      pthread_mutex_unlock(&p->lock);
      sched_yield();
      pthread_mutex_lock(&p->lock);
      continue;
    }
    /* Let proxy_add and the launch marks in between sweeps. */
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

ncclResult_t proxy_create(net_t* net, int rank, volatile uint32_t* comm_abort,
                          volatile uint32_t* kernel_abort, proxy_t** proxy_p) {
  proxy_t* p = NULL;
  CHECK(MEM_CALLOC(&p, 1));
  p->net = net;
  p->rank = rank;
  p->comm_abort = comm_abort;
  p->kernel_abort = kernel_abort;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  int err = pthread_create(&p->thread, NULL, proxy_main, p);
  if (err != 0) {
    WARN("proxy: rank %d cannot start its proxy thread: %s", rank, strerror(err));
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return ncclSystemError;
  }
  (void)pthread_setname_np(p->thread, "choir-proxy");
  *proxy_p = p;
  return ncclSuccess;
}

void proxy_destroy(proxy_t* p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  for (int i = 0; i < p->nends; i++) {
    proxy_end_t* e = p->ends[i];
    if (e->c.mhandle != NULL) (void)net_dereg_mr(p->net, e->c.comm, e->c.mhandle);
    if (e->c.is_send)
      (void)net_close_send(p->net, e->c.comm);
    else
      (void)net_close_recv(p->net, e->c.comm);
    free(e);
  }
  free(p->ends);
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

ncclResult_t proxy_add(proxy_t* p, const proxy_conn_t* conns, int n) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&p->lock);
  if (p->nends + n > p->cap) {
    int cap = p->cap ? p->cap : 16;
    while (cap < p->nends + n) cap *= 2;
    proxy_end_t** ends = realloc(p->ends, (size_t)cap * sizeof(*ends));
    if (ends == NULL) {
      WARN("proxy: out of memory for %d connection ends", cap);
      res = ncclSystemError;
      goto out;
    }
    p->ends = ends;
    p->cap = cap;
  }
  for (int i = 0; i < n; i++) {
    proxy_end_t* e = calloc(1, sizeof(*e));
    if (e == NULL) {
      WARN("proxy: out of memory for a connection end");
      res = ncclSystemError;
      goto out;
    }
    e->c = conns[i];
    /* Counters start where the kernels' steps start: 0 (fresh connections). */
    p->ends[p->nends++] = e;
  }
out:
  pthread_mutex_unlock(&p->lock);
  return res;
}

void proxy_launch_begin(proxy_t* p) {
  __atomic_add_fetch(&p->active, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&p->lock);
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

void proxy_launch_end(proxy_t* p) {
  /* No signal needed: the thread notices at its next sweep and goes to sleep by itself. */
  __atomic_sub_fetch(&p->active, 1, __ATOMIC_ACQ_REL);
}

ncclResult_t proxy_error(const proxy_t* p) {
  return p == NULL ? ncclSuccess : (ncclResult_t)__atomic_load_n(&p->error, __ATOMIC_ACQUIRE);
}

int proxy_active(const proxy_t* p) { return __atomic_load_n(&p->active, __ATOMIC_ACQUIRE); }
uint64_t proxy_sweeps(const proxy_t* p) { return __atomic_load_n(&p->sweeps, __ATOMIC_RELAXED); }
