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
#include <stdlib.h>
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
  if (dp->prof_group_open)
    prof_record(dp->prof, dp->prof_group_api, ncclProfilerGroupEndApiStart, NULL);
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

void* enq_prof_p2p_start(enq_comm_t* dp, const enq_op_t* op, bool send, int peer,
                         const void* buff) {
  if (!prof_on(dp->prof, ncclProfileP2p)) return NULL;
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = ncclProfileP2p;
  d.parentObj = op->prof_api;
  d.p2p.func = prof_func_name(send ? ncclFuncSend : ncclFuncRecv);
  d.p2p.buff = (void*)buff;
  d.p2p.datatype = prof_type_name(op->type);
  d.p2p.count = op->count;
  d.p2p.peer = peer;
  d.p2p.nChannels =
      peer == dp->rank ? 1 : (uint8_t)(dp->p2p_nch_peer ? dp->p2p_nch_peer[peer] : 0);
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

/* ---- Steps of a ring collective through each connection end (ProxyOp events) ---------------- */

/* Steps the CTA of part c of the work takes on its send (is_send) or receive end, counted as
 * the ring algorithms of kern_coll.cuh take them: every primitive call is one step of each end
 * it uses, a call without elements included. d: the ring distance from the root (Broadcast,
 * Reduce). */
static uint64_t enq_ring_steps(const kern_coll_work_t* w, int n, int d, uint32_t step_bytes,
                               uint32_t c, int is_send) {
  const uint64_t es = kern_type_size((ncclDataType_t)w->type);
  if (n < 2 || es == 0 || step_bytes < es) return 0;
  const uint64_t unit = KERN_RC_VEC_BYTES / es;
  uint64_t off, cnt;
  kern_split_part(w->count, unit, (uint32_t)w->nchannels, c, &off, &cnt);
  const uint64_t slice = step_bytes / es;
  const uint64_t iters = (cnt + slice - 1) / slice;
  switch (w->coll) {
    case KERN_COLL_ALLREDUCE: {
      uint64_t rounds = 0;
      for (uint64_t base = 0; base < cnt; rounds++) {
        uint64_t chunk = (cnt - base + (uint64_t)n - 1) / (uint64_t)n;
        chunk = (chunk + unit - 1) / unit * unit;
        if (chunk > slice) chunk = slice;
        base += (uint64_t)n * chunk;
      }
      return rounds * (uint64_t)(2 * n - 2);
    }
    case KERN_COLL_REDUCESCATTER:
    case KERN_COLL_ALLGATHER: return iters * (uint64_t)(n - 1);
    case KERN_COLL_BROADCAST: /* the root sends, the last one receives, the others both */
      return (is_send ? d < n - 1 : d > 0) ? iters : 0;
    case KERN_COLL_REDUCE: /* starts after the root (d 1), ends at it (d 0) */
      return (is_send ? d != 0 : d != 1) ? iters : 0;
    default: return 0;
  }
}

/* The tree's AllReduce (kern_tree.cuh): channel c's part in steps of the plan's chunk within the
 * slot of the phase's first send end (every end's slot holds it: enq_tree_check); every end of
 * the channel takes one step per slice, the up phase's (children in, parent out) and the down
 * phase's (parent in, children out) alike. */
static void enq_prof_tree_ops(enq_comm_t* dp, const kern_coll_work_t* w, void* parent) {
  const uint64_t es = kern_type_size((ncclDataType_t)w->type);
  if (dp->host_tree == NULL || es == 0) return;
  const uint64_t unit = KERN_RC_VEC_BYTES / es;
  for (uint32_t c = 0; c < (uint32_t)w->nchannels && (int)c < dp->tree_nch; c++) {
    const kern_tree_t* t = &dp->host_tree[c];
    const kern_tree_t* key = dp->dev_tree + c; /* the ends' names (enq_tree_reqs) */
    const kern_conn_t* first = NULL;
    for (int i = 0; i < KERN_TREE_ARITY && first == NULL && t->up < 0; i++)
      if (t->down[i] >= 0) first = &t->down_send[i];
    if (t->up >= 0) first = &t->up_send;
    if (first == NULL) continue;
    uint32_t step = kern_proto_step_capacity((kern_proto_t)w->proto, first->slot_bytes[w->proto]);
    if (w->chunk_bytes < step) step = w->chunk_bytes;
    uint64_t off, cnt;
    kern_split_part(w->count, unit, (uint32_t)w->nchannels, c, &off, &cnt);
    uint64_t slice = step / es / unit * unit;
    if (slice == 0) slice = unit;
    const uint32_t nsteps = (uint32_t)((cnt + slice - 1) / slice);
    /* Each linked end (host copy as connected) and its name (the device table's place). */
    const kern_conn_t* ends[2 + 2 * KERN_TREE_ARITY];
    const kern_conn_t* names[2 + 2 * KERN_TREE_ARITY];
    int ne = 0;
    if (t->up >= 0) {
      ends[ne] = &t->up_send, names[ne++] = &key->up_send;
      ends[ne] = &t->up_recv, names[ne++] = &key->up_recv;
    }
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (t->down[i] < 0) continue;
      ends[ne] = &t->down_send[i], names[ne++] = &key->down_send[i];
      ends[ne] = &t->down_recv[i], names[ne++] = &key->down_recv[i];
    }
    for (int e = 0; e < ne; e++)
      if (ends[e]->transport == KERN_TRANSPORT_NET)
        transport_prof_op(dp->transport, names[e], parent, nsteps, (int)step, (int)c);
  }
}

