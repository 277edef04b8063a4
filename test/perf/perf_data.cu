/*
 * Choir perf tools: data kernels. One instance per data type (the type is a template parameter so
 * that the per-element switches of ref.h fold away); grid-stride loops over 64-bit indices, so
 * that 8 GB buffers of 1-byte types are covered.
 */
#include <cuda_runtime.h>

#include "perf_data.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 8192;

unsigned perf_blocks(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return b ? (unsigned)b : 1u;
}

__device__ size_t perf_first_index() { return blockIdx.x * (size_t)blockDim.x + threadIdx.x; }

__device__ size_t perf_stride() { return (size_t)gridDim.x * blockDim.x; }

/* Warp-reduce the counters, one atomic per warp that found something. Every thread of the block
 * must call it (no early exit before). */
__device__ void perf_accumulate(perf_check_out* out, unsigned long long wrong,
                                unsigned long long first) {
  for (int off = 16; off > 0; off >>= 1) {
    wrong += __shfl_down_sync(0xffffffffu, wrong, off);
    unsigned long long f = __shfl_down_sync(0xffffffffu, first, off);
    first = f < first ? f : first;
  }
  if ((threadIdx.x & 31u) == 0 && wrong) {
    atomicAdd(&out->nwrong, wrong);
    atomicMin(&out->first, first);
  }
}

template <int T> __global__ void perf_fill_kernel(void* buf, size_t count, perf_gen g, int rank) {
  for (size_t i = perf_first_index(); i < count; i += perf_stride())
    ref_store(T, buf, i, perf_gen_value(&g, T, rank, i));
}

template <int T>
__global__ void perf_check_kernel(const void* buf, size_t count, perf_gen g, perf_expect x,
                                  perf_check_out* out) {
  unsigned long long wrong = 0, first = ~0ull;
  for (size_t i = perf_first_index(); i < count; i += perf_stride()) {
    if (perf_expect_elem(&g, T, &x, i, ref_load(T, buf, i), nullptr, nullptr)) {
      wrong++;
      if (i < first) first = i;
    }
  }
  perf_accumulate(out, wrong, first);
}

__global__ void perf_guard_kernel(const unsigned char* buf, size_t bytes, unsigned char fill,
                                  perf_check_out* out) {
  unsigned long long wrong = 0, first = ~0ull;
  for (size_t i = perf_first_index(); i < bytes; i += perf_stride()) {
    if (buf[i] != fill) {
      wrong++;
      if (i < first) first = i;
    }
  }
  perf_accumulate(out, wrong, first);
}

template <int T>
cudaError_t perf_fill_t(void* buf, size_t count, const perf_gen* g, int rank, cudaStream_t s) {
  perf_fill_kernel<T><<<perf_blocks(count), kThreads, 0, s>>>(buf, count, *g, rank);
  return cudaGetLastError();
}

template <int T>
cudaError_t perf_check_t(const void* buf, size_t count, const perf_gen* g, const perf_expect* x,
                         perf_check_out* out, cudaStream_t s) {
  perf_check_kernel<T><<<perf_blocks(count), kThreads, 0, s>>>(buf, count, *g, *x, out);
  return cudaGetLastError();
}

} // namespace

#define PERF_DISPATCH(t, fn, ...)                          \
  switch (t) {                                             \
  case REF_INT8: return fn<REF_INT8>(__VA_ARGS__);         \
  case REF_UINT8: return fn<REF_UINT8>(__VA_ARGS__);       \
  case REF_INT32: return fn<REF_INT32>(__VA_ARGS__);       \
  case REF_UINT32: return fn<REF_UINT32>(__VA_ARGS__);     \
  case REF_INT64: return fn<REF_INT64>(__VA_ARGS__);       \
  case REF_UINT64: return fn<REF_UINT64>(__VA_ARGS__);     \
  case REF_FLOAT16: return fn<REF_FLOAT16>(__VA_ARGS__);   \
  case REF_FLOAT32: return fn<REF_FLOAT32>(__VA_ARGS__);   \
  case REF_FLOAT64: return fn<REF_FLOAT64>(__VA_ARGS__);   \
  case REF_BFLOAT16: return fn<REF_BFLOAT16>(__VA_ARGS__); \
  case REF_FP8_E4M3: return fn<REF_FP8_E4M3>(__VA_ARGS__); \
  case REF_FP8_E5M2: return fn<REF_FP8_E5M2>(__VA_ARGS__); \
  default: return cudaErrorInvalidValue;                   \
  }

extern "C" int perf_data_fill(void* buf, size_t count, const struct perf_gen* g, int rank,
                              cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  PERF_DISPATCH(g->type, perf_fill_t, buf, count, g, rank, s)
}

extern "C" int perf_data_check(const void* buf, size_t count, const struct perf_gen* g,
                               const struct perf_expect* x, struct perf_check_out* out,
                               cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  PERF_DISPATCH(g->type, perf_check_t, buf, count, g, x, out, s)
}

extern "C" int perf_data_guard(const void* buf, size_t bytes, unsigned char fill,
                               struct perf_check_out* out, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  perf_guard_kernel<<<perf_blocks(bytes), kThreads, 0, s>>>((const unsigned char*)buf, bytes, fill,
                                                            out);
  return cudaGetLastError();
}
