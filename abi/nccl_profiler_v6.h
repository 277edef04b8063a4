/*
 * Choir: profiler plugin ABI, version 6 (NCCL 2.29 and 2.30 level; unknown to NCCL 2.28, which
 * stops at v5). Frozen: never edit a field, only add new version headers. Layout is pinned by
 * test/abi/plugin_layout.c.
 *
 * The core loads the library once per process and calls init once per communicator. Events are
 * started, updated and stopped concurrently from any thread that works for the communicator
 * (application threads and proxy threads): the event entries must be thread-safe and must never
 * block. Only init's return value is acted on; the other entries should return ncclSuccess.
 *
 * v6 is v5 plus the copy-engine events (CeColl, CeSync, CeBatch): the descriptor keeps v5's size
 * and layout for the events both know, and the state args are v5's. Copy-engine events are only
 * started and stopped, never given states through recordEventState. Function, datatype,
 * algorithm and protocol are reported as strings (e.g. "AllReduce", "ncclFloat32", "RING",
 * "SIMPLE"). The descriptor's `type` is uint8_t in v1 .. v4 and uint64_t from v5 on.
 */
#ifndef CHOIR_NCCL_PROFILER_V6_H
#define CHOIR_NCCL_PROFILER_V6_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"
#include "nccl_profiler_common.h"
#include "nccl_profiler_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the core tells startEvent about a new event (core-owned, read during the call). */
typedef struct {
  uint64_t type;   /* one ncclProfile* bit */
  void* parentObj; /* handle of the parent event, or NULL */
  int rank;        /* rank that produced the event */
  union {
    struct {
      bool graphCaptured; /* the group is being captured into a CUDA graph */
      int groupDepth;     /* group nesting depth */
    } groupApi;

    struct {
      const char* func; /* collective name */
      size_t count;
      const char* datatype; /* datatype name */
      int root;
      void* stream; /* cudaStream_t of the call */
      bool graphCaptured;
    } collApi;

    struct {
      const char* func; /* "Send" or "Recv" */
      size_t count;
      const char* datatype; /* datatype name */
      void* stream;         /* cudaStream_t of the call */
      bool graphCaptured;
    } p2pApi;

    struct {
      void* stream; /* cudaStream_t the kernel is launched on */
    } kernelLaunch;

    struct {
      uint64_t seqNumber; /* per-communicator collective sequence number */
      const char* func;   /* collective name */
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype; /* datatype name */
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;  /* algorithm name */
      const char* proto; /* protocol name */
      void* parentGroup; /* the Group event, for plugins that still nest under it as in v4 */
    } coll;

    struct {
      const char* func; /* "Send" or "Recv" */
      void* buff;
      const char* datatype; /* datatype name */
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup; /* the Group event, for plugins that still nest under it as in v4 */
    } p2p;

    struct {
      ncclPid_t pid;     /* process that issued the operation: may differ from the proxy's own,
                            in which case parentObj must not be dereferenced */
      uint8_t channelId; /* channel of the operation */
      int peer;          /* remote rank */
      int nSteps;        /* number of network steps */
      int chunkSize;     /* chunk size of the operation, bytes */
      int isSend;        /* 1 send, 0 receive */
    } proxyOp;

    struct {
      int step; /* step index inside the proxy op */
    } proxyStep;

    struct {
      uint8_t channelId; /* channel whose kernel work this is */
      uint64_t pTimer;   /* GPU global timer when the channel's work started */
    } kernelCh;

    struct {
      int64_t id; /* pluginId given by the net plugin: payload type | payload version */
      void* data; /* payload defined by the net plugin, valid during the call */
    } netPlugin;

    /* Copy-engine events. NCCL documents these fields by name only. */
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;

    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;

    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

/* State args are unchanged from v5. */
typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  /* Profiler name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator: creates the context *context for the other entries and sets
   * *eActivationMask, a core-owned process-wide int of ncclProfile* bits selecting the events to
   * report; the plugin may change it at any time afterwards. commId, commName (may be NULL; read
   * during the call), nNodes, nranks and rank describe the communicator; logfn stays valid until
   * finalize. May block. Non-success: the communicator runs without this profiler. */
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  /* Starts an event described by eDescr (core-owned, read during the call: copy what must
   * outlive it) and writes an opaque handle to *eHandle; NULL means "not tracked", and the core
   * makes no further calls for that event. Thread-safe; never blocks. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  /* Ends an event; the handle is not used again. For Coll and P2p events this marks the end of
   * enqueueing, not of the transfer. Thread-safe; never blocks. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* Records that a running event entered eState; eStateArgs (core-owned, read during the call)
   * carries the data of that state and may be NULL. Thread-safe; never blocks. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  /* Destroys the context when its communicator is destroyed, after its last event. */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

#ifdef __cplusplus
}
#endif

#endif
