/*
 * Choir: types shared by every plugin ABI (net, collnet, tuner, profiler): the logger the core hands
 * to plugins, its levels and subsystem bits, the collective ids, and the profiler callback that net
 * plugins receive. Names and values are NCCL's. C99, no CUDA dependency.
 */
#ifndef CHOIR_NCCL_COMMON_H
#define CHOIR_NCCL_COMMON_H

#include <stdint.h>

#include "nccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_DESTROY = 0x10000,
  NCCL_ALLOC_HOST = 0x20000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/*
 * Logger handed to every plugin at init. Thread-safe; may be called from any thread at any time
 * between the plugin's init and its finalize. `flags` is a mask of ncclDebugLogSubSys bits, `fmt`
 * a printf format. Messages below the level set by NCCL_DEBUG, or outside NCCL_DEBUG_SUBSYS, are
 * dropped before formatting.
 */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/* Collective ids as the tuner and net attributes see them (2.28 level: Gather is the last). */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11
} ncclFunc_t;

/* Algorithm and protocol ids used by the tuner cost table. */
#define NCCL_NUM_ALGORITHMS 7
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6

#define NCCL_NUM_PROTOCOLS 3
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2

/* Cost-table value meaning "this algorithm/protocol pair is not available". */
#define NCCL_ALGO_PROTO_IGNORE -1.0

/*
 * Callback given to net plugins (v10+) so that they can report their own events to the profiler.
 * type: 0 start (fills *eHandle), 1 stop, 2 update, 3 update-and-stop. pHandle is the opaque handle
 * the core passed to isend/irecv; pluginId identifies the payload layout of extData.
 */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

#ifdef __cplusplus
}
#endif

#endif
