/*
 * Group nesting and group jobs. Only the outermost ncclGroupEnd acts; the state is per thread,
 * as in NCCL, so independent threads never see each other's groups.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "enqueue_internal.h"

static __thread int enqueue_group_depth_;
static __thread enq_comm_t* enqueue_group_comms; /* communicators with queued operations */
static __thread group_job_t* enqueue_group_jobs; /* in submission order */
static __thread group_job_t* enqueue_group_jobs_tail;
/* The latest error of a call made inside the open group (ncclSuccess: none), which the outermost
 * ncclGroupEnd returns: NCCL's per-thread group error, with NCCL's rule (the latest wins). */
static __thread ncclResult_t enqueue_group_error;

int enqueue_group_depth(void) { return enqueue_group_depth_; }

ncclResult_t enqueue_group_fail(ncclResult_t res) {
  if (enqueue_group_depth_ > 0 && res != ncclSuccess && res != ncclInProgress)
    enqueue_group_error = res;
  return res;
}

typedef enum { ENQ_MATCH_COUNT, ENQ_MATCH_CANCEL } enq_match_t;

/* Walk the open group's jobs and count the matching ones; CANCEL also unlinks them and completes
 * them with res (a completion may free its job: it is unlinked first). */
static int enqueue_group_match(bool (*match)(const group_job_t*, const void*), const void* ctx,
                               enq_match_t what, ncclResult_t res) {
  int n = 0;
  group_job_t** link = &enqueue_group_jobs;
  group_job_t* prev = NULL;
  while (*link != NULL) {
    group_job_t* j = *link;
    if (!match(j, ctx)) {
      prev = j;
      link = &j->next;
      continue;
    }
    n++;
    if (what == ENQ_MATCH_COUNT) {
      prev = j;
      link = &j->next;
      continue;
    }
    *link = j->next;
    if (enqueue_group_jobs_tail == j) enqueue_group_jobs_tail = prev;
    j->next = NULL;
    j->complete(j, res);
  }
  return n;
}

int enqueue_group_holds(bool (*match)(const group_job_t*, const void*), const void* ctx) {
  return enqueue_group_match(match, ctx, ENQ_MATCH_COUNT, ncclSuccess);
}

int enqueue_group_cancel(bool (*match)(const group_job_t*, const void*), const void* ctx,
                         ncclResult_t res) {
  return enqueue_group_match(match, ctx, ENQ_MATCH_CANCEL, res);
}

static ncclResult_t enqueue_job_run(group_job_t* job) {
  ncclResult_t res = ncclSuccess;
  if (job->cuda_dev >= 0) res = cuda_set_device(job->cuda_dev);
  if (res == ncclSuccess) res = job->run(job);
  job->complete(job, res);
  return res;
}

/* Run a job on the calling thread, leaving the caller's CUDA device as it was. */
static ncclResult_t enqueue_job_run_here(group_job_t* job) {
  int saved = -1;
  if (job->cuda_dev >= 0 && cuda_get_device(&saved) != ncclSuccess) saved = -1;
  ncclResult_t res = enqueue_job_run(job);
  if (saved >= 0) cuda_set_device(saved);
  return res;
}

typedef struct {
  group_job_t* job;
  ncclResult_t res;
} enqueue_thread_arg_t;

static void* enqueue_job_thread(void* arg) {
  enqueue_thread_arg_t* a = (enqueue_thread_arg_t*)arg;
  a->res = enqueue_job_run(a->job);
  return NULL;
}

static void* enqueue_job_thread_detached(void* arg) {
  enqueue_job_run((group_job_t*)arg);
  return NULL;
}

/* Start fn(arg) on a thread nobody joins: pthread_create's result. */
static int enq_thread_detached(void* (*fn)(void*), void* arg) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return err;
}

/* Start a job nobody waits for. */
static ncclResult_t enqueue_job_detach(group_job_t* job) {
  int err = enq_thread_detached(enqueue_job_thread_detached, job);
  if (err != 0) {
    WARN("cannot start a thread for a non-blocking operation: %s", strerror(err));
    job->complete(job, ncclSystemError);
    return ncclSystemError;
  }
  return ncclInProgress;
}

