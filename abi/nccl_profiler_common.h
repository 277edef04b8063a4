/*
 * Choir: types shared by every version of the profiler plugin ABI (nccl_profiler_v1.h ...
 * nccl_profiler_v6.h): event-type bits, event states, and the identifiers of net-plugin-defined
 * event payloads. Names and values are NCCL's; pinned by test/abi/plugin_layout.c. C99.
 */
#ifndef CHOIR_NCCL_PROFILER_COMMON_H
#define CHOIR_NCCL_PROFILER_COMMON_H

#include <stdint.h>

#include "nccl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Event types: the value of a descriptor's `type`, and the bits of the activation mask a plugin
 * sets at init. Which types a core emits depends on the plugin's version (noted per type).
 */
enum {
  ncclProfileGroup = (1 << 0),         /* group of operations (v1+) */
  ncclProfileColl = (1 << 1),          /* one collective, from enqueue (v1+) */
  ncclProfileP2p = (1 << 2),           /* one send or receive, from enqueue (v1+) */
  ncclProfileProxyOp = (1 << 3),       /* proxy work for one channel and peer (v1+) */
  ncclProfileProxyStep = (1 << 4),     /* one network step of a proxy op (v1+) */
  ncclProfileProxyCtrl = (1 << 5),     /* proxy thread activity (v1+) */
  ncclProfileKernelCh = (1 << 6),      /* one kernel channel's work (v3+) */
  ncclProfileNetPlugin = (1 << 7),     /* event defined by the net plugin (v3+) */
  ncclProfileGroupApi = (1 << 8),      /* ncclGroupStart/End API call (v5+) */
  ncclProfileCollApi = (1 << 9),       /* collective API call (v5+) */
  ncclProfileP2pApi = (1 << 10),       /* send/recv API call (v5+) */
  ncclProfileKernelLaunch = (1 << 11), /* kernel launch (v5+) */
  ncclProfileCeColl = (1 << 12),       /* copy-engine collective (v6) */
  ncclProfileCeSync = (1 << 13),       /* copy-engine synchronization (v6) */
  ncclProfileCeBatch = (1 << 14)       /* copy-engine batch (v6) */
};

/* States passed to recordEventState; one enum, int-sized, for every version. */
typedef enum {
  /* ProxyOp states, no longer emitted for v4+ plugins. */
  ncclProfilerProxyOpSendPosted = 0,
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyOpInProgress_v4 = 19,

  /* ProxyStep states. */
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,

  /* ProxyCtrl states. */
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,

  /* NetPlugin event updated by the net plugin. */
  ncclProfilerNetPluginUpdate = 21,

  /* KernelCh event: the channel's kernel work ended (args carry the GPU stop time). */
  ncclProfilerKernelChStop = 22,

  /* GroupApi event states (v5+). */
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24,

  /* Copy-engine states (v6). */
  ncclProfilerCeCollStart = 25,
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30
} ncclProfilerEventState_t;

typedef ncclProfilerEventState_t ncclProfilerEventState_v1_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v2_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v3_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

/* Process id as carried by ProxyOp descriptors: pid_t on Linux, which is int. Declared here so the
 * ABI headers need no POSIX header. */
typedef int ncclPid_t;

/*
 * NetPlugin events: the pluginId a net plugin passes to the profiler callback, and the core copies
 * into the descriptor's netPlugin.id, is (payload type | payload version). The payload layouts are
 * in nccl_profiler_net_ib_v1.h and nccl_profiler_net_socket_v1.h.
 */
#define NCCL_PROFILER_NET_VER_BITS (16)
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)

typedef enum {
  NCCL_PROFILER_NET_TYPE_IB = (1U << NCCL_PROFILER_NET_VER_BITS),
  NCCL_PROFILER_NET_TYPE_SOCK = (2U << NCCL_PROFILER_NET_VER_BITS)
} ncclProfilerNetType;

#ifdef __cplusplus
}
#endif

#endif
