/*
 * Device side of test_memalloc.c: a kernel on the reader's GPU reads an allocation of another
 * GPU through its own mapping (no copy engine, no staging), so that a missing peer mapping
 * faults or reads wrong bytes instead of passing.
 */
#include "test_memalloc_kern.h"

__global__ void ma_count_kernel(const unsigned char* p, size_t n, unsigned char v,
                                unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    mine += p[i] != v;
  if (mine) atomicAdd(bad, mine);
}

extern "C" cudaError_t ma_count_mismatches(int reader, const void* p, size_t n, unsigned char v,
                                           unsigned long long* bad_p) {
  *bad_p = ~0ull;
  cudaError_t e = cudaSetDevice(reader);
  unsigned long long* bad = NULL;
  if (e == cudaSuccess) e = cudaMalloc((void**)&bad, sizeof(*bad));
  if (e == cudaSuccess) e = cudaMemset(bad, 0, sizeof(*bad));
  if (e == cudaSuccess) {
    unsigned blocks = (unsigned)((n + 255) / 256);
    if (blocks > 1024) blocks = 1024;
    if (blocks == 0) blocks = 1;
    ma_count_kernel<<<blocks, 256>>>((const unsigned char*)p, n, v, bad);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(bad_p, bad, sizeof(*bad), cudaMemcpyDeviceToHost);
  if (bad != NULL) cudaFree(bad);
  return e;
}
