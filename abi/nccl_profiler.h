/*
 * Choir: the profiler plugin ABI, every accepted version (v1 .. v6), the payloads of net-plugin
 * events, and the unversioned names for the newest version. A profiler exports its table under
 * the versioned symbol name (note: no "Plugin" in it), e.g. `const ncclProfiler_v6_t
 * ncclProfiler_v6`. NCCL 2.28 itself accepts v1 .. v5; Choir also accepts v6 (NCCL 2.29+).
 */
#ifndef CHOIR_NCCL_PROFILER_H
#define CHOIR_NCCL_PROFILER_H

#include "nccl_profiler_common.h"
#include "nccl_profiler_net_ib_v1.h"
#include "nccl_profiler_net_socket_v1.h"
#include "nccl_profiler_v1.h"
#include "nccl_profiler_v2.h"
#include "nccl_profiler_v3.h"
#include "nccl_profiler_v4.h"
#include "nccl_profiler_v5.h"
#include "nccl_profiler_v6.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ncclProfiler_v6_t ncclProfiler_t;
typedef ncclProfilerEventDescr_v6_t ncclProfilerEventDescr_t;
typedef ncclProfilerEventStateArgs_v6_t ncclProfilerEventStateArgs_t;

/* Symbol name of the newest table, as a string for dlsym() (NCCL's header defines no such macro;
 * older versions follow the pattern "ncclProfiler_v1" .. "ncclProfiler_v5"). */
#define CHOIR_PROFILER_PLUGIN_SYMBOL_NAME "ncclProfiler_v6"

#ifdef __cplusplus
}
#endif

#endif
