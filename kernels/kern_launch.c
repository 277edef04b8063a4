/*
 * Host side of the kernels' C boundary: argument checks, instance lookup in the generated table,
 * grid sizing, and the thread-local error line. C11; the CUDA C++ lives in the instances.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kern_internal.h"
#include "nccl_common.h"

/* One line per thread: the core reads it right after the failing call, on the same thread. */
static _Thread_local char kern_err_buf[256];

static ncclResult_t kern_fail(ncclResult_t res, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

static ncclResult_t kern_fail(ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kern_err_buf, sizeof(kern_err_buf), fmt, ap);
  va_end(ap);
  return res;
}

const char* kern_last_error(void) { return kern_err_buf; }

/* ---- launches with a parameter prefix (kern_internal.h) ---- */

typedef CUresult (*kern_cu_launch_fn)(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                      unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                      CUstream stream, void** params, void** extra);
static pthread_once_t kern_cu_once = PTHREAD_ONCE_INIT;
static kern_cu_launch_fn kern_cu_launch;
static cudaError_t kern_cu_load_err = cudaSuccess;

static void kern_cu_load(void) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  void* fn = NULL;
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault,
                                                   &q);
  if (e == cudaSuccess && (q != cudaDriverEntryPointSuccess || fn == NULL))
    e = cudaErrorSymbolNotFound;
  kern_cu_load_err = e;
  kern_cu_launch = e == cudaSuccess ? (kern_cu_launch_fn)fn : NULL;
}

cudaError_t kern_launch_prefix(const void* fn, unsigned grid, unsigned threads, const void* params,
                               size_t bytes, cudaStream_t stream) {
  pthread_once(&kern_cu_once, kern_cu_load);
  if (kern_cu_launch == NULL) return kern_cu_load_err;
  cudaFunction_t f;
  cudaError_t e = cudaGetFuncBySymbol(&f, fn);
  if (e != cudaSuccess) return e;
  /* The driver copies the bytes during the call: params may live on the caller's stack. */
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void*)params, CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &bytes, CU_LAUNCH_PARAM_END};
  return (cudaError_t)kern_cu_launch((CUfunction)f, grid, 1, 1, threads, 1, 1, 0, (CUstream)stream,
                                     NULL, extra);
}

_Static_assert(KERN_ALGO_TREE == NCCL_ALGO_TREE, "the kernels take NCCL's number of the tree");

const char* kern_subset(void) { return kern_subset_str; }

const char* kern_op_name(kern_op_t op) {
  return (int)op >= 0 && op < KERN_OP_NUM ? kern_op_names[op] : "?";
}

const char* kern_type_name(ncclDataType_t type) {
  return (int)type >= 0 && type < ncclNumTypes ? kern_type_names[type] : "?";
}

size_t kern_type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

int kern_instance_available(kern_op_t op, ncclDataType_t type) {
  if ((int)op < 0 || op >= KERN_OP_NUM || (int)type < 0 || type >= ncclNumTypes) return 0;
  return kern_rc_table[op][type] != NULL;
}

static ncclResult_t kern_rc_check(const kern_reduce_copy_args_t* a) {
  if (a == NULL) return kern_fail(ncclInvalidArgument, "reduce-copy: args is NULL");
  if ((int)a->op < 0 || a->op >= KERN_OP_NUM)
    return kern_fail(ncclInvalidArgument, "reduce-copy: op %d is not a kern_op_t", (int)a->op);
  size_t size = kern_type_size(a->type);
  if (size == 0)
    return kern_fail(ncclInvalidArgument, "reduce-copy: type %d is not an ncclDataType_t",
                     (int)a->type);
  if (a->nsrcs < 1 || a->nsrcs > KERN_RC_MAX_SRCS)
    return kern_fail(ncclInvalidArgument, "reduce-copy: nsrcs %d outside 1..%d", (int)a->nsrcs,
                     KERN_RC_MAX_SRCS);
  if (a->ndsts < 1 || a->ndsts > KERN_RC_MAX_DSTS)
    return kern_fail(ncclInvalidArgument, "reduce-copy: ndsts %d outside 1..%d", (int)a->ndsts,
                     KERN_RC_MAX_DSTS);
  if (a->op == KERN_OP_AVG && a->divisor < 1)
    return kern_fail(ncclInvalidArgument, "reduce-copy: avg needs divisor >= 1, got %d",
                     (int)a->divisor);
  if (!kern_rc_table[a->op][a->type])
    return kern_fail(ncclInvalidUsage, "kernel for %s/%s not built (kernel_subset=%s)",
                     kern_op_names[a->op], kern_type_names[a->type], kern_subset_str);
  if (a->count == 0) return ncclSuccess;
  /* The vector path needs element alignment to find a common 16-byte boundary; every buffer
   * NCCL hands out satisfies it, so a misaligned pointer is a caller bug worth naming. */
  for (int s = 0; s < a->nsrcs; s++) {
    if (a->srcs[s] == NULL || (uintptr_t)a->srcs[s] % size != 0)
      return kern_fail(ncclInvalidArgument,
                       "reduce-copy: srcs[%d]=%p is NULL or not %zu-byte aligned", s, a->srcs[s],
                       size);
  }
  for (int d = 0; d < a->ndsts; d++) {
    if (a->dsts[d] == NULL || (uintptr_t)a->dsts[d] % size != 0)
      return kern_fail(ncclInvalidArgument,
                       "reduce-copy: dsts[%d]=%p is NULL or not %zu-byte aligned", d, a->dsts[d],
                       size);
  }
  return ncclSuccess;
}

