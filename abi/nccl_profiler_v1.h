/*
 * Choir: profiler plugin ABI, version 1 (NCCL 2.23 level). Frozen: never edit a field, only add
 * new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * The core loads the library once per process and calls init once per communicator. Events are
 * started, updated and stopped concurrently from any thread that works for the communicator
 * (application threads and proxy threads): the event entries must be thread-safe and must never
 * block. Only init's return value is acted on; the other entries should return ncclSuccess.
 *
 * v1 reports function, datatype, algorithm and protocol as numeric ids. The descriptor's `type`
 * is uint8_t in v1 .. v4 and uint64_t from v5 on.
 */
#ifndef CHOIR_NCCL_PROFILER_V1_H
#define CHOIR_NCCL_PROFILER_V1_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"
#include "nccl_profiler_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the core tells startEvent about a new event (core-owned, read during the call). */
typedef struct {
  uint8_t type;    /* one ncclProfile* bit */
  void* parentObj; /* handle of the parent event (for Coll and P2p: the Group), or NULL */
  int rank;        /* rank that produced the event */
  union {
    struct {
      const char* name;   /* communicator name */
      uint64_t commHash;  /* communicator id */
      uint64_t seqNumber; /* per-communicator collective sequence number */
      uint8_t func;       /* ncclFunc_t */
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype; /* ncclDataType_t */
      uint32_t op;      /* ncclRedOp_t */
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;  /* NCCL_ALGO_* */
      uint8_t proto; /* NCCL_PROTO_* */
      int isCollnet;
      int isNvls;
    } coll;

    struct {
      const char* name;  /* communicator name */
      uint64_t commHash; /* communicator id */
      uint8_t func;      /* ncclFunc_t */
      void* buff;
      uint8_t datatype; /* ncclDataType_t */
      size_t count;
      int peer;
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
  };
} ncclProfilerEventDescr_v1_t;

/* Data attached to a state change (core-owned, read during the call). */
typedef union {
  struct {
    size_t transSize; /* bytes transferred */
    int steps;        /* step count */
  } proxyOp;

  struct {
    int appendedProxyOps; /* number of proxy ops appended */
  } proxyCtrl;
} ncclProfilerEventStateArgs_v1_t;

typedef struct {
  /* Profiler name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator: creates the context *context for the other entries and sets
   * *eActivationMask, a core-owned process-wide int of ncclProfile* bits selecting the events to
   * report; the plugin may change it at any time afterwards. May block. Non-success: the
   * communicator runs without this profiler. */
  ncclResult_t (*init)(void** context, int* eActivationMask);
  /* Starts an event described by eDescr (core-owned, read during the call: copy what must
   * outlive it) and writes an opaque handle to *eHandle; NULL means "not tracked", and the core
   * makes no further calls for that event. Thread-safe; never blocks. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v1_t* eDescr);
  /* Ends an event; the handle is not used again. For Coll and P2p events this marks the end of
   * enqueueing, not of the transfer. Thread-safe; never blocks. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* Records that a running event entered eState; eStateArgs (core-owned, read during the call)
   * carries the data of that state and may be NULL. Thread-safe; never blocks. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v1_t eState,
                                   ncclProfilerEventStateArgs_v1_t* eStateArgs);
  /* Destroys the context when its communicator is destroyed, after its last event. */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v1_t;

#ifdef __cplusplus
}
#endif

#endif