ncclResult_t enqueue_job_submit(group_job_t* job) {
  job->next = NULL;
  if (enqueue_group_depth_ > 0) {
    if (enqueue_group_jobs_tail)
      enqueue_group_jobs_tail->next = job;
    else
      enqueue_group_jobs = job;
    enqueue_group_jobs_tail = job;
    return ncclSuccess;
  }
  if (job->nonblocking) return enqueue_job_detach(job);
  return enqueue_job_run_here(job);
}

/* Run the group's jobs, all at once: each may wait for ranks driven by another job. */
static ncclResult_t enqueue_group_run_jobs(group_job_t* jobs) {
  int n = 0, nonblocking = 0;
  for (group_job_t* j = jobs; j; j = j->next) {
    n++;
    nonblocking += j->nonblocking;
  }
  if (nonblocking != 0 && nonblocking != n) {
    WARN("ncclGroupEnd: the group mixes blocking and non-blocking communicators; use one kind "
         "per group");
    for (group_job_t *j = jobs, *next; j; j = next) {
      next = j->next;
      j->complete(j, ncclInvalidUsage);
    }
    return ncclInvalidUsage;
  }
  if (nonblocking) {
    ncclResult_t res = ncclInProgress;
    for (group_job_t *j = jobs, *next; j; j = next) {
      next = j->next;
      if (enqueue_job_detach(j) != ncclInProgress) res = ncclSystemError;
    }
    return res;
  }
  if (n == 1) return enqueue_job_run_here(jobs);
  enqueue_thread_arg_t* args = NULL;
  pthread_t* threads = NULL;
  ncclResult_t res = MEM_CALLOC(&args, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&threads, (size_t)n);
  if (res != ncclSuccess) {
    for (group_job_t *j = jobs, *next; j; j = next) {
      next = j->next;
      j->complete(j, res);
    }
    goto out_free;
  }
  int started = 0;
  for (group_job_t *j = jobs, *next; j; j = next) {
    next = j->next; /* the job may be freed by its completion */
    args[started].job = j;
    int err = pthread_create(&threads[started], NULL, enqueue_job_thread, &args[started]);
    if (err != 0) {
      /* The jobs already started may wait for this one's ranks; they fail by their timeout. */
      WARN("ncclGroupEnd: cannot start a thread for job %d of %d: %s", started + 1, n,
           strerror(err));
      res = ncclSystemError;
      for (group_job_t* k = j; k; k = next) {
        next = k->next;
        k->complete(k, ncclSystemError);
      }
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    if (res == ncclSuccess && args[i].res != ncclSuccess) res = args[i].res;
  }
out_free:
  free(threads);
  free(args);
  return res;
}

void enqueue_group_add_comm(enq_comm_t* dp) {
  if (dp->in_group) return;
  dp->in_group = 1;
  dp->group_next = enqueue_group_comms;
  enqueue_group_comms = dp;
}

int enqueue_group_forget(enq_comm_t* dp) {
  if (dp == NULL || !dp->in_group) return 0;
  for (enq_comm_t** link = &enqueue_group_comms; *link != NULL; link = &(*link)->group_next) {
    if (*link != dp) continue;
    *link = dp->group_next;
    int n = dp->nops;
    enqueue_plan_clear(dp);
    dp->group_next = NULL;
    dp->in_group = 0;
    return n;
  }
  return 0; /* in another thread's group: that thread's business */
}

/* ---- Operations at group end -------------------------------------------------------------- */

/* Connecting a communicator is a group job: it talks to peers that this same thread may drive
 * through other communicators of the group, so several run on threads of their own. */
typedef struct {
  group_job_t base;
  enq_comm_t* dp;
} enqueue_connect_job_t;

static ncclResult_t enqueue_connect_run(group_job_t* job) {
  enum cudaStreamCaptureMode mode = enq_capture_relax();
  ncclResult_t res = enqueue_plan_connect(((enqueue_connect_job_t*)job)->dp);
  enq_capture_restore(mode);
  return res;
}

static void enqueue_connect_complete(group_job_t* job, ncclResult_t res) { (void)job, (void)res; }

/* Make the connections the queued operations need, all communicators at once. */
static ncclResult_t enqueue_group_connect(enq_comm_t* list) {
  int n = 0;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) n += enqueue_plan_needs_connect(dp);
  if (n == 0) return ncclSuccess;
  enqueue_connect_job_t* jobs = NULL;
  CHECK(MEM_CALLOC(&jobs, (size_t)n));
  int k = 0;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) {
    if (!enqueue_plan_needs_connect(dp)) continue;
    jobs[k].dp = dp;
    jobs[k].base.run = enqueue_connect_run;
    jobs[k].base.complete = enqueue_connect_complete;
    jobs[k].base.cuda_dev = dp->cuda_dev;
    jobs[k].base.next = k + 1 < n ? &jobs[k + 1].base : NULL;
    k++;
  }
  ncclResult_t res = enqueue_group_run_jobs(&jobs[0].base);
  free(jobs);
  return res;
}

