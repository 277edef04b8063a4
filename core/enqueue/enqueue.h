/*
 * core/enqueue: from API call to kernel launch, and group semantics. For now it holds the group
 * state (nesting per thread) and the jobs a group end runs: communicator creation, split and
 * shrink, which must progress together when one thread drives several ranks. Planning and
 * launching arrive with the data path.
 */
#ifndef CHOIR_ENQUEUE_H
#define CHOIR_ENQUEUE_H

#include <stdbool.h>

#include "base.h"
#include "nccl.h"

/* A piece of work that may need to wait for other ranks (embedded in a larger struct). */
typedef struct group_job group_job_t;
struct group_job {
  /* Does the work. Runs on its own thread when several jobs must progress together or when the
   * communicator is non-blocking, else on the caller's thread. The job's CUDA device is current. */
  ncclResult_t (*run)(group_job_t* job);
  /* Called exactly once after run (or instead of it, with the error that prevented it): publishes
   * the result and releases the job. Must not block on other ranks. */
  void (*complete)(group_job_t* job, ncclResult_t res);
  int cuda_dev;     /* device current when the job was submitted, -1 for none */
  bool nonblocking; /* from a non-blocking communicator: nobody waits for it */
  group_job_t* next;
};

/*
 * Outside a group: a blocking job runs now on this thread and its result is returned; a
 * non-blocking one starts on a thread of its own and ncclInProgress is returned. Inside a group:
 * the job waits for the outermost ncclGroupEnd, and ncclSuccess is returned.
 */
ncclResult_t enqueue_job_submit(group_job_t* job);

ncclResult_t enqueue_group_start(void);
/* Close one level; the outermost close runs what the group holds: every job on its own thread,
 * waiting for all of them unless they are non-blocking (then ncclInProgress). With sim_info,
 * fill sim_info->estimatedTime as well. */
ncclResult_t enqueue_group_end(ncclSimInfo_t* sim_info);
/* Nesting depth of the calling thread's group (0: not in a group). */
int enqueue_group_depth(void);

#endif
