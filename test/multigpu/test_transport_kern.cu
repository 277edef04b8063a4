/* Device side of test_transport.c (see test_transport_kern.h). */
#include <cuda_runtime.h>

#include "test_transport_kern.h"

namespace {

__global__ void tt_write_kernel(char* dst, size_t bytes, uint32_t seed, uint64_t* counter,
                                uint64_t value) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes; i += stride)
    dst[i] = (char)tt_pattern(seed, i);
  if (counter == nullptr) return;
  /* The counter follows the data, as in the data path: every thread fences its own stores at
   * system scope, the block meets, then one thread publishes. (The launcher uses a single block
   * when there is a counter, so the barrier covers every store.) */
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) *(volatile uint64_t*)counter = value;
}

__global__ void tt_check_kernel(const char* src, size_t bytes, uint32_t seed,
                                const uint64_t* counter, unsigned long long* out) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long wrong = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes; i += stride)
    wrong += (unsigned char)src[i] != tt_pattern(seed, i);
  if (wrong) atomicAdd(&out[0], wrong);
  if (counter != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    out[1] = *(const volatile uint64_t*)counter;
}

}  // namespace

extern "C" cudaError_t tt_write(char* dst, size_t bytes, uint32_t seed, uint64_t* counter,
                                uint64_t value) {
  unsigned blocks = counter != nullptr ? 1u : 64u;
  tt_write_kernel<<<blocks, 512>>>(dst, bytes, seed, counter, value);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

extern "C" cudaError_t tt_check(const char* src, size_t bytes, uint32_t seed,
                                const uint64_t* counter, unsigned long long* wrong_p,
                                uint64_t* counter_p) {
  unsigned long long* out = nullptr;
  cudaError_t e = cudaMalloc(&out, 2 * sizeof(*out));
  if (e != cudaSuccess) return e;
  e = cudaMemset(out, 0, 2 * sizeof(*out));
  if (e == cudaSuccess) {
    tt_check_kernel<<<64, 512>>>(src, bytes, seed, counter, out);
    e = cudaGetLastError();
  }
  unsigned long long host[2] = {0, 0};
  if (e == cudaSuccess) e = cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(out);
  *wrong_p = host[0];
  *counter_p = host[1];
  return e;
}
