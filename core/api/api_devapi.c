/*
 * The device API's host helpers that NVIDIA's NCCL 2.28 exports beside ncclDevCommCreate: teams
 * (world, LSA, rail) and the resource requirements of the LSA barrier, the GIN barrier and the
 * LL all-to-all. Programs compiled against NVIDIA's nccl_device.h call them; the structures they
 * fill are NCCL 2.28.9's (abi/nccl_device.h pins them). Choir does not build device communicators
 * yet: ncclDevCommCreate checks the requirements, refuses what Choir will never serve (GPU-initiated
 * networking, NVLink multicast) naming the field, and says that LSA device communicators are not
 * built yet for the rest. The other helpers only compute, as NCCL's do.
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

static int api_lsa_size(ncclComm_t comm) {
  return sys_lsa_block(&comm->peers[0].host_hash, sizeof(comm->peers[0]), comm->nranks);
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
  outReq->bufferSize = (size_t)nBarriers * NCCL_GIN_MAX_CONTEXTS * sizeof(uint32_t);
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

/* ---- ncclDevCommCreate ------------------------------------------------------------------------ */

/* Requirement lists longer than this are taken for a cycle (a list that points back into itself). */
#define API_REQ_LIST_MAX 65536

/* Why Choir cannot serve reqs (a WARN naming the field and the way out), or ncclSuccess. */
static ncclResult_t api_devcomm_refusal(ncclComm_t comm, const ncclDevCommRequirements_t* r) {
  static const char* const gin =
      "needs GPU-initiated networking (GIN), which Choir does not serve; within one host use "
      "lsaBarrierCount and ncclLsaBarrierSession, and peer pointers (ncclGetLsaPointer)";
  const struct {
    const char* name;
    int value;
  } counts[] = {{"barrierCount", r->barrierCount},
                {"lsaBarrierCount", r->lsaBarrierCount},
                {"railGinBarrierCount", r->railGinBarrierCount},
                {"lsaLLA2ABlockCount", r->lsaLLA2ABlockCount},
                {"lsaLLA2ASlotCount", r->lsaLLA2ASlotCount},
                {"ginContextCount", r->ginContextCount},
                {"ginSignalCount", r->ginSignalCount},
                {"ginCounterCount", r->ginCounterCount}};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    if (counts[i].value < 0) {
      WARN("ncclDevCommCreate: reqs->%s is %d; counts must be 0 or more (zero-initialize the "
           "requirements, then set what the kernels use)",
           counts[i].name, counts[i].value);
      return ncclInvalidArgument;
    }
  }
  if (r->lsaMultimem) {
    WARN("ncclDevCommCreate: reqs->lsaMultimem is set: NVLink multicast (multimem) is not served "
         "by Choir; leave it false and use unicast peer pointers (ncclGetLsaPointer)");
    return ncclInvalidUsage;
  }
  if (r->barrierCount > 0) {
    WARN("ncclDevCommCreate: reqs->barrierCount is %d: a world barrier (ncclBarrierSession over "
         "ncclTeamTagWorld) %s",
         r->barrierCount, gin);
    return ncclInvalidUsage;
  }
  /* The rail team is one rank per LSA block (host). Where this rank is its whole rail team (the
   * communicator is one LSA block), a rail barrier has nobody to wait for: NCCL 2.28 accepts the
   * count there, and PyTorch's symmetric memory asks for 32 whatever the layout. The handle stays
   * zero; ncclGinBarrierSession itself still traps (no GIN context exists). */
  const int rail = comm->nranks / api_lsa_size(comm);
  if (r->railGinBarrierCount > 0 && rail > 1) {
    WARN("ncclDevCommCreate: reqs->railGinBarrierCount is %d and the rail team has %d ranks (one "
         "per host): a barrier between hosts %s",
         r->railGinBarrierCount, rail, gin);
    return ncclInvalidUsage;
  }
  if (r->railGinBarrierCount > 0)
    INFO(NCCL_INIT, "ncclDevCommCreate: rank %d: reqs->railGinBarrierCount %d over a rail team of "
         "this rank alone: nothing to set up (ncclGinBarrierSession is not served)",
         comm->rank, r->railGinBarrierCount);
  if (r->ginSignalCount > 0 || r->ginCounterCount > 0 || r->ginForceEnable) {
    WARN("ncclDevCommCreate: reqs->%s %s",
         r->ginSignalCount > 0    ? "ginSignalCount"
         : r->ginCounterCount > 0 ? "ginCounterCount"
                                  : "ginForceEnable",
         gin);
    return ncclInvalidUsage;
  }
  int i = 0;
  for (const ncclDevResourceRequirements_t* q = r->resourceRequirementsList; q != NULL;
       q = q->next, i++) {
    if (i >= API_REQ_LIST_MAX) {
      WARN("ncclDevCommCreate: reqs->resourceRequirementsList has more than %d entries (a list "
           "whose next pointers loop?)",
           API_REQ_LIST_MAX);
      return ncclInvalidArgument;
    }
    if (q->ginSignalCount != 0 || q->ginCounterCount != 0) {
      WARN("ncclDevCommCreate: reqs->resourceRequirementsList entry %d asks for %d GIN signal(s) "
           "and %d counter(s): it %s",
           i, q->ginSignalCount, q->ginCounterCount, gin);
      return ncclInvalidUsage;
    }
    if (q->bufferAlign != 0 && (q->bufferAlign & (q->bufferAlign - 1)) != 0) {
      WARN("ncclDevCommCreate: reqs->resourceRequirementsList entry %d: bufferAlign %zu is not a "
           "power of two",
           i, q->bufferAlign);
      return ncclInvalidArgument;
    }
  }
  i = 0;
  for (const ncclTeamRequirements_t* t = r->teamRequirementsList; t != NULL; t = t->next, i++) {
    if (i >= API_REQ_LIST_MAX) {
      WARN("ncclDevCommCreate: reqs->teamRequirementsList has more than %d entries (a list whose "
           "next pointers loop?)",
           API_REQ_LIST_MAX);
      return ncclInvalidArgument;
    }
    if (t->multimem) {
      WARN("ncclDevCommCreate: reqs->teamRequirementsList entry %d asks for multimem: NVLink "
           "multicast is not served by Choir",
           i);
      return ncclInvalidUsage;
    }
  }
  if (r->lsaLLA2ABlockCount > 0 || r->lsaLLA2ASlotCount > 0)
    return api_missing("ncclDevCommCreate (reqs->lsaLLA2ABlockCount, lsaLLA2ASlotCount)",
                       "the LL all-to-all session (ncclLLA2ASession)");
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
         ncclDevComm_t* outDevComm) {
  API_CHECK_PTR("ncclDevCommCreate", reqs);
  API_CHECK_PTR("ncclDevCommCreate", outDevComm);
  CHECK(comm_check_usable("ncclDevCommCreate", comm));
  memset(outDevComm, 0, sizeof(*outDevComm));
  CHECK(enqueue_group_fail(api_devcomm_refusal(comm, reqs)));
  return enqueue_group_fail(comm_devcomm_submit(comm, reqs, outDevComm));
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const* devComm) {
  API_CHECK_PTR("ncclDevCommDestroy", devComm);
  CHECK(comm_check_ready("ncclDevCommDestroy", comm));
  return comm_devcomm_destroy(comm, devComm);
}