ncclResult_t kern_reduce_copy_launch(const kern_reduce_copy_args_t* a, cudaStream_t stream) {
  ncclResult_t res = kern_rc_check(a);
  if (res != ncclSuccess || a->count == 0) return res;

  unsigned nctas = a->nctas;
  if (nctas == 0) {
    /* Enough CTAs that each moves at least one full step (every warp one unrolled chunk of
     * 16-byte packs), capped at four per SM. The kernel is grid-stride and one CTA per SM is
     * resident, but a few waves of shorter CTAs measured 1-3% faster on an H200 than one wave
     * of long ones (test-kern-reduce-copy --sweep), and beyond four the gain was mixed. */
    int dev, sms;
    cudaError_t err = cudaGetDevice(&dev);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess)
      return kern_fail(ncclUnhandledCudaError, "reduce-copy: cannot query the device: %s",
                       cudaGetErrorString(err));
    uint64_t bytes = a->count * kern_type_size(a->type);
    uint64_t step = (uint64_t)KERN_RC_NTHREADS * KERN_RC_UNROLL * KERN_RC_VEC_BYTES;
    uint64_t want = (bytes + step - 1) / step;
    uint64_t cap = 4 * (uint64_t)(sms > 0 ? sms : 1);
    nctas = (unsigned)(want < cap ? want : cap);
  }
  cudaError_t err = kern_rc_table[a->op][a->type](a, nctas, stream);
  if (err != cudaSuccess)
    return kern_fail(ncclUnhandledCudaError, "reduce-copy %s/%s: launch of %u CTAs failed: %s",
                     kern_op_names[a->op], kern_type_names[a->type], nctas,
                     cudaGetErrorString(err));
  return ncclSuccess;
}

/* Whether a collective reduces (op, type) or moves bytes (Broadcast, AllGather: the copy
 * kernel). */
static int kern_coll_reduces(int32_t coll) {
  return coll == KERN_COLL_REDUCE || coll == KERN_COLL_REDUCESCATTER || coll == KERN_COLL_ALLREDUCE;
}

/* Every check of one work, before any CUDA call; `what` names it in the message ("collective",
 * or "collective batch work 3"). */
