/* Checks, queries, and the end of a communicator's life: finalize, destroy, abort, revoke. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"

ncclResult_t comm_check(const char* func, ncclComm_t comm) {
  if (comm == NULL) {
    WARN("%s: argument 'comm' is NULL; pass a communicator created by ncclCommInitRank*", func);
    return ncclInvalidArgument;
  }
  if (comm->magic_start != COMM_MAGIC || comm->magic_end != COMM_MAGIC) {
    WARN("%s: comm %p is not a valid communicator (corrupted, or used after ncclCommDestroy)",
         func, (void*)comm);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* A network failure the proxy met, or a rank the watch found gone, becomes the communicator's
 * status (once it is ready: before, the data path may still be in the making). */
static const char* comm_peer_str(ncclComm_t comm, int rank, char* buf, size_t size);

/* The communicator's status becomes res unless it already holds an error. */
static void comm_break(ncclComm_t comm, ncclResult_t res) {
  int expected = ncclSuccess;
  __atomic_compare_exchange_n(&comm->status, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
}

/* Whether this caller writes fail_msg: the first failure is the one reported. */
static bool comm_claim_fail(ncclComm_t comm) {
  int none = 0;
  return __atomic_compare_exchange_n(&comm->fail_claim, &none, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

/* How long a network failure waits for the liveness watch to name the rank behind it: a
 * process's connections all break the moment it dies, the watch's among them. */
#define COMM_ROOT_GRACE_MS 200

/* The data path's own failure (the proxy met a network error): the communicator breaks with
 * that error. The message names the rank that failed: the one the watch saw die (or that made a
 * peer abort), else the rank on the other end of the broken connection. */
static void comm_fail_network(ncclComm_t comm, ncclResult_t res, const char* why) {
  if (comm_claim_fail(comm)) {
    int root = 0;
    for (int waited = 0;; waited++) {
      root = __atomic_load_n(&comm->root_failed, __ATOMIC_ACQUIRE);
      if (root != 0 || comm->watch == NULL || waited >= COMM_ROOT_GRACE_MS) break;
      usleep(1000);
    }
    char op[160], who[96];
    enqueue_comm_last_op(comm->dp, op, sizeof(op));
    if (root != 0) {
      int event = bootstrap_watch_event(comm->watch, root - 1);
      snprintf(comm->fail_msg, sizeof(comm->fail_msg),
               "comm %p rank %d (commId 0x%llx): %s %s; here %s; the last operation launched "
               "here: %s. The communicator is broken: abort or destroy it, or shrink it without "
               "rank %d",
               (void*)comm, comm->rank, (unsigned long long)comm->comm_hash,
               comm_peer_str(comm, root - 1, who, sizeof(who)),
               event != 0 ? bootstrap_peer_event_str(event) : "failed", why, op, root - 1);
    } else {
      snprintf(comm->fail_msg, sizeof(comm->fail_msg),
               "comm %p rank %d (commId 0x%llx): %s; the last operation launched here: %s. The "
               "communicator is broken: abort or destroy it",
               (void*)comm, comm->rank, (unsigned long long)comm->comm_hash, why, op);
    }
    __atomic_store_n(&comm->fail_ready, 1, __ATOMIC_RELEASE);
    WARN("%s", comm->fail_msg);
  }
  comm_break(comm, res);
}

static void comm_poll_async(ncclComm_t comm) {
  if (__atomic_load_n(&comm->status, __ATOMIC_ACQUIRE) != ncclSuccess) return;
  /* A non-blocking group end that failed in the background breaks the communicator. */
  ncclResult_t deferred = enqueue_comm_deferred_result(comm->dp);
  if (deferred != ncclSuccess) {
    comm_break(comm, deferred);
    return;
  }
  if (__atomic_load_n(&comm->peer_failed, __ATOMIC_ACQUIRE) != 0) {
    comm_break(comm, ncclRemoteError);
    return;
  }
  char why[512];
  ncclResult_t net = enqueue_comm_async_error(comm->dp, why, sizeof(why));
  if (net == ncclSuccess) return;
  if (why[0] == '\0') snprintf(why, sizeof(why), "the network failed (%s)", err_string(net));
  comm_fail_network(comm, net, why);
}

/* "rank 3 (10.0.0.2, pid 4242)": for messages about a peer. */
static const char* comm_peer_str(ncclComm_t comm, int rank, char* buf, size_t size) {
  char a[SOCK_ADDR_STRLEN] = "?";
  const sock_addr_t* addr = bootstrap_peer_addr(comm->bootstrap, rank);
  if (sock_addr_valid(addr, false)) {
    sock_addr_t host = *addr;
    sock_addr_set_port(&host, 0);
    sock_addr_str(&host, a, sizeof(a));
    char* colon = strrchr(a, ':'); /* the port is the bootstrap's, not worth showing */
    if (colon != NULL) *colon = '\0';
  }
  snprintf(buf, size, "rank %d (%s, pid %d)", rank, a,
           comm->peers ? (int)comm->peers[rank].pid : -1);
  return buf;
}

/* The watch thread's report (bootstrap_watch_ops_t). A rank that is gone while this one may wait
 * for it breaks the communicator: its status becomes ncclRemoteError and running kernels give up
 * (as after ncclCommRevoke). That is a rank killed or silent, or one that said goodbye (destroy,
 * abort, exit) while this rank had operations in flight that it may never complete: it left with
 * its own operations unfinished, or this rank launched collectives it never did (every rank
 * launches the same sequence). Otherwise a departure only makes later operations that need the
 * rank fail (comm_check_peers): the usual end of a job, where ranks tear down at their own pace,
 * and a slow rank's last operation completes with data a fast one already sent, is no error. */
static void comm_peer_report(void* ctx, const bootstrap_peer_report_t* r) {
  ncclComm_t comm = ctx;
  const int rank = r->rank, event = r->event, reporter = r->reporter;
  const bool gone = event == BOOTSTRAP_PEER_EXITED || event == BOOTSTRAP_PEER_SILENT;
  /* The root cause: a rank that died or went silent, or the one whose failure made a peer leave. */
  const int root = rank != comm->rank && gone ? rank
                   : r->cause >= 0 && r->cause != comm->rank ? r->cause
                                                             : -1;
  if (root >= 0) {
    int none = 0;
    __atomic_compare_exchange_n(&comm->root_failed, &none, root + 1, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
  }
  bool fatal = gone || rank == comm->rank;
  if (!fatal && enqueue_comm_busy(comm->dp))
    fatal = r->busy || enqueue_comm_colls(comm->dp) > r->colls;
  char who[96], by[64] = "";
  comm_peer_str(comm, rank, who, sizeof(who));
  if (reporter != comm->rank && reporter != rank)
    snprintf(by, sizeof(by), " (seen by rank %d)", reporter);
  if (!fatal) {
    __atomic_add_fetch(&comm->departed, 1, __ATOMIC_ACQ_REL);
    INFO(NCCL_INIT, "comm %p rank %d: %s %s%s after %llu collectives; operations that need it "
         "now fail", (void*)comm, comm->rank, who, bootstrap_peer_event_str(event), by,
         (unsigned long long)r->colls);
    return;
  }
  if (!comm_claim_fail(comm)) return;
  char op[160];
  enqueue_comm_last_op(comm->dp, op, sizeof(op));
  if (rank == comm->rank)
    snprintf(comm->fail_msg, sizeof(comm->fail_msg),
             "comm %p rank %d: rank %d gave up on this rank: to it this rank %s; the last "
             "operation launched here: %s. The communicator is broken: abort or destroy it",
             (void*)comm, comm->rank, reporter, bootstrap_peer_event_str(event), op);
  else if (r->cause >= 0 && r->cause != rank && r->cause != comm->rank)
    snprintf(comm->fail_msg, sizeof(comm->fail_msg),
             "comm %p rank %d (commId 0x%llx): rank %d failed, and then %s %s%s; the last "
             "operation launched here: %s. The communicator is broken: abort or destroy it, or "
             "shrink it without ranks %d and %d",
             (void*)comm, comm->rank, (unsigned long long)comm->comm_hash, r->cause, who,
             bootstrap_peer_event_str(event), by, op, r->cause, rank);
  else
    snprintf(comm->fail_msg, sizeof(comm->fail_msg),
             "comm %p rank %d (commId 0x%llx): %s %s%s; the last operation launched here: %s. "
             "The communicator is broken: abort or destroy it, or shrink it without rank %d",
             (void*)comm, comm->rank, (unsigned long long)comm->comm_hash, who,
             bootstrap_peer_event_str(event), by, op, rank);
  __atomic_store_n(&comm->fail_ready, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&comm->peer_failed, rank + 1, __ATOMIC_RELEASE);
  WARN("%s", comm->fail_msg);
  comm_break(comm, ncclRemoteError);
  enqueue_comm_abort(comm->dp);
}

/* What this rank's goodbye carries: its collectives launched, and whether some work is still
 * running (bootstrap_watch_ops_t). */
static void comm_watch_state(void* ctx, uint64_t* colls_p, int* busy_p, int* cause_p) {
  ncclComm_t comm = ctx;
  *colls_p = enqueue_comm_colls(comm->dp);
  *busy_p = enqueue_comm_busy(comm->dp);
  *cause_p = __atomic_load_n(&comm->root_failed, __ATOMIC_ACQUIRE) - 1;
}

static const bootstrap_watch_ops_t comm_watch_ops = {comm_peer_report, comm_watch_state};

ncclResult_t comm_watch_start(ncclComm_t comm) {
  return bootstrap_watch_start(comm->bootstrap, &comm_watch_ops, comm, &comm->watch);
}

ncclResult_t comm_check_peers(const char* func, ncclComm_t comm, int peer) {
  if (__atomic_load_n(&comm->departed, __ATOMIC_ACQUIRE) == 0) return ncclSuccess;
  for (int r = peer < 0 ? 0 : peer; r < (peer < 0 ? comm->nranks : peer + 1); r++) {
    int event = bootstrap_watch_event(comm->watch, r);
    if (event == 0) continue;
    char who[96];
    WARN("%s: %s %s, so this operation could never complete; %s", func,
         comm_peer_str(comm, r, who, sizeof(who)), bootstrap_peer_event_str(event),
         peer < 0 ? "every rank must take part in a collective (shrink the communicator to "
                    "exclude it)"
                  : "it cannot take part in send/recv any more");
    return event == BOOTSTRAP_PEER_LEFT ? ncclInvalidUsage : ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t comm_check_ready(const char* func, ncclComm_t comm) {
  CHECK(comm_check(func, comm));
  comm_poll_async(comm);
  int status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status == ncclInProgress) {
    /* Nothing of it may be used yet (its data path does not exist); NCCL answers
     * ncclInvalidArgument here too. */
    WARN(
        "%s: comm %p is still being created (its creation waits for ncclGroupEnd, or a "
        "non-blocking creation is running); wait until ncclCommGetAsyncError reports "
        "ncclSuccess",
        func, (void*)comm);
    return ncclInvalidArgument;
  }
  if (status != ncclSuccess) {
    if (__atomic_load_n(&comm->fail_ready, __ATOMIC_ACQUIRE) != 0)
      WARN("%s: comm %p failed earlier: %s", func, (void*)comm, comm->fail_msg);
    else
      WARN("%s: comm %p failed earlier (%s); abort or destroy it", func, (void*)comm,
           err_string((ncclResult_t)status));
    return (ncclResult_t)status;
  }
  if (comm->revoked) {
    WARN("%s: comm %p was revoked; only destroy, split and shrink are allowed", func,
         (void*)comm);
    return ncclInvalidUsage;
  }
  return ncclSuccess;
}

ncclResult_t comm_check_not_finalized(const char* func, ncclComm_t comm) {
  if (!comm->finalized) return ncclSuccess;
  WARN(
      "%s: communicator %p was finalized (ncclCommFinalize); only ncclCommDestroy and queries "
      "are allowed after that",
      func, (void*)comm);
  return ncclInvalidUsage;
}

ncclResult_t comm_check_usable(const char* func, ncclComm_t comm) {
  CHECK(comm_check_ready(func, comm));
  return comm_check_not_finalized(func, comm);
}

ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* res_p) {
  CHECK(comm_check("ncclCommGetAsyncError", comm));
  comm_poll_async(comm);
  *res_p = (ncclResult_t)__atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  /* A non-blocking group end still connecting and launching in the background. */
  if (*res_p == ncclSuccess && enqueue_comm_deferred_running(comm->dp)) *res_p = ncclInProgress;
  /* The caller's next ncclGetLastError says why, whichever thread found it. */
  if (*res_p != ncclSuccess && *res_p != ncclInProgress &&
      __atomic_load_n(&comm->fail_ready, __ATOMIC_ACQUIRE) != 0)
    err_set_last("%s", comm->fail_msg);
  return ncclSuccess;
}

/* A job of this thread's open group that creates ctx (a communicator) or splits or shrinks it. */
static bool comm_job_match(const group_job_t* job, const void* ctx) {
  return comm_job_uses(job, (ncclComm_t)(uintptr_t)ctx);
}

/* Wait until the communicator's own creation and the jobs that use it are over. Each of them is
 * bounded by the bootstrap timeout, and returns early once abort_flag is set. */
static void comm_wait_idle(ncclComm_t comm) {
  struct timespec ms = {0, 1000 * 1000};
  while (__atomic_load_n(&comm->status, __ATOMIC_ACQUIRE) == ncclInProgress ||
         __atomic_load_n(&comm->pending, __ATOMIC_ACQUIRE) != 0)
    nanosleep(&ms, NULL);
}

ncclResult_t comm_finalize(ncclComm_t comm) {
  CHECK(comm_check("ncclCommFinalize", comm));
  if (comm->revoked) {
    WARN("ncclCommFinalize: comm %p was revoked; call ncclCommDestroy instead", (void*)comm);
    return ncclInvalidUsage;
  }
  if (comm->finalized) {
    WARN("ncclCommFinalize: comm %p is already finalized", (void*)comm);
    return ncclInvalidUsage;
  }
  int status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status == ncclInProgress && enqueue_group_holds(comm_job_match, comm) > 0) {
    WARN(
        "ncclCommFinalize: comm %p is still being created: its creation waits for this thread's "
        "ncclGroupEnd; call ncclGroupEnd first (or ncclCommDestroy to cancel the creation)",
        (void*)comm);
    return ncclInvalidUsage;
  }
  if (status == ncclInProgress) return ncclInProgress;
  /* Its last operations may still be launching in the background (non-blocking group end). */
  enqueue_comm_deferred_wait(comm->dp);
  comm_poll_async(comm);
  status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status != ncclSuccess) return (ncclResult_t)status;
  CHECK(enqueue_comm_finalize(comm->dp));
  comm->finalized = true;
  INFO(NCCL_INIT, "comm %p rank %d nranks %d - finalized", (void*)comm, comm->rank, comm->nranks);
  return ncclSuccess;
}

/* Destroy and abort end alike once the communicator is idle; abort first tells its jobs to stop.
 * What this thread's open group still holds for the communicator cannot run before the
 * ncclGroupEnd that this thread would only call after we return: waiting for it would never end.
 * So the creation jobs that make this communicator, or a split or shrink of it, are taken out of
 * the group and complete with ncclInvalidUsage without running (a child being split off then
 * reports that error and can only be destroyed), and the operations it queued there are
 * dropped; a later ncclGroupEnd never touches it. NCCL returns from the same misuse too. */
static ncclResult_t comm_release(const char* func, ncclComm_t comm, bool abort, const char* what) {
  CHECK(comm_check(func, comm));
  int njobs = enqueue_group_cancel(comm_job_match, comm, ncclInvalidUsage);
  int nops = enqueue_group_forget(comm->dp);
  if (njobs > 0 || nops > 0)
    WARN(
        "%s: comm %p had %d creation job(s) (its own, or a split or shrink of it) and %d "
        "operation(s) waiting for this thread's ncclGroupEnd; they were cancelled (peers still "
        "waiting for this rank's part of a creation will time out)",
        func, (void*)comm, njobs, nops);
  if (abort) {
    __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_RELEASE);
    enqueue_comm_abort(comm->dp);
  }
  /* A non-blocking group end finishing in the background (an abort cuts its connecting short;
   * a destroy lets it finish, as a blocking group end would have). */
  enqueue_comm_deferred_wait(comm->dp);
  comm_wait_idle(comm);
  /* A destroy lets the operations already launched finish before it says goodbye, as NCCL's
   * finalize does: a goodbye while they still run tells peers that are themselves still in
   * the last operation that this rank left in the middle of it: they give up on it, and this
   * rank's kernels, no longer watched, would wait for data that never comes. Bounded: a peer
   * that dies or goes silent meanwhile is reported by the watch, which stops the kernels. */
  if (!abort) (void)enqueue_comm_finalize(comm->dp);
  /* The goodbye: a destroy after the last operation is the normal end; an abort tells peers
   * that may still wait for this rank to stop waiting. */
  bootstrap_watch_stop(comm->watch, abort ? BOOTSTRAP_LEAVE_ABORT : BOOTSTRAP_LEAVE_DESTROY);
  comm->watch = NULL;
  INFO(NCCL_INIT, "comm %p rank %d nranks %d cudaDev %d busId %llx - %s complete", (void*)comm,
       comm->rank, comm->nranks, comm->cuda_dev, (unsigned long long)comm->bus_id, what);
  comm_free(comm);
  return ncclSuccess;
}

ncclResult_t comm_destroy(ncclComm_t comm) {
  return comm_release("ncclCommDestroy", comm, false, "destroy");
}

ncclResult_t comm_abort(ncclComm_t comm) {
  return comm_release("ncclCommAbort", comm, true, "abort");
}

ncclResult_t comm_revoke(ncclComm_t comm) {
  CHECK(comm_check("ncclCommRevoke", comm));
  int status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status == ncclInProgress) {
    WARN("ncclCommRevoke: comm %p is still being created; wait for ncclCommGetAsyncError to "
         "report success first", (void*)comm);
    return ncclInvalidUsage;
  }
  /* Kernels in flight stop waiting for peers; the communicator then only allows destroy. */
  enqueue_comm_abort(comm->dp);
  comm->revoked = true;
  INFO(NCCL_INIT, "comm %p rank %d nranks %d - revoked", (void*)comm, comm->rank, comm->nranks);
  return ncclSuccess;
}
