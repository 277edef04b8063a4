/*
 * The byte-moving kernels, built once whatever kernel_subset keeps: Broadcast and AllGather
 * (the host passes counts in bytes; AllGather also OneShot, kern_direct.cuh), one kernel per
 * protocol for a batch of one work or more, and
 * batches of sends, receives and local copies (Simple). They use the primitives with a
 * plain copy (one source, no operator).
 */
#include "kern_coll.cuh"

namespace kern {

using copy_red = red<KERN_OP_SUM, ncclUint8>;

template <int PROTO>
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_copy_coll_batch_kernel(const __grid_constant__ kern_coll_batch_t b) {
  coll_batch_run<PROTO, copy_red, DIRECT_COPY>(b);
}

/* A lone LL work of the copy kernel (the ring's Broadcast or AllGather, OneShot AllGather): a
 * parameter of one work, as kern_coll_lone_kernel (kern_coll.cuh). */
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_copy_lone_kernel(const __grid_constant__ kern_coll_batch1_t b) {
  const kern_coll_work_t& w = b.works[0];
  if (w.algo == KERN_ALGO_ONESHOT) { /* AllGather (kern_coll_check) */
    prof_mark_start(w.prof);
    direct_allgather(w);
    prof_mark_stop(w.prof);
    return;
  }
  if (blockIdx.x - w.channel0 >= (unsigned)w.nchannels) return;
  const copy_red r(w.scalar_bits, w.scalar_ptr, w.divisor);
  coll_run<KERN_PROTO_LL, DIRECT_COPY>(r, w);
}

/* A Sym AllGather (kern_direct.cuh: on a symmetric window) runs alone, in a kernel of its own. */
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_copy_sym_kernel(const __grid_constant__ kern_coll_batch1_t b) {
  const kern_coll_work_t& w = b.works[0];
  prof_mark_start(w.prof);
  direct_allgather_sym(w);
  prof_mark_stop(w.prof);
}

/* One CTA: part `cta` of op k, over the op's connection `cta` with its peer. */
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_p2p_kernel(const __grid_constant__ kern_p2p_batch_t b) {
  prof_mark_start(b.prof);
  uint32_t cta = blockIdx.x, k = 0;
  while (k + 1 < b.nops && cta >= b.ops[k].nctas) {
    cta -= b.ops[k].nctas;
    k++;
  }
  const kern_p2p_op_t& op = b.ops[k];
  const copy_red r(0, nullptr, 1);
  kern_comm_t* comm = b.comm;
  uint64_t off, cnt;
  kern_split_part(op.bytes, KERN_RC_VEC_BYTES, op.nctas, cta, &off, &cnt);
  const bool send = op.kind == KERN_P2P_SEND, recv = op.kind == KERN_P2P_RECV;
  kern_conn_t* c = nullptr;
  if (send || recv)
    c = (send ? comm->p2p_send : comm->p2p_recv) + (uint64_t)op.peer * KERN_MAX_P2P_CHANNELS + cta;
  /* A local copy is a primitive with no connection: one step over the whole part. */
  prims<KERN_PROTO_SIMPLE, copy_red> p(r, recv ? c : nullptr, send ? c : nullptr,
                                       comm->abort_flag, b.chunk_bytes);
  const uint64_t slice = p.step_elems();
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    if (send)
      p.send((const char*)op.src + off + base, ne);
    else if (recv)
      p.recv((char*)op.dst + off + base, ne);
    else
      p.localCopy((const char*)op.src + off + base, (char*)op.dst + off + base, ne, POST_NONE);
    base += ne;
  }
  p.finish();
  prof_mark_stop(b.prof);
}

template <int PROTO>
cudaError_t copy_coll_batch_launch(const kern_coll_batch_t* b, cudaStream_t stream) {
  unsigned grid, nt;
  coll_batch_dims(b, KERN_NTHREADS, 1, &grid, &nt);
  const void* fn = (const void*)kern_copy_coll_batch_kernel<PROTO>;
  if (b->works[0].algo == KERN_ALGO_SYM) /* alone: kern_launch.c */
    fn = (const void*)kern_copy_sym_kernel;
  else if (coll_batch_lone_ll(b))
    fn = (const void*)kern_copy_lone_kernel;
  return kern_launch_prefix(fn, grid, nt, b, KERN_COLL_BATCH_BYTES(b->nworks), stream);
}

} /* namespace kern */

extern "C" cudaError_t kern_copy_coll_batch_launch(const kern_coll_batch_t* b,
                                                   cudaStream_t stream) {
  switch (b->works[0].proto) {
    case KERN_PROTO_LL: return kern::copy_coll_batch_launch<KERN_PROTO_LL>(b, stream);
    case KERN_PROTO_LL128: return kern::copy_coll_batch_launch<KERN_PROTO_LL128>(b, stream);
    default: return kern::copy_coll_batch_launch<KERN_PROTO_SIMPLE>(b, stream);
  }
}

extern "C" cudaError_t kern_p2p_batch_launch(const kern_p2p_batch_t* b, cudaStream_t stream) {
  return kern_launch_prefix((const void*)kern::kern_p2p_kernel, b->nctas, KERN_NTHREADS, b,
                            KERN_P2P_BATCH_BYTES(b->nops), stream);
}

extern "C" cudaError_t kern_copy_preload(void) {
  const void* fns[] = {(const void*)kern::kern_copy_coll_batch_kernel<KERN_PROTO_LL>,
                       (const void*)kern::kern_copy_coll_batch_kernel<KERN_PROTO_LL128>,
                       (const void*)kern::kern_copy_coll_batch_kernel<KERN_PROTO_SIMPLE>,
                       (const void*)kern::kern_copy_lone_kernel,
                       (const void*)kern::kern_copy_sym_kernel,
                       (const void*)kern::kern_p2p_kernel};
  cudaFuncAttributes attr;
  cudaError_t e = cudaSuccess;
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]) && e == cudaSuccess; i++)
    e = cudaFuncGetAttributes(&attr, fns[i]);
  return e;
}
