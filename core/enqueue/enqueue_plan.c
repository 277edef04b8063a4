/*
 * Planning and launching: the operations a group collected on one communicator become kernel
 * launches on the user's streams. Ring collectives run in call order, consecutive ones that share
 * a kernel in one launch (up to KERN_COLL_BATCH_MAX, CHOIR_AGG_MAX), which runs them one after
 * the other, on the group's first collective's stream (the group's other streams joined before
 * and after, as NCCL does); sends and receives (and AlltoAll, Gather, Scatter, which are made of
 * them) launch in batches that progress together in one kernel.
 *
 * Each collective gets its plan (algorithm, protocol, channels, threads, chunk) in one place,
 * enqueue_plan_make, from the cost model of the connected ring (core/tune): the same inputs on
 * every rank, so the same plan.
 *
 * Every rank must derive the same launches from matching calls, or the kernels would wait for
 * each other forever. So: collectives keep call order (every rank calls them in the same order)
 * and their batches are cut from that order alone;
 * the k-th send to a peer meets the peer's k-th receive from this rank (NCCL's matching rule),
 * which defines the send/recv "round" k; a batch holds one round's operations whose ring
 * distance (delta) falls in one fixed block, and batches go in (round, block) order; each
 * operation's CTA count depends only on its byte count and the peer's transport. Both ends of
 * every connection therefore run the same pieces in the same order.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "enqueue_internal.h"

/* A send or receive gets one CTA per this many bytes, up to the peer's connections. */
#define ENQ_P2P_BYTES_PER_CTA (128 * 1024)
/* CTAs a p2p batch may use at most (all must be resident together). */
#define ENQ_P2P_BATCH_CTAS 128

typedef struct {
  int peer;
  kern_p2p_kind_t kind;
  const void* src;
  void* dst;
  uint64_t bytes;
  cudaStream_t stream;
  int round;
  int delta;
  /* 1: part of a collective made of sends and receives (AlltoAll, Gather, Scatter), which every
   * rank calls alike: its operations take fewer CTAs each and share a batch with the next
   * deltas, so that all peers progress at once. 0: the user's send/recv. Both ends of a pair
   * get the same class from matching calls. */
  int cls;
  void* prof_parent;   /* the op's P2p event (profiler), or NULL */
  const enq_op_t* op;  /* the operation it comes from */
} enq_p2p_t;

/*
 * Class-1 operations (see enq_p2p_t.cls) run in one of two shapes, chosen per group from the
 * AlltoAll/Gather/Scatter calls in it. Every rank makes the same calls with the same counts, so
 * every rank picks the same shape and cuts the same batches.
 *   spread    (every per-peer block below ENQ_COLL_P2P_PAIRWISE_BYTES): ENQ_COLL_P2P_DELTAS
 *             deltas per batch, so that all peers progress at once, with fewer CTAs each;
 *   pairwise  (a larger block): one delta per batch with every connection of the peer, the
 *             local copy joining delta 1: each phase is a shift permutation, where one link
 *             pair runs at full speed (measured on 4 H200s: 354 vs 318 GB/s busbw at 4 GB).
 * Both move slices of ENQ_COLL_P2P_SLICE, which keeps more slots in flight per connection.
 * A pairwise batch of Gathers and Scatters only (every step between a root and one peer) moves
 * ENQ_COLL_P2P_ROOTED_SLICE: on 2 x H200, 4 GB Gather 344 -> 352 GB/s busbw and Scatter 362 ->
 * 370 with 1 MB slices (1 GB slices: no better), where AlltoAll lost (350 -> 347 at 4 GB, 310
 * -> 293 at 64 MB).
 */
#define ENQ_COLL_P2P_DELTAS 4
#define ENQ_COLL_P2P_PAIRWISE_BYTES (32ull << 20)
#define ENQ_COLL_P2P_SLICE (256u * 1024)
#define ENQ_COLL_P2P_ROOTED_SLICE (1024u * 1024)

void enqueue_plan_clear(enq_comm_t* dp) {
  dp->nops = 0;
  dp->plans_valid = 0;
  enq_prof_group_close(dp);
}

int enq_p2p_batch_ctas(const enq_comm_t* dp) {
  return dp->cta_cap > 0 && dp->cta_cap < ENQ_P2P_BATCH_CTAS ? dp->cta_cap : ENQ_P2P_BATCH_CTAS;
}

/* CTAs per operation of a spread class-1 batch: ENQ_COLL_P2P_DELTAS deltas of a send and a
 * receive share one launch. */
static int enq_coll_p2p_ctas(const enq_comm_t* dp) {
  int n = enq_p2p_batch_ctas(dp) / (2 * ENQ_COLL_P2P_DELTAS);
  return n < 1 ? 1 : n;
}

static int enq_is_coll(enq_kind_t k) { return k <= ENQ_ALLREDUCE; }

/* ---- Streams ------------------------------------------------------------------------------ */

/* Kernels of one communicator must not overlap (they share the connections): a launch on a
 * stream other than the previous one waits for the previous launch. Not under capture: the
 * graph's own order applies there, and an event from outside the capture cannot be waited on.
 * Enter and leave also mark the launch for the proxy thread (network connections only). */
static ncclResult_t enq_stream_enter(enq_comm_t* dp, cudaStream_t s, int* capturing_p) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  *capturing_p = st != cudaStreamCaptureStatusNone;
  if (!*capturing_p && dp->launched && dp->last_stream != s)
    CUDA_CHECK(cudaStreamWaitEvent(s, dp->done_ev, 0));
  return transport_launch_begin(dp->transport, s, *capturing_p);
}

static ncclResult_t enq_stream_leave(enq_comm_t* dp, cudaStream_t s, int capturing) {
  CHECK(transport_launch_end(dp->transport, s));
  if (capturing) return ncclSuccess;
  CUDA_CHECK(cudaEventRecord(dp->done_ev, s));
  dp->last_stream = s;
  __atomic_store_n(&dp->launched, 1, __ATOMIC_RELEASE); /* enqueue_comm_busy reads it */
  return ncclSuccess;
}

typedef enum { ENQ_JOIN_INTO, ENQ_JOIN_OUT_OF } enq_join_t;

/* Streams streams[0..n) other than s joined with s through ev: INTO, s waits for each of them;
 * OUT_OF, each waits for s (a stream named twice in a row is joined once). */
static ncclResult_t enq_streams_join(const cudaStream_t* streams, int n, cudaStream_t s,
                                     enq_join_t dir, cudaEvent_t ev) {
  for (int i = 0; i < n; i++) {
    if (streams[i] == s || (i > 0 && streams[i] == streams[i - 1])) continue;
    cudaStream_t from = dir == ENQ_JOIN_INTO ? streams[i] : s;
    cudaStream_t to = dir == ENQ_JOIN_INTO ? s : streams[i];
    CUDA_CHECK(cudaEventRecord(ev, from));
    CUDA_CHECK(cudaStreamWaitEvent(to, ev, 0));
  }
  return ncclSuccess;
}

bool enq_stream_capturing(cudaStream_t stream) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

/* ---- Collectives -------------------------------------------------------------------------- */

