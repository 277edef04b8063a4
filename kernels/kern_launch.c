/*
 * Host side of the kernels' C boundary: argument checks, instance lookup in the generated table,
 * grid sizing, and the thread-local error line. C11; the CUDA C++ lives in the instances.
 */
#include <stdarg.h>
#include <stdio.h>

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

ncclResult_t kern_coll_launch(const kern_coll_work_t* w, cudaStream_t stream) {
  if (w == NULL || w->comm == NULL) return kern_fail(ncclInvalidArgument, "collective: no work or comm");
  if (w->coll < 0 || w->coll >= KERN_COLL_NUM)
    return kern_fail(ncclInvalidArgument, "collective: coll %d is not a kern_coll_t", (int)w->coll);
  if (w->nchannels < 1 || w->nchannels > KERN_MAX_CHANNELS)
    return kern_fail(ncclInvalidArgument, "collective: nchannels %d outside 1..%d",
                     (int)w->nchannels, KERN_MAX_CHANNELS);
  if (w->chunk_bytes == 0 || w->chunk_bytes % KERN_RC_VEC_BYTES != 0)
    return kern_fail(ncclInvalidArgument, "collective: chunk_bytes %u is not a positive multiple "
                     "of %d", w->chunk_bytes, KERN_RC_VEC_BYTES);
  if (w->algo != NCCL_ALGO_RING && w->algo != KERN_ALGO_ONESHOT)
    return kern_fail(ncclInvalidArgument,
                     "collective: algo %d is not built (ring, %d, and OneShot, %d)", (int)w->algo,
                     NCCL_ALGO_RING, KERN_ALGO_ONESHOT);
  if (w->algo == KERN_ALGO_ONESHOT &&
      (w->coll != KERN_COLL_ALLREDUCE || w->proto != KERN_PROTO_LL ||
       w->nchannels > KERN_DIRECT_MAX_CTAS))
    return kern_fail(ncclInvalidArgument,
                     "collective: OneShot runs AllReduce with LL on at most %d CTAs (coll %d, "
                     "proto %d, %d CTAs)",
                     KERN_DIRECT_MAX_CTAS, (int)w->coll, (int)w->proto, (int)w->nchannels);
  if (w->proto < 0 || w->proto >= KERN_PROTO_NUM)
    return kern_fail(ncclInvalidArgument, "collective: proto %d is not a kern_proto_t (0..%d)",
                     (int)w->proto, KERN_PROTO_NUM - 1);
  if (w->nthreads % 32 != 0 || w->nthreads < 64 || w->nthreads > KERN_NTHREADS)
    return kern_fail(ncclInvalidArgument,
                     "collective: nthreads %u is not a multiple of 32 in 64..%d", w->nthreads,
                     KERN_NTHREADS);
  const int reduces = w->coll == KERN_COLL_REDUCE || w->coll == KERN_COLL_REDUCESCATTER ||
                      w->coll == KERN_COLL_ALLREDUCE;
  cudaError_t err;
  if (reduces) {
    if ((int)w->op < 0 || w->op >= KERN_OP_NUM || kern_type_size((ncclDataType_t)w->type) == 0)
      return kern_fail(ncclInvalidArgument, "collective: op %d / type %d invalid", (int)w->op,
                       (int)w->type);
    if (w->op == KERN_OP_AVG && w->divisor < 1)
      return kern_fail(ncclInvalidArgument, "collective: avg needs divisor >= 1");
    kern_coll_launch_fn* fn = kern_coll_table[w->op][w->type];
    if (fn == NULL)
      return kern_fail(ncclInvalidUsage, "collective kernel for %s/%s not built (kernel_subset=%s)",
                       kern_op_names[w->op], kern_type_names[w->type], kern_subset_str);
    err = fn(w, stream);
  } else {
    if (w->type != ncclUint8)
      return kern_fail(ncclInvalidArgument, "collective: Broadcast/AllGather take bytes (uint8)");
    err = kern_copy_coll_launch(w, stream);
  }
  if (err != cudaSuccess)
    return kern_fail(ncclUnhandledCudaError, "collective %d: launch of %d CTAs failed: %s",
                     (int)w->coll, (int)w->nchannels, cudaGetErrorString(err));
  return ncclSuccess;
}

int kern_coll_available(kern_op_t op, ncclDataType_t type) {
  if ((int)op < 0 || op >= KERN_OP_NUM || (int)type < 0 || type >= ncclNumTypes) return 0;
  return kern_coll_table[op][type] != NULL;
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
      if (kern_coll_table[op][t]) err = kern_coll_table[op][t](NULL, 0);
  if (err != cudaSuccess)
    return kern_fail(ncclUnhandledCudaError, "cannot load the data-path kernels: %s",
                     cudaGetErrorString(err));
  return ncclSuccess;
}
