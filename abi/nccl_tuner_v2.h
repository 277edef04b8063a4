/*
 * Choir: tuner plugin ABI, version 2 (NCCL 2.21 level). Frozen: never edit a field, only add new
 * version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * A v2 tuner picks the algorithm and protocol itself. The core loads the library once per process
 * and calls init once per communicator; getCollInfo runs on the thread that plans a group of
 * operations for that communicator. Calls for one context are never concurrent; calls for
 * different contexts may be.
 */
#ifndef CHOIR_NCCL_TUNER_V2_H
#define CHOIR_NCCL_TUNER_V2_H

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
  /* Chooses how to run one collective of type collType moving nBytes (numPipeOps operations
   * aggregated together). collNetSupport / nvlsSupport say whether those algorithms are usable.
   * Outputs: *algorithm (NCCL_ALGO_*), *protocol (NCCL_PROTO_*) and *nChannels; an output left
   * untouched keeps the core's choice, but algorithm and protocol are set together or not at all.
   * Called on the planning path: must be fast and never block. Return ncclSuccess: NCCL releases
   * differ on whether an error falls back to the core's own choice or fails the operation. */
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  /* Destroys the context when its communicator is destroyed. */
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v2_t;

#ifdef __cplusplus
}
#endif

#endif
