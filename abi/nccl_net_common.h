/*
 * Choir: constants and helper types shared by every version of the net / collnet plugin ABI
 * (nccl_net_v6.h ... nccl_net_v12.h). Names, values and layouts are NCCL's; they are interface
 * facts, pinned by test/abi/plugin_layout.c. C99, no CUDA dependency.
 */
#ifndef CHOIR_NCCL_NET_COMMON_H
#define CHOIR_NCCL_NET_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque connection handle: the core hands listen() a zeroed buffer of exactly this
 * many bytes, ships it to the peer through the bootstrap network, and gives it to connect(). */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Largest maxP2pBytes / maxCollBytes the core accepts from a plugin (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1LL * 1024 * 1024 * 1024 * 1024)

/* Transfer-size limits the core assumes for plugins older than v9, which cannot report them:
 * 1 GiB per point-to-point request, 512 MiB per collnet operation. */
#ifndef MAX_NET_SIZE
#define MAX_NET_SIZE (1024LL * 1024 * 1024)
#endif
#ifndef MAX_COLLNET_SIZE
#define MAX_COLLNET_SIZE (512LL * 1024 * 1024)
#endif

/* Bits of ncclNetProperties_vN.ptrSupport, and values of the regMr `type` argument. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Value the core may store in *request before calling irecv (v9+): the data of this receive is
 * validated by the GPU through protocol flags (LL, LL128), so the plugin may report completion
 * early. The plugin still returns a pollable request, or NULL to be called again. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* Multi-request hint bit (introduced with v11, alongside maxMultiRequestSize). */
#define NCCL_NET_MULTI_REQUEST 0x2

/* Memory-registration and signal flags used by the GIN/RMA plugin kinds, not by ncclNet. */
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1)
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

/* Outstanding requests a plugin must accept per send or receive comm (v7+; v6 and older: 8,
 * see NCCL_NET_MAX_REQUESTS_V6). A sender may see this many isends per posted multi-receive slot.
 */
#define NCCL_NET_MAX_REQUESTS 32

/* Net plugin objects one process may hold at once (two are reserved for built-in transports). */
#ifndef NCCL_NET_MAX_PLUGINS
#define NCCL_NET_MAX_PLUGINS 16
#endif

/* Physical devices one virtual NIC may fuse, for the v9, v10 and v11 vProps arrays. */
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4

/* Device-offload (ncclNetProperties_vN.netDeviceType, v7+). */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
/* The one UNPACK device-code version the core's kernels implement; any other value in
 * netDeviceVersion makes an UNPACK device unusable. */
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

typedef enum {
  NCCL_NET_DEVICE_HOST = 0,      /* no offload: the proxy thread drives every transfer */
  NCCL_NET_DEVICE_UNPACK = 1,    /* GPU kernels scatter received data themselves */
  NCCL_NET_DEVICE_GIN_PROXY = 2, /* GPU-initiated networking through a host proxy */
  NCCL_NET_DEVICE_GIN_GDAKI = 3, /* GPU-initiated networking, GPU posts work directly */
  NCCL_NET_DEVICE_GIN_GPI = 4    /* GPU-initiated networking, packet injection (2.30) */
} ncclNetDeviceType;

/*
 * Device-side description of one offloaded connection (identical from v7 to v12). The core
 * allocates it and passes its address to connect()/accept(); the plugin fills it. `handle` points
 * to plugin-owned device-visible state of `size` bytes that stays valid until the comm is closed;
 * `needsProxyProgress` non-zero says the connection still needs host-side progress calls from
 * the core's proxy thread.
 */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;

/*
 * Values of the `type` argument of ncclProfilerCallback_t (nccl_common.h), with which a v10+ net
 * plugin reports its own events: start (the core writes the new event handle to *eHandle), stop,
 * update (attach new extData to a running event), and update followed by stop.
 */
enum {
  ncclProfilerNetEventStart = 0,
  ncclProfilerNetEventStop = 1,
  ncclProfilerNetEventUpdate = 2,
  ncclProfilerNetEventUpdateAndStop = 3
};

#ifdef __cplusplus
}
#endif

#endif
