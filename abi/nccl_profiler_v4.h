/*
 * Choir: profiler plugin ABI, version 4 (NCCL 2.27 level). Frozen: never edit a field, only add
 * new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * The core loads the library once per process and calls init once per communicator. Events are
 * started, updated and stopped concurrently from any thread that works for the communicator
 * (application threads and proxy threads): the event entries must be thread-safe and must never
 * block. Only init's return value is acted on; the other entries should return ncclSuccess.
 *
 * v4 init receives the communicator's identity and a logger; ProxyOp events report only
 * ncclProfilerProxyOpInProgress_v4 (states 0 .. 7 are retired) and the state args follow the new
 * event set. Function, datatype, algorithm and protocol are reported as strings (e.g.
 * "AllReduce", "ncclFloat32", "RING", "SIMPLE"). The descriptor's `type` is uint8_t in v1 .. v4
 * and uint64_t from v5 on.
 */
#ifndef CHOIR_NCCL_PROFILER_V4_H
#define CHOIR_NCCL_PROFILER_V4_H

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
    } coll;

    struct {
      const char* func; /* "Send" or "Recv" */
      void* buff;
      const char* datatype; /* datatype name */
      size_t count;
      int peer;
      uint8_t nChannels;
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
  };
} ncclProfilerEventDescr_v4_t;

/* Data attached to a state change (core-owned, read during the call). */
typedef union {
  struct {
    size_t transSize; /* bytes transferred by the step */
  } proxyStep;

  struct {
    int appendedProxyOps; /* number of proxy ops appended */
  } proxyCtrl;

  struct {
    void* data; /* updated net-plugin payload */
  } netPlugin;

  struct {
    uint64_t pTimer; /* GPU global timer when the channel's work ended */
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  /* Profiler name for logs, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator: creates the context *context for the other entries and sets
   * *eActivationMask, a core-owned process-wide int of ncclProfile* bits selecting the events to
   * report; the plugin may change it at any time afterwards. commName (may be NULL; read during
   * the call), commHash, nNodes, nranks and rank describe the communicator; logfn stays valid
   * until finalize. May block. Non-success: the communicator runs without this profiler. */
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName,
                       uint64_t commHash, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  /* Starts an event described by eDescr (core-owned, read during the call: copy what must
   * outlive it) and writes an opaque handle to *eHandle; NULL means "not tracked", and the core
   * makes no further calls for that event. Thread-safe; never blocks. */
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  /* Ends an event; the handle is not used again. For Coll and P2p events this marks the end of
   * enqueueing, not of the transfer. Thread-safe; never blocks. */
  ncclResult_t (*stopEvent)(void* eHandle);
  /* Records that a running event entered eState; eStateArgs (core-owned, read during the call)
   * carries the data of that state and may be NULL. Thread-safe; never blocks. */
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  /* Destroys the context when its communicator is destroyed, after its last event. */
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

#ifdef __cplusplus
}
#endif

#endif
