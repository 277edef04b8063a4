/*
 * The profiler plugin in the core (see prof.h): loading, init and finalize per communicator, and
 * each version's descriptors written from the newest one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "prof.h"

int prof_mask;

struct prof {
  prof_head_t head; /* first: prof_on reads it */
  int version;
  const void* table;
  const char* name;
  void* ctx;
  int rank;
  uint64_t comm_hash;
  const char* comm_name; /* for v1..v3 descriptors: ours, owned */
};

/* The types each version's descriptor can carry. */
#define PROF_TYPES_V1                                                                    \
  (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileProxyOp |             \
   ncclProfileProxyStep | ncclProfileProxyCtrl)
#define PROF_TYPES_V3 (PROF_TYPES_V1 | ncclProfileKernelCh | ncclProfileNetPlugin)
#define PROF_TYPES_V5                                                                    \
  (PROF_TYPES_V3 | ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |         \
   ncclProfileKernelLaunch)

static int prof_types_of(int version) {
  return version >= 5 ? PROF_TYPES_V5 : version >= 3 ? PROF_TYPES_V3 : PROF_TYPES_V1;
}

/* ---- The process's library ---------------------------------------------------------------- */

enum { PROF_UNTRIED = 0, PROF_LOADED, PROF_NONE };
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static int prof_state = PROF_UNTRIED;
static int prof_refs;
static plugin_lib_t prof_lib;

/* Under prof_lock: open the library if nobody tried yet (a failure stands for the process: the
 * knob is read once). */
static void prof_load_locked(void) {
  if (prof_state != PROF_UNTRIED) return;
  char specs[PLUGIN_MAX_SPECS][PLUGIN_SPEC_MAX];
  int nspecs = 0;
  bool named = false;
  if (plugin_specs(&plugin_kind_profiler, param_str(PARAM_PROFILER_PLUGIN), specs,
                   PLUGIN_MAX_SPECS, &nspecs, &named) != ncclSuccess)
    nspecs = 0;
  for (int i = 0; i < nspecs; i++) {
    if (plugin_open(&plugin_kind_profiler, specs[i], named, &prof_lib) == ncclSuccess) {
      prof_state = PROF_LOADED;
      INFO(NCCL_INIT, "PROFILER/Plugin: using '%s' (v%d) from %s", prof_lib.table_name,
           prof_lib.version, prof_lib.path);
      return;
    }
  }
  /* As NCCL does when none was named: a profiler table inside the net plugin's library (each
   * of NCCL_NET_PLUGIN's, or the default libnccl-net.so), opened once more for it. */
  if (!named && nspecs > 0) {
    char nets[PLUGIN_MAX_SPECS][PLUGIN_SPEC_MAX];
    int nnets = 0;
    bool net_named = false;
    if (plugin_specs(&plugin_kind_net, param_str(PARAM_NET_PLUGIN), nets, PLUGIN_MAX_SPECS,
                     &nnets, &net_named) != ncclSuccess)
      nnets = 0;
    for (int i = 0; i < nnets; i++) {
      plugin_lib_t net;
      if (plugin_open(&plugin_kind_net, nets[i], false, &net) != ncclSuccess) continue;
      const bool found = plugin_open_in(&plugin_kind_profiler, &net, &prof_lib) == ncclSuccess;
      plugin_close(&net);
      if (found) {
        prof_state = PROF_LOADED;
        INFO(NCCL_INIT, "PROFILER/Plugin: using '%s' (v%d) from the net plugin's library %s",
             prof_lib.table_name, prof_lib.version, prof_lib.path);
        return;
      }
    }
  }
  prof_state = PROF_NONE;
  INFO(NCCL_INIT, "PROFILER/Plugin: no profiler plugin%s",
       nspecs == 0 ? " (NCCL_PROFILER_PLUGIN=none)"
       : named     ? " could be loaded"
                   : " found");
}

static void prof_unref(void) {
  pthread_mutex_lock(&prof_lock);
  if (--prof_refs == 0 && prof_state == PROF_LOADED) {
    plugin_close(&prof_lib);
    prof_state = PROF_UNTRIED; /* a later communicator opens it again */
  }
  pthread_mutex_unlock(&prof_lock);
}