/* Drop what the communicators of a group still hold and take them out of it. */
static void enqueue_group_release(enq_comm_t* list) {
  for (enq_comm_t *dp = list, *next; dp; dp = next) {
    next = dp->group_next;
    enqueue_plan_clear(dp);
    dp->group_next = NULL;
    dp->in_group = 0;
  }
}

/* Connections first, then every communicator's launches from this thread; the group's result. */
static ncclResult_t enqueue_group_connect_launch(enq_comm_t* list) {
  int saved = -1;
  if (cuda_get_device(&saved) != ncclSuccess) saved = -1;
  ncclResult_t res = enqueue_group_connect(list);
  /* Switch devices only when needed: a launch of one small operation costs well under a
   * microsecond of host time, and a cudaSetDevice is a good part of that. */
  int current = saved;
  for (enq_comm_t* dp = list; dp && res == ncclSuccess; dp = dp->group_next) {
    if (dp->cuda_dev != current) {
      res = cuda_set_device(dp->cuda_dev);
      current = res == ncclSuccess ? dp->cuda_dev : -1;
    }
    if (res == ncclSuccess) res = enqueue_plan_launch(dp);
  }
  if (saved >= 0 && current != saved) cuda_set_device(saved);
  enqueue_group_release(list); /* what was not launched after an error */
  return res;
}

/* ---- Non-blocking group ends ---------------------------------------------------------------
 * A group of non-blocking communicators whose operations need connections first (a first
 * collective, a new send/recv peer) does not make the caller wait for them: a thread of its own
 * connects and launches, and the group end returns ncclInProgress. Until that thread is done,
 * enqueue_comm_deferred_running says so (ncclCommGetAsyncError reports ncclInProgress, as NCCL
 * documents) and the communicators take no new operation; the launches come in the streams'
 * order only once it is done, which is why NCCL's users wait for ncclSuccess before they queue
 * work behind them. A stream being captured keeps the group on the caller's thread (the launch
 * must land in the capture at its place), and so does a group that is ready to launch. */

typedef struct {
  enq_comm_t** dps;
  int n;
} enq_deferred_t;

static void* enq_deferred_main(void* arg) {
  enq_deferred_t* d = (enq_deferred_t*)arg;
  ncclResult_t res = enqueue_group_connect_launch(d->dps[0]);
  bool aborted = false;
  for (int i = 0; i < d->n; i++)
    aborted = aborted || (d->dps[i]->host_abort != NULL && *d->dps[i]->host_abort != 0);
  if (res != ncclSuccess && aborted)
    INFO(NCCL_INIT | NCCL_COLL, "ncclGroupEnd (finishing in the background): stopped by an abort");
  else if (res != ncclSuccess)
    WARN("ncclGroupEnd (finishing in the background): %s; ncclCommGetAsyncError reports it",
         err_string(res));
  /* The last touches: once `deferred` drops, the owner may destroy the communicator. */
  for (int i = 0; i < d->n; i++) {
    __atomic_store_n(&d->dps[i]->deferred_res, (int)res, __ATOMIC_RELAXED);
    __atomic_store_n(&d->dps[i]->deferred, 0, __ATOMIC_RELEASE);
  }
  free(d->dps);
  free(d);
  return NULL;
}

