/*
 * Net plugin properties for older ABI versions, from the newest (v12) that a plugin fills: the
 * fields each version has, copied; the rest zero. Header-only, for Choir's net plugins (each
 * includes abi/ headers only and links nothing of the core).
 */
#ifndef CHOIR_COMMON_NET_PROPS_H
#define CHOIR_COMMON_NET_PROPS_H

#include <string.h>

#include "nccl_net.h"

/* Fields every version from v8 on has. */
#define NET_PROPS_COMMON_(p, q)                   \
  do {                                            \
    (p)->name = (q)->name;                        \
    (p)->pciPath = (q)->pciPath;                  \
    (p)->guid = (q)->guid;                        \
    (p)->ptrSupport = (q)->ptrSupport;            \
    (p)->regIsGlobal = (q)->regIsGlobal;          \
    (p)->speed = (q)->speed;                      \
    (p)->port = (q)->port;                        \
    (p)->latency = (q)->latency;                  \
    (p)->maxComms = (q)->maxComms;                \
    (p)->maxRecvs = (q)->maxRecvs;                \
    (p)->netDeviceType = (q)->netDeviceType;      \
    (p)->netDeviceVersion = (q)->netDeviceVersion; \
  } while (0)

/* Fields from v9 on (vProps has 4 entries before v12). */
#define NET_PROPS_V9_(p, q)                    \
  do {                                         \
    (p)->forceFlush = (q)->forceFlush;         \
    (p)->vProps.ndevs = (q)->vProps.ndevs;     \
    (p)->vProps.devs[0] = (q)->vProps.devs[0]; \
    (p)->maxP2pBytes = (q)->maxP2pBytes;       \
    (p)->maxCollBytes = (q)->maxCollBytes;     \
  } while (0)

static inline void net_props_to_v11(const ncclNetProperties_v12_t* q, ncclNetProperties_v11_t* p) {
  memset(p, 0, sizeof(*p));
  NET_PROPS_COMMON_(p, q);
  NET_PROPS_V9_(p, q);
  p->maxMultiRequestSize = q->maxMultiRequestSize;
}

static inline void net_props_to_v10(const ncclNetProperties_v12_t* q, ncclNetProperties_v10_t* p) {
  memset(p, 0, sizeof(*p));
  NET_PROPS_COMMON_(p, q);
  NET_PROPS_V9_(p, q);
}

static inline void net_props_to_v9(const ncclNetProperties_v12_t* q, ncclNetProperties_v9_t* p) {
  memset(p, 0, sizeof(*p));
  NET_PROPS_COMMON_(p, q);
  NET_PROPS_V9_(p, q);
}

static inline void net_props_to_v8(const ncclNetProperties_v12_t* q, ncclNetProperties_v8_t* p) {
  memset(p, 0, sizeof(*p));
  NET_PROPS_COMMON_(p, q);
}

#undef NET_PROPS_COMMON_
#undef NET_PROPS_V9_

#endif
