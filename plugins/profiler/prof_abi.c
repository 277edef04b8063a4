/*
 * The exported tables ncclProfiler_v6, _v5 and _v4: thin entry points that decode each version's
 * own descriptor into the shared event store. The versions differ where it matters:
 *   - v4's descriptor `type` is a uint8_t (v5/v6: uint64_t), which moves no later member on LP64
 *     but must be read at its own width;
 *   - v4's init takes (commName, commHash, nNodes, nranks, rank, logfn), v5/v6's take commId
 *     second;
 *   - v5 adds the API events (GroupApi, CollApi, P2pApi, KernelLaunch) and coll/p2p.parentGroup;
 *   - v6 adds the copy-engine events.
 * State args have the same layout in v4, v5 and v6. Each table limits the activation mask to the
 * events its version can describe.
 */
#include "prof.h"

/* Payload copies for the members that several versions share under the same names; `s` is the
 * descriptor's union member of the version at hand. */
#define PROF_FILL_COLL(ev, s)                                                        \
  do {                                                                               \
    (ev)->u.coll.seq = (s).seqNumber;                                                \
    (ev)->u.coll.count = (s).count;                                                  \
    (ev)->u.coll.sendbuff = (s).sendBuff;                                            \
    (ev)->u.coll.recvbuff = (s).recvBuff;                                            \
    (ev)->u.coll.root = (s).root;                                                    \
    (ev)->u.coll.nchannels = (s).nChannels;                                          \
    (ev)->u.coll.nwarps = (s).nWarps;                                                \
    prof_strcpy((ev)->u.coll.func, sizeof((ev)->u.coll.func), (s).func);             \
    prof_strcpy((ev)->u.coll.datatype, sizeof((ev)->u.coll.datatype), (s).datatype); \
    prof_strcpy((ev)->u.coll.algo, sizeof((ev)->u.coll.algo), (s).algo);             \
    prof_strcpy((ev)->u.coll.proto, sizeof((ev)->u.coll.proto), (s).proto);          \
  } while (0)

#define PROF_FILL_P2P(ev, s)                                                       \
  do {                                                                             \
    (ev)->u.p2p.count = (s).count;                                                 \
    (ev)->u.p2p.buff = (s).buff;                                                   \
    (ev)->u.p2p.peer = (s).peer;                                                   \
    (ev)->u.p2p.nchannels = (s).nChannels;                                         \
    prof_strcpy((ev)->u.p2p.func, sizeof((ev)->u.p2p.func), (s).func);             \
    prof_strcpy((ev)->u.p2p.datatype, sizeof((ev)->u.p2p.datatype), (s).datatype); \
  } while (0)

/* A proxy op may come from another process (PXN): its parent is then not ours to resolve. */
#define PROF_FILL_PROXY_OP(ctx, ev, s)                     \
  do {                                                     \
    (ev)->u.proxy_op.pid = (s).pid;                        \
    (ev)->u.proxy_op.channel = (s).channelId;              \
    (ev)->u.proxy_op.peer = (s).peer;                      \
    (ev)->u.proxy_op.nsteps = (s).nSteps;                  \
    (ev)->u.proxy_op.chunk_size = (s).chunkSize;           \
    (ev)->u.proxy_op.is_send = (uint8_t)((s).isSend != 0); \
    (ev)->foreign_parent = (s).pid != (ctx)->pid;          \
  } while (0)

#define PROF_FILL_KERNEL_CH(ev, s)             \
  do {                                         \
    (ev)->u.kernel_ch.channel = (s).channelId; \
    (ev)->u.kernel_ch.gpu_start = (s).pTimer;  \
  } while (0)

#define PROF_FILL_COLL_API(ev, s)                                                  \
  do {                                                                             \
    (ev)->u.api.count = (s).count;                                                 \
    (ev)->u.api.stream = (s).stream;                                               \
    (ev)->u.api.root = (s).root;                                                   \
    (ev)->u.api.graph_captured = (s).graphCaptured;                                \
    prof_strcpy((ev)->u.api.func, sizeof((ev)->u.api.func), (s).func);             \
    prof_strcpy((ev)->u.api.datatype, sizeof((ev)->u.api.datatype), (s).datatype); \
  } while (0)

#define PROF_FILL_P2P_API(ev, s)                                                   \
  do {                                                                             \
    (ev)->u.api.count = (s).count;                                                 \
    (ev)->u.api.stream = (s).stream;                                               \
    (ev)->u.api.root = -1;                                                         \
    (ev)->u.api.graph_captured = (s).graphCaptured;                                \
    prof_strcpy((ev)->u.api.func, sizeof((ev)->u.api.func), (s).func);             \
    prof_strcpy((ev)->u.api.datatype, sizeof((ev)->u.api.datatype), (s).datatype); \
  } while (0)