/* The ncclFunc_t of an operation (ENQ_BROADCAST..ENQ_ALLREDUCE have its values). */
ncclFunc_t enq_func(const enq_op_t* op) {
  switch (op->kind) {
    case ENQ_SEND: return ncclFuncSend;
    case ENQ_RECV: return ncclFuncRecv;
    case ENQ_ALLTOALL: return ncclFuncAlltoAll;
    case ENQ_GATHER: return ncclFuncGather;
    case ENQ_SCATTER: return ncclFuncScatter;
    default: return (ncclFunc_t)op->kind;
  }
}

uint64_t enqueue_plan_nbytes(const enq_op_t* op, int nranks) {
  const uint64_t bytes = (uint64_t)op->count * kern_type_size(op->type);
  switch (op->kind) {
    case ENQ_ALLGATHER:
    case ENQ_REDUCESCATTER:
    case ENQ_ALLTOALL: return bytes * (uint64_t)nranks;
    default: return bytes;
  }
}

/* The plan hands tune's algorithm to the kernels as it is. */
_Static_assert(TUNE_ALGO_ONESHOT == KERN_ALGO_ONESHOT && TUNE_ALGO_TWOSHOT == KERN_ALGO_TWOSHOT,
               "tune's and the kernels' numbers of the direct algorithms");

ncclResult_t enqueue_plan_make(tune_t* t, const enq_op_t* op, int nranks, int num_pipe_ops,
                               const uint32_t ring_slot_bytes[KERN_PROTO_NUM], int ring_nchannels,
                               int tree_nchannels, enq_plan_t* plan_p) {
  tune_choice_t ch;
  memset(&ch, 0, sizeof(ch));
  CHECK(tune_choose(t, enq_func(op), enqueue_plan_nbytes(op, nranks), num_pipe_ops, &ch));
  if (ch.algo == TUNE_ALGO_ONESHOT || ch.algo == TUNE_ALGO_TWOSHOT) {
    /* tune offers them only with the direct connections (algo_mask): OneShot for AllReduce,
     * AllGather and ReduceScatter, TwoShot for AllReduce (tune_algos_for). */
    if (!kern_direct_runs(ch.algo, (int)enq_func(op)) || ch.proto != NCCL_PROTO_LL || ch.nchannels < 1 ||
        ch.nchannels > KERN_DIRECT_MAX_CTAS || ch.nthreads < 64 || ch.nthreads > KERN_NTHREADS ||
        ch.nthreads % 32 != 0 || ch.chunk_bytes < 16 || ch.chunk_bytes % 16 != 0) {
      WARN("plan: the model chose %s with protocol %d, %d CTAs, %d threads, chunk %u for "
           "collective %d; it takes AllReduce (OneShot also AllGather, ReduceScatter), LL, "
           "1..%d CTAs, 64..%d threads (multiples of 32) and chunks of whole 16 bytes",
           ch.algo == TUNE_ALGO_ONESHOT ? "OneShot" : "TwoShot", ch.proto, ch.nchannels, ch.nthreads, ch.chunk_bytes, (int)op->kind,
           KERN_DIRECT_MAX_CTAS, KERN_NTHREADS);
      return ncclInternalError;
    }
  } else if (ch.algo == NCCL_ALGO_TREE) {
    /* tune offers the tree only with tree channels (algo_mask), for AllReduce, with a protocol
     * of TUNE_TREE_PROTOS that the ring has (the tree's connections have the ring's slots). */
    if (op->kind != ENQ_ALLREDUCE || (unsigned)ch.proto >= NCCL_NUM_PROTOCOLS ||
        !(TUNE_TREE_PROTOS & (1u << ch.proto)) ||
        ring_slot_bytes[ch.proto] == 0 || ch.nchannels < 1 ||
        ch.nchannels > tree_nchannels || ch.nthreads < 64 || ch.nthreads > KERN_NTHREADS ||
        ch.nthreads % 32 != 0 || ch.chunk_bytes < 16 || ch.chunk_bytes % 16 != 0) {
      WARN("plan: the model chose the tree with protocol %d, %d channels, %d threads, chunk %u "
           "for collective %d; it takes AllReduce, a protocol the ring has, 1..%d channels (those "
           "connected), 64..%d threads (multiples of 32) and chunks of whole 16 bytes",
           ch.proto, ch.nchannels, ch.nthreads, ch.chunk_bytes, (int)op->kind, tree_nchannels,
           KERN_NTHREADS);
      return ncclInternalError;
    }
  } else if (ch.algo != NCCL_ALGO_RING || ch.proto < 0 || ch.proto >= KERN_PROTO_NUM ||
      ring_slot_bytes[ch.proto] == 0 || ch.nchannels < 1 || ch.nchannels > ring_nchannels ||
      ch.nthreads < 64 || ch.nthreads > KERN_NTHREADS || ch.nthreads % 32 != 0 ||
      ch.chunk_bytes < 16 || ch.chunk_bytes % 16 != 0) {
    WARN("plan: the model chose algorithm %d, protocol %d, %d channels, %d threads, chunk %u "
         "for collective %d; the ring has protocols with slots LL %u LL128 %u Simple %u and %d "
         "channels, and the kernels take ring only, 64..%d threads (multiples of 32) and chunks "
         "of whole 16 bytes",
         ch.algo, ch.proto, ch.nchannels, ch.nthreads, ch.chunk_bytes, (int)op->kind,
         ring_slot_bytes[KERN_PROTO_LL], ring_slot_bytes[KERN_PROTO_LL128],
         ring_slot_bytes[KERN_PROTO_SIMPLE], ring_nchannels, KERN_NTHREADS);
    return ncclInternalError;
  }
  *plan_p = (enq_plan_t){.algo = ch.algo,
                         .proto = ch.proto,
                         .nchannels = ch.nchannels,
                         .nthreads = ch.nthreads,
                         .chunk_bytes = ch.chunk_bytes,
                         .time_us = ch.time_us};
  return ncclSuccess;
}

static int enq_reduces(enq_kind_t k) {
  return k == ENQ_REDUCE || k == ENQ_REDUCESCATTER || k == ENQ_ALLREDUCE;
}

/* ---- Sym kernels: AllReduce, AllGather, ReduceScatter on symmetric windows ---------------- */

/* Where LSA rank 0's copy of [p, p + bytes) lies, and the window's stride, when the range is
 * inside one of wins[0..nwins) whose team holds all nranks ranks. */
static int enq_win_find(const enq_win_t* wins, int nwins, int nranks, const void* p,
                        uint64_t bytes, char** flat0, uint32_t* stride4g) {
  const char* c = (const char*)p;
  for (int i = 0; i < nwins; i++) {
    const enq_win_t* w = &wins[i];
    if (w->nlsa != nranks || c < w->buff || (uint64_t)(c - w->buff) > w->size ||
        bytes > w->size - (uint64_t)(c - w->buff))
      continue;
    *flat0 = w->flat0 + (c - w->buff);
    *stride4g = w->stride4g;
    return 1;
  }
  return 0;
}

#define ENQ_SYM_BYTES_PER_CTA 65536 /* a CTA more per this many bytes, up to the direct CTAs */
#define ENQ_SYM_CHUNK 1024 /* the barriers' steps need a chunk; they carry one line */

