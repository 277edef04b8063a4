/*
 * The plugin kinds Choir loads, and what makes a table of each version acceptable. Which entries
 * may be NULL is part of each ABI's contract (see the abi/ headers); everything else must be set,
 * and a table that breaks that is rejected at load rather than crashing later.
 */
#include <stddef.h>

#include "nccl_net.h"
#include "nccl_profiler.h"
#include "nccl_tuner.h"
#include "plugin.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- net: v12 slot order; older versions are prefixes of it ---- */
static const char* const net_slots[] = {
    "name",       "init",        "devices",     "getProperties", "listen",      "connect",
    "accept",     "regMr",       "regMrDmaBuf", "deregMr",       "isend",       "irecv",
    "iflush",     "test",        "closeSend",   "closeRecv",     "closeListen", "getDeviceMr",
    "irecvConsumed", "makeVDevice", "finalize", "setNetAttr"};
_Static_assert(sizeof(ncclNet_v12_t) == sizeof(net_slots), "net v12 slot list");
_Static_assert(offsetof(ncclNet_v12_t, setNetAttr) == 21 * sizeof(void*), "net v12 order");
_Static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 19 * sizeof(void*), "net v9 order");
_Static_assert(offsetof(ncclNet_v7_t, irecvConsumed) == 18 * sizeof(void*), "net v7 order");
_Static_assert(offsetof(ncclNet_v6_t, closeListen) == 16 * sizeof(void*), "net v6 order");

/* regMrDmaBuf, getDeviceMr, irecvConsumed, makeVDevice, setNetAttr may be NULL. */
static const int net_optional[] = {8, 17, 18, 19, 21};

static size_t net_table_size(int version) {
  switch (version) {
    case 6: return sizeof(ncclNet_v6_t);
    case 7: return sizeof(ncclNet_v7_t);
    case 8: return sizeof(ncclNet_v8_t);
    case 9: return sizeof(ncclNet_v9_t);
    case 10: return sizeof(ncclNet_v10_t);
    case 11: return sizeof(ncclNet_v11_t);
    default: return sizeof(ncclNet_v12_t);
  }
}

static bool net_validate(const void* table, int version, char* why, size_t why_size) {
  return plugin_check_slots(table, net_table_size(version), net_slots, net_optional,
                            COUNT(net_optional), why, why_size);
}

const plugin_kind_t plugin_kind_net = {
    "net", "NET", "libnccl-net", "ncclNetPlugin_v", {12, 11, 10, 9, 8, 7, 6, 0}, net_validate};

/* ---- collnet: a plugin with zero devices may leave everything after `devices` NULL, so only
 * the entries needed to ask are required here; the rest is checked when devices > 0. ---- */
static bool collnet_validate(const void* table, int version, char* why, size_t why_size) {
  (void)version;
  static const char* const head[] = {"name", "init", "devices"};
  return plugin_check_slots(table, sizeof(head), head, NULL, 0, why, why_size);
}

const plugin_kind_t plugin_kind_collnet = {"collnet",
                                           "COLLNET",
                                           "libnccl-net",
                                           "ncclCollNetPlugin_v",
                                           {12, 11, 10, 9, 8, 7, 6, 0},
                                           collnet_validate};

/* ---- tuner: name, init, getCollInfo, destroy/finalize; v6 adds an optional getChunkSize ---- */
static const char* const tuner_slots[] = {"name", "init", "getCollInfo", "finalize",
                                          "getChunkSize"};
_Static_assert(sizeof(ncclTuner_v6_t) == sizeof(tuner_slots), "tuner v6 slot list");
_Static_assert(sizeof(ncclTuner_v2_t) == 4 * sizeof(void*), "tuner v2 slot count");
static const int tuner_optional[] = {4};

static bool tuner_validate(const void* table, int version, char* why, size_t why_size) {
  size_t size = version >= 6 ? sizeof(ncclTuner_v6_t) : sizeof(ncclTuner_v5_t);
  return plugin_check_slots(table, size, tuner_slots, tuner_optional, COUNT(tuner_optional), why,
                            why_size);
}

const plugin_kind_t plugin_kind_tuner = {
    "tuner", "TUNER", "libnccl-tuner", "ncclTunerPlugin_v", {6, 5, 4, 3, 2, 0}, tuner_validate};

/* ---- profiler: the same six entries in every version, all required ---- */
static const char* const profiler_slots[] = {"name",      "init",
                                             "startEvent", "stopEvent",
                                             "recordEventState", "finalize"};
_Static_assert(sizeof(ncclProfiler_v6_t) == sizeof(profiler_slots), "profiler slot list");
_Static_assert(sizeof(ncclProfiler_v1_t) == sizeof(profiler_slots), "profiler v1 slot list");

static bool profiler_validate(const void* table, int version, char* why, size_t why_size) {
  (void)version;
  return plugin_check_slots(table, sizeof(profiler_slots), profiler_slots, NULL, 0, why,
                            why_size);
}

const plugin_kind_t plugin_kind_profiler = {"profiler",
                                            "PROFILER",
                                            "libnccl-profiler",
                                            "ncclProfiler_v",
                                            {6, 5, 4, 3, 2, 1, 0},
                                            profiler_validate};
