/*
 * The reduce-copy primitive: nsrcs (1..8) sources reduced element-wise with an operator into
 * ndsts (1..2) destinations. kern::rc_run is the device-side building block that collective
 * kernels call on their own ranges; kern_rc_kernel is the standalone grid-wide kernel behind
 * kern_reduce_copy_launch. Semantics: kernels.h.
 *
 * Work distribution: the range is cut into chunks of KERN_RC_UNROLL * 32 packs; one warp owns
 * one chunk at a time (lane l takes packs l, l+32, l+64, l+96, so every load instruction of the
 * warp is one coalesced 512-byte access), and warps stride over chunks across the whole grid.
 * Within a chunk each thread issues its KERN_RC_UNROLL loads of a source before using any, so
 * that 4 x 16 bytes per thread are in flight per source.
 */
#ifndef CHOIR_KERN_REDUCE_COPY_CUH
#define CHOIR_KERN_REDUCE_COPY_CUH

#include "kern_internal.h"
#include "kern_reduce.cuh"

namespace kern {

/* Pointers of one reduce-copy. Every index into these arrays is a compile-time constant once
 * the source/destination loops are unrolled, so they stay in registers (no local memory). */
struct rc_ptrs {
  const char* src[KERN_RC_MAX_SRCS];
  char* dst[KERN_RC_MAX_DSTS];
};

/* Cache-global loads and stores: the data streams through once, and L1 is not coherent with
 * the peers' writes the data path will read through the same code. */
template <typename P>
__device__ __forceinline__ P rc_ld(const P* p) {
  if constexpr (std::is_same_v<P, uint64_t>)
    return (uint64_t)__ldcg((const unsigned long long*)p);
  else
    return __ldcg(p);
}
template <typename P>
__device__ __forceinline__ void rc_st(P* p, P v) {
  if constexpr (std::is_same_v<P, uint64_t>)
    __stcg((unsigned long long*)p, (unsigned long long)v);
  else
    __stcg(p, v);
}

/* One warp-chunk of packs: lane's packs are i0 + u*32, u < KERN_RC_UNROLL. CHECK is set only for
 * the last, partial chunk of a span, where packs at or beyond n are skipped. */
template <bool CHECK, typename P, class R>
__device__ __forceinline__ void rc_chunk(const R& r, const rc_ptrs& p, uint64_t i0, uint64_t n,
                                         int nsrcs, int ndsts, uint32_t preop_mask, bool postop) {
  constexpr int U = R::rc_unroll;
  P acc[U];
  {
    const P* s = (const P*)p.src[0];
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] = (!CHECK || i0 + u * 32 < n) ? rc_ld(s + i0 + u * 32) : P{};
  }
  if (R::has_pre) {
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] = r.pre(acc[u], preop_mask & 1);
  }
#pragma unroll
  for (int k = 1; k < KERN_RC_MAX_SRCS; k++) {
    if (k >= nsrcs) break;
    const P* s = (const P*)p.src[k];
    P t[U];
#pragma unroll
    for (int u = 0; u < U; u++) t[u] = (!CHECK || i0 + u * 32 < n) ? rc_ld(s + i0 + u * 32) : P{};
    if (R::has_pre) {
#pragma unroll
      for (int u = 0; u < U; u++) t[u] = r.pre(t[u], (preop_mask >> k) & 1);
    }
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] = r.reduce(acc[u], t[u]);
  }
  if (R::has_post && postop) {
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] = r.post(acc[u]);
  }
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_DSTS; k++) {
    if (k >= ndsts) break;
    P* d = (P*)p.dst[k];
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (!CHECK || i0 + u * 32 < n) rc_st(d + i0 + u * 32, acc[u]);
    }
  }
}

/* n packs of type P from the start of p, spread over nwarps workers; this thread is lane of
 * worker warp. Vectors: full chunks need no bounds checks, and the one partial chunk goes to
 * the worker whose turn it would be. Single elements (head, tail, or everything when pointers
 * disagree on alignment) always check bounds: one code copy instead of two, for the path that
 * is either tiny or already slow. */
template <typename P, class R>
__device__ __forceinline__ void rc_span(const R& r, const rc_ptrs& p, uint64_t n, int nsrcs,
                                        int ndsts, uint32_t preop_mask, bool postop, uint32_t warp,
                                        uint32_t nwarps, uint32_t lane) {
  constexpr uint64_t per = R::rc_unroll * 32;
  if constexpr (std::is_same_v<P, uint4>) {
    const uint64_t nfull = n / per;
    for (uint64_t c = warp; c < nfull; c += nwarps)
      rc_chunk<false, P>(r, p, c * per + lane, n, nsrcs, ndsts, preop_mask, postop);
    if (nfull * per < n && warp == nfull % nwarps)
      rc_chunk<true, P>(r, p, nfull * per + lane, n, nsrcs, ndsts, preop_mask, postop);
  } else {
    for (uint64_t c = warp; c * per < n; c += nwarps)
      rc_chunk<true, P>(r, p, c * per + lane, n, nsrcs, ndsts, preop_mask, postop);
  }
}