int enqueue_plan_sym(const enq_win_t* wins, int nwins, int nranks, int direct_ctas, int cta_cap,
                     int64_t mode, const enq_op_t* op, enq_plan_t* plan) {
  const int ar = op->kind == ENQ_ALLREDUCE, ag = op->kind == ENQ_ALLGATHER,
            rs = op->kind == ENQ_REDUCESCATTER;
  if (mode == 0 || !(ar || ag || rs) || op->count == 0 || direct_ctas < 1 || nranks < 2 ||
      nranks > KERN_DIRECT_MAX_RANKS || (!ag && kern_op_from_nccl(op->op) == KERN_OP_PREMULSUM))
    return 0;
  if (mode == 1 && plan->algo == TUNE_ALGO_ONESHOT) return 0;
  /* A rank's block (AllGather, ReduceScatter) or buffer (AllReduce); the buffers that other ranks
   * read (the input: AllReduce, ReduceScatter) or write (the output: AllReduce, AllGather) must
   * lie in windows, whole. */
  const uint64_t bytes = (uint64_t)op->count * kern_type_size(op->type);
  const uint64_t whole = ar ? bytes : bytes * (uint64_t)nranks;
  char *s0 = NULL, *r0 = NULL;
  uint32_t sstride = 0, rstride = 0;
  if (!ag && !enq_win_find(wins, nwins, nranks, op->sendbuff, whole, &s0, &sstride)) return 0;
  if (!rs && !enq_win_find(wins, nwins, nranks, op->recvbuff, whole, &r0, &rstride)) return 0;
  const uint32_t stride = ag ? rstride : sstride;
  if (stride == 0 || (ar && sstride != rstride)) return 0;
  uint64_t ctas = (bytes + ENQ_SYM_BYTES_PER_CTA - 1) / ENQ_SYM_BYTES_PER_CTA;
  int max = direct_ctas;
  if (cta_cap > 0 && max > cta_cap) max = cta_cap;
  if (ctas > (uint64_t)max) ctas = (uint64_t)max;
  if (ctas < 1) ctas = 1;
  /* 64 bytes a thread per pass (4 loads of 16 bytes), whole warps, 64..KERN_NTHREADS */
  uint64_t nt = (bytes / ctas / 64 + 31) / 32 * 32;
  if (nt < 64) nt = 64;
  if (nt > KERN_NTHREADS) nt = KERN_NTHREADS;
  INFO(NCCL_TUNING, "plan: %s of %llu bytes in symmetric windows takes %s, %d CTAs x %d "
       "threads (the model had chosen %s/%s)", prof_func_name(enq_func(op)),
       (unsigned long long)bytes, ar ? "SymTwoShot" : ag ? "SymAllGather" : "SymReduceScatter",
       (int)ctas, (int)nt, tune_algo_name(plan->algo), kern_proto_name(plan->proto));
  plan->algo = KERN_ALGO_SYM;
  plan->proto = NCCL_PROTO_LL; /* the barriers' lines */
  plan->nchannels = (int)ctas;
  plan->nthreads = (int)nt;
  plan->chunk_bytes = ENQ_SYM_CHUNK;
  plan->channel0 = 0;
  plan->sym_send0 = s0;
  plan->sym_recv0 = r0;
  plan->sym_stride4g = stride;
  return 1;
}

/* The group's collectives that take a Sym kernel (enqueue_plan_sym): none, without a lock, while
 * CHOIR_SYM_KERNELS is 0 or no window is registered. */
static void enq_plan_sym(enq_comm_t* dp) {
  const int64_t mode = param_int(PARAM_SYM_KERNELS);
  if (mode == 0 || __atomic_load_n(&dp->nwins, __ATOMIC_ACQUIRE) == 0) return;
  pthread_mutex_lock(&dp->wins_lock);
  for (int i = 0; i < dp->nops; i++)
    if (enq_is_coll(dp->ops[i].kind) && dp->ops[i].count > 0)
      (void)enqueue_plan_sym(dp->wins, dp->nwins, dp->nranks,
                             dp->dev_direct ? dp->direct_ctas : 0, dp->cta_cap, mode,
                             &dp->ops[i], &dp->plans[i]);
  pthread_mutex_unlock(&dp->wins_lock);
}

/* The kernel's work of a planned collective (without profiler records). */
static void enq_coll_work(enq_comm_t* dp, const enq_op_t* op, const enq_plan_t* plan,
                          kern_coll_work_t* w) {
  memset(w, 0, sizeof(*w));
  w->sendbuff = op->sendbuff;
  w->recvbuff = op->recvbuff;
  w->comm = dp->dev_kc;
  w->coll = (int32_t)op->kind;
  w->root = op->root;
  w->divisor = dp->nranks;
  w->algo = plan->algo;
  w->proto = plan->proto;
  w->nthreads = (uint16_t)plan->nthreads;
  w->nchannels = plan->nchannels;
  w->channel0 = (uint16_t)plan->channel0;
  w->chunk_bytes = plan->chunk_bytes;
  if (enq_reduces(op->kind)) {
    w->op = kern_op_from_nccl(op->op);
    w->type = op->type;
    w->count = op->count;
    if (w->op == KERN_OP_PREMULSUM) enqueue_redop_scalar(dp, op->op, &w->scalar_bits, &w->scalar_ptr);
  } else {
    w->op = KERN_OP_SUM;
    w->type = ncclUint8;
    w->count = op->count * kern_type_size(op->type);
  }
  if (plan->algo == KERN_ALGO_SYM) { /* never premulsum (enqueue_plan_sym): no scalar */
    w->sym_send0 = plan->sym_send0;
    w->sym_recv0 = plan->sym_recv0;
    w->sym_stride4g = plan->sym_stride4g;
  }
}

enq_batch_key_t enqueue_plan_batch_key(const enq_op_t* op, const enq_plan_t* plan) {
  const int reduces = enq_reduces(op->kind);
  return (enq_batch_key_t){.tree = plan->algo == NCCL_ALGO_TREE,
                           .solo = plan->algo == KERN_ALGO_SYM,
                           .proto = plan->proto,
                           .op = reduces ? (int)kern_op_from_nccl(op->op) : -1,
                           .type = reduces ? (int)op->type : -1};
}

int enqueue_plan_batch_end(const enq_batch_key_t* keys, int n, int lo, int max) {
  const enq_batch_key_t* k = &keys[lo];
  int hi = lo + 1;
  if (k->solo) return hi;
  while (hi < n && hi - lo < max && !keys[hi].solo && keys[hi].tree == k->tree &&
         keys[hi].proto == k->proto &&
         keys[hi].op == k->op && keys[hi].type == k->type)
    hi++;
  return hi;
}

int enqueue_plan_batch_max(void) {
  const int64_t v = param_int(PARAM_AGG_MAX);
  return v < 1 ? 1 : v > KERN_COLL_BATCH_MAX ? KERN_COLL_BATCH_MAX : (int)v;
}

/* Consecutive OneShot works of a launch with the same operator arguments run as one stream of
 * lines (kern_direct.cuh: each CTA takes its part of every work): such a run gets the CTAs its
 * bytes together call for, not the few each work's own size asks (40 all-reduces of 4 KB, one
 * CTA each, moved 160 KB through one CTA). Runs as the kernel forms them (kern_oneshot_joins), so
 * every rank, which forms the same batches, splits alike. */
