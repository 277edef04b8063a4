/*
 * core/prof: the profiler plugin in the core.
 *
 * The library is found through core/plugin (NCCL_PROFILER_PLUGIN; unset: libnccl-profiler.so,
 * silently absent; "none" disables) and opened once per process; each communicator calls the
 * plugin's init and gets its own context (prof_t), or none when init fails (a WARN, and the
 * communicator runs without it, as in NCCL). The activation mask is one process-wide int that
 * the plugin writes in init and may change at any time; the core reads no variable of its own
 * for it. Every instrumentation point asks prof_on() first, so nothing is built or called for
 * an event type the mask leaves out, or when no profiler is loaded.
 *
 * Events are described here in the newest layout (v6, whose descriptor and state arguments are
 * v5's plus copy-engine members); prof.c writes each version's own descriptor, and drops what a
 * version cannot represent: the API and kernel-launch events before v5, kernel-channel and
 * net-plugin events before v3. Before v5 a Coll or P2p event's parent is its Group event.
 */
#ifndef CHOIR_PROF_H
#define CHOIR_PROF_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "nccl_profiler.h"

typedef struct prof prof_t;
/* What prof_on reads of a prof_t (its first member). */
typedef struct prof_head {
  int types; /* the ncclProfile* bits the plugin's version can represent */
} prof_head_t;

/* The process-wide activation mask (ncclProfile* bits) the loaded plugin writes. */
extern int prof_mask;

/* Creates this communicator's profiler context: loads the library if nobody did yet, calls init.
 * *p_out is NULL when no profiler is loaded or its init failed (never an error for the
 * communicator). comm_name may be NULL. */
void prof_create(uint64_t comm_hash, const char* comm_name, int nnodes, int nranks, int rank,
                 prof_t** p_out);
/* finalize, and the library's reference. Safe with NULL. */
void prof_destroy(prof_t* p);

/* Whether events of `type` are wanted on p (p loaded, the bit in the mask, and the plugin's
 * version able to represent the type). */
static inline bool prof_on(const prof_t* p, int type) {
  return p != NULL && (__atomic_load_n(&prof_mask, __ATOMIC_RELAXED) & type) != 0 &&
         (type & ((const prof_head_t*)p)->types) != 0;
}

/* startEvent with d (type, parentObj and the type's member set; rank is filled here); the
 * plugin's handle, or NULL (not tracked: later calls with NULL do nothing). */
void* prof_start(prof_t* p, ncclProfilerEventDescr_v6_t* d);
void prof_stop(prof_t* p, void* handle);
void prof_record(prof_t* p, void* handle, ncclProfilerEventState_t state,
                 ncclProfilerEventStateArgs_v6_t* args);

/* What the core hands a net plugin as a request's profiler handle (pHandle): the communicator's
 * profiler and the ProxyStep event the plugin's own events hang under. The plugin's calls come
 * back through prof_net_callback (registered with the net plugin layer by prof_create): start
 * gives a NetPlugin event (id = the plugin's payload type and version, data its payload), update
 * records NetPluginUpdate with new data, stop ends it. */
typedef struct prof_net_parent {
  prof_t* prof;
  void* step;
} prof_net_parent_t;
ncclResult_t prof_net_callback(void** eHandle, int type, void* pHandle, int64_t pluginId,
                               void* extData);

/* Names as NCCL's profiler descriptors carry them. */
const char* prof_func_name(ncclFunc_t f);   /* "AllReduce", "Send", ... */
const char* prof_type_name(ncclDataType_t t); /* "ncclFloat32", ... */
const char* prof_algo_name(int algo);       /* "RING", ... */
const char* prof_proto_name(int proto);     /* "LL", "LL128", "SIMPLE" */

#endif
