/*
 * Choir: payload of NetPlugin profiler events reported by a socket net plugin, version 1
 * (pluginId = NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER). Pinned by
 * test/abi/plugin_layout.c.
 */
#ifndef CHOIR_NCCL_PROFILER_NET_SOCKET_V1_H
#define CHOIR_NCCL_PROFILER_NET_SOCKET_V1_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_profiler_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_PROFILER_NET_SOCKET_VER 1

/* Values of ncclProfilerNetSockDescr_v1_t.type. */
enum {
  ncclProfileSocket = (1 << 0) /* one transfer on one socket */
};

typedef struct {
  uint8_t type; /* ncclProfileSocket */
  union {
    struct {
      int fd;        /* socket descriptor */
      int op;        /* transfer direction, as the plugin's own send/receive op code */
      size_t length; /* bytes of the transfer */
    } sock;
  };
} ncclProfilerNetSockDescr_v1_t;

#ifdef __cplusplus
}
#endif

#endif