void enqueue_plan_spread_oneshot(const tune_t* t, kern_coll_batch_t* b) {
  for (uint32_t i = 0; i < b->nworks;) {
    const kern_coll_work_t* w = &b->works[i];
    uint32_t j = i + 1;
    while (j < b->nworks && kern_oneshot_joins(w, &b->works[j])) j++;
    if (j - i >= 2) {
      uint64_t total = 0;
      int most = 0;
      for (uint32_t k = i; k < j; k++) {
        total += b->works[k].count * kern_type_size((ncclDataType_t)b->works[k].type);
        if (b->works[k].nchannels > most) most = b->works[k].nchannels;
      }
      int ctas = tune_direct_ctas(t, total);
      if (ctas < most) ctas = most;
      for (uint32_t k = i; k < j; k++) b->works[k].nchannels = ctas;
    }
    i = j;
  }
}

void enqueue_plan_spread_ring(int limit, enq_plan_t* plans, int n) {
  int next = 0;
  for (int i = 0; i < n; i++) {
    enq_plan_t* p = &plans[i];
    if (p->algo != NCCL_ALGO_RING || p->nchannels < 1) continue;
    if (p->nchannels >= limit) {
      p->channel0 = 0;
      continue;
    }
    if (next + p->nchannels > limit) next = 0;
    p->channel0 = next;
    next += p->nchannels;
  }
}

/* Ring channels a launch may spread its ring works over: the ring's (already within the CTA
 * cap), or 0 with CHOIR_RING_SPREAD=0. */
static int enq_ring_spread_limit(const enq_comm_t* dp) {
  return param_int(PARAM_RING_SPREAD) != 0 ? dp->nchannels : 0;
}

/* Whether collective b joins the run that a starts (enqueue_plan_runs): the same kind among
 * AllReduce, AllGather and ReduceScatter, the same kernel operator and type. Not the stream:
 * ranks may use streams differently, and every rank must plan alike. */
static int enq_run_alike(const enq_op_t* a, const enq_op_t* b) {
  return (a->kind == ENQ_ALLREDUCE || a->kind == ENQ_ALLGATHER || a->kind == ENQ_REDUCESCATTER) &&
         b->kind == a->kind && b->type == a->type &&
         (a->kind == ENQ_ALLGATHER || kern_op_from_nccl(b->op) == kern_op_from_nccl(a->op));
}

/* Sizes of a run stay within this factor of its smallest: the model's choice for their bytes
 * together fits each of them. */
#define ENQ_RUN_SPREAD 4

ncclResult_t enqueue_plan_runs(tune_t* t, const enq_op_t* ops, enq_plan_t* plans, int n,
                               int nranks, int max_run, int ring_nchannels) {
  for (int lo = 0; lo < n;) {
    const enq_op_t* a = &ops[lo];
    if (!enq_is_coll(a->kind) || a->count == 0) {
      lo++;
      continue;
    }
    uint64_t lo_b = enqueue_plan_nbytes(a, nranks), hi_b = lo_b, total = lo_b;
    int idx[KERN_COLL_BATCH_MAX];
    int k = 0;
    idx[k++] = lo;
    int next = lo + 1;
    for (; next < n && k < max_run && k < KERN_COLL_BATCH_MAX; next++) {
      const enq_op_t* b = &ops[next];
      if (!enq_is_coll(b->kind) || b->count == 0) continue; /* not launched with the others */
      if (!enq_run_alike(a, b)) break;
      const uint64_t nb = enqueue_plan_nbytes(b, nranks);
      const uint64_t l = nb < lo_b ? nb : lo_b, h = nb > hi_b ? nb : hi_b;
      if (h > l * ENQ_RUN_SPREAD) break;
      lo_b = l;
      hi_b = h;
      total += nb;
      idx[k++] = next;
    }
    if (k < 2) {
      lo++;
      continue;
    }
    tune_choice_t ch;
    memset(&ch, 0, sizeof(ch));
    CHECK(tune_choose_run(t, enq_func(a), total, k, &ch));
    const int ring = ch.algo == NCCL_ALGO_RING, oneshot = ch.algo == TUNE_ALGO_ONESHOT;
    if (ring && (ch.nchannels < 1 || ch.nchannels > ring_nchannels)) {
      WARN("plan: the model chose %d ring channels for a run of %d collectives; the ring has %d",
           ch.nchannels, k, ring_nchannels);
      return ncclInternalError;
    }
    if (ring || oneshot) {
      for (int j = 0; j < k; j++) {
        enq_plan_t* p = &plans[idx[j]];
        const uint64_t nb = enqueue_plan_nbytes(&ops[idx[j]], nranks);
        p->algo = ch.algo;
        p->proto = ch.proto;
        p->nthreads = ch.nthreads;
        p->chunk_bytes = ch.chunk_bytes;
        p->time_us = (float)((double)ch.time_us * (double)nb / (double)total);
        if (ring) { /* its share of the channels by bytes, at least one */
          uint64_t c = ((uint64_t)ch.nchannels * nb + total / 2) / total;
          p->nchannels = c < 1 ? 1 : c > (uint64_t)ch.nchannels ? ch.nchannels : (int)c;
        } else { /* the launch gives the run its CTAs (enqueue_plan_spread_oneshot) */
          p->nchannels = tune_direct_ctas(t, nb);
          if (p->nchannels < 1) p->nchannels = 1;
        }
      }
      INFO(NCCL_TUNING, "plan: a run of %d %s (%llu bytes together) takes %s/%s, %d channels "
           "shared by bytes, %d threads", k, prof_func_name(enq_func(a)),
           (unsigned long long)total, ring ? "Ring" : "OneShot", kern_proto_name(ch.proto),
           ch.nchannels, ch.nthreads);
    }
    lo = idx[k - 1] + 1;
  }
  return ncclSuccess;
}

/* Collectives ops[0..n) with their plans, one batch (enqueue_plan_batch_end): one launch on
 * their stream. Per collective, in call order as for one launch each: its Coll event, the steps
 * the proxy's ProxyOp events expect through each network connection end, and its CTAs'
 * kernel-channel records (each work's own, contiguous, as the kernel writes them). */