/* Whether the group goes to a thread of its own (see above). */
static bool enq_group_defers(enq_comm_t* list) {
  bool connect = false;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) {
    if (!dp->nonblocking) return false;
    connect = connect || enqueue_plan_needs_connect(dp);
    for (int i = 0; i < dp->nops; i++)
      if (enq_stream_capturing(dp->ops[i].stream)) return false;
  }
  return connect;
}

/* Hand the group to its thread: ncclInProgress, or ncclSuccess when it could not start (the
 * caller then finishes the group itself). */
static ncclResult_t enq_group_defer(enq_comm_t* list) {
  int n = 0;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) n++;
  enq_deferred_t* d = calloc(1, sizeof(*d));
  if (d == NULL || (d->dps = calloc((size_t)n, sizeof(*d->dps))) == NULL) {
    free(d);
    return ncclSuccess;
  }
  d->n = n;
  int i = 0;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) {
    d->dps[i++] = dp;
    __atomic_store_n(&dp->deferred, 1, __ATOMIC_RELEASE);
  }
  int err = enq_thread_detached(enq_deferred_main, d);
  if (err != 0) {
    INFO(NCCL_INIT, "ncclGroupEnd: no thread for a non-blocking group end (%s): it finishes "
         "before returning", strerror(err));
    for (i = 0; i < d->n; i++) __atomic_store_n(&d->dps[i]->deferred, 0, __ATOMIC_RELEASE);
    free(d->dps);
    free(d);
    return ncclSuccess;
  }
  INFO(NCCL_INIT | NCCL_COLL, "ncclGroupEnd: %d non-blocking communicator(s) connect and launch "
       "in the background (ncclInProgress)", i);
  return ncclInProgress;
}

bool enqueue_comm_deferred_running(const enq_comm_t* dp) {
  return dp != NULL && __atomic_load_n(&dp->deferred, __ATOMIC_ACQUIRE) != 0;
}

ncclResult_t enqueue_comm_deferred_idle(const enq_comm_t* dp, const char* func) {
  if (!enqueue_comm_deferred_running(dp)) return ncclSuccess;
  WARN("%s: this communicator's last non-blocking group end is still connecting and launching "
       "in the background; poll ncclCommGetAsyncError until it returns ncclSuccess first",
       func);
  return ncclInvalidUsage;
}

ncclResult_t enqueue_comm_deferred_result(enq_comm_t* dp) {
  /* Read on every operation's checks: write only when there is a result to hand over. */
  if (dp == NULL || enqueue_comm_deferred_running(dp) ||
      __atomic_load_n(&dp->deferred_res, __ATOMIC_ACQUIRE) == ncclSuccess)
    return ncclSuccess;
  return (ncclResult_t)__atomic_exchange_n(&dp->deferred_res, (int)ncclSuccess, __ATOMIC_ACQ_REL);
}

void enqueue_comm_deferred_wait(const enq_comm_t* dp) {
  while (enqueue_comm_deferred_running(dp)) usleep(200);
}

static ncclResult_t enqueue_group_flush(enq_comm_t* list, ncclSimInfo_t* sim_info) {
  ncclResult_t res = ncclSuccess;
  for (enq_comm_t* dp = list; dp; dp = dp->group_next) enq_prof_group_end(dp);
  if (sim_info != NULL) {
    float t = 0;
    for (enq_comm_t* dp = list; dp && res == ncclSuccess; dp = dp->group_next) {
      float e = 0;
      res = enqueue_plan_estimate(dp, &e);
      if (e > t) t = e; /* communicators run side by side */
    }
    sim_info->estimatedTime = t;
    enqueue_group_release(list);
    return res;
  }
  if (enq_group_defers(list) && enq_group_defer(list) == ncclInProgress) return ncclInProgress;
  return enqueue_group_connect_launch(list);
}

