/*
 * The one place a failed CUDA runtime call becomes an ncclResult_t and a WARN (CUDA_CHECK in
 * base.h). Apart from base_cuda.c so that tests replacing the runtime wrappers keep it.
 */
#include <cuda_runtime_api.h>

#include "base.h"

ncclResult_t cuda_result(int err, const char* call) {
  if (err == (int)cudaSuccess) return ncclSuccess;
  cudaError_t e = (cudaError_t)err;
  WARN("CUDA call %s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
  return ncclUnhandledCudaError;
}