static ncclResult_t enq_launch_colls(enq_comm_t* dp, cudaStream_t s, const enq_op_t* const* ops,
                                     const enq_plan_t* plans, int n) {
  /* Only the first n works are read (the launch copies only those): no zeroing of the rest. */
  kern_coll_batch_t b;
  b.tag = KERN_COLL_BATCH_TAG;
  b.nworks = (uint32_t)n;
  b.pad = 0;
  for (int i = 0; i < n; i++) enq_coll_work(dp, ops[i], &plans[i], &b.works[i]);
  enqueue_plan_spread_oneshot(dp->tune, &b);
  int capturing;
  CHECK(enq_stream_enter(dp, s, &capturing));
  void* evs[KERN_COLL_BATCH_MAX];
  uint64_t kch0 = 0;
  int any_kch = 0;
  for (int i = 0; i < n; i++) {
    kern_coll_work_t* w = &b.works[i];
    evs[i] = enq_prof_coll_start(dp, ops[i], &plans[i]);
    if (dp->prof == NULL) continue;
    if (!capturing) enq_prof_ring_ops(dp, w, evs[i]);
    uint64_t kch = 0;
    if ((w->prof = enq_prof_kch_reserve(dp, (uint32_t)w->nchannels, capturing, &kch)) != NULL) {
      for (int c = 0; c < w->nchannels; c++)
        enq_prof_kch_set(dp, kch + (uint64_t)c, evs[i], w->channel0 + c);
      if (!any_kch) kch0 = kch;
      any_kch = 1;
    }
  }
  void* kl = enq_prof_launch_start(dp, s);
  ncclResult_t res = kern_coll_batch_launch(&b, s);
  prof_stop(dp->prof, kl);
  for (int i = 0; i < n; i++) prof_stop(dp->prof, evs[i]);
  if (res != ncclSuccess) {
    if (any_kch) enq_prof_kch_cancel(dp, kch0); /* every record from the batch's first on */
    WARN("rank %d: cannot launch %d collective(s): %s", dp->rank, n, kern_last_error());
    transport_launch_abandon(dp->transport, s, capturing);
    return res;
  }
  for (int i = 0; i < n; i++) {
    const enq_op_t* op = ops[i];
    const kern_coll_work_t* w = &b.works[i];
    TRACE(NCCL_COLL, "rank %d: coll %d count %zu type %d op %d root %d: %s, %d channels x %d "
          "threads, %u-byte chunks (work %d of a launch of %d)",
          dp->rank, (int)op->kind, op->count, (int)op->type, (int)op->op, op->root,
          kern_proto_name(w->proto), w->nchannels, (int)w->nthreads, w->chunk_bytes, i, n);
  }
  return enq_stream_leave(dp, s, capturing);
}

/* The plans of the queued collectives, in call order (every rank plans the same), into
 * dp->plans (see there): once per group, since a tuner plugin is asked once per operation. */
static ncclResult_t enq_plan_group(enq_comm_t* dp) {
  if (dp->plans_valid) return ncclSuccess;
  if (dp->tune == NULL) {
    WARN("rank %d: a collective reached its plan before the ring was connected", dp->rank);
    return ncclInternalError;
  }
  if (dp->plans_cap < dp->nops) {
    enq_plan_t* p = realloc(dp->plans, sizeof(*p) * (size_t)dp->nops);
    if (p == NULL) {
      WARN("rank %d: out of memory planning %d operations", dp->rank, dp->nops);
      return ncclSystemError;
    }
    dp->plans = p;
    dp->plans_cap = dp->nops;
  }
  int n = 0;
  for (int i = 0; i < dp->nops; i++) n += enq_is_coll(dp->ops[i].kind) && dp->ops[i].count > 0;
  const kern_conn_t* c0 = &dp->host_kc.channels[0].send;
  for (int i = 0; i < dp->nops; i++) {
    const enq_op_t* op = &dp->ops[i];
    memset(&dp->plans[i], 0, sizeof(dp->plans[i]));
    if (!enq_is_coll(op->kind) || op->count == 0) continue;
    CHECK(enqueue_plan_make(dp->tune, op, dp->nranks, n, c0->slot_bytes, dp->nchannels,
                            dp->tree_nch, &dp->plans[i]));
  }
  if (param_int(PARAM_GROUP_PLAN) != 0 && n > 1)
    CHECK(enqueue_plan_runs(dp->tune, dp->ops, dp->plans, dp->nops, dp->nranks,
                            enqueue_plan_batch_max(), dp->nchannels));
  enq_plan_sym(dp);
  enqueue_plan_spread_ring(enq_ring_spread_limit(dp), dp->plans, dp->nops);
  dp->plans_valid = 1;
  return ncclSuccess;
}

/* Whether a queued collective's plan picks the tree before it is connected (*wants). */
static ncclResult_t enq_tree_wanted(enq_comm_t* dp, int* wants) {
  *wants = 0;
  if (dp->host_tree != NULL || dp->tree_nch == 0 || !dp->ring_ready) return ncclSuccess;
  int any = 0;
  for (int i = 0; i < dp->nops && !any; i++)
    any = dp->ops[i].kind == ENQ_ALLREDUCE && dp->ops[i].count > 0;
  if (!any) return ncclSuccess;
  CHECK(enq_plan_group(dp));
  for (int i = 0; i < dp->nops && !*wants; i++)
    *wants = dp->ops[i].kind == ENQ_ALLREDUCE && dp->ops[i].count > 0 &&
             dp->plans[i].algo == NCCL_ALGO_TREE;
  return ncclSuccess;
}

/* Every non-empty collective of the group, planned in call order (every rank plans the same),
 * then launched in batches of consecutive ones that share a kernel. The proxy and
 * the profiler see each collective's calls in call order, as with one launch each. */
static ncclResult_t enq_launch_coll_all(enq_comm_t* dp) {
  int n = 0;
  for (int i = 0; i < dp->nops; i++) n += enq_is_coll(dp->ops[i].kind) && dp->ops[i].count > 0;
  if (n == 0) return ncclSuccess;
  CHECK(enq_plan_group(dp));
  const enq_op_t** ops = NULL;
  enq_plan_t* plans = NULL;
  enq_batch_key_t* keys = NULL;
  ncclResult_t res = MEM_CALLOC(&ops, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&plans, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&keys, (size_t)n);
  for (int i = 0, k = 0; i < dp->nops && res == ncclSuccess; i++) {
    const enq_op_t* op = &dp->ops[i];
    if (!enq_is_coll(op->kind) || op->count == 0) continue;
    if (dp->plans[i].algo == NCCL_ALGO_TREE && dp->host_tree == NULL) {
      WARN("rank %d: a tree plan reached launch before the tree was connected", dp->rank);
      res = ncclInternalError;
      break;
    }
    ops[k] = op;
    plans[k] = dp->plans[i];
    keys[k] = enqueue_plan_batch_key(op, &plans[k]);
    k++;
  }
  /* NCCL's rule for a group on several streams: every stream waits for the others before the
   * group's kernels start and for the kernels after them, as if the group ran on each; the
   * launches go on the first collective's stream. So the streams never decide the batches, and
   * ranks that use streams differently still cut the same ones (kernels.h). */
  cudaStream_t* streams = NULL;
  int nstreams = 0;
  if (res == ncclSuccess) res = MEM_CALLOC(&streams, (size_t)n);
  for (int i = 0; i < n && res == ncclSuccess; i++)
    if (i == 0 || ops[i]->stream != ops[i - 1]->stream) streams[nstreams++] = ops[i]->stream;
  const cudaStream_t s = res == ncclSuccess ? ops[0]->stream : NULL;
  if (res == ncclSuccess) res = enq_streams_join(streams, nstreams, s, ENQ_JOIN_INTO, dp->join_ev);
  const int max = enqueue_plan_batch_max();
  int launched = 0;
  for (int lo = 0; lo < n && res == ncclSuccess;) {
    const int hi = enqueue_plan_batch_end(keys, n, lo, max);
    res = enq_launch_colls(dp, s, ops + lo, plans + lo, hi - lo);
    launched = 1;
    lo = hi;
  }
  if (launched) {
    /* The kernels are in s: the other streams wait for them whatever happened since. */
    const ncclResult_t jres = enq_streams_join(streams, nstreams, s, ENQ_JOIN_OUT_OF, dp->join_ev);
    if (res == ncclSuccess) res = jres;
  }
  free(streams);
  free(ops);
  free(plans);
  free(keys);
  return res;
}