static ncclResult_t kern_coll_check(const kern_coll_work_t* w, const char* what) {
  if (w == NULL || w->comm == NULL) return kern_fail(ncclInvalidArgument, "%s: no work or comm", what);
  if (w->coll < 0 || w->coll >= KERN_COLL_NUM)
    return kern_fail(ncclInvalidArgument, "%s: coll %d is not a kern_coll_t", what, (int)w->coll);
  if (w->nchannels < 1 || w->nchannels > KERN_MAX_CHANNELS)
    return kern_fail(ncclInvalidArgument, "%s: nchannels %d outside 1..%d", what,
                     (int)w->nchannels, KERN_MAX_CHANNELS);
  if (w->chunk_bytes == 0 || w->chunk_bytes % KERN_RC_VEC_BYTES != 0)
    return kern_fail(ncclInvalidArgument, "%s: chunk_bytes %u is not a positive multiple of %d",
                     what, w->chunk_bytes, KERN_RC_VEC_BYTES);
  if (w->algo != NCCL_ALGO_RING && w->algo != KERN_ALGO_TREE && w->algo != KERN_ALGO_ONESHOT &&
      w->algo != KERN_ALGO_TWOSHOT && w->algo != KERN_ALGO_SYM)
    return kern_fail(ncclInvalidArgument,
                     "%s: algo %d is not built (tree, %d; ring, %d; OneShot, %d; TwoShot, %d; "
                     "Sym, %d)",
                     what, (int)w->algo, KERN_ALGO_TREE, NCCL_ALGO_RING, KERN_ALGO_ONESHOT,
                     KERN_ALGO_TWOSHOT, KERN_ALGO_SYM);
  if (w->algo == KERN_ALGO_SYM) {
    /* The windows' copies each collective reads or writes across ranks. */
    const int send = w->coll == KERN_COLL_ALLREDUCE || w->coll == KERN_COLL_REDUCESCATTER;
    const int recv = w->coll == KERN_COLL_ALLREDUCE || w->coll == KERN_COLL_ALLGATHER;
    if ((!send && !recv) || w->proto != KERN_PROTO_LL || w->nchannels > KERN_DIRECT_MAX_CTAS ||
        (w->coll != KERN_COLL_ALLGATHER && w->op == KERN_OP_PREMULSUM) ||
        (send && w->sym_send0 == NULL) || (recv && w->sym_recv0 == NULL) || w->sym_stride4g == 0)
      return kern_fail(ncclInvalidArgument,
                       "%s: the Sym kernels run AllReduce, AllGather and ReduceScatter (not "
                       "premulsum) over the direct connections' LL steps on at most %d CTAs, with "
                       "the window copies of the buffers read or written across ranks and their "
                       "stride (coll %d, proto %d, op %d, %d CTAs, stride %u x 4 GiB)",
                       what, KERN_DIRECT_MAX_CTAS, (int)w->coll, (int)w->proto, (int)w->op,
                       (int)w->nchannels, (unsigned)w->sym_stride4g);
  }
  if (w->algo == KERN_ALGO_TREE && w->coll != KERN_COLL_ALLREDUCE)
    return kern_fail(ncclInvalidArgument, "%s: the tree runs AllReduce only (coll %d)", what,
                     (int)w->coll);
  if ((w->algo == KERN_ALGO_ONESHOT || w->algo == KERN_ALGO_TWOSHOT) &&
      (w->proto != KERN_PROTO_LL || w->nchannels > KERN_DIRECT_MAX_CTAS ||
       !kern_direct_runs(w->algo, w->coll)))
    return kern_fail(ncclInvalidArgument,
                     "%s: OneShot runs AllReduce, AllGather and ReduceScatter, TwoShot AllReduce, "
                     "with LL on at most %d CTAs (coll %d, proto %d, %d CTAs)",
                     what, KERN_DIRECT_MAX_CTAS, (int)w->coll, (int)w->proto, (int)w->nchannels);
  if (w->proto < 0 || w->proto >= KERN_PROTO_NUM)
    return kern_fail(ncclInvalidArgument, "%s: proto %d is not a kern_proto_t (0..%d)", what,
                     (int)w->proto, KERN_PROTO_NUM - 1);
  if (w->nthreads % 32 != 0 || w->nthreads < 64 || w->nthreads > KERN_NTHREADS)
    return kern_fail(ncclInvalidArgument, "%s: nthreads %u is not a multiple of 32 in 64..%d",
                     what, (unsigned)w->nthreads, KERN_NTHREADS);
  if (w->channel0 != 0 && w->algo != NCCL_ALGO_RING)
    return kern_fail(ncclInvalidArgument, "%s: channel0 %u with algo %d; only ring works start "
                     "past channel 0", what, (unsigned)w->channel0, (int)w->algo);
  if ((int)w->channel0 + w->nchannels > KERN_MAX_CHANNELS)
    return kern_fail(ncclInvalidArgument, "%s: channels %u..%d run past the %d ring channels",
                     what, (unsigned)w->channel0, (int)w->channel0 + w->nchannels - 1,
                     KERN_MAX_CHANNELS);
  if (kern_coll_reduces(w->coll)) {
    if ((int)w->op < 0 || w->op >= KERN_OP_NUM || kern_type_size((ncclDataType_t)w->type) == 0)
      return kern_fail(ncclInvalidArgument, "%s: op %d / type %d invalid", what, (int)w->op,
                       (int)w->type);
    if (w->op == KERN_OP_AVG && w->divisor < 1)
      return kern_fail(ncclInvalidArgument, "%s: avg needs divisor >= 1", what);
    if (kern_coll_batch_table[w->op][w->type] == NULL)
      return kern_fail(ncclInvalidUsage, "%s kernel for %s/%s not built (kernel_subset=%s)", what,
                       kern_op_names[w->op], kern_type_names[w->type], kern_subset_str);
  } else if (w->type != ncclUint8) {
    return kern_fail(ncclInvalidArgument, "%s: Broadcast/AllGather take bytes (uint8)", what);
  }
  return ncclSuccess;
}

