/*
 * Choir: the tuner plugin ABI, every accepted version (v2 .. v6), plus the unversioned names for
 * the newest one and the indices of the cost-table and model-constant dimensions. A tuner exports
 * its table under the versioned symbol name, e.g. `const ncclTuner_v6_t ncclTunerPlugin_v6`.
 * NCCL 2.28 itself accepts v2 .. v5; Choir also accepts v6 (NCCL 2.30). The algorithm and
 * protocol ids (NCCL_ALGO_*, NCCL_PROTO_*, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS) and
 * NCCL_ALGO_PROTO_IGNORE come from nccl_common.h.
 */
#ifndef CHOIR_NCCL_TUNER_H
#define CHOIR_NCCL_TUNER_H

#include "nccl_common.h"
#include "nccl_tuner_v2.h"
#include "nccl_tuner_v3.h"
#include "nccl_tuner_v4.h"
#include "nccl_tuner_v5.h"
#include "nccl_tuner_v6.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ncclTuner_v6_t ncclTuner_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v6_t ncclNvlDomainInfo_t;

/* Symbol name of the newest table, as a string (NCCL spells it this way). */
#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v6"

/* Cost-table value for "not usable" (same value as NCCL_ALGO_PROTO_IGNORE). */
#define NCCL_TUNING_IGNORE -1.0

/* First index of ncclTunerConstants_t.hwLatencies. */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS NCCL_NUM_HW_LINKS_V5

/* First index of the per-architecture bandwidth tables. */
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS NCCL_NUM_COMPCAPS_V5

/* Second index of the per-architecture bandwidth tables: communicator size in nodes. */
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES NCCL_NUM_TUNING_SCALES_V5

#ifdef __cplusplus
}
#endif

#endif
