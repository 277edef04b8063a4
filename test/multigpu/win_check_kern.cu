/* Device side of win_check.c: see win_check_kern.h. */
#include "nccl_device.h"
#include "win_check_kern.h"

__global__ void wc_lsa_allreduce_kernel(ncclDevComm dc, ncclWindow_t sendwin, size_t sendoff,
                                        float* recv, size_t count) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier,
                                         blockIdx.x};
  /* Every peer's send data is in place before anyone reads it. */
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  const int n = dc.lsaSize;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int p = 0; p < n; p++) sum += ((const float*)ncclGetLsaPointer(sendwin, sendoff, p))[i];
    recv[i] = sum;
  }
  /* Nobody overwrites its send data while a peer may still read it. */
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

extern "C" cudaError_t wc_lsa_allreduce(const struct ncclDevComm* dc, ncclWindow_t sendwin,
                                        size_t sendoff, float* recv, size_t count, int nctas,
                                        cudaStream_t stream) {
  wc_lsa_allreduce_kernel<<<nctas, 256, 0, stream>>>(*dc, sendwin, sendoff, recv, count);
  return cudaGetLastError();
}