__device__ __forceinline__ rc_ptrs rc_advance(const rc_ptrs& p, uint64_t bytes) {
  rc_ptrs q;
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_SRCS; k++) q.src[k] = p.src[k] + bytes;
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_DSTS; k++) q.dst[k] = p.dst[k] + bytes;
  return q;
}

/*
 * Reduce-copy count elements over nwarps cooperating warps (any subset of the grid: a collective
 * kernel passes its own). Preconditions: 1 <= nsrcs <= 8, 1 <= ndsts <= 2, every used pointer
 * aligned to the element size, warp < nwarps, and all threads of a warp call it together.
 * When every pointer has the same address modulo 16, elements up to the first 16-byte boundary
 * (head) and after the last (tail) go element by element and the rest as 16-byte vectors;
 * otherwise everything goes element by element.
 */
template <class R>
__device__ __forceinline__ void rc_run(const R& r, const rc_ptrs& p, uint64_t count, int nsrcs,
                                       int ndsts, uint32_t preop_mask, bool postop, uint32_t warp,
                                       uint32_t nwarps, uint32_t lane) {
  using B = typename R::B;
  constexpr uint64_t epv = KERN_RC_VEC_BYTES / sizeof(B);
  const uintptr_t a0 = (uintptr_t)p.src[0];
  uintptr_t diff = 0;
#pragma unroll
  for (int k = 1; k < KERN_RC_MAX_SRCS; k++) diff |= k < nsrcs ? (uintptr_t)p.src[k] ^ a0 : 0;
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_DSTS; k++) diff |= k < ndsts ? (uintptr_t)p.dst[k] ^ a0 : 0;

  /* Vector range [head, tail_at); empty when the pointers disagree modulo 16. */
  uint64_t head = count, tail_at = count;
  if (diff % KERN_RC_VEC_BYTES == 0) {
    head = ((KERN_RC_VEC_BYTES - a0 % KERN_RC_VEC_BYTES) % KERN_RC_VEC_BYTES) / sizeof(B);
    if (head > count) head = count;
    const uint64_t nvec = (count - head) / epv;
    tail_at = head + nvec * epv;
    if (nvec)
      rc_span<uint4>(r, rc_advance(p, head * sizeof(B)), nvec, nsrcs, ndsts, preop_mask, postop,
                     warp, nwarps, lane);
  }
  /* Elements [0, head) and [tail_at, count), in one loop so that the element code is inlined
   * once. The tail goes to the last worker, so that it does not queue behind the head. */
#pragma unroll 1
  for (int part = 0; part < 2; part++) {
    const uint64_t at = part == 0 ? 0 : tail_at;
    const uint64_t n = part == 0 ? head : count - tail_at;
    if (n == 0) continue;
    rc_span<B>(r, rc_advance(p, at * sizeof(B)), n, nsrcs, ndsts, preop_mask, postop,
               part == 0 ? warp : nwarps - 1 - warp, nwarps, lane);
  }
}

/* The standalone kernel: the whole grid is one team of workers. The arguments stay in the
 * kernel parameter space (__grid_constant__), read with constant indices.
 * Launch bounds ask for one resident CTA per SM on purpose: without the minimum, ptxas aims at
 * 64 registers (two CTAs) and for some instances and flag sets buys that with spills; with it,
 * every instance fits in registers (62..107). One CTA of 16 warps, each with 4 x 16 bytes in
 * flight per source, already saturates HBM: on an H200 the measured bandwidth was the same or
 * up to 10% better than with the 64-register build (test-kern-reduce-copy --sweep). */
template <int OP, int TYPE>
__global__ void __launch_bounds__(KERN_RC_NTHREADS, 1)
    kern_rc_kernel(const __grid_constant__ kern_reduce_copy_args_t a) {
  const red<OP, TYPE> r(a.scalar_bits, a.scalar_ptr, a.divisor);
  rc_ptrs p;
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_SRCS; k++) p.src[k] = (const char*)a.srcs[k];
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_DSTS; k++) p.dst[k] = (char*)a.dsts[k];
  const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const uint32_t nwarps = gridDim.x * blockDim.x / 32;
  rc_run(r, p, a.count, a.nsrcs, a.ndsts, a.preop_mask, a.postop != 0, warp, nwarps,
         threadIdx.x % 32);
}

template <int OP, int TYPE>
cudaError_t rc_launch(const kern_reduce_copy_args_t* a, unsigned nctas, cudaStream_t stream) {
  void* params[] = {(void*)a};
  return cudaLaunchKernel((const void*)kern_rc_kernel<OP, TYPE>, dim3(nctas),
                          dim3(KERN_RC_NTHREADS), params, 0, stream);
}

} /* namespace kern */

/* One instance, as listed by instances.py: defines the C launcher kern_rc_launch_<op>_<type>. */
#define KERN_RC_INSTANCE(opname, tyname, OPE, TYE)                                                 \
  extern "C" kern_rc_launch_fn kern_rc_launch_##opname##_##tyname;                                 \
  extern "C" cudaError_t kern_rc_launch_##opname##_##tyname(const kern_reduce_copy_args_t* a,      \
                                                            unsigned nctas, cudaStream_t stream) { \
    return kern::rc_launch<OPE, TYE>(a, nctas, stream);                                            \
  }

#endif