void prof_create(uint64_t comm_hash, const char* comm_name, int nnodes, int nranks, int rank,
                 prof_t** p_out) {
  *p_out = NULL;
  pthread_mutex_lock(&prof_lock);
  prof_load_locked();
  bool loaded = prof_state == PROF_LOADED;
  if (loaded) prof_refs++;
  int version = prof_lib.version;
  const void* table = prof_lib.table;
  const char* name = prof_lib.table_name;
  pthread_mutex_unlock(&prof_lock);
  if (!loaded) return;

  prof_t* p = calloc(1, sizeof(*p));
  char* cname = comm_name ? strdup(comm_name) : NULL;
  if (p == NULL || (comm_name && cname == NULL)) {
    WARN("PROFILER/Plugin: out of memory; rank %d runs without the profiler", rank);
    free(p);
    free(cname);
    prof_unref();
    return;
  }
  p->head.types = prof_types_of(version);
  p->version = version;
  p->table = table;
  p->name = name;
  p->rank = rank;
  p->comm_hash = comm_hash;
  p->comm_name = cname;
  ncclResult_t res;
  if (version >= 5) {
    const ncclProfiler_v5_t* t = table; /* v6's init is v5's */
    res = t->init(&p->ctx, comm_hash, &prof_mask, comm_name, nnodes, nranks, rank,
                  log_plugin_logger);
  } else if (version == 4) {
    const ncclProfiler_v4_t* t = table;
    res = t->init(&p->ctx, &prof_mask, comm_name, comm_hash, nnodes, nranks, rank,
                  log_plugin_logger);
  } else {
    const ncclProfiler_v1_t* t = table; /* v1..v3 share init's signature */
    res = t->init(&p->ctx, &prof_mask);
  }
  if (res != ncclSuccess) {
    WARN("PROFILER/Plugin: '%s' (v%d) init failed (%s) for rank %d of %d; this communicator runs "
         "without the profiler (as in NCCL): fix the profiler's configuration, or set "
         "NCCL_PROFILER_PLUGIN=none",
         name, version, err_string(res), rank, nranks);
    free(cname);
    free(p);
    prof_unref();
    return;
  }
  net_set_prof_hook(prof_net_callback);
  INFO(NCCL_INIT, "PROFILER/Plugin: '%s' (v%d) initialized for rank %d of %d, mask 0x%x", name,
       version, rank, nranks, (unsigned)__atomic_load_n(&prof_mask, __ATOMIC_RELAXED));
  *p_out = p;
}

void prof_destroy(prof_t* p) {
  if (p == NULL) return;
  const ncclProfiler_v1_t* t = p->table; /* finalize has one signature and slot in every version */
  ncclResult_t res = t->finalize(p->ctx);
  if (res != ncclSuccess)
    INFO(NCCL_INIT, "PROFILER/Plugin: '%s' finalize returned %s (ignored)", p->name,
         err_string(res));
  free((void*)p->comm_name);
  free(p);
  prof_unref();
}

/* ---- Names ---------------------------------------------------------------------------------- */

const char* prof_func_name(ncclFunc_t f) {
  static const char* const names[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                      "AllReduce", "SendRecv", "Send",      "Recv",
                                      "AlltoAll",  "Scatter",  "Gather"};
  return (int)f >= 0 && (size_t)f < sizeof(names) / sizeof(names[0]) ? names[f] : "Unknown";
}