/* One rank: every collective is the identity on its data (a reduction over one contribution;
 * avg divides by 1), so no kernel of the data path runs. In place there is nothing to do; out
 * of place, one device-to-device copy on the user's stream (recorded like any work under
 * capture). Only a user operator (premulsum) changes values: the reduce-copy kernel applies its
 * scalar, in place or not. No communicator resource is touched, so no ordering against the
 * communicator's other launches is needed. */
static ncclResult_t enq_launch_single(enq_comm_t* dp, const enq_op_t* op) {
  const int reduces = enq_reduces(op->kind);
  const uint64_t bytes = op->count * kern_type_size(op->type);
  if (bytes == 0) return ncclSuccess;
  if (reduces && kern_op_from_nccl(op->op) == KERN_OP_PREMULSUM) {
    kern_reduce_copy_args_t a;
    memset(&a, 0, sizeof(a));
    a.srcs[0] = op->sendbuff;
    a.dsts[0] = op->recvbuff;
    a.count = op->count;
    a.op = KERN_OP_PREMULSUM;
    a.type = op->type;
    a.nsrcs = 1;
    a.ndsts = 1;
    a.preop_mask = 1;
    a.divisor = 1;
    enqueue_redop_scalar(dp, op->op, &a.scalar_bits, &a.scalar_ptr);
    ncclResult_t res = kern_reduce_copy_launch(&a, op->stream);
    if (res != ncclSuccess) WARN("rank 0 of 1: cannot apply the premulsum operator: %s", kern_last_error());
    return res;
  }
  if (op->sendbuff == op->recvbuff) return ncclSuccess;
  CUDA_CHECK(cudaMemcpyAsync(op->recvbuff, op->sendbuff, bytes, cudaMemcpyDeviceToDevice,
                             op->stream));
  return ncclSuccess;
}

/* ---- Sends and receives ------------------------------------------------------------------- */

static ncclResult_t enq_p2p_push(enq_p2p_t** v, int* n, int* cap, enq_p2p_t e) {
  if (*n == *cap) {
    int ncap = *cap ? 2 * *cap : 64;
    enq_p2p_t* g = realloc(*v, sizeof(*g) * (size_t)ncap);
    if (g == NULL) {
      WARN("out of memory planning %d send/recv operations", ncap);
      return ncclSystemError;
    }
    *v = g;
    *cap = ncap;
  }
  (*v)[(*n)++] = e;
  return ncclSuccess;
}

/* The sends and receives of the pending operations, in call order (AlltoAll, Gather and
 * Scatter expanded into theirs). */
static ncclResult_t enq_p2p_list(enq_comm_t* dp, enq_p2p_t** list_p, int* n_p) {
  enq_p2p_t* v = NULL;
  int n = 0, cap = 0;
  const int me = dp->rank, nr = dp->nranks;
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < dp->nops && res == ncclSuccess; i++) {
    const enq_op_t* op = &dp->ops[i];
    if (enq_is_coll(op->kind)) continue;
    const uint64_t b = op->count * kern_type_size(op->type);
    const char* sb = (const char*)op->sendbuff;
    char* rb = (char*)op->recvbuff;
    enq_p2p_t e = {.stream = op->stream, .bytes = b,
                   .cls = op->kind != ENQ_SEND && op->kind != ENQ_RECV,
                   .op = op};
    switch (op->kind) {
      case ENQ_SEND:
        e.peer = op->root, e.kind = KERN_P2P_SEND, e.src = sb;
        res = enq_p2p_push(&v, &n, &cap, e);
        break;
      case ENQ_RECV:
        e.peer = op->root, e.kind = KERN_P2P_RECV, e.dst = rb;
        res = enq_p2p_push(&v, &n, &cap, e);
        break;
      case ENQ_ALLTOALL:
        for (int p = 0; p < nr && res == ncclSuccess; p++) {
          e.peer = p, e.kind = KERN_P2P_SEND, e.src = sb + (uint64_t)p * b, e.dst = NULL;
          res = enq_p2p_push(&v, &n, &cap, e);
          e.kind = KERN_P2P_RECV, e.src = NULL, e.dst = rb + (uint64_t)p * b;
          if (res == ncclSuccess) res = enq_p2p_push(&v, &n, &cap, e);
        }
        break;
      case ENQ_GATHER:
        e.peer = op->root, e.kind = KERN_P2P_SEND, e.src = sb;
        res = enq_p2p_push(&v, &n, &cap, e);
        if (me == op->root)
          for (int p = 0; p < nr && res == ncclSuccess; p++) {
            e.peer = p, e.kind = KERN_P2P_RECV, e.src = NULL, e.dst = rb + (uint64_t)p * b;
            res = enq_p2p_push(&v, &n, &cap, e);
          }
        break;
      case ENQ_SCATTER:
        if (me == op->root)
          for (int p = 0; p < nr && res == ncclSuccess; p++) {
            e.peer = p, e.kind = KERN_P2P_SEND, e.src = sb + (uint64_t)p * b, e.dst = NULL;
            res = enq_p2p_push(&v, &n, &cap, e);
          }
        e.peer = op->root, e.kind = KERN_P2P_RECV, e.src = NULL, e.dst = rb;
        if (res == ncclSuccess) res = enq_p2p_push(&v, &n, &cap, e);
        break;
      default: break;
    }
  }
  if (res != ncclSuccess) {
    free(v);
    return res;
  }
  *list_p = v;
  *n_p = n;
  return ncclSuccess;
}

int enqueue_plan_needs_connect(enq_comm_t* dp) {
  int tree = 0;
  /* A plan that fails here fails again in the connect, which reports it. */
  if (enq_tree_wanted(dp, &tree) != ncclSuccess || tree) return 1;
  for (int i = 0; i < dp->nops; i++) {
    const enq_op_t* op = &dp->ops[i];
    if (op->count == 0) continue;
    if (enq_is_coll(op->kind)) {
      if (!dp->ring_ready && dp->nranks > 1) return 1; /* one rank: no ring (enq_launch_single) */
      continue;
    }
    if (op->kind == ENQ_SEND || op->kind == ENQ_RECV) {
      if (op->root != dp->rank && !dp->p2p_nch_peer[op->root]) return 1;
      continue;
    }
    for (int p = 0; p < dp->nranks; p++) /* AlltoAll/Gather/Scatter: every peer, at most */
      if (p != dp->rank && !dp->p2p_nch_peer[p]) return 1;
  }
  return 0;
}

