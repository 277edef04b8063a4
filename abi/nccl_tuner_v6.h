/*
 * Choir: tuner plugin ABI, version 6 (NCCL 2.30 level; unknown to NCCL 2.28, which stops at v5).
 * Frozen: never edit a field, only add new version headers. Layout is pinned by
 * test/abi/plugin_layout.c.
 *
 * v6 is v5 plus an optional getChunkSize entry; the init structs are v5's. The core loads the
 * library once per process and calls init once per communicator; getCollInfo and getChunkSize
 * run on the thread that plans a group of operations for that communicator. Calls for one context
 * are never concurrent; calls for different contexts may be.
 */
#ifndef CHOIR_NCCL_TUNER_V6_H
#define CHOIR_NCCL_TUNER_V6_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"
#include "nccl_tuner_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

typedef struct {
  /* Tuner name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator; same contract as ncclTuner_v5_t.init: nvlDomainInfo is read during
   * the call, constants (fully initialized) may be modified during the call, logFunction stays
   * valid until finalize. May block. Non-success: the communicator runs without this tuner. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  /* Adjusts the core-owned cost table (contiguous float[numAlgo][numProto] passed as float**;
   * estimated microseconds, -1.0 = unusable; lower to prefer, -1.0 to forbid, never revive a
   * -1.0 entry) for one collective of type collType moving nBytes; *nChannels arrives as 0
   * ("keep the core's count"); regBuff is 1 when the user buffers are registered. Must be fast
   * and never block. Return ncclSuccess: NCCL releases differ on whether an error falls back to
   * the core's own choice or fails the operation. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  /* Destroys the context when its communicator is destroyed. */
  ncclResult_t (*finalize)(void* context);
  /* Optional (may be NULL): after algo, proto and nChannels are fixed, *chunkSize holds the
   * core's chunk size and may be changed; the core then clamps it to its buffer limits and rounds
   * it to its granularity. Must be fast and never block. */
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo,
                               int proto, int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

#ifdef __cplusplus
}
#endif

#endif