const char* prof_type_name(ncclDataType_t t) {
  static const char* const names[] = {"ncclInt8",     "ncclUint8",      "ncclInt32",
                                      "ncclUint32",   "ncclInt64",      "ncclUint64",
                                      "ncclFloat16",  "ncclFloat32",    "ncclFloat64",
                                      "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return (int)t >= 0 && (size_t)t < sizeof(names) / sizeof(names[0]) ? names[t] : "Unknown";
}

const char* prof_algo_name(int algo) {
  static const char* const names[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                      "NVLS", "NVLS_TREE", "PAT"};
  return algo >= 0 && (size_t)algo < sizeof(names) / sizeof(names[0]) ? names[algo] : "Unknown";
}

const char* prof_proto_name(int proto) {
  static const char* const names[] = {"LL", "LL128", "SIMPLE"};
  return proto >= 0 && proto < 3 ? names[proto] : "Unknown";
}

/* ---- Events --------------------------------------------------------------------------------- */

/* v1's numeric ids from the names the newest descriptor carries. */
static uint8_t prof_index_of(const char* s, const char* (*name)(int), int n) {
  for (int i = 0; i < n; i++)
    if (s != NULL && strcmp(s, name(i)) == 0) return (uint8_t)i;
  return 0xff;
}
static const char* prof_func_name_i(int f) { return prof_func_name((ncclFunc_t)f); }
static const char* prof_type_name_i(int t) { return prof_type_name((ncclDataType_t)t); }

/* The common head of every version's descriptor before v5 (uint8_t type). */
#define PROF_HEAD_OLD(dst, d, p)         \
  do {                                   \
    (dst).type = (uint8_t)(d)->type;     \
    (dst).parentObj = (d)->parentObj;    \
    (dst).rank = (p)->rank;              \
  } while (0)

/* Coll and P2p parents before v5: the Group event (the API events do not exist there). */
static void* prof_old_parent(const ncclProfilerEventDescr_v6_t* d) {
  if (d->type == ncclProfileColl) return d->coll.parentGroup;
  if (d->type == ncclProfileP2p) return d->p2p.parentGroup;
  return d->parentObj;
}

/* Members every older descriptor's Coll and P2p share with the newest, by name and type; and
 * those v1..v3 add (the communicator, and nMaxChannels for nChannels). */
#define PROF_COLL_SHARED(o, d)                  \
  do {                                          \
    (o).coll.seqNumber = (d)->coll.seqNumber;   \
    (o).coll.sendBuff = (d)->coll.sendBuff;     \
    (o).coll.recvBuff = (d)->coll.recvBuff;     \
    (o).coll.count = (d)->coll.count;           \
    (o).coll.root = (d)->coll.root;             \
    (o).coll.nWarps = (d)->coll.nWarps;         \
  } while (0)
#define PROF_P2P_SHARED(o, d)           \
  do {                                  \
    (o).p2p.buff = (d)->p2p.buff;       \
    (o).p2p.count = (d)->p2p.count;     \
    (o).p2p.peer = (d)->p2p.peer;       \
  } while (0)
#define PROF_COLL_OLD(o, d, p)                   \
  do {                                           \
    (o).coll.name = (p)->comm_name;              \
    (o).coll.commHash = (p)->comm_hash;          \
    (o).coll.nMaxChannels = (d)->coll.nChannels; \
  } while (0)
#define PROF_P2P_OLD(o, p)              \
  do {                                  \
    (o).p2p.name = (p)->comm_name;      \
    (o).p2p.commHash = (p)->comm_hash;  \
  } while (0)
/* The names as strings (v2..v4). */
#define PROF_NAMES(o, d)                        \
  do {                                          \
    (o).coll.func = (d)->coll.func;             \
    (o).coll.datatype = (d)->coll.datatype;     \
    (o).coll.algo = (d)->coll.algo;             \
    (o).coll.proto = (d)->coll.proto;           \
  } while (0)
#define PROF_P2P_NAMES(o, d)                    \
  do {                                          \
    (o).p2p.func = (d)->p2p.func;               \
    (o).p2p.datatype = (d)->p2p.datatype;       \
  } while (0)

static void prof_start_v4(prof_t* p, void** h, const ncclProfilerEventDescr_v6_t* d) {
  ncclProfilerEventDescr_v4_t o;
  memset(&o, 0, sizeof(o));
  PROF_HEAD_OLD(o, d, p);
  o.parentObj = prof_old_parent(d);
  switch (d->type) {
    case ncclProfileColl:
      PROF_COLL_SHARED(o, d);
      PROF_NAMES(o, d);
      o.coll.nChannels = d->coll.nChannels;
      break;
    case ncclProfileP2p:
      PROF_P2P_SHARED(o, d);
      PROF_P2P_NAMES(o, d);
      o.p2p.nChannels = d->p2p.nChannels;
      break;
    case ncclProfileProxyOp: memcpy(&o.proxyOp, &d->proxyOp, sizeof(o.proxyOp)); break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    case ncclProfileKernelCh:
      o.kernelCh.channelId = d->kernelCh.channelId;
      o.kernelCh.pTimer = d->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      o.netPlugin.id = d->netPlugin.id;
      o.netPlugin.data = d->netPlugin.data;
      break;
    default: break;
  }
  ((const ncclProfiler_v4_t*)p->table)->startEvent(p->ctx, h, &o);
}

/* v1, v2 and v3 share the proxy members' layout; their Coll and P2p differ. */
static void prof_start_v3(prof_t* p, void** h, const ncclProfilerEventDescr_v6_t* d) {
  ncclProfilerEventDescr_v3_t o;
  memset(&o, 0, sizeof(o));
  PROF_HEAD_OLD(o, d, p);
  o.parentObj = prof_old_parent(d);
  switch (d->type) {
    case ncclProfileColl:
      PROF_COLL_SHARED(o, d);
      PROF_COLL_OLD(o, d, p);
      PROF_NAMES(o, d);
      break;
    case ncclProfileP2p:
      PROF_P2P_SHARED(o, d);
      PROF_P2P_OLD(o, p);
      PROF_P2P_NAMES(o, d);
      break;
    case ncclProfileProxyOp: memcpy(&o.proxyOp, &d->proxyOp, sizeof(o.proxyOp)); break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    case ncclProfileKernelCh: o.kernelCh.channelId = d->kernelCh.channelId; break;
    case ncclProfileNetPlugin:
      o.netPlugin.id = d->netPlugin.id;
      o.netPlugin.data = d->netPlugin.data;
      break;
    default: break;
  }
  ((const ncclProfiler_v3_t*)p->table)->startEvent(p->ctx, h, &o);
}

/* Bytes a collective moves per rank, as v1/v2's trafficBytes: count elements of datatype. */
static size_t prof_traffic(const ncclProfilerEventDescr_v6_t* d) {
  static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  uint8_t t = prof_index_of(d->coll.datatype, prof_type_name_i, 12);
  return t < 12 ? d->coll.count * sizes[t] : 0;
}

static void prof_start_v2(prof_t* p, void** h, const ncclProfilerEventDescr_v6_t* d) {
  ncclProfilerEventDescr_v2_t o;
  memset(&o, 0, sizeof(o));
  PROF_HEAD_OLD(o, d, p);
  o.parentObj = prof_old_parent(d);
  switch (d->type) {
    case ncclProfileColl:
      PROF_COLL_SHARED(o, d);
      PROF_COLL_OLD(o, d, p);
      PROF_NAMES(o, d);
      o.coll.trafficBytes = prof_traffic(d);
      break;
    case ncclProfileP2p:
      PROF_P2P_SHARED(o, d);
      PROF_P2P_OLD(o, p);
      PROF_P2P_NAMES(o, d);
      break;
    case ncclProfileProxyOp: memcpy(&o.proxyOp, &d->proxyOp, sizeof(o.proxyOp)); break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    default: break;
  }
  ((const ncclProfiler_v2_t*)p->table)->startEvent(p->ctx, h, &o);
}

static void prof_start_v1(prof_t* p, void** h, const ncclProfilerEventDescr_v6_t* d) {
  ncclProfilerEventDescr_v1_t o;
  memset(&o, 0, sizeof(o));
  PROF_HEAD_OLD(o, d, p);
  o.parentObj = prof_old_parent(d);
  switch (d->type) {
    case ncclProfileColl:
      PROF_COLL_SHARED(o, d);
      PROF_COLL_OLD(o, d, p);
      o.coll.func = prof_index_of(d->coll.func, prof_func_name_i, 11);
      o.coll.datatype = prof_index_of(d->coll.datatype, prof_type_name_i, 12);
      o.coll.op = 0; /* the newer descriptors carry no operator; v1 readers get ncclSum */
      o.coll.trafficBytes = prof_traffic(d);
      o.coll.algo = prof_index_of(d->coll.algo, prof_algo_name, 7);
      o.coll.proto = prof_index_of(d->coll.proto, prof_proto_name, 3);
      break;
    case ncclProfileP2p:
      PROF_P2P_SHARED(o, d);
      PROF_P2P_OLD(o, p);
      o.p2p.func = prof_index_of(d->p2p.func, prof_func_name_i, 11);
      o.p2p.datatype = prof_index_of(d->p2p.datatype, prof_type_name_i, 12);
      break;
    case ncclProfileProxyOp: memcpy(&o.proxyOp, &d->proxyOp, sizeof(o.proxyOp)); break;
    case ncclProfileProxyStep: o.proxyStep.step = d->proxyStep.step; break;
    default: break;
  }
  ((const ncclProfiler_v1_t*)p->table)->startEvent(p->ctx, h, &o);
}

void* prof_start(prof_t* p, ncclProfilerEventDescr_v6_t* d) {
  if (p == NULL || !(d->type & (uint64_t)p->head.types)) return NULL;
  void* h = NULL;
  d->rank = p->rank;
  switch (p->version) {
    case 6: ((const ncclProfiler_v6_t*)p->table)->startEvent(p->ctx, &h, d); break;
    case 5:
      /* v5's descriptor is v6's without the copy-engine members, which the core never sends. */
      ((const ncclProfiler_v5_t*)p->table)
          ->startEvent(p->ctx, &h, (ncclProfilerEventDescr_v5_t*)(void*)d);
      break;
    case 4: prof_start_v4(p, &h, d); break;
    case 3: prof_start_v3(p, &h, d); break;
    case 2: prof_start_v2(p, &h, d); break;
    default: prof_start_v1(p, &h, d); break;
  }
  return h;
}

void prof_stop(prof_t* p, void* handle) {
  if (p == NULL || handle == NULL) return;
  ((const ncclProfiler_v1_t*)p->table)->stopEvent(handle); /* one signature in every version */
}

void prof_record(prof_t* p, void* handle, ncclProfilerEventState_t state,
                 ncclProfilerEventStateArgs_v6_t* args) {
  if (p == NULL || handle == NULL) return;
  if (p->version >= 4) {
    /* v4..v6 share the state arguments' layout. */
    ((const ncclProfiler_v4_t*)p->table)
        ->recordEventState(handle, state, (ncclProfilerEventStateArgs_v4_t*)(void*)args);
    return;
  }
  /* v1..v3: the proxy-step size went in proxyOp.transSize; states newer than v3 are dropped. */
  if (state > ncclProfilerProxyCtrlAppendEnd) return;
  ncclProfilerEventStateArgs_v3_t o;
  memset(&o, 0, sizeof(o));
  if (args != NULL) {
    if (state >= ncclProfilerProxyCtrlIdle)
      o.proxyCtrl.appendedProxyOps = args->proxyCtrl.appendedProxyOps;
    else
      o.proxyOp.transSize = args->proxyStep.transSize;
  }
  ((const ncclProfiler_v3_t*)p->table)->recordEventState(handle, state, args ? &o : NULL);
}

/* ---- The net plugin's own events ------------------------------------------------------------ */

typedef struct prof_net_ev {
  prof_t* prof;
  void* handle;
} prof_net_ev_t;

ncclResult_t prof_net_callback(void** eHandle, int type, void* pHandle, int64_t pluginId,
                               void* extData) {
  if (eHandle == NULL) return ncclSuccess;
  if (type == ncclProfilerNetEventStart) {
    *eHandle = NULL;
    const prof_net_parent_t* par = pHandle;
    if (par == NULL || !prof_on(par->prof, ncclProfileNetPlugin)) return ncclSuccess;
    ncclProfilerEventDescr_v6_t d;
    memset(&d, 0, sizeof(d));
    d.type = ncclProfileNetPlugin;
    d.parentObj = par->step;
    d.netPlugin.id = pluginId;
    d.netPlugin.data = extData;
    void* h = prof_start(par->prof, &d);
    prof_net_ev_t* ev = h ? malloc(sizeof(*ev)) : NULL;
    if (ev == NULL) {
      prof_stop(par->prof, h);
      return ncclSuccess;
    }
    ev->prof = par->prof;
    ev->handle = h;
    *eHandle = ev;
    return ncclSuccess;
  }
  prof_net_ev_t* ev = *eHandle;
  if (ev == NULL) return ncclSuccess;
  if (type == ncclProfilerNetEventUpdate || type == ncclProfilerNetEventUpdateAndStop) {
    ncclProfilerEventStateArgs_v6_t a;
    memset(&a, 0, sizeof(a));
    a.netPlugin.data = extData;
    prof_record(ev->prof, ev->handle, ncclProfilerNetPluginUpdate, &a);
  }
  if (type == ncclProfilerNetEventStop || type == ncclProfilerNetEventUpdateAndStop) {
    prof_stop(ev->prof, ev->handle);
    free(ev);
    *eHandle = NULL;
  }
  return ncclSuccess;
}