ncclResult_t enqueue_plan_connect(enq_comm_t* dp) {
  for (int i = 0; i < dp->nops && !dp->ring_ready && dp->nranks > 1; i++)
    if (enq_is_coll(dp->ops[i].kind) && dp->ops[i].count > 0) CHECK(enqueue_comm_connect_ring(dp));
  int tree = 0;
  CHECK(enq_tree_wanted(dp, &tree));
  if (tree) CHECK(enqueue_comm_connect_tree(dp));
  enq_p2p_t* v = NULL;
  int n = 0;
  CHECK(enq_p2p_list(dp, &v, &n));
  int* peers = NULL;
  int np = 0;
  ncclResult_t res = ncclSuccess;
  if (n > 0) res = MEM_CALLOC(&peers, (size_t)dp->nranks);
  uint8_t* want = NULL;
  if (res == ncclSuccess && n > 0) res = MEM_CALLOC(&want, (size_t)dp->nranks);
  if (res == ncclSuccess) {
    for (int i = 0; i < n; i++)
      if (v[i].bytes > 0 && v[i].peer != dp->rank && !dp->p2p_nch_peer[v[i].peer])
        want[v[i].peer] = 1;
    /* Peers in rank order: both ends of a pair then meet in the same order. */
    for (int p = 0; p < dp->nranks && n > 0; p++)
      if (want[p]) peers[np++] = p;
    if (np > 0) res = enqueue_comm_connect_p2p(dp, peers, np);
  }
  free(want);
  free(peers);
  free(v);
  return res;
}

static int enq_p2p_cmp(const void* a, const void* b) {
  const enq_p2p_t* x = (const enq_p2p_t*)a;
  const enq_p2p_t* y = (const enq_p2p_t*)b;
  if (x->round != y->round) return x->round < y->round ? -1 : 1;
  if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
  if (x->delta != y->delta) return x->delta < y->delta ? -1 : 1;
  return (int)x->kind - (int)y->kind;
}

/* 1 when the pending class-1 operations run pairwise (see ENQ_COLL_P2P_PAIRWISE_BYTES). */
static int enq_p2p_pairwise(const enq_comm_t* dp) {
  for (int i = 0; i < dp->nops; i++) {
    const enq_op_t* op = &dp->ops[i];
    if ((op->kind == ENQ_ALLTOALL || op->kind == ENQ_GATHER || op->kind == ENQ_SCATTER) &&
        op->count * kern_type_size(op->type) >= ENQ_COLL_P2P_PAIRWISE_BYTES)
      return 1;
  }
  return 0;
}

/* The delta block an operation is batched by: the local copy goes with delta 1 when pairwise. */
static int enq_p2p_block(const enq_p2p_t* e, int pairwise, int per_batch_p2p) {
  if (!e->cls) return e->delta / per_batch_p2p;
  if (pairwise) return e->delta == 0 ? 1 : e->delta;
  return e->delta / ENQ_COLL_P2P_DELTAS;
}

static uint16_t enq_p2p_nctas(enq_comm_t* dp, const enq_p2p_t* e, int pairwise) {
  uint64_t max = e->kind == KERN_P2P_COPY ? (uint64_t)dp->p2p_nch : dp->p2p_nch_peer[e->peer];
  if (e->cls && !pairwise && max > (uint64_t)enq_coll_p2p_ctas(dp)) max = enq_coll_p2p_ctas(dp);
  if (max < 1) max = 1;
  uint64_t n = (e->bytes + ENQ_P2P_BYTES_PER_CTA - 1) / ENQ_P2P_BYTES_PER_CTA;
  if (n < 1) n = 1;
  return (uint16_t)(n < max ? n : max);
}

/* The slice a batch of ops [lo, hi) moves per connection step. Batches never mix classes. */
static uint32_t enq_p2p_slice(const enq_p2p_t* v, int lo, int hi, int pairwise) {
  if (!v[lo].cls) return 1u << 30;
  if (!pairwise) return ENQ_COLL_P2P_SLICE;
  for (int i = lo; i < hi; i++)
    if (v[i].op->kind == ENQ_ALLTOALL) return ENQ_COLL_P2P_SLICE;
  return ENQ_COLL_P2P_ROOTED_SLICE;
}

/* One batch: ops [lo, hi) of v. Launched on the first op's stream; the other streams of the
 * batch join before and after. */
static ncclResult_t enq_launch_batch(enq_comm_t* dp, enq_p2p_t* v, int lo, int hi,
                                     int pairwise) {
  static kern_p2p_batch_t zero;
  kern_p2p_batch_t b = zero;
  b.comm = dp->dev_kc;
  b.chunk_bytes = enq_p2p_slice(v, lo, hi, pairwise);
  for (int i = lo; i < hi; i++) {
    kern_p2p_op_t* o = &b.ops[b.nops++];
    o->src = v[i].src;
    o->dst = v[i].dst;
    o->bytes = v[i].bytes;
    o->peer = v[i].peer;
    o->kind = (uint16_t)v[i].kind;
    o->nctas = enq_p2p_nctas(dp, &v[i], pairwise);
    b.nctas += o->nctas;
  }
  cudaStream_t s = v[lo].stream;
  int capturing;
  CHECK(enq_stream_enter(dp, s, &capturing));
  uint64_t kch = 0;
  if (dp->prof != NULL) {
    void* parents[KERN_P2P_MAX_OPS];
    for (int i = lo; i < hi; i++) parents[i - lo] = v[i].prof_parent;
    if (!capturing) enq_prof_p2p_ops(dp, &b, parents);
    /* CTA records in the kernel's order: op k's CTAs, each named by its connection. */
    if ((b.prof = enq_prof_kch_reserve(dp, b.nctas, capturing, &kch)) != NULL)
      for (uint32_t k = 0, r = 0; k < b.nops; k++)
        for (uint32_t c = 0; c < b.ops[k].nctas; c++, r++)
          enq_prof_kch_set(dp, kch + r, parents[k], (int)c);
  }
  cudaStream_t streams[KERN_P2P_MAX_OPS];
  for (int i = lo; i < hi; i++) streams[i - lo] = v[i].stream;
  /* From here on every error must balance the launch mark of enq_stream_enter. */
  ncclResult_t res = enq_streams_join(streams, hi - lo, s, ENQ_JOIN_INTO, dp->join_ev);
  if (res == ncclSuccess) {
    void* kl = enq_prof_launch_start(dp, s);
    res = kern_p2p_launch(&b, s);
    prof_stop(dp->prof, kl);
    if (res != ncclSuccess)
      WARN("rank %d: cannot launch %u send/recv operations: %s", dp->rank, b.nops,
           kern_last_error());
  }
  if (res != ncclSuccess) {
    if (b.prof != NULL) enq_prof_kch_cancel(dp, kch);
    transport_launch_abandon(dp->transport, s, capturing);
    return res;
  }
  TRACE(NCCL_P2P, "rank %d: p2p batch of %u ops, %u CTAs", dp->rank, b.nops, b.nctas);
  /* The kernel is launched: the mark ends in the stream whatever happens to the joins. */
  res = enq_streams_join(streams, hi - lo, s, ENQ_JOIN_OUT_OF, dp->join_ev);
  ncclResult_t lres = enq_stream_leave(dp, s, capturing);
  return res != ncclSuccess ? res : lres;
}