/* The argument a state carries, by the kind of event it is recorded on. */
#define PROF_STATE_VALUE(ev, a)                                                  \
  ((a) == NULL                       ? 0                                         \
   : (ev)->kind == PROF_K_PROXY_STEP ? (uint64_t)(a)->proxyStep.transSize        \
   : (ev)->kind == PROF_K_PROXY_CTRL ? (uint64_t)(a)->proxyCtrl.appendedProxyOps \
   : (ev)->kind == PROF_K_KERNEL_CH  ? (uint64_t)(a)->kernelCh.pTimer            \
                                     : 0)

#define PROF_RECORD(ev, state, a)                                                           \
  do {                                                                                      \
    if ((ev) == NULL) return ncclSuccess;                                                   \
    if ((state) == ncclProfilerNetPluginUpdate) {                                           \
      if ((ev)->kind == PROF_K_NET) {                                                       \
        if ((a) != NULL) prof_event_net_payload((ev), (ev)->u.net.id, (a)->netPlugin.data); \
        atomic_fetch_add_explicit(&(ev)->nupdates, 1, memory_order_relaxed);                \
      }                                                                                     \
      return ncclSuccess;                                                                   \
    }                                                                                       \
    prof_event_state((ev), (int)(state), PROF_STATE_VALUE((ev), (a)));                      \
  } while (0)

/* ---- entries common to every version ---- */

static ncclResult_t prof_stop(void* eHandle) {
  if (eHandle != NULL) prof_event_stop(eHandle);
  return ncclSuccess;
}

static ncclResult_t prof_finalize(void* context) { return prof_ctx_finalize(context); }

/* ---- v4 ---- */

static ncclResult_t prof_v4_init(void** context, int* eActivationMask, const char* commName,
                                 uint64_t commHash, int nNodes, int nranks, int rank,
                                 ncclDebugLogger_t logfn) {
  return prof_ctx_init((prof_ctx_t**)context, 4, commHash, commName, nNodes, nranks, rank, logfn,
                       eActivationMask);
}

static ncclResult_t prof_v4_start(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* d) {
  prof_ctx_t* ctx = context;
  prof_event_t* ev = prof_event_begin(ctx, d->type, d->parentObj, d->rank);
  if (ev != NULL) {
    switch (ev->kind) {
      case PROF_K_COLL: PROF_FILL_COLL(ev, d->coll); break;
      case PROF_K_P2P: PROF_FILL_P2P(ev, d->p2p); break;
      case PROF_K_PROXY_OP: PROF_FILL_PROXY_OP(ctx, ev, d->proxyOp); break;
      case PROF_K_PROXY_STEP: ev->u.proxy_step.step = d->proxyStep.step; break;
      case PROF_K_KERNEL_CH: PROF_FILL_KERNEL_CH(ev, d->kernelCh); break;
      case PROF_K_NET: prof_event_net_payload(ev, d->netPlugin.id, d->netPlugin.data); break;
      default: break; /* Group, ProxyCtrl: nothing beyond the header */
    }
    prof_event_publish(ev);
  }
  *eHandle = ev;
  return ncclSuccess;
}

static ncclResult_t prof_v4_record(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* a) {
  prof_event_t* ev = eHandle;
  PROF_RECORD(ev, eState, a);
  return ncclSuccess;
}

/* ---- v5 ---- */

static ncclResult_t prof_v5_init(void** context, uint64_t commId, int* eActivationMask,
                                 const char* commName, int nNodes, int nranks, int rank,
                                 ncclDebugLogger_t logfn) {
  return prof_ctx_init((prof_ctx_t**)context, 5, commId, commName, nNodes, nranks, rank, logfn,
                       eActivationMask);
}

static ncclResult_t prof_v5_start(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  prof_ctx_t* ctx = context;
  prof_event_t* ev = prof_event_begin(ctx, d->type, d->parentObj, d->rank);
  if (ev != NULL) {
    switch (ev->kind) {
      case PROF_K_COLL:
        PROF_FILL_COLL(ev, d->coll);
        ev->group = d->coll.parentGroup;
        break;
      case PROF_K_P2P:
        PROF_FILL_P2P(ev, d->p2p);
        ev->group = d->p2p.parentGroup;
        break;
      case PROF_K_PROXY_OP: PROF_FILL_PROXY_OP(ctx, ev, d->proxyOp); break;
      case PROF_K_PROXY_STEP: ev->u.proxy_step.step = d->proxyStep.step; break;
      case PROF_K_KERNEL_CH: PROF_FILL_KERNEL_CH(ev, d->kernelCh); break;
      case PROF_K_NET: prof_event_net_payload(ev, d->netPlugin.id, d->netPlugin.data); break;
      case PROF_K_GROUP_API:
        ev->u.group_api.depth = d->groupApi.groupDepth;
        ev->u.group_api.graph_captured = d->groupApi.graphCaptured;
        break;
      case PROF_K_COLL_API: PROF_FILL_COLL_API(ev, d->collApi); break;
      case PROF_K_P2P_API: PROF_FILL_P2P_API(ev, d->p2pApi); break;
      case PROF_K_KERNEL_LAUNCH: ev->u.kernel_launch.stream = d->kernelLaunch.stream; break;
      default: break;
    }
    prof_event_publish(ev);
  }
  *eHandle = ev;
  return ncclSuccess;
}

