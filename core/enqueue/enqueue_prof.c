/*
 * The profiler's events of the data path (core/prof has the plugin and the versions). Per
 * communicator and group: a GroupApi event (v5+) from the group's first operation on the
 * communicator to the end of its launches, and a Group event over the same span (the parent of
 * Coll and P2p events for plugins before v5). Per call: a CollApi or P2pApi event around the
 * queueing (the API call's own span). Per operation at launch: a Coll event (its plan: algorithm,
 * protocol, channels, warps) or a P2p event, child of the API event, from just before its
 * kernel's launch to just after (NCCL's meaning: enqueued, not finished); and a KernelLaunch
 * event around each kernel launch. Nothing is built unless prof_on says the type is wanted.
 */
#include <string.h>

#include "enqueue_internal.h"

/* The events of the group on dp, started by its first operation. */
static void enq_prof_group_open(enq_comm_t* dp, cudaStream_t stream) {
  if (dp->prof_group_open) return;
  dp->prof_group_open = 1;
  const int depth = enqueue_group_depth();
  if (prof_on(dp->prof, ncclProfileGroupApi)) {
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileGroupApi;
    d.groupApi.graphCaptured = enq_stream_capturing(stream);
    d.groupApi.groupDepth = depth > 0 ? depth : 1; /* 1: the implicit group of a lone call */
    dp->prof_group_api = prof_start(dp->prof, &d);
    /* The ncclGroupStart of the group has returned by now (or there was none). */
    prof_record(dp->prof, dp->prof_group_api, ncclProfilerGroupStartApiStop, NULL);
  }
  if (prof_on(dp->prof, ncclProfileGroup)) {
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileGroup;
    dp->prof_group = prof_start(dp->prof, &d);
  }
}

void enq_prof_op(enq_comm_t* dp, enq_op_t* op) {
  op->prof_api = NULL;
  if (dp->prof == NULL) return;
  enq_prof_group_open(dp, op->stream);
  const bool p2p = op->kind == ENQ_SEND || op->kind == ENQ_RECV;
  const int type = p2p ? ncclProfileP2pApi : ncclProfileCollApi;
  if (!prof_on(dp->prof, type)) return;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = (uint64_t)type;
  d.parentObj = dp->prof_group_api;
  if (p2p) {
    d.p2pApi.func = prof_func_name(op->kind == ENQ_SEND ? ncclFuncSend : ncclFuncRecv);
    d.p2pApi.count = op->count;
    d.p2pApi.datatype = prof_type_name(op->type);
    d.p2pApi.stream = op->stream;
    d.p2pApi.graphCaptured = enq_stream_capturing(op->stream);
  } else {
    d.collApi.func = prof_func_name(enq_func(op));
    d.collApi.count = op->count;
    d.collApi.datatype = prof_type_name(op->type);
    d.collApi.root = op->root;
    d.collApi.stream = op->stream;
    d.collApi.graphCaptured = enq_stream_capturing(op->stream);
  }
  /* The call's span is its queueing, done by now; the handle stays the task's parent. */
  op->prof_api = prof_start(dp->prof, &d);
  prof_stop(dp->prof, op->prof_api);
}

void enq_prof_group_end(enq_comm_t* dp) {
  if (dp->prof_group_open) prof_record(dp->prof, dp->prof_group_api, ncclProfilerGroupEndApiStart, NULL);
}

void enq_prof_group_close(enq_comm_t* dp) {
  if (!dp->prof_group_open) return;
  prof_stop(dp->prof, dp->prof_group);
  prof_stop(dp->prof, dp->prof_group_api);
  dp->prof_group = dp->prof_group_api = NULL;
  dp->prof_group_open = 0;
}

void* enq_prof_coll_start(enq_comm_t* dp, const enq_op_t* op, const enq_plan_t* plan) {
  if (!prof_on(dp->prof, ncclProfileColl)) return NULL;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileColl;
  d.parentObj = op->prof_api;
  d.coll.seqNumber = dp->prof_seq++;
  d.coll.func = prof_func_name(enq_func(op));
  d.coll.sendBuff = op->sendbuff;
  d.coll.recvBuff = op->recvbuff;
  d.coll.count = op->count;
  d.coll.root = op->root;
  d.coll.datatype = prof_type_name(op->type);
  /* One rank runs no algorithm (enq_launch_single): no channels, and "NONE". */
  d.coll.nChannels = plan ? (uint8_t)plan->nchannels : 0;
  d.coll.nWarps = plan ? (uint8_t)(plan->nthreads / 32) : 0;
  d.coll.algo = plan ? prof_algo_name(plan->algo) : "NONE";
  d.coll.proto = plan ? prof_proto_name(plan->proto) : "NONE";
  d.coll.parentGroup = dp->prof_group;
  return prof_start(dp->prof, &d);
}

void* enq_prof_p2p_start(enq_comm_t* dp, const enq_op_t* op) {
  if (!prof_on(dp->prof, ncclProfileP2p)) return NULL;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileP2p;
  d.parentObj = op->prof_api;
  d.p2p.func = prof_func_name(op->kind == ENQ_SEND ? ncclFuncSend : ncclFuncRecv);
  d.p2p.buff = op->kind == ENQ_SEND ? (void*)op->sendbuff : op->recvbuff;
  d.p2p.datatype = prof_type_name(op->type);
  d.p2p.count = op->count;
  d.p2p.peer = op->root;
  d.p2p.nChannels = op->root == dp->rank ? 1 : (uint8_t)(dp->p2p_nch_peer ? dp->p2p_nch_peer[op->root] : 0);
  d.p2p.parentGroup = dp->prof_group;
  return prof_start(dp->prof, &d);
}

void* enq_prof_launch_start(enq_comm_t* dp, cudaStream_t stream) {
  if (!prof_on(dp->prof, ncclProfileKernelLaunch)) return NULL;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileKernelLaunch;
  d.parentObj = dp->prof_group_api;
  d.kernelLaunch.stream = stream;
  return prof_start(dp->prof, &d);
}
