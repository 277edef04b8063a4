/* Device side of win_check.c (win_check_kern.cu): a one-shot all-reduce written with
 * nccl_device.h, as applications and nccl-tests' -D 1 write theirs. */
#ifndef CHOIR_WIN_CHECK_KERN_H
#define CHOIR_WIN_CHECK_KERN_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ncclDevComm;

/* recv[i] = the sum over the LSA team of send[i], read from each peer's copy of the send window
 * (sendoff bytes into it) through ncclGetLsaPointer, between two LSA barriers (one per CTA:
 * the device communicator needs at least nctas LSA barriers). Float elements. */
cudaError_t wc_lsa_allreduce(const struct ncclDevComm* dc, ncclWindow_t sendwin, size_t sendoff,
                             float* recv, size_t count, int nctas, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
