/*
 * core/api: the device API's host side that Choir has built so far (api_devapi.c): NCCL 2.28.9's
 * team and requirement structures, with their layouts (programs compiled against NVIDIA's
 * nccl_device.h pass them in), and the exported helpers. The names are NCCL's. Choir ships no
 * nccl_device.h yet (README: missing); until it does, this header is the core's and the tests'.
 */
#ifndef CHOIR_API_DEVAPI_H
#define CHOIR_API_DEVAPI_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* NCCL 2.28.9's nccl_device/core.h and friends: the layouts, pinned below. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;
typedef uint32_t ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
} ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
} ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
} ncclLLA2AHandle_t;
/* GIN contexts per communicator at most (NCCL_GIN_MAX_CONTEXTS of 2.28.9). */
#define API_GIN_MAX_CONTEXTS 4

_Static_assert(sizeof(ncclTeam_t) == 12, "ncclTeam layout (NCCL 2.28.9)");
_Static_assert(sizeof(ncclDevResourceRequirements_t) == 56 &&
                   offsetof(ncclDevResourceRequirements_t, bufferSize) == 8 &&
                   offsetof(ncclDevResourceRequirements_t, bufferAlign) == 16 &&
                   offsetof(ncclDevResourceRequirements_t, outBufferHandle) == 24 &&
                   offsetof(ncclDevResourceRequirements_t, ginSignalCount) == 32 &&
                   offsetof(ncclDevResourceRequirements_t, ginCounterCount) == 36 &&
                   offsetof(ncclDevResourceRequirements_t, outGinSignalStart) == 40 &&
                   offsetof(ncclDevResourceRequirements_t, outGinCounterStart) == 48,
               "ncclDevResourceRequirements layout (NCCL 2.28.9)");
_Static_assert(sizeof(ncclLsaBarrierHandle_t) == 8 && offsetof(ncclLsaBarrierHandle_t, nBarriers) == 4,
               "ncclLsaBarrierHandle layout (NCCL 2.28.9)");
_Static_assert(sizeof(ncclGinBarrierHandle_t) == 8 && offsetof(ncclGinBarrierHandle_t, bufHandle) == 4,
               "ncclGinBarrierHandle layout (NCCL 2.28.9)");
_Static_assert(sizeof(ncclLLA2AHandle_t) == 8 && offsetof(ncclLLA2AHandle_t, nSlots) == 4,
               "ncclLLA2AHandle layout (NCCL 2.28.9)");


/* NCCL's LSA block for nranks ranks whose host hashes are at host_hash, host_hash + stride bytes,
 * ...: ranks of one host in blocks of consecutive world ranks, the same size everywhere: the
 * greatest common divisor of the runs of consecutive ranks that share a host (1 when hosts
 * interleave ranks). */
int api_lsa_block(const uint64_t* host_hash, size_t stride, int nranks);

ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
/* Two of the pnccl twins, for the tests (every one is exported: NCCL_API). */
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);

#endif