/* A batch (one work or more) that kern_coll_check passed, so its instance is built, to its kernel:
 * the reductions' of its (op, type), or the copy kernel. */
static ncclResult_t kern_coll_batch_start(const kern_coll_batch_t* b, cudaStream_t stream) {
  const kern_coll_work_t* w0 = &b->works[0];
  cudaError_t err;
  if (kern_coll_reduces(w0->coll)) {
    err = kern_coll_batch_table[w0->op][w0->type](b, stream); /* built: kern_coll_check */
  } else {
    err = kern_copy_coll_batch_launch(b, stream);
  }
  if (err != cudaSuccess) {
    if (b->nworks == 1)
      return kern_fail(ncclUnhandledCudaError, "collective %d: launch of %d CTAs failed: %s",
                       (int)w0->coll, (int)w0->nchannels, cudaGetErrorString(err));
    return kern_fail(ncclUnhandledCudaError, "collective batch of %u works: launch failed: %s",
                     b->nworks, cudaGetErrorString(err));
  }
  return ncclSuccess;
}

/* One work is a batch of one: the same kernel, with 112 bytes of parameters (kern_internal.h). */
ncclResult_t kern_coll_launch(const kern_coll_work_t* w, cudaStream_t stream) {
  ncclResult_t res = kern_coll_check(w, "collective");
  if (res != ncclSuccess) return res;
  kern_coll_batch_t b;
  b.tag = KERN_COLL_BATCH_TAG;
  b.nworks = 1;
  b.pad = 0;
  b.works[0] = *w;
  return kern_coll_batch_start(&b, stream);
}

/* What kern_coll_check calls a work of a batch; a failure message then gets its index. */
#define KERN_BATCH_WHAT "collective batch work"

ncclResult_t kern_coll_batch_launch(const kern_coll_batch_t* b, cudaStream_t stream) {
  if (b == NULL) return kern_fail(ncclInvalidArgument, "collective batch: batch is NULL");
  if (b->tag != KERN_COLL_BATCH_TAG)
    return kern_fail(ncclInvalidArgument, "collective batch: tag %#llx is not "
                     "KERN_COLL_BATCH_TAG (%#llx)", (unsigned long long)b->tag,
                     (unsigned long long)KERN_COLL_BATCH_TAG);
  if (b->nworks < 1 || b->nworks > KERN_COLL_BATCH_MAX)
    return kern_fail(ncclInvalidArgument, "collective batch: nworks %u outside 1..%d", b->nworks,
                     KERN_COLL_BATCH_MAX);
  const kern_coll_work_t* w0 = &b->works[0];
  for (uint32_t i = 0; i < b->nworks; i++) {
    const kern_coll_work_t* w = &b->works[i];
    ncclResult_t res = kern_coll_check(w, KERN_BATCH_WHAT);
    if (res != ncclSuccess) { /* the work's index goes into the message only now */
      char rest[sizeof(kern_err_buf)];
      snprintf(rest, sizeof(rest), "%s", kern_err_buf + strlen(KERN_BATCH_WHAT));
      return kern_fail(res, KERN_BATCH_WHAT " %u%s", i, rest);
    }
    if (w->algo == KERN_ALGO_SYM && b->nworks > 1)
      return kern_fail(ncclInvalidArgument, "collective batch work %u: a Sym kernel runs in a "
                       "launch of its own (a batch of %u works)", i, b->nworks);
    if (i == 0) continue;
    /* One kernel runs them all: the same protocol, the same family, and for reductions the same
     * (op, type). The communicator too: the kernel takes each work's, but the connections of
     * two communicators are two rings that one CTA must not serialize. */
    if ((w->algo == KERN_ALGO_TREE) != (w0->algo == KERN_ALGO_TREE))
      return kern_fail(ncclInvalidArgument, "collective batch work %u: algo %d and work 0's %d "
                       "need different kernels (the tree has its own); one batch runs one kernel",
                       i, (int)w->algo, (int)w0->algo);
    if (w->proto != w0->proto)
      return kern_fail(ncclInvalidArgument, "collective batch work %u: proto %s differs from "
                       "work 0's %s; one batch runs one kernel", i, kern_proto_name(w->proto),
                       kern_proto_name(w0->proto));
    if (kern_coll_reduces(w->coll) != kern_coll_reduces(w0->coll))
      return kern_fail(ncclInvalidArgument, "collective batch work %u: coll %d and work 0's %d "
                       "need different kernels (reduction and copy)", i, (int)w->coll,
                       (int)w0->coll);
    if (kern_coll_reduces(w->coll) && (w->op != w0->op || w->type != w0->type))
      return kern_fail(ncclInvalidArgument, "collective batch work %u: %s/%s differs from work "
                       "0's %s/%s; one batch runs one kernel", i, kern_op_names[w->op],
                       kern_type_names[w->type], kern_op_names[w0->op], kern_type_names[w0->type]);
    if (w->comm != w0->comm)
      return kern_fail(ncclInvalidArgument, "collective batch work %u: another communicator "
                       "(comm %p, work 0's %p)", i, (void*)w->comm, (void*)w0->comm);
  }
  /* OneShot AllReduces run as one stream per run of joining works (kern_oneshot_joins): in a
   * batch of two or more, each such work gets its run's length from it on (kernels.h: run), in
   * a copy of the batch made at the first run, and a run's works must share their CTAs (the plan
   * gives them the same: enqueue_plan_spread_oneshot). A batch of one runs in the lone LL
   * kernel, which takes no run. */
  kern_coll_batch_t m;
  int copied = 0;
  for (uint32_t i = 0; i < b->nworks;) {
    uint32_t j = i + 1;
    if (b->nworks > 1 && b->works[i].algo == KERN_ALGO_ONESHOT &&
        b->works[i].coll == KERN_COLL_ALLREDUCE) {
      while (j < b->nworks && kern_oneshot_joins(&b->works[i], &b->works[j])) {
        if (b->works[j].nchannels != b->works[i].nchannels)
          return kern_fail(ncclInvalidArgument, "collective batch work %u: OneShot AllReduce on "
                           "%d CTAs after work %u's %d; the works of one OneShot run share their "
                           "CTAs", j, (int)b->works[j].nchannels, i, (int)b->works[i].nchannels);
        j++;
      }
      if (!copied) memcpy(&m, b, KERN_COLL_BATCH_BYTES(b->nworks));
      copied = 1;
      for (uint32_t k = i; k < j; k++) m.works[k].run = (int32_t)(j - k);
    }
    i = j;
  }
  return kern_coll_batch_start(copied ? &m : b, stream);
}

