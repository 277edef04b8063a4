/*
 * Choir: tuner plugin ABI, version 5 (NCCL 2.28 and 2.29 level). Frozen: never edit a field, only
 * add new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * v5 init takes the communicator id first and two new structs: the NVLink-domain shape and the
 * core's performance-model constants, which the tuner may overwrite. destroy became finalize.
 * The core loads the library once per process and calls init once per communicator; getCollInfo
 * runs on the thread that plans a group of operations for that communicator. Calls for one
 * context are never concurrent; calls for different contexts may be.
 */
#ifndef CHOIR_NCCL_TUNER_V5_H
#define CHOIR_NCCL_TUNER_V5_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Shape of the communicator's NVLink domains (12 bytes). */
typedef struct {
  int nNvlDomains;          /* number of NVLink domains */
  int minRanksPerNvlDomain; /* ranks in the smallest domain */
  int maxRanksPerNvlDomain; /* ranks in the largest domain */
} ncclNvlDomainInfo_v5_t;

/* Dimensions of ncclTunerConstants_v5_t. */
#define NCCL_NUM_ALGORITHMS_V5 7    /* NCCL_ALGO_TREE .. NCCL_ALGO_PAT */
#define NCCL_NUM_PROTOCOLS_V5 3     /* NCCL_PROTO_LL, LL128, SIMPLE */
#define NCCL_NUM_HW_LINKS_V5 3      /* NVLink, PCI, network */
#define NCCL_NUM_COMPCAPS_V5 4      /* Volta, Ampere, Hopper, Blackwell */
#define NCCL_NUM_TUNING_SCALES_V5 3 /* 1 node, 2 nodes, 4 or more nodes */

/* The core's performance-model constants (1152 bytes). Given to init filled with the core's
 * values; whatever the tuner writes back is used for that communicator. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;

typedef struct {
  /* Tuner name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator: creates the context *ctx passed to the other entries. commId
   * identifies the communicator of nRanks ranks on nNodes nodes. nvlDomainInfo is core-owned and
   * read during the call; constants is core-owned, fully initialized, and may be modified during
   * the call. logFunction stays valid until finalize. May block. Non-success: the communicator
   * runs without this tuner. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  /* Adjusts the cost of running one collective of type collType moving nBytes (numPipeOps
   * operations aggregated together). collCostTable is a core-owned, contiguous
   * float[numAlgo][numProto] passed as float** (cast it back to float (*)[numProto]); entries
   * are estimated microseconds, NCCL_ALGO_PROTO_IGNORE (-1.0) for unusable pairs, and the core
   * picks the cheapest non-negative entry afterwards. Lower an entry to prefer it, set -1.0 to
   * forbid it, never revive a -1.0 entry. *nChannels arrives as 0 ("keep the core's count"); any
   * other value caps the channels used. regBuff is 1 when the user buffers are registered (or
   * will be, under graph capture). Must be fast and never block. Return ncclSuccess: NCCL
   * releases differ on whether an error falls back to the core's own choice or fails the
   * operation. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  /* Destroys the context when its communicator is destroyed. */
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

#ifdef __cplusplus
}
#endif

#endif
