/*
 * core/plugin private: what the net and collnet adapters share. Not for other modules.
 */
#ifndef CHOIR_PLUGIN_NET_PRIV_H
#define CHOIR_PLUGIN_NET_PRIV_H

#include "plugin_net.h"

struct net {
  plugin_lib_t lib;  /* our reference on the library and the table found */
  uint64_t comm_id;  /* for the collnet init, which comes later */
  int traffic_class; /* handed to v10 at connect, to v11+ at init */
  void* ctx;         /* v11+: the plugin's per-communicator context */
  bool shared_ref;   /* v6..v10: we hold one reference on the library's one-time init */
  int ndev;
  collnet_t* collnet; /* opened on first net_collnet() */
  bool collnet_tried;
};

/*
 * The one-time init of v6..v10 tables (net and collnet alike), counted per table: the table's
 * address identifies the library while any reference keeps it loaded. net_shared_acquire runs
 * `init(arg)` only when nobody holds the table yet; a failed init takes no reference, so the next
 * communicator tries again.
 */
ncclResult_t net_shared_acquire(const void* table,
                                ncclResult_t (*init)(const void* table, void* arg), void* arg);
void net_shared_release(const void* table);

/* The profiler callback given to plugins while the core has none to forward to. */
ncclResult_t net_prof_noop(void** eHandle, int type, void* pHandle, int64_t pluginId,
                           void* extData);
/* What plugins get as their profiler callback: forwards to net_set_prof_hook's function. */
ncclResult_t net_prof_cb(void** eHandle, int type, void* pHandle, int64_t pluginId,
                         void* extData);

/* Fill a v12 properties struct from the version-`version` struct the plugin wrote into `raw`
 * for device `dev`, with the documented defaults for the fields older versions lack. */
ncclResult_t net_props_convert(const char* plugin, int version, int dev, const void* raw,
                               ncclNetProperties_v12_t* out);
/* Large enough for any version's properties struct. */
typedef union {
  ncclNetProperties_v6_t v6;
  ncclNetProperties_v7_t v7;
  ncclNetProperties_v8_t v8;
  ncclNetProperties_v9_t v9;
  ncclNetProperties_v10_t v10;
  ncclNetProperties_v11_t v11;
  ncclNetProperties_v12_t v12;
} net_props_any_t;

/* WARN that `entry` is missing from plugin `name` (NULL entry or absent from its version). */
ncclResult_t net_unsupported(const char* kind, const char* name, int version, const char* entry);

/* A plugin call that failed: one WARN naming the plugin, the entry and the result. */
ncclResult_t net_call_failed(const char* kind, const char* name, const char* entry,
                             ncclResult_t res);

void collnet_close(collnet_t* cn);

#endif
