/*
 * Choir: tuner plugin ABI, version 4 (NCCL 2.24 .. 2.27 level). Frozen: never edit a field, only
 * add new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * Like v3, plus the regBuff argument of getCollInfo. The core loads the library once per process
 * and calls init once per communicator; getCollInfo runs on the thread that plans a group of
 * operations for that communicator. Calls for one context are never concurrent; calls for
 * different contexts may be.
 */
#ifndef CHOIR_NCCL_TUNER_V4_H
#define CHOIR_NCCL_TUNER_V4_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  /* Tuner name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator of nRanks ranks on nNodes nodes: creates the context *context passed to
   * the other entries. logFunction stays valid until destroy. May block. Non-success: the
   * communicator runs without this tuner. */
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  /* Adjusts the cost of running one collective of type collType moving nBytes (numPipeOps
   * operations aggregated together). collCostTable is a core-owned, contiguous
   * float[numAlgo][numProto] passed as float** (cast it back to float (*)[numProto]); entries are
   * estimated microseconds, NCCL_ALGO_PROTO_IGNORE (-1.0) for unusable pairs, and the core picks
   * the cheapest non-negative entry afterwards. Lower an entry to prefer it, set -1.0 to forbid it,
   * never revive a -1.0 entry. *nChannels arrives as 0 ("keep the core's count"); any other value
   * caps the channels used. regBuff is 1 when the user buffers are registered (or will be, under
   * graph capture). Must be fast and never block. Return ncclSuccess: NCCL releases differ on
   * whether an error falls back to the core's own choice or fails the operation. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  /* Destroys the context when its communicator is destroyed. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

#ifdef __cplusplus
}
#endif

#endif