int kern_coll_available(kern_op_t op, ncclDataType_t type) {
  if ((int)op < 0 || op >= KERN_OP_NUM || (int)type < 0 || type >= ncclNumTypes) return 0;
  return kern_coll_batch_table[op][type] != NULL;
}

ncclResult_t kern_p2p_launch(const kern_p2p_batch_t* b, cudaStream_t stream) {
  if (b == NULL || b->comm == NULL) return kern_fail(ncclInvalidArgument, "p2p: no batch or comm");
  if (b->nops < 1 || b->nops > KERN_P2P_MAX_OPS)
    return kern_fail(ncclInvalidArgument, "p2p: nops %u outside 1..%d", b->nops, KERN_P2P_MAX_OPS);
  if (b->chunk_bytes == 0 || b->chunk_bytes % KERN_RC_VEC_BYTES != 0)
    return kern_fail(ncclInvalidArgument, "p2p: chunk_bytes %u is not a positive multiple of %d",
                     b->chunk_bytes, KERN_RC_VEC_BYTES);
  uint32_t total = 0;
  for (uint32_t k = 0; k < b->nops; k++) {
    if (b->ops[k].nctas < 1 || b->ops[k].nctas > KERN_MAX_P2P_CHANNELS)
      return kern_fail(ncclInvalidArgument, "p2p: op %u has nctas %u outside 1..%d", k,
                       (unsigned)b->ops[k].nctas, KERN_MAX_P2P_CHANNELS);
    total += b->ops[k].nctas;
  }
  if (total != b->nctas)
    return kern_fail(ncclInvalidArgument, "p2p: nctas %u is not the sum of the ops' (%u)",
                     b->nctas, total);
  cudaError_t err = kern_p2p_batch_launch(b, stream);
  if (err != cudaSuccess)
    return kern_fail(ncclUnhandledCudaError, "p2p: launch of %u CTAs failed: %s", b->nctas,
                     cudaGetErrorString(err));
  return ncclSuccess;
}

ncclResult_t kern_preload(void) {
  cudaError_t err = kern_copy_preload();
  for (int op = 0; op < KERN_OP_NUM && err == cudaSuccess; op++)
    for (int t = 0; t < ncclNumTypes && err == cudaSuccess; t++)
      if (kern_coll_batch_table[op][t]) err = kern_coll_batch_table[op][t](NULL, 0);
  if (err != cudaSuccess)
    return kern_fail(ncclUnhandledCudaError, "cannot load the data-path kernels: %s",
                     cudaGetErrorString(err));
  return ncclSuccess;
}