/* v5 and v6 share the state-args type. */
static ncclResult_t prof_v5_record(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* a) {
  prof_event_t* ev = eHandle;
  PROF_RECORD(ev, eState, a);
  return ncclSuccess;
}

/* ---- v6 ---- */

static ncclResult_t prof_v6_init(void** context, uint64_t commId, int* eActivationMask,
                                 const char* commName, int nNodes, int nranks, int rank,
                                 ncclDebugLogger_t logfn) {
  return prof_ctx_init((prof_ctx_t**)context, 6, commId, commName, nNodes, nranks, rank, logfn,
                       eActivationMask);
}

static ncclResult_t prof_v6_start(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* d) {
  prof_ctx_t* ctx = context;
  prof_event_t* ev = prof_event_begin(ctx, d->type, d->parentObj, d->rank);
  if (ev != NULL) {
    switch (ev->kind) {
      case PROF_K_COLL:
        PROF_FILL_COLL(ev, d->coll);
        ev->group = d->coll.parentGroup;
        break;
      case PROF_K_P2P:
        PROF_FILL_P2P(ev, d->p2p);
        ev->group = d->p2p.parentGroup;
        break;
      case PROF_K_PROXY_OP: PROF_FILL_PROXY_OP(ctx, ev, d->proxyOp); break;
      case PROF_K_PROXY_STEP: ev->u.proxy_step.step = d->proxyStep.step; break;
      case PROF_K_KERNEL_CH: PROF_FILL_KERNEL_CH(ev, d->kernelCh); break;
      case PROF_K_NET: prof_event_net_payload(ev, d->netPlugin.id, d->netPlugin.data); break;
      case PROF_K_GROUP_API:
        ev->u.group_api.depth = d->groupApi.groupDepth;
        ev->u.group_api.graph_captured = d->groupApi.graphCaptured;
        break;
      case PROF_K_COLL_API: PROF_FILL_COLL_API(ev, d->collApi); break;
      case PROF_K_P2P_API: PROF_FILL_P2P_API(ev, d->p2pApi); break;
      case PROF_K_KERNEL_LAUNCH: ev->u.kernel_launch.stream = d->kernelLaunch.stream; break;
      case PROF_K_CE_COLL:
        ev->u.ce_coll.seq = d->ceColl.seqNumber;
        ev->u.ce_coll.count = d->ceColl.count;
        ev->u.ce_coll.stream = d->ceColl.stream;
        ev->u.ce_coll.root = d->ceColl.root;
        ev->u.ce_coll.batch_size = d->ceColl.batchSize;
        ev->u.ce_coll.num_batches = d->ceColl.numBatches;
        ev->u.ce_coll.ce_seq = d->ceColl.ceSeqNum;
        ev->u.ce_coll.intra_sync = d->ceColl.intraBatchSync;
        prof_strcpy(ev->u.ce_coll.func, sizeof(ev->u.ce_coll.func), d->ceColl.func);
        prof_strcpy(ev->u.ce_coll.datatype, sizeof(ev->u.ce_coll.datatype), d->ceColl.datatype);
        prof_strcpy(ev->u.ce_coll.sync, sizeof(ev->u.ce_coll.sync), d->ceColl.syncStrategy);
        break;
      case PROF_K_CE_SYNC:
        ev->u.ce_sync.complete = d->ceCollSync.isComplete;
        ev->u.ce_sync.nranks = d->ceCollSync.nRanks;
        break;
      case PROF_K_CE_BATCH:
        ev->u.ce_batch.num_ops = d->ceCollBatch.numOps;
        ev->u.ce_batch.total_bytes = d->ceCollBatch.totalBytes;
        ev->u.ce_batch.intra_sync = d->ceCollBatch.useIntraSync;
        break;
      default: break;
    }
    prof_event_publish(ev);
  }
  *eHandle = ev;
  return ncclSuccess;
}

/* ---- the tables: the only symbols the library exports ---- */

#define PROF_TABLE_NAME "choir-trace"

PROF_EXPORT const ncclProfiler_v6_t ncclProfiler_v6 = {
    PROF_TABLE_NAME, prof_v6_init, prof_v6_start, prof_stop, prof_v5_record, prof_finalize};

PROF_EXPORT const ncclProfiler_v5_t ncclProfiler_v5 = {
    PROF_TABLE_NAME, prof_v5_init, prof_v5_start, prof_stop, prof_v5_record, prof_finalize};

PROF_EXPORT const ncclProfiler_v4_t ncclProfiler_v4 = {
    PROF_TABLE_NAME, prof_v4_init, prof_v4_start, prof_stop, prof_v4_record, prof_finalize};
