/*
 * The CUDA runtime calls of the data path's device setup, one-rank operations and teardown,
 * emulated for CPU tests that also link fake_cuda.c (emulated devices): defined in the test
 * program, they take the place of libcudart's for the core's libraries linked into it. Device
 * memory is host memory; nothing runs: copies between user buffers and kernel launches are only
 * counted (fake_cudart_copies, fake_cudart_launches), since the buffers a test passes need not
 * be real.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

int fake_cudart_copies;
int fake_cudart_launches;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  (void)flags;
  *s = (cudaStream_t)malloc(1);
  return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  free(s);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  (void)flags;
  *e = (cudaEvent_t)malloc(1);
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  free(e);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  (void)flags;
  *p = calloc(1, size);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned int flags) {
  (void)flags;
  *d = h;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t size) {
  *p = calloc(1, size);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  (void)s;
  memset(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s) {
  (void)s;
  if (k == cudaMemcpyDeviceToDevice) /* between the user's buffers: counted, not touched */
    fake_cudart_copies++;
  else
    memcpy(d, src, n);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* a, const void* f) {
  (void)f;
  memset(a, 0, sizeof(*a));
  return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* m) {
  (void)m;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int d) {
  (void)a, (void)d;
  *v = 132;
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t sh,
                             cudaStream_t s) {
  (void)f, (void)g, (void)b, (void)args, (void)sh, (void)s;
  fake_cudart_launches++;
  return cudaSuccess;
}
