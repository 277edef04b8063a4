/*
 * The device API's host helpers that NVIDIA's NCCL 2.28 exports beside ncclDevCommCreate: teams
 * (world, LSA, rail) and the resource requirements of the LSA barrier, the GIN barrier and the
 * LL all-to-all. Programs compiled against NVIDIA's nccl_device.h call them; the structures they
 * fill are NCCL 2.28.9's, so their layouts are pinned below. Choir does not build device
 * communicators yet (ncclDevCommCreate refuses): these helpers only compute, as NCCL's do.
 *
 * Teams: a team is {nRanks, rank, stride}: ranks rank0 + i * stride of the world. The LSA team
 * (load/store accessible) is NCCL's: ranks of one host, in blocks of consecutive world ranks, the
 * same size everywhere (the greatest common divisor of the runs of consecutive ranks on one
 * host); the rail team is the ranks at the same place of every LSA block.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api_devapi.h"
#include "comm.h"

/* A team of nothing: what the team helpers return for a communicator that is not usable (NCCL
 * would crash); the WARN says why. */
static const ncclTeam_t api_team_none = {0, 0, 0};

static int api_gcd(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int api_lsa_block(const uint64_t* host_hash, size_t stride, int nranks) {
  int size = 0, run = 1;
  const char* at = (const char*)host_hash;
  for (int r = 1; r < nranks; r++) {
    if (*(const uint64_t*)(at + (size_t)r * stride) ==
        *(const uint64_t*)(at + (size_t)(r - 1) * stride)) {
      run++;
    } else {
      size = api_gcd(size, run);
      run = 1;
    }
  }
  return api_gcd(size, run);
}

static int api_lsa_size(ncclComm_t comm) {
  return api_lsa_block(&comm->peers[0].host_hash, sizeof(comm->peers[0]), comm->nranks);
}

/* The communicator is created and has its peers; else a WARN naming func. */
static bool api_team_comm_ok(const char* func, ncclComm_t comm) {
  if (comm_check_ready(func, comm) != ncclSuccess) return false;
  if (comm->peers == NULL || comm->nranks < 1) {
    WARN("%s: communicator %p has no rank table yet (its creation has not finished)", func,
         (void*)comm);
    return false;
  }
  return true;
}

NCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm) {
  if (!api_team_comm_ok("ncclTeamWorld", comm)) return api_team_none;
  return (ncclTeam_t){comm->nranks, comm->rank, 1};
}

NCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm) {
  if (!api_team_comm_ok("ncclTeamLsa", comm)) return api_team_none;
  const int lsa = api_lsa_size(comm);
  return (ncclTeam_t){lsa, comm->rank % lsa, 1};
}

NCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm) {
  if (!api_team_comm_ok("ncclTeamRail", comm)) return api_team_none;
  const int lsa = api_lsa_size(comm);
  return (ncclTeam_t){comm->nranks / lsa, comm->rank / lsa, lsa};
}

/* Rank `rank` of team, as a world rank (NCCL's arithmetic: no range check, as in NCCL; -1 for an
 * unusable communicator). */
NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!api_team_comm_ok("ncclTeamRankToWorld", comm)) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}

/* The same as a rank of this rank's LSA team. */
NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!api_team_comm_ok("ncclTeamRankToLsa", comm)) return -1;
  return comm->rank % api_lsa_size(comm) + (rank - team.rank) * team.stride;
}

/* Requirements: what a device communicator must hold for the object (NCCL 2.28.9's sizes), and
 * where ncclDevCommCreate would write the handles. */
static ncclResult_t api_req_args(const char* func, const void* outHandle, const void* outReq,
                                 int n, const char* nname) {
  API_CHECK_PTR(func, outHandle);
  API_CHECK_PTR(func, outReq);
  if (n < 0) {
    WARN("%s: %s is %d; pass a count of 0 or more", func, nname, n);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
         ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  CHECK(api_req_args("ncclLsaBarrierCreateRequirement", outHandle, outReq, nBarriers,
                     "nBarriers"));
  if (team.nRanks < 1) {
    WARN("ncclLsaBarrierCreateRequirement: the team has %d ranks; pass a team from ncclTeamLsa "
         "or ncclTeamWorld", team.nRanks);
    return ncclInvalidArgument;
  }
  memset(outReq, 0, sizeof(*outReq));
  outHandle->nBarriers = nBarriers;
  /* Per barrier three words of state and one inbox word per team rank. */
  outReq->bufferSize = (size_t)(3 * nBarriers + nBarriers * team.nRanks) * sizeof(uint32_t);
  outReq->bufferAlign = sizeof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team,
         int nBarriers, ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  (void)team;
  CHECK(comm_check_ready("ncclGinBarrierCreateRequirement", comm));
  CHECK(api_req_args("ncclGinBarrierCreateRequirement", outHandle, outReq, nBarriers,
                     "nBarriers"));
  memset(outReq, 0, sizeof(*outReq));
  /* An epoch word per barrier and GIN context, and a signal per barrier. */
  outReq->bufferSize = (size_t)nBarriers * API_GIN_MAX_CONTEXTS * sizeof(uint32_t);
  outReq->bufferAlign = sizeof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  outReq->ginSignalCount = nBarriers;
  outReq->outGinSignalStart = &outHandle->signal0;
  return ncclSuccess;
}

/* Slots for maxElts elements of up to maxEltSize bytes: 8 data bytes per slot. */
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  if (maxElts < 0 || maxEltSize < 0) {
    WARN("ncclLLA2ACalcSlots: maxElts %d and maxEltSize %d must not be negative", maxElts,
         maxEltSize);
    return 0;
  }
  return maxElts * ((maxEltSize + 7) / 8);
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots,
         ncclLLA2AHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  CHECK(api_req_args("ncclLLA2ACreateRequirement", outHandle, outReq, nBlocks, "nBlocks"));
  if (nSlots < 0) {
    WARN("ncclLLA2ACreateRequirement: nSlots is %d; pass ncclLLA2ACalcSlots' count", nSlots);
    return ncclInvalidArgument;
  }
  outHandle->nSlots = (uint32_t)nSlots;
  memset(outReq, 0, sizeof(*outReq));
  /* Per block a 16-byte header and two sets of nSlots 16-byte lines. */
  outReq->bufferSize = (size_t)nBlocks * (1 + 2 * (size_t)nSlots) * 16;
  outReq->bufferAlign = 16;
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}
