/* Group nesting. Only the outermost ncclGroupEnd acts; the state is per thread, as in NCCL. */
#include "enqueue.h"

static __thread int enqueue_group_depth_;

int enqueue_group_depth(void) { return enqueue_group_depth_; }

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
  /* Nothing can be queued yet: every operation that would join a group is still missing and
   * fails at its own call. An empty group takes no time. */
  if (sim_info != NULL) sim_info->estimatedTime = 0.0f;
  return ncclSuccess;
}
