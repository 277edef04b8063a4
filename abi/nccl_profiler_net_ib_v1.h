/*
 * Choir: payload of NetPlugin profiler events reported by an InfiniBand/RoCE net plugin, version 1
 * (pluginId = NCCL_PROFILER_NET_TYPE_IB | NCCL_PROFILER_NET_IB_VER). Pinned by
 * test/abi/plugin_layout.c.
 */
#ifndef CHOIR_NCCL_PROFILER_NET_IB_V1_H
#define CHOIR_NCCL_PROFILER_NET_IB_V1_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_profiler_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_PROFILER_NET_IB_VER 1

/* Values of ncclProfilerNetIbDescr_v1_t.type. */
enum {
  ncclProfileQp = (1 << 0) /* one work request posted on a queue pair */
};

typedef struct {
  uint8_t type; /* ncclProfileQp */
  union {
    struct {
      int device;     /* net device index */
      uint64_t wr_id; /* work request id */
      int opcode;     /* verbs opcode of the work request */
      int qpNum;      /* queue pair number */
      size_t length;  /* bytes moved by the work request */
    } qp;
  };
} ncclProfilerNetIbDescr_v1_t;

#ifdef __cplusplus
}
#endif

#endif