void enq_prof_ring_ops(enq_comm_t* dp, const kern_coll_work_t* w, void* parent) {
  if (!prof_on(dp->prof, ncclProfileProxyOp | ncclProfileProxyStep)) return;
  if (w->algo == NCCL_ALGO_TREE) {
    enq_prof_tree_ops(dp, w, parent);
    return;
  }
  if (w->algo != NCCL_ALGO_RING) return; /* OneShot: p2p only, no proxy */
  const int n = dp->nranks;
  /* Part k of the work runs on ring channel channel0 + k (kernels.h). */
  for (uint32_t k = 0; k < (uint32_t)w->nchannels; k++) {
    const uint32_t c = (uint32_t)w->channel0 + k;
    kern_channel_t* ch = &dp->host_kc.channels[c];
    if (ch->send.transport != KERN_TRANSPORT_NET && ch->recv.transport != KERN_TRANSPORT_NET)
      continue;
    /* The kernel's step: the plan's chunk within what both ends' slots hold (kern_prims.cuh). */
    uint32_t slot = ch->recv.slot_bytes[w->proto];
    if (ch->send.slot_bytes[w->proto] < slot) slot = ch->send.slot_bytes[w->proto];
    uint32_t step = kern_proto_step_capacity((kern_proto_t)w->proto, slot);
    if (w->chunk_bytes < step) step = w->chunk_bytes;
    int root_pos = 0;
    for (int i = 0; i < n; i++)
      if (dp->ring_ranks[(size_t)c * (size_t)n + (size_t)i] == w->root) root_pos = i;
    const int d = ((ch->index - root_pos) % n + n) % n;
    if (ch->send.transport == KERN_TRANSPORT_NET)
      transport_prof_op(dp->transport, &ch->send, parent,
                        (uint32_t)enq_ring_steps(w, n, d, step, k, 1), (int)step, (int)c);
    if (ch->recv.transport == KERN_TRANSPORT_NET)
      transport_prof_op(dp->transport, &ch->recv, parent,
                        (uint32_t)enq_ring_steps(w, n, d, step, k, 0), (int)step, (int)c);
  }
}

void enq_prof_p2p_ops(enq_comm_t* dp, const kern_p2p_batch_t* b, void* const* parents) {
  if (!prof_on(dp->prof, ncclProfileProxyOp | ncclProfileProxyStep)) return;
  for (uint32_t k = 0; k < b->nops; k++) {
    const kern_p2p_op_t* o = &b->ops[k];
    if (o->kind != KERN_P2P_SEND && o->kind != KERN_P2P_RECV) continue;
    if (transport_kind(dp->transport, (int)o->peer) != KERN_TRANSPORT_NET) continue;
    /* The kernel's step over a connection: the batch's chunk within the slot (Simple). */
    uint32_t step = kern_proto_step_capacity(KERN_PROTO_SIMPLE, enq_p2p_slot_bytes(dp, o->peer));
    if (b->chunk_bytes < step) step = b->chunk_bytes;
    if (step == 0) continue;
    for (uint32_t cta = 0; cta < o->nctas; cta++) {
      /* CTA cta moves its part of the bytes (kern_copy.cu) in steps. */
      uint64_t off, part;
      kern_split_part(o->bytes, KERN_RC_VEC_BYTES, o->nctas, cta, &off, &part);
      const uint64_t nsteps = (part + step - 1) / step;
      transport_prof_op(dp->transport, enq_p2p_conn_key(dp, o->kind == KERN_P2P_SEND, o->peer,
                                                        (int)cta),
                        parents[k], (uint32_t)nsteps, (int)step, (int)cta);
    }
  }
}

/* ---- Kernel channels (KernelCh events) ---------------------------------------------------------
 * Each CTA of a launch writes its start and stop times (the GPU's global timer) into one record
 * of host-mapped memory (kernels.h: kern_prof_rec_t); the host reports a record once its stop is
 * there, at the communicator's next launch, at finalize or at destroy, and never waits for the
 * stream. Records are handed out in launch order, and a communicator's launches finish in that
 * order (each waits for the previous one's event), so the reader stops at the first record not
 * finished. A launch's records are contiguous (the kernel writes record blockIdx.x): one that
 * does not fit before the end of the ring starts at its beginning, the skipped records count as
 * finished without an event. Captured launches get none: a graph replays its kernels' arguments,
 * so their records could not be told apart. */

#define ENQ_KCH_RECS 4096u
#define ENQ_KCH_SKIPPED ((void*)1) /* parent of a record no launch got */

