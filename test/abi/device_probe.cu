/*
 * Device API probe: built once against Choir's abi/nccl_device.h and once against NVIDIA's NCCL
 * 2.28 device headers (CHOIR_PROBE_REFERENCE, from the CUDA toolkit's include folder). It prints
 * every size and offset of the structures that cross between an application's inlined device code
 * and the library, the constants, and checks the host functions' signatures; compare_probes.py
 * requires the two outputs to be identical.
 *
 * NVIDIA's top-level nccl_device.h pulls in its GPU-initiated-networking backends (DOCA headers);
 * the reference build includes the type headers below it instead, which hold every layout, and
 * the inline team functions.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef CHOIR_PROBE_REFERENCE
#include "nccl_device/impl/comm__types.h"
#include "nccl_device/impl/ptr__types.h"
#include "nccl_device/impl/core__funcs.h"
#ifdef CHOIR_NCCL_DEVICE
#error "the reference probe found Choir's nccl_device.h, not NVIDIA's"
#endif
#else
#include "nccl_device.h"
#if !defined(CHOIR_NCCL_DEVICE)
#error "the probe did not find Choir's abi/nccl_device.h first on the include path"
#endif
#endif

#include "probe.h"

/* Host functions exported by the library, with NCCL 2.28.9's signatures. */
#define SIG(name, ret, ...)               \
  {                                       \
    ret (*fn_)(__VA_ARGS__) = name;       \
    P("function " #name, fn_ != NULL);    \
  }

int main(void) {
#ifdef CHOIR_PROBE_REFERENCE
  printf("header reference\n");
#else
  printf("header choir\n");
#endif
  SIZE(ncclTeam);
  OFF(ncclTeam, nRanks);
  OFF(ncclTeam, rank);
  OFF(ncclTeam, stride);

  SIZE(ncclDevCommRequirements);
  OFF(ncclDevCommRequirements, resourceRequirementsList);
  OFF(ncclDevCommRequirements, teamRequirementsList);
  OFF(ncclDevCommRequirements, lsaMultimem);
  OFF(ncclDevCommRequirements, barrierCount);
  OFF(ncclDevCommRequirements, lsaBarrierCount);
  OFF(ncclDevCommRequirements, railGinBarrierCount);
  OFF(ncclDevCommRequirements, lsaLLA2ABlockCount);
  OFF(ncclDevCommRequirements, lsaLLA2ASlotCount);
  OFF(ncclDevCommRequirements, ginForceEnable);
  OFF(ncclDevCommRequirements, ginContextCount);
  OFF(ncclDevCommRequirements, ginSignalCount);
  OFF(ncclDevCommRequirements, ginCounterCount);

  SIZE(ncclDevResourceRequirements);
  OFF(ncclDevResourceRequirements, next);
  OFF(ncclDevResourceRequirements, bufferSize);
  OFF(ncclDevResourceRequirements, bufferAlign);
  OFF(ncclDevResourceRequirements, outBufferHandle);
  OFF(ncclDevResourceRequirements, ginSignalCount);
  OFF(ncclDevResourceRequirements, ginCounterCount);
  OFF(ncclDevResourceRequirements, outGinSignalStart);
  OFF(ncclDevResourceRequirements, outGinCounterStart);

  SIZE(ncclTeamRequirements);
  OFF(ncclTeamRequirements, next);
  OFF(ncclTeamRequirements, team);
  OFF(ncclTeamRequirements, multimem);
  OFF(ncclTeamRequirements, outMultimemHandle);

  SIZE(ncclWindow_vidmem);
  OFF(ncclWindow_vidmem, winHost);
  OFF(ncclWindow_vidmem, lsaFlatBase);
  OFF(ncclWindow_vidmem, lsaRank);
  OFF(ncclWindow_vidmem, worldRank);
  OFF(ncclWindow_vidmem, stride4G);
  OFF(ncclWindow_vidmem, mcOffset4K);
  OFF(ncclWindow_vidmem, ginOffset4K);
  OFF(ncclWindow_vidmem, ginWins);

  SIZE(ncclMultimemHandle);
  OFF(ncclMultimemHandle, mcBasePtr);
  SIZE(ncclLsaBarrierHandle);
  OFF(ncclLsaBarrierHandle, bufHandle);
  OFF(ncclLsaBarrierHandle, nBarriers);
  SIZE(ncclGinBarrierHandle);
  OFF(ncclGinBarrierHandle, signal0);
  OFF(ncclGinBarrierHandle, bufHandle);
  SIZE(ncclLLA2AHandle);
  OFF(ncclLLA2AHandle, bufHandle);
  OFF(ncclLLA2AHandle, nSlots);

  SIZE(ncclDevCommWindowTable);
  SIZE(ncclDevCommWindowTable::Entry);
  OFF(ncclDevCommWindowTable::Entry, base);
  OFF(ncclDevCommWindowTable::Entry, size);
  OFF(ncclDevCommWindowTable::Entry, window);
  OFF(ncclDevCommWindowTable, entries);
  OFF(ncclDevCommWindowTable, next);

  SIZE(ncclDevComm);
  OFF(ncclDevComm, rank);
  OFF(ncclDevComm, nRanks);
  OFF(ncclDevComm, nRanks_rcp32);
  OFF(ncclDevComm, lsaRank);
  OFF(ncclDevComm, lsaSize);
  OFF(ncclDevComm, lsaSize_rcp32);
  OFF(ncclDevComm, windowTable);
  OFF(ncclDevComm, resourceWindow);
  OFF(ncclDevComm, resourceWindow_inlined);
  OFF(ncclDevComm, lsaMultimem);
  OFF(ncclDevComm, lsaBarrier);
  OFF(ncclDevComm, railGinBarrier);
  OFF(ncclDevComm, ginContextCount);
  OFF(ncclDevComm, ginTypes);
  OFF(ncclDevComm, ginHandles);
  OFF(ncclDevComm, ginSignalBase);
  OFF(ncclDevComm, ginSignalCount);
  OFF(ncclDevComm, ginCounterBase);
  OFF(ncclDevComm, ginCounterCount);
  OFF(ncclDevComm, ginSignalShadows);

  SIZE(ncclDevResourceHandle_t);
  SIZE(ncclGinSignal_t);
  SIZE(ncclGinCounter_t);
  SIZE(ncclGinWindow_t);
  SIZE(ncclSymPtr<char>);
  SIZE(ncclSymPtr<double>);
  OFF(ncclSymPtr<char>, window);
  OFF(ncclSymPtr<char>, offset);
  SIZE(ncclGin_SignalAdd);
  OFF(ncclGin_SignalAdd, value);
  SIZE(ncclGin_SignalInc);
  SIZE(ncclGin_CounterInc);
  SIZE(ncclCoopCta);
  SIZE(ncclCoopWarp);
  SIZE(ncclCoopLanes);
  SIZE(ncclCoopWarpSpan);
  VAL(NCCL_GIN_MAX_CONTEXTS);
  VAL(ncclGinSignalInc);
  VAL(ncclGinSignalAdd);
  P("ncclGetResourceBufferOffset(3)", ncclGetResourceBufferOffset(3));

  /* The team arithmetic is inline in both headers: the same answers on a grid of teams of a
   * 16-rank world seen from world rank 5 (the world, LSA blocks of 4 and 2, rails, a reversed
   * team). */
  const ncclTeam_t teams[] = {{16, 5, 1}, {4, 1, 1}, {2, 1, 1}, {4, 1, 4}, {8, 2, 2},
                              {2, 0, 8}, {4, 2, -1}, {1, 0, 1}};
  const int nteams = (int)(sizeof(teams) / sizeof(teams[0]));
  char key[128];
  for (int a = 0; a < nteams; a++) {
    for (int b = 0; b < nteams; b++) {
      for (int r = 0; r < teams[b].nRanks; r++) {
        const bool member = ncclTeamRankIsMember(teams[a], teams[b], r);
        snprintf(key, sizeof(key), "ncclTeamRankIsMember(t%d,t%d,%d)", a, b, r);
        P(key, member);
        if (!member) continue;
        snprintf(key, sizeof(key), "ncclTeamRankToTeam(t%d,t%d,%d)", a, b, r);
        P(key, ncclTeamRankToTeam(teams[a], teams[b], r));
      }
    }
    for (int inner = 1; inner <= teams[a].nRanks; inner *= 2) {
      if (teams[a].nRanks % inner != 0) continue;
      const ncclTeam_t in = ncclTeamInnerFactor(teams[a], inner);
      const ncclTeam_t out = ncclTeamOuterFactor(teams[a], inner);
      snprintf(key, sizeof(key), "ncclTeamInnerFactor(t%d,%d)", a, inner);
      P(key, (long long)in.nRanks * 1000000 + in.rank * 1000 + in.stride);
      snprintf(key, sizeof(key), "ncclTeamOuterFactor(t%d,%d)", a, inner);
      P(key, (long long)out.nRanks * 1000000 + out.rank * 1000 + out.stride);
    }
  }
  /* Differences between the world and its subsets (LSA block, rail, every other rank). */
  const int subsets[] = {1, 2, 3, 4, 5};
  for (int i = 0; i < (int)(sizeof(subsets) / sizeof(subsets[0])); i++) {
    const ncclTeam_t sub = teams[subsets[i]];
    for (int index = 0; index < teams[0].nRanks - sub.nRanks; index++) {
      snprintf(key, sizeof(key), "ncclTeamRankInDifference(t0,t%d,%d)", subsets[i], index);
      P(key, ncclTeamRankInDifference(teams[0], sub, index));
    }
  }

  SIG(ncclDevCommCreate, ncclResult_t, ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*);
  SIG(ncclDevCommDestroy, ncclResult_t, ncclComm_t, ncclDevComm_t const*);
  SIG(ncclTeamWorld, ncclTeam_t, ncclComm_t);
  SIG(ncclTeamLsa, ncclTeam_t, ncclComm_t);
  SIG(ncclTeamRail, ncclTeam_t, ncclComm_t);
  SIG(ncclTeamRankToWorld, int, ncclComm_t, ncclTeam_t, int);
  SIG(ncclTeamRankToLsa, int, ncclComm_t, ncclTeam_t, int);
  SIG(ncclLsaBarrierCreateRequirement, ncclResult_t, ncclTeam_t, int, ncclLsaBarrierHandle_t*,
      ncclDevResourceRequirements_t*);
  SIG(ncclGinBarrierCreateRequirement, ncclResult_t, ncclComm_t, ncclTeam_t, int,
      ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*);
  SIG(ncclLLA2ACalcSlots, int, int, int);
  SIG(ncclLLA2ACreateRequirement, ncclResult_t, int, int, ncclLLA2AHandle_t*,
      ncclDevResourceRequirements_t*);
  return 0;
}
