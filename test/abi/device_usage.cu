/*
 * Compiles (never runs) kernels that use every part of abi/nccl_device.h the way applications do:
 * nccl-tests 2.19.6's LSA and GIN kernels, PyTorch's peer pointers, cooperative groups, symmetric
 * pointers, barrier sessions. A build that fails here is a header that breaks its users. Built
 * against abi/ only: the marker check fails the build if another nccl_device.h (NVIDIA's, in the
 * CUDA toolkit's include folder) came first.
 */
#include "nccl_device.h"
#if !defined(CHOIR_NCCL_DEVICE)
#error "device_usage.cu did not find Choir's abi/nccl_device.h first on the include path"
#endif

/* An LSA all-reduce in nccl-tests' shape: barrier, sum every peer's slice, barrier. */
template <typename T>
__global__ void lsaAllReduce(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin,
                             size_t recvoff, size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm),
                                         devComm.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  const int nPeers = devComm.lsaSize;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    T sum = T(0);
    for (int peer = 0; peer < nPeers; peer++) sum += ((T*)ncclGetLsaPointer(sendwin, sendoff, peer))[i];
    for (int peer = 0; peer < nPeers; peer++) ((T*)ncclGetLsaPointer(recvwin, recvoff, peer))[i] = sum;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}
template __global__ void lsaAllReduce<float>(ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                                             ncclDevComm);

/* The other constructors, groups and pointer forms. */
__global__ void lsaParts(ncclWindow_t w, ncclDevComm devComm, float* out) {
  ncclCoopWarp warp;
  {
    ncclLsaBarrierSession<ncclCoopWarp> bar{warp, devComm, ncclTeamTagLsa(), 0};
    bar.arrive(warp, cuda::memory_order_release);
    bar.wait(warp, cuda::memory_order_acquire);
  }
  {
    ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagLsa(), devComm, 1};
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, ncclGinFenceLevel::Relaxed);
    bar.lsaBarrier().sync(ncclCoopCta(), cuda::memory_order_seq_cst);
  }
  float* local = (float*)ncclGetLocalPointer(w, 0);
  float* peer = (float*)ncclGetPeerPointer(w, 64, devComm.rank ^ 1);
  float* rail = (float*)ncclGetPeerPointer(w, 0, ncclTeamRail(devComm), 0);
  ncclSymPtr<float> sym(w, 128);
  sym += 4;
  ncclSymPtr<char> bytes = sym;
  out[threadIdx.x] = local[0] + peer[0] + rail[0] + *sym.lsaPtr(0) + *sym.peerPtr(1) +
                     (float)(sym - ncclSymPtr<float>(w, 0)) + (float)(bytes == ncclSymPtr<char>(w, 144));
  out[0] += ncclCoopBcast(warp, out[1], 3);
  out[1] = ncclCoopBcast(ncclCoopCta(), out[2], 0);
  out[2] = ncclCoopBcast(ncclCoopCoalesced(), out[3], 1);
  out[3] = ncclCoopBcast(ncclCoopWarpSpan(0, 2, 0), out[4], 5);
  out[4] = (float)ncclCoopGetLaneMask(ncclCoopTile<8>()) + (float)ncclCoopIsThread(ncclCoopThread()) +
           (float)ncclCoopWithinWarp(ncclCoopCta());
  out[5] = (float)ncclTeamRankToWorld(devComm, ncclTeamLsa(devComm), 0) +
           (float)ncclTeamRankToLsa(devComm, ncclTeamWorld(devComm), devComm.rank);
  out[6] = ncclFindWindow(ncclCoopThread(), devComm, out) == w ? 1.f : 0.f;
  out[7] = *(float*)ncclGetResourceBufferLocalPointer(devComm, 1) +
           *ncclGetResourceBuffer(devComm, 2).lsaPtr(0);
}

/* nccl-tests' GIN all-to-all shape: compiles; Choir's ncclDevCommCreate refuses GIN, so it never
 * runs against a Choir device communicator. */
__global__ void ginAlltoAll(ncclWindow_t sendwin, ncclWindow_t recvwin, size_t size, ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  const uint64_t before = gin.readSignal(blockIdx.x);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  for (int r = threadIdx.x; r < devComm.nRanks; r += blockDim.x)
    gin.put(ncclTeamWorld(devComm), r, recvwin, devComm.rank * size, sendwin, r * size, size,
            ncclGin_SignalInc{blockIdx.x});
  gin.waitSignal(ncclCoopCta(), blockIdx.x, before + devComm.nRanks);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Relaxed);
}