static ncclResult_t enq_kch_alloc(enq_comm_t* dp) {
  const size_t bytes = sizeof(kern_prof_rec_t) * ENQ_KCH_RECS;
  if (cudaHostAlloc((void**)&dp->kch_host, bytes, cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer((void**)&dp->kch_dev, dp->kch_host, 0) != cudaSuccess ||
      (dp->kch_parent = calloc(ENQ_KCH_RECS, sizeof(void*))) == NULL ||
      (dp->kch_channel = calloc(ENQ_KCH_RECS, 1)) == NULL) {
    WARN("rank %d: cannot allocate %zu bytes of host-mapped memory for the profiler's kernel "
         "channel timestamps; this communicator reports no KernelCh events",
         dp->rank, bytes);
    (void)cudaGetLastError();
    enq_prof_kch_release(dp);
    dp->kch_failed = 1;
    return ncclSystemError;
  }
  return ncclSuccess;
}

kern_prof_rec_t* enq_prof_kch_reserve(enq_comm_t* dp, uint32_t n, int capturing,
                                      uint64_t* first_p) {
  if (capturing || n == 0 || n > ENQ_KCH_RECS || dp->kch_failed ||
      !prof_on(dp->prof, ncclProfileKernelCh))
    return NULL;
  if (dp->kch_host == NULL && enq_kch_alloc(dp) != ncclSuccess) return NULL;
  enq_prof_kch_poll(dp);
  uint64_t first = dp->kch_head;
  const uint32_t at = (uint32_t)(first % ENQ_KCH_RECS);
  const uint32_t skip = at + n > ENQ_KCH_RECS ? ENQ_KCH_RECS - at : 0;
  if (dp->kch_head + skip + n - dp->kch_tail > ENQ_KCH_RECS) {
    INFO(NCCL_INIT, "rank %d: %llu kernel-channel records still running; a launch of %u CTAs "
         "goes without KernelCh events", dp->rank,
         (unsigned long long)(dp->kch_head - dp->kch_tail), n);
    return NULL;
  }
  for (uint32_t i = 0; i < skip; i++) dp->kch_parent[at + i] = ENQ_KCH_SKIPPED;
  first += skip;
  kern_prof_rec_t* h = &dp->kch_host[first % ENQ_KCH_RECS];
  for (uint32_t i = 0; i < n; i++) { /* the caller names every record (enq_prof_kch_set) */
    __atomic_store_n(&h[i].start, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h[i].stop, 0, __ATOMIC_RELAXED);
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* zeroed before the launch can write them */
  dp->kch_head = first + n;
  *first_p = first;
  return dp->kch_dev + first % ENQ_KCH_RECS;
}

void enq_prof_kch_set(enq_comm_t* dp, uint64_t rec, void* parent, int channel) {
  dp->kch_parent[rec % ENQ_KCH_RECS] = parent;
  dp->kch_channel[rec % ENQ_KCH_RECS] = (uint8_t)channel;
}

void enq_prof_kch_cancel(enq_comm_t* dp, uint64_t first) {
  /* Nothing was reserved after the failed launch's records. */
  for (uint64_t r = first; r < dp->kch_head; r++)
    dp->kch_parent[r % ENQ_KCH_RECS] = ENQ_KCH_SKIPPED;
}

void enq_prof_kch_poll(enq_comm_t* dp) {
  while (dp->kch_tail < dp->kch_head) {
    const uint32_t i = (uint32_t)(dp->kch_tail % ENQ_KCH_RECS);
    void* parent = dp->kch_parent[i];
    if (parent != ENQ_KCH_SKIPPED) {
      const uint64_t stop = __atomic_load_n(&dp->kch_host[i].stop, __ATOMIC_ACQUIRE);
      if (stop == 0) break;
      ncclProfilerEventDescr_v6_t d;
      memset(&d, 0, sizeof(d));
      d.type = ncclProfileKernelCh;
      d.parentObj = parent;
      d.kernelCh.channelId = dp->kch_channel[i];
      d.kernelCh.pTimer = __atomic_load_n(&dp->kch_host[i].start, __ATOMIC_RELAXED);
      void* ev = prof_start(dp->prof, &d);
      ncclProfilerEventStateArgs_v6_t a;
      memset(&a, 0, sizeof(a));
      a.kernelCh.pTimer = stop;
      prof_record(dp->prof, ev, ncclProfilerKernelChStop, &a);
      prof_stop(dp->prof, ev);
    }
    dp->kch_tail++;
  }
}

void enq_prof_kch_release(enq_comm_t* dp) {
  if (dp->kch_host != NULL) enq_prof_kch_poll(dp);
  if (dp->kch_tail != dp->kch_head)
    INFO(NCCL_INIT, "rank %d: %llu kernel-channel records never finished; no KernelCh event "
         "for them", dp->rank, (unsigned long long)(dp->kch_head - dp->kch_tail));
  if (dp->kch_host != NULL) cudaFreeHost(dp->kch_host);
  free(dp->kch_parent);
  free(dp->kch_channel);
  dp->kch_host = dp->kch_dev = NULL;
  dp->kch_parent = NULL;
  dp->kch_channel = NULL;
  dp->kch_head = dp->kch_tail = 0;
}
