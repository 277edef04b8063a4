/*
 * Choir: tuner plugin ABI, version 3 (NCCL 2.22 and 2.23 level). Frozen: never edit a field, only
 * add new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * From v3 on the tuner edits a cost table instead of naming an algorithm. The core loads the
 * library once per process and calls init once per communicator; getCollInfo runs on the thread
 * that plans a group of operations for that communicator. Calls for one context are never
 * concurrent; calls for different contexts may be.
 */
#ifndef CHOIR_NCCL_TUNER_V3_H
#define CHOIR_NCCL_TUNER_V3_H

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
   * caps the channels used. Must be fast and never block. Return ncclSuccess: NCCL releases differ
   * on whether an error falls back to the core's own choice or fails the operation. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  /* Destroys the context when its communicator is destroyed. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

#ifdef __cplusplus
}
#endif

#endif