static ncclResult_t enq_launch_p2p(enq_comm_t* dp) {
  enq_p2p_t* v = NULL;
  int n = 0;
  CHECK(enq_p2p_list(dp, &v, &n));
  ncclResult_t res = ncclSuccess;
  /* A P2p event per send and receive, from before the first batch's launch to after the
   * last's: the user's each (even empty), and the non-empty ones AlltoAll, Gather and Scatter
   * are made of. */
  void** part_evs = NULL;
  if (n > 0 && prof_on(dp->prof, ncclProfileP2p) && (part_evs = calloc((size_t)n, sizeof(void*))))
    for (int i = 0; i < n; i++)
      if (!v[i].cls || v[i].bytes > 0)
        v[i].prof_parent = part_evs[i] = enq_prof_p2p_start(
            dp, v[i].op, v[i].kind == KERN_P2P_SEND, v[i].peer,
            v[i].kind == KERN_P2P_SEND ? v[i].src : (const void*)v[i].dst);
  const int me = dp->rank, nr = dp->nranks;
  /* Rounds: the k-th send to a peer and the k-th receive from it. */
  int* nsend = NULL;
  int* nrecv = NULL;
  int m = 0;
  if (n == 0) goto out;
  CHECK_GOTO(MEM_CALLOC(&nsend, (size_t)nr), res, out);
  CHECK_GOTO(MEM_CALLOC(&nrecv, (size_t)nr), res, out);
  for (int i = 0; i < n; i++) {
    if (v[i].bytes == 0) continue; /* nothing moves, nothing to match: NCCL's no-op */
    enq_p2p_t e = v[i];
    e.round = e.kind == KERN_P2P_SEND ? nsend[e.peer]++ : nrecv[e.peer]++;
    e.delta = e.kind == KERN_P2P_SEND ? (e.peer - me + nr) % nr : (me - e.peer + nr) % nr;
    v[m++] = e;
  }
  /* Sends to self meet receives from self: the k-th of each becomes one local copy. */
  if (nsend[me] != nrecv[me]) {
    WARN("rank %d: %d send(s) to itself but %d receive(s) from itself in one group; each send to "
         "self needs a matching receive of the same size in the same group", me, nsend[me],
         nrecv[me]);
    res = ncclInvalidUsage;
    goto out;
  }
  for (int i = 0; i < m; i++) {
    if (v[i].peer != me || v[i].kind != KERN_P2P_SEND) continue;
    for (int j = 0; j < m; j++) {
      if (v[j].peer != me || v[j].kind != KERN_P2P_RECV || v[j].round != v[i].round) continue;
      if (v[j].bytes != v[i].bytes) {
        WARN("rank %d: send to self of %llu bytes meets a receive from self of %llu bytes; sizes "
             "must match", me, (unsigned long long)v[i].bytes, (unsigned long long)v[j].bytes);
        res = ncclInvalidUsage;
        goto out;
      }
      v[i].kind = KERN_P2P_COPY;
      v[i].dst = v[j].dst;
      v[j].bytes = 0; /* dropped below */
      break;
    }
  }
  {
    int k = 0;
    for (int i = 0; i < m; i++)
      if (v[i].bytes > 0) v[k++] = v[i];
    m = k;
  }
  /* Stable order by (round, delta, kind); call order is kept within a key by the round. */
  qsort(v, (size_t)m, sizeof(*v), enq_p2p_cmp);
  {
    int per_batch_p2p = enq_p2p_batch_ctas(dp) / (2 * dp->p2p_nch);
    if (per_batch_p2p < 1) per_batch_p2p = 1;
    const int pairwise = enq_p2p_pairwise(dp);
    int lo = 0;
    while (lo < m && res == ncclSuccess) {
      const int block = enq_p2p_block(&v[lo], pairwise, per_batch_p2p);
      int hi = lo + 1;
      while (hi < m && v[hi].round == v[lo].round && v[hi].cls == v[lo].cls &&
             enq_p2p_block(&v[hi], pairwise, per_batch_p2p) == block &&
             hi - lo < KERN_P2P_MAX_OPS)
        hi++;
      res = enq_launch_batch(dp, v, lo, hi, pairwise);
      lo = hi;
    }
  }
out:
  if (part_evs != NULL)
    for (int i = 0; i < n; i++) prof_stop(dp->prof, part_evs[i]);
  free(part_evs);
  free(nsend);
  free(nrecv);
  free(v);
  return res;
}

ncclResult_t enqueue_plan_launch(enq_comm_t* dp) {
  ncclResult_t res = ncclSuccess;
  if (dp->host_abort && *dp->host_abort) {
    WARN("rank %d: the communicator was aborted; its operations are not launched", dp->rank);
    res = ncclInvalidUsage;
    goto out;
  }
  if (dp->nops > 0) {
    const enq_op_t* last = &dp->ops[dp->nops - 1];
    __atomic_store_n(&dp->last_kind, (int)last->kind, __ATOMIC_RELAXED);
    __atomic_store_n(&dp->last_count, last->count, __ATOMIC_RELAXED);
    __atomic_store_n(&dp->last_type, (int)last->type, __ATOMIC_RELAXED);
    __atomic_store_n(&dp->last_peer, last->root, __ATOMIC_RELAXED);
    __atomic_store_n(&dp->last_nops, dp->nops, __ATOMIC_RELAXED);
    __atomic_add_fetch(&dp->groups_launched, 1, __ATOMIC_RELEASE);
    uint64_t colls = 0;
    for (int i = 0; i < dp->nops; i++)
      colls += dp->ops[i].kind != ENQ_SEND && dp->ops[i].kind != ENQ_RECV;
    __atomic_add_fetch(&dp->colls_launched, colls, __ATOMIC_RELEASE);
  }
  /* One rank: no plan (enq_launch_single copies or scales; no ring, no model). */
  if (dp->nranks == 1) {
    for (int i = 0; i < dp->nops && res == ncclSuccess; i++) {
      if (!enq_is_coll(dp->ops[i].kind)) continue;
      void* ev = dp->ops[i].count > 0 ? enq_prof_coll_start(dp, &dp->ops[i], NULL) : NULL;
      res = enq_launch_single(dp, &dp->ops[i]);
      prof_stop(dp->prof, ev);
    }
  } else {
    res = enq_launch_coll_all(dp);
  }
  if (res == ncclSuccess) res = enq_launch_p2p(dp);
out:
  enqueue_plan_clear(dp);
  return res;
}

ncclResult_t enqueue_plan_estimate(enq_comm_t* dp, float* us_p) {
  *us_p = 0.0f;
  int any = 0;
  for (int i = 0; i < dp->nops; i++) any |= dp->ops[i].count > 0;
  if (!any) return ncclSuccess;
  tune_t* t = NULL;
  CHECK(enqueue_comm_sim_tune(dp, &t));
  double sum = 0;
  for (int i = 0; i < dp->nops; i++) {
    const enq_op_t* op = &dp->ops[i];
    if (op->count == 0) continue;
    /* For sends and receives (AlltoAll, Gather, Scatter too): what this rank sends. */
    uint64_t bytes = enqueue_plan_nbytes(op, dp->nranks);
    if (op->kind == ENQ_SCATTER && op->root == dp->rank) bytes *= (uint64_t)dp->nranks;
    sum += tune_estimate_us(t, enq_func(op), bytes);
  }
#ifdef CHOIR_TEST_PLANT_ZERO_ESTIMATE /* planted bug: test/unit's api-comm-catches-* only */
  sum = 0;
#endif
  *us_p = (float)sum;
  return ncclSuccess;
}