ncclResult_t enqueue_op(enq_comm_t* dp, const enq_op_t* op) {
  if (!dp->device_ready) {
    int saved = -1;
    if (cuda_get_device(&saved) != ncclSuccess) saved = -1;
    enum cudaStreamCaptureMode mode = enq_capture_relax();
    ncclResult_t res = cuda_set_device(dp->cuda_dev);
    if (res == ncclSuccess) res = enqueue_comm_setup_device(dp);
    if (saved >= 0) cuda_set_device(saved);
    enq_capture_restore(mode);
    CHECK(res);
  }
  if (dp->nops == dp->ops_cap) {
    int ncap = dp->ops_cap ? 2 * dp->ops_cap : 16;
    enq_op_t* g = realloc(dp->ops, sizeof(*g) * (size_t)ncap);
    if (g == NULL) {
      WARN("out of memory queueing operation %d of a group", dp->nops + 1);
      return ncclSystemError;
    }
    dp->ops = g;
    dp->ops_cap = ncap;
  }
  dp->ops[dp->nops++] = *op;
  enq_prof_op(dp, &dp->ops[dp->nops - 1]);
  if (enqueue_group_depth_ > 0) {
    enqueue_group_add_comm(dp);
    return ncclSuccess;
  }
  dp->group_next = NULL;
  return enqueue_group_flush(dp, NULL);
}

ncclResult_t enqueue_group_start(void) {
  enqueue_group_depth_++;
  return ncclSuccess;
}

ncclResult_t enqueue_group_end(ncclSimInfo_t* sim_info) {
  if (enqueue_group_depth_ == 0) {
    WARN("ncclGroupEnd: no group is open on this thread; call ncclGroupStart first");
    return ncclInvalidUsage;
  }
  if (--enqueue_group_depth_ > 0) return ncclSuccess;
  group_job_t* jobs = enqueue_group_jobs;
  enqueue_group_jobs = enqueue_group_jobs_tail = NULL;
  enq_comm_t* comms = enqueue_group_comms;
  enqueue_group_comms = NULL;
  ncclResult_t failed = enqueue_group_error;
  enqueue_group_error = ncclSuccess;
  if (failed != ncclSuccess) {
    /* A call of the group failed its checks. As in NCCL, nothing of the group runs: the
     * operations it queued are dropped (their communicators stay usable), and its creation jobs
     * (init, split, shrink) complete with that error without running, so that the communicators
     * they were creating report it (ncclCommGetAsyncError) and can only be destroyed; nothing
     * waits for peers that the failed call would have created. The failed call's own WARN stays
     * the text of ncclGetLastError. */
    int njobs = 0, nops = 0;
    for (group_job_t *j = jobs, *next; j; j = next) {
      next = j->next;
      njobs++;
      j->complete(j, failed);
    }
    for (enq_comm_t* dp = comms; dp; dp = dp->group_next) nops += dp->nops;
    enqueue_group_release(comms);
    INFO(NCCL_INIT | NCCL_COLL,
         "ncclGroupEnd: a call inside the group failed (%s); dropped its "
         "%d operation(s) and %d creation job(s)",
         err_string(failed), nops, njobs);
    return failed;
  }
  if (sim_info != NULL) sim_info->estimatedTime = 0.0f; /* creating communicators: no GPU time */
  ncclResult_t res = ncclSuccess;
  if (jobs != NULL) res = enqueue_group_run_jobs(jobs);
  if (comms == NULL) return res;
  if (res != ncclSuccess && res != ncclInProgress) {
    enqueue_group_release(comms);
    return res;
  }
  ncclResult_t ops_res = enqueue_group_flush(comms, sim_info);
  return ops_res != ncclSuccess ? ops_res : res;
}
