/*
 * The byte-moving kernels, built once whatever kernel_subset keeps: Broadcast and AllGather
 * (the host passes counts in bytes) and batches of sends, receives and local copies. They use
 * the ring and connection code of kern_coll.cuh with a plain copy (one source, no operator).
 */
#include "kern_coll.cuh"

namespace kern {

using copy_red = red<KERN_OP_SUM, ncclUint8>;

__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_copy_coll_kernel(const __grid_constant__ kern_coll_work_t w) {
  const copy_red r(0, nullptr, 1);
  coll_run(r, w);
}

/* One CTA: part `cta` of op k, over the op's connection `cta` with its peer. */
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_p2p_kernel(const __grid_constant__ kern_p2p_batch_t b) {
  uint32_t cta = blockIdx.x, k = 0;
  while (k + 1 < b.nops && cta >= b.ops[k].nctas) {
    cta -= b.ops[k].nctas;
    k++;
  }
  const kern_p2p_op_t& op = b.ops[k];
  const copy_red r(0, nullptr, 1);
  kern_comm_t* comm = b.comm;
  uint64_t off, cnt;
  split_part(op.bytes, KERN_RC_VEC_BYTES, op.nctas, cta, &off, &cnt);
  __shared__ conn_io io;
  if (threadIdx.x == 0) {
    io.abort_flag = comm->abort_flag;
    io.rstep = io.sstep = 0;
  }
  __syncthreads();
  if (op.kind == KERN_P2P_COPY) {
    io_step(r, io, false, false, (const char*)op.src + off, (char*)op.dst + off, cnt, false,
            false);
    return;
  }
  const bool send = op.kind == KERN_P2P_SEND;
  kern_conn_t* c =
      (send ? comm->p2p_send : comm->p2p_recv) + (uint64_t)op.peer * KERN_MAX_P2P_CHANNELS + cta;
  if (threadIdx.x == 0) {
    if (send)
      io_load_send(io, c);
    else
      io_load_recv(io, c);
  }
  __syncthreads();
  /* Slices fill one slot at most: the connection's slot size, or less if the batch says so. */
  const uint64_t slice = b.chunk_bytes < (send ? io.sslot : io.rslot) ? b.chunk_bytes
                                                                       : (send ? io.sslot : io.rslot);
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    bool ok = send ? io_step(r, io, false, true, (const char*)op.src + off + base, nullptr, ne,
                             false, false)
                   : io_step(r, io, true, false, nullptr, (char*)op.dst + off + base, ne, false,
                             false);
    if (!ok) break;
    base += ne;
  }
  if (threadIdx.x == 0) c->step = send ? io.sstep : io.rstep;
}

} /* namespace kern */

extern "C" cudaError_t kern_copy_coll_launch(const kern_coll_work_t* w, cudaStream_t stream) {
  void* params[] = {(void*)w};
  return cudaLaunchKernel((const void*)kern::kern_copy_coll_kernel, dim3(w->nchannels),
                          dim3(KERN_NTHREADS), params, 0, stream);
}

extern "C" cudaError_t kern_p2p_batch_launch(const kern_p2p_batch_t* b, cudaStream_t stream) {
  void* params[] = {(void*)b};
  return cudaLaunchKernel((const void*)kern::kern_p2p_kernel, dim3(b->nctas), dim3(KERN_NTHREADS),
                          params, 0, stream);
}

extern "C" cudaError_t kern_copy_preload(void) {
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, (const void*)kern::kern_copy_coll_kernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, (const void*)kern::kern_p2p_kernel);
  return e;
}
