/*
 * Choir: the net / collnet plugin ABI, every accepted version (v6 .. v12), plus the unversioned
 * names for the newest one. A plugin that implements one version includes that version's header
 * or this one and exports its table under the versioned symbol name, e.g.
 *   const ncclNet_v12_t ncclNetPlugin_v12 = {...};
 * The collnet table is optional and searched separately (ncclCollNetPlugin_vN).
 *
 * NCCL 2.28 itself accepts v6 .. v11; Choir also accepts v12 (NCCL 2.30).
 */
#ifndef CHOIR_NCCL_NET_H
#define CHOIR_NCCL_NET_H

#include "nccl_net_common.h"
#include "nccl_net_v10.h"
#include "nccl_net_v11.h"
#include "nccl_net_v12.h"
#include "nccl_net_v6.h"
#include "nccl_net_v7.h"
#include "nccl_net_v8.h"
#include "nccl_net_v9.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ncclNet_v12_t ncclNet_t;
typedef ncclCollNet_v12_t ncclCollNet_t;
typedef ncclNetSGE_v12_t ncclNetSGE_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;

/* Fusion limit of the newest version. */
#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12

/* Symbols of the newest tables. As in NCCL these are identifiers, so that a plugin may write
 * `const ncclNet_t NCCL_NET_PLUGIN_SYMBOL = {...};`. */
#define NCCL_NET_PLUGIN_SYMBOL ncclNetPlugin_v12
#define NCCL_COLLNET_PLUGIN_SYMBOL ncclCollNetPlugin_v12

/* The same names as strings, for dlsym(). Older versions follow the same pattern
 * ("ncclNetPlugin_v6" .. "ncclNetPlugin_v11", "ncclCollNetPlugin_v6" .. "ncclCollNetPlugin_v11").
 */
#define CHOIR_NET_PLUGIN_SYMBOL_NAME "ncclNetPlugin_v12"
#define CHOIR_COLLNET_PLUGIN_SYMBOL_NAME "ncclCollNetPlugin_v12"

#ifdef __cplusplus
}
#endif

#endif
