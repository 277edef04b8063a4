/*
 * Net plugins as the core sees them (plugin_net.h): opening and per-communicator init, the
 * one-time init of old versions, properties, and every ncclNet call dispatched on the version of
 * the table found. There are no adapted copies of tables: each call casts the table to the
 * version it is, so plugins of different versions can be in use at the same time.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_net_priv.h"

#define NET_T(v) ((const ncclNet_v##v##_t*)net->lib.table)
/* An entry whose signature is the same in every version (v6 on, or v7 on), read from the table
 * as the version it is. */
#define NET_SAME(f)                        \
  (net->lib.version == 6    ? NET_T(6)->f  \
   : net->lib.version == 7  ? NET_T(7)->f  \
   : net->lib.version == 8  ? NET_T(8)->f  \
   : net->lib.version == 9  ? NET_T(9)->f  \
   : net->lib.version == 10 ? NET_T(10)->f \
   : net->lib.version == 11 ? NET_T(11)->f \
                            : NET_T(12)->f)
#define NET_SAME7(f)                       \
  (net->lib.version == 7    ? NET_T(7)->f  \
   : net->lib.version == 8  ? NET_T(8)->f  \
   : net->lib.version == 9  ? NET_T(9)->f  \
   : net->lib.version == 10 ? NET_T(10)->f \
   : net->lib.version == 11 ? NET_T(11)->f \
                            : NET_T(12)->f)

/* Checked against MAX_NET_SIZE by NCCL; the contract here is what the old ABIs can carry. */
#define NET_OLD_P2P_MAX ((size_t)INT_MAX)
#define NET_OLD_REG_MAX ((size_t)INT_MAX)

#define NET_CALL(net, entry, call)                                                    \
  do {                                                                                \
    ncclResult_t r_ = (call);                                                         \
    if (r_ != ncclSuccess) return net_call_failed("NET", net_name(net), (entry), r_); \
  } while (0)

/* ---- shared one-time init of v6..v10 tables ---- */

typedef struct net_shared {
  struct net_shared* next;
  const void* table;
  int refs;
} net_shared_t;

static pthread_mutex_t net_shared_lock = PTHREAD_MUTEX_INITIALIZER;
static net_shared_t* net_shared_list;

ncclResult_t net_shared_acquire(const void* table,
                                ncclResult_t (*init)(const void* table, void* arg), void* arg) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&net_shared_lock);
  net_shared_t* s = net_shared_list;
  while (s != NULL && s->table != table) s = s->next;
  if (s != NULL) {
    s->refs++;
    goto out_unlock;
  }
  /* Init under the lock: a second communicator must not use the library before it is ready. */
  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    WARN("NET/Plugin: out of memory");
    res = ncclSystemError;
    goto out_unlock;
  }
  res = init(table, arg);
  if (res != ncclSuccess) {
    free(s);
    goto out_unlock;
  }
  s->table = table;
  s->refs = 1;
  s->next = net_shared_list;
  net_shared_list = s;
out_unlock:
  pthread_mutex_unlock(&net_shared_lock);
  return res;
}

void net_shared_release(const void* table) {
  pthread_mutex_lock(&net_shared_lock);
  for (net_shared_t** p = &net_shared_list; *p != NULL; p = &(*p)->next) {
    if ((*p)->table != table) continue;
    net_shared_t* s = *p;
    if (--s->refs == 0) {
      *p = s->next;
      free(s);
    }
    break;
  }
  pthread_mutex_unlock(&net_shared_lock);
}

/* ---- helpers shared with collnet ---- */

ncclResult_t net_prof_noop(void** eHandle, int type, void* pHandle, int64_t pluginId,
                           void* extData) {
  (void)type;
  (void)pHandle;
  (void)pluginId;
  (void)extData;
  if (eHandle != NULL) *eHandle = NULL;
  return ncclSuccess;
}

/* The callback every plugin gets: the core's profiler (net_set_prof_hook) once one is loaded. */
static ncclProfilerCallback_t net_prof_hook;

void net_set_prof_hook(ncclProfilerCallback_t fn) {
  __atomic_store_n(&net_prof_hook, fn, __ATOMIC_RELEASE);
}

ncclResult_t net_prof_cb(void** eHandle, int type, void* pHandle, int64_t pluginId,
                         void* extData) {
  ncclProfilerCallback_t fn = __atomic_load_n(&net_prof_hook, __ATOMIC_ACQUIRE);
  /* Stops and updates come without pHandle: the hook tells them by *eHandle. */
  if (fn == NULL) return net_prof_noop(eHandle, type, pHandle, pluginId, extData);
  return fn(eHandle, type, pHandle, pluginId, extData);
}

ncclResult_t net_unsupported(const char* kind, const char* name, int version, const char* entry) {
  WARN("%s/Plugin: %s is not supported by plugin %s (v%d)", kind, entry, name, version);
  return ncclInvalidUsage;
}

ncclResult_t net_call_failed(const char* kind, const char* name, const char* entry,
                             ncclResult_t res) {
  WARN("%s/Plugin: %s of plugin %s failed: %s (%d)", kind, entry, name, err_string(res), (int)res);
  return res;
}

#define PROPS_COPY_V6(o, i)            \
  do {                                 \
    (o)->name = (i)->name;             \
    (o)->pciPath = (i)->pciPath;       \
    (o)->guid = (i)->guid;             \
    (o)->ptrSupport = (i)->ptrSupport; \
    (o)->speed = (i)->speed;           \
    (o)->port = (i)->port;             \
    (o)->latency = (i)->latency;       \
    (o)->maxComms = (i)->maxComms;     \
    (o)->maxRecvs = (i)->maxRecvs;     \
  } while (0)

#define PROPS_COPY_V9(o, i)                                    \
  do {                                                         \
    PROPS_COPY_V6(o, i);                                       \
    (o)->regIsGlobal = (i)->regIsGlobal;                       \
    (o)->forceFlush = (i)->forceFlush;                         \
    (o)->netDeviceType = (i)->netDeviceType;                   \
    (o)->netDeviceVersion = (i)->netDeviceVersion;             \
    (o)->vProps.ndevs = (i)->vProps.ndevs;                     \
    for (int k_ = 0; k_ < NCCL_NET_MAX_DEVS_PER_NIC_V11; k_++) \
      (o)->vProps.devs[k_] = (i)->vProps.devs[k_];             \
    (o)->maxP2pBytes = (i)->maxP2pBytes;                       \
    (o)->maxCollBytes = (i)->maxCollBytes;                     \
  } while (0)

ncclResult_t net_props_convert(const char* plugin, int version, int dev, const void* raw,
                               ncclNetProperties_v12_t* out) {
  const net_props_any_t* in = raw;
  ncclNetProperties_v12_t p;
  memset(&p, 0, sizeof(p));
  /* Defaults for what an old version cannot say. */
  p.netDeviceType = NCCL_NET_DEVICE_HOST;
  p.vProps.ndevs = 1;
  p.vProps.devs[0] = dev;
  p.maxP2pBytes = MAX_NET_SIZE;
  p.maxCollBytes = MAX_COLLNET_SIZE;
  p.maxMultiRequestSize = 1;
  p.railId = NCCL_NET_ID_UNDEF;
  p.planeId = NCCL_NET_ID_UNDEF;
  switch (version) {
    case 6: PROPS_COPY_V6(&p, &in->v6); break;
    case 7:
      PROPS_COPY_V6(&p, &in->v7);
      p.netDeviceType = in->v7.netDeviceType;
      p.netDeviceVersion = in->v7.netDeviceVersion;
      break;
    case 8:
      PROPS_COPY_V6(&p, &in->v8);
      p.regIsGlobal = in->v8.regIsGlobal;
      p.netDeviceType = in->v8.netDeviceType;
      p.netDeviceVersion = in->v8.netDeviceVersion;
      break;
    case 9: PROPS_COPY_V9(&p, &in->v9); break;
    case 10: PROPS_COPY_V9(&p, &in->v10); break;
    case 11:
      PROPS_COPY_V9(&p, &in->v11);
      p.maxMultiRequestSize = in->v11.maxMultiRequestSize;
      break;
    default: p = in->v12; break;
  }
  if (version >= 9) {
    int max_fused = version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC_V11;
    if (p.vProps.ndevs < 0 || p.vProps.ndevs > max_fused) {
      WARN("NET/Plugin: plugin %s reports %d fused devices for device %d (at most %d)", plugin,
           p.vProps.ndevs, dev, max_fused);
      return ncclInvalidUsage;
    }
    if (p.maxP2pBytes == 0 || p.maxP2pBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES ||
        p.maxCollBytes == 0 || p.maxCollBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES) {
      WARN(
          "NET/Plugin: plugin %s device %d reports maxP2pBytes %zu, maxCollBytes %zu: each must "
          "be between 1 and %lld",
          plugin, dev, p.maxP2pBytes, p.maxCollBytes, (long long)NCCL_MAX_NET_SIZE_BYTES);
      return ncclInvalidUsage;
    }
  }
  *out = p;
  return ncclSuccess;
}

/* ---- open / init / close ---- */

static ncclResult_t net_init_once(const void* table, void* arg) {
  const plugin_lib_t* lib = arg;
  switch (lib->version) {
    case 6: return ((const ncclNet_v6_t*)table)->init(log_plugin_logger);
    case 7: return ((const ncclNet_v7_t*)table)->init(log_plugin_logger);
    case 8: return ((const ncclNet_v8_t*)table)->init(log_plugin_logger);
    case 9: return ((const ncclNet_v9_t*)table)->init(log_plugin_logger);
    default: return ((const ncclNet_v10_t*)table)->init(log_plugin_logger, net_prof_cb);
  }
}

/* Initialize the opened library `lib` for one communicator; takes lib over on success. */
static ncclResult_t net_init_comm(plugin_lib_t* lib, uint64_t comm_id, int traffic_class,
                                  net_t** net_p) {
  ncclResult_t res;
  net_t* net = calloc(1, sizeof(*net));
  if (net == NULL) {
    WARN("NET/Plugin: out of memory");
    return ncclSystemError;
  }
  net->lib = *lib;
  net->comm_id = comm_id;
  net->traffic_class = traffic_class;
  if (net->lib.version == 11) {
    ncclNetCommConfig_v11_t config = {traffic_class};
    res = NET_T(11)->init(&net->ctx, comm_id, &config, log_plugin_logger, net_prof_cb);
  } else if (net->lib.version >= 12) {
    ncclNetCommConfig_v12_t config = {traffic_class};
    res = NET_T(12)->init(&net->ctx, comm_id, &config, log_plugin_logger, net_prof_cb);
  } else {
    res = net_shared_acquire(net->lib.table, net_init_once, &net->lib);
    net->shared_ref = res == ncclSuccess;
  }
  if (res != ncclSuccess) {
    INFO(NCCL_INIT | NCCL_NET, "NET/Plugin: init of plugin %s (%s) failed: %s", net_name(net),
         net->lib.path, err_string(res));
    goto err_free;
  }
  int ndev = 0;
  res = NET_SAME(devices)(&ndev);
  if (res != ncclSuccess) {
    INFO(NCCL_INIT | NCCL_NET, "NET/Plugin: devices() of plugin %s failed: %s", net_name(net),
         err_string(res));
    goto err_fini;
  }
  net->ndev = ndev < 0 ? 0 : ndev;
  *net_p = net;
  return ncclSuccess;
err_fini:
  if (net->lib.version >= 11)
    (void)(net->lib.version == 11 ? NET_T(11)->finalize : NET_T(12)->finalize)(net->ctx);
  else
    net_shared_release(net->lib.table);
err_free:
  free(net);
  return res;
}

ncclResult_t net_open(const char* spec, uint64_t comm_id, int traffic_class, net_t** net_p) {
  plugin_lib_t lib;
  CHECK(plugin_open(&plugin_kind_net, spec, true, &lib));
  ncclResult_t res = net_init_comm(&lib, comm_id, traffic_class, net_p);
  if (res != ncclSuccess) {
    WARN("NET/Plugin: could not initialize plugin %s from %s", lib.table_name, lib.path);
    plugin_close(&lib);
  }
  return res;
}

void net_close(net_t* net) {
  if (net == NULL) return;
  if (net->collnet != NULL) collnet_close(net->collnet);
  if (net->lib.version >= 11) {
    ncclResult_t res =
        (net->lib.version == 11 ? NET_T(11)->finalize : NET_T(12)->finalize)(net->ctx);
    if (res != ncclSuccess) (void)net_call_failed("NET", net_name(net), "finalize", res);
  } else if (net->shared_ref) {
    net_shared_release(net->lib.table);
  }
  plugin_close(&net->lib);
  free(net);
}

/* ---- selection ---- */

/* Appends one "what: why" note to the list of candidates passed over. */
static void net_note(char* buf, size_t size, const char* what, const char* why) {
  size_t len = strlen(buf);
  if (len + 4 >= size) return;
  /* Truncation is fine: the list is for a log line. */
  if (snprintf(buf + len, size - len, "%s%s: %s", len ? "; " : "", what, why) < 0) buf[len] = '\0';
}

/* Try one candidate: load, match the name, init, count devices. */
static ncclResult_t net_try(const char* spec, bool user_named, const char* want, uint64_t comm_id,
                            int traffic_class, char* notes, size_t notes_size, net_t** net_p) {
  plugin_lib_t lib;
  char why[160];
  if (plugin_open(&plugin_kind_net, spec, user_named, &lib) != ncclSuccess) {
    net_note(notes, notes_size, spec, "could not be loaded");
    return ncclInvalidUsage;
  }
  if (want != NULL && sys_strcasecmp(want, lib.table_name) != 0) {
    snprintf(why, sizeof(why), "its name '%s' is not '%s'", lib.table_name, want);
    net_note(notes, notes_size, spec, why);
    plugin_close(&lib);
    return ncclInvalidUsage;
  }
  net_t* net = NULL;
  if (net_init_comm(&lib, comm_id, traffic_class, &net) != ncclSuccess) {
    snprintf(why, sizeof(why), "init of '%s' failed", lib.table_name);
    net_note(notes, notes_size, spec, why);
    plugin_close(&lib);
    return ncclInvalidUsage;
  }
  if (net->ndev == 0) {
    snprintf(why, sizeof(why), "'%s' has no devices", lib.table_name);
    net_note(notes, notes_size, spec, why);
    net_close(net);
    return ncclInvalidUsage;
  }
  *net_p = net;
  return ncclSuccess;
}

/* The name a communicator asks for: NCCL_NET overrides config.netName (net_name_arg); NULL: any. */
static const char* net_wanted(const char* net_name_arg) {
  const char* want = param_str(PARAM_NET);
  if (want == NULL || want[0] == '\0') want = net_name_arg;
  if (want != NULL && want[0] == '\0') want = NULL;
  return want;
}

/* The candidates, in the order net_select tries them: the NCCL_NET_PLUGIN list (the first
 * *nexternal_p; *user_named_p: the user chose them), then Choir's own net plugins from its plugin
 * directory only. */
static ncclResult_t net_candidates(char specs[][PLUGIN_SPEC_MAX], int* nspecs_p, int* nexternal_p,
                                   bool* user_named_p) {
  int nspecs = 0;
  CHECK(plugin_specs(&plugin_kind_net, param_str(PARAM_NET_PLUGIN), specs, PLUGIN_MAX_SPECS,
                     &nspecs, user_named_p));
  *nexternal_p = nspecs;
  const char* dir = plugin_dir();
  if (dir[0] != '\0' &&
      snprintf(specs[nspecs], PLUGIN_SPEC_MAX, "%s/libnccl-net-socket.so", dir) < PLUGIN_SPEC_MAX)
    nspecs++;
  *nspecs_p = nspecs;
  return ncclSuccess;
}

ncclResult_t net_select(const char* net_name_arg, uint64_t comm_id, int traffic_class,
                        net_t** net_p) {
  const char* want = net_wanted(net_name_arg);
  char specs[PLUGIN_MAX_SPECS + 1][PLUGIN_SPEC_MAX];
  int nspecs = 0, nexternal = 0;
  bool user_named = false;
  CHECK(net_candidates(specs, &nspecs, &nexternal, &user_named));

  char notes[2048] = "";
  for (int i = 0; i < nspecs; i++) {
    bool named = i < nexternal && user_named;
    net_t* net = NULL;
    if (net_try(specs[i], named, want, comm_id, traffic_class, notes, sizeof(notes), &net) !=
        ncclSuccess)
      continue;
    INFO(NCCL_INIT | NCCL_NET, "NET/Plugin: using %s (v%d, %s, %d devices)%s%s%s%s", net_name(net),
         net_version(net), net_lib_path(net), net->ndev, want ? ", matching NCCL_NET/netName" : "",
         want ? want : "", notes[0] ? "; passed over: " : "", notes);
    *net_p = net;
    return ncclSuccess;
  }
  if (nspecs == 0)
    net_note(notes, sizeof(notes), "(nothing)",
             "NCCL_NET_PLUGIN=none and no "
             "plugin directory");
  WARN("NET/Plugin: no usable net plugin%s%s%s; tried %s", want ? " named '" : "", want ? want : "",
       want ? "'" : "", notes);
  return ncclInvalidUsage;
}

ncclResult_t net_check_name(const char* net_name_arg) {
  const char* want = net_wanted(net_name_arg);
  if (want == NULL) return ncclSuccess;
  char specs[PLUGIN_MAX_SPECS + 1][PLUGIN_SPEC_MAX];
  int nspecs = 0, nexternal = 0;
  bool user_named = false;
  CHECK(net_candidates(specs, &nspecs, &nexternal, &user_named));
  char names[1024] = "";
  for (int i = 0; i < nspecs; i++) {
    plugin_lib_t lib;
    if (plugin_open(&plugin_kind_net, specs[i], i < nexternal && user_named, &lib) != ncclSuccess)
      continue;
    bool match = sys_strcasecmp(want, lib.table_name) == 0;
    size_t len = strlen(names);
    /* Truncation is fine: the list is for a message. */
    if (snprintf(names + len, sizeof(names) - len, "%s'%s' (%s)", len ? ", " : "", lib.table_name,
                 lib.path) < 0)
      names[len] = '\0';
    plugin_close(&lib);
    if (match) return ncclSuccess;
  }
  const char* env = param_str(PARAM_NET);
  const char* src = env != NULL && env[0] != '\0' ? "NCCL_NET" : "config.netName";
  if (names[0] != '\0')
    WARN(
        "%s '%s' names no network; the networks found are %s: use one of these names (any case) "
        "or unset %s",
        src, want, names, src);
  else
    WARN(
        "%s '%s' names no network, and no net plugin could be loaded (see NCCL_NET_PLUGIN and "
        "CHOIR_PLUGIN_DIR); unset %s or make the plugin available",
        src, want, src);
  return ncclInvalidUsage;
}

/* ---- accessors ---- */

const char* net_name(const net_t* net) { return net->lib.table_name; }
int net_version(const net_t* net) { return net->lib.version; }
const char* net_lib_path(const net_t* net) { return net->lib.path; }
int net_ndev(const net_t* net) { return net->ndev; }

ncclResult_t net_props(net_t* net, int dev, ncclNetProperties_v12_t* props_p) {
  net_props_any_t raw;
  memset(&raw, 0, sizeof(raw));
  ncclResult_t res;
  switch (net->lib.version) {
    case 6: res = NET_T(6)->getProperties(dev, &raw.v6); break;
    case 7: res = NET_T(7)->getProperties(dev, &raw.v7); break;
    case 8: res = NET_T(8)->getProperties(dev, &raw.v8); break;
    case 9: res = NET_T(9)->getProperties(dev, &raw.v9); break;
    case 10: res = NET_T(10)->getProperties(dev, &raw.v10); break;
    case 11: res = NET_T(11)->getProperties(dev, &raw.v11); break;
    default: res = NET_T(12)->getProperties(dev, &raw.v12); break;
  }
  if (res != ncclSuccess) return net_call_failed("NET", net_name(net), "getProperties", res);
  return net_props_convert(net_name(net), net->lib.version, dev, &raw, props_p);
}

/* ---- connection setup ---- */

ncclResult_t net_listen(net_t* net, int dev, void* handle, void** listen_comm_p) {
  void* comm = NULL;
  switch (net->lib.version) {
    case 6: NET_CALL(net, "listen", NET_T(6)->listen(dev, handle, &comm)); break;
    case 7: NET_CALL(net, "listen", NET_T(7)->listen(dev, handle, &comm)); break;
    case 8: NET_CALL(net, "listen", NET_T(8)->listen(dev, handle, &comm)); break;
    case 9: NET_CALL(net, "listen", NET_T(9)->listen(dev, handle, &comm)); break;
    case 10: NET_CALL(net, "listen", NET_T(10)->listen(dev, handle, &comm)); break;
    case 11: NET_CALL(net, "listen", NET_T(11)->listen(net->ctx, dev, handle, &comm)); break;
    default: NET_CALL(net, "listen", NET_T(12)->listen(net->ctx, dev, handle, &comm));
  }
  *listen_comm_p = comm;
  return ncclSuccess;
}

ncclResult_t net_connect(net_t* net, int dev, void* handle, void** send_comm_p) {
  void* comm = NULL;
  switch (net->lib.version) {
    case 6: NET_CALL(net, "connect", NET_T(6)->connect(dev, handle, &comm)); break;
    case 7: NET_CALL(net, "connect", NET_T(7)->connect(dev, handle, &comm, NULL)); break;
    case 8: NET_CALL(net, "connect", NET_T(8)->connect(dev, handle, &comm, NULL)); break;
    case 9: NET_CALL(net, "connect", NET_T(9)->connect(dev, handle, &comm, NULL)); break;
    case 10: {
      ncclNetCommConfig_v10_t config = {net->traffic_class};
      NET_CALL(net, "connect", NET_T(10)->connect(dev, &config, handle, &comm, NULL));
      break;
    }
    case 11:
      NET_CALL(net, "connect", NET_T(11)->connect(net->ctx, dev, handle, &comm, NULL));
      break;
    default: NET_CALL(net, "connect", NET_T(12)->connect(net->ctx, dev, handle, &comm, NULL));
  }
  *send_comm_p = comm;
  return ncclSuccess;
}

ncclResult_t net_accept(net_t* net, void* listen_comm, void** recv_comm_p) {
  void* comm = NULL;
  if (net->lib.version == 6)
    NET_CALL(net, "accept", NET_T(6)->accept(listen_comm, &comm));
  else
    NET_CALL(net, "accept", NET_SAME7(accept)(listen_comm, &comm, NULL));
  *recv_comm_p = comm;
  return ncclSuccess;
}

/* ---- registration ---- */

ncclResult_t net_reg_mr(net_t* net, void* comm, void* data, size_t size, int type, void** mh_p) {
  void* mh = NULL;
  if (net->lib.version <= 7) {
    if (size > NET_OLD_REG_MAX) {
      WARN("NET/Plugin: cannot register %zu bytes with plugin %s: v%d registers at most %zu bytes",
           size, net_name(net), net->lib.version, NET_OLD_REG_MAX);
      return ncclInvalidUsage;
    }
    NET_CALL(net, "regMr",
             (net->lib.version == 6 ? NET_T(6)->regMr : NET_T(7)->regMr)(comm, data, (int)size,
                                                                         type, &mh));
  } else {
    int v = net->lib.version;
    NET_CALL(net, "regMr",
             (v == 8    ? NET_T(8)->regMr
              : v == 9  ? NET_T(9)->regMr
              : v == 10 ? NET_T(10)->regMr
              : v == 11 ? NET_T(11)->regMr
                        : NET_T(12)->regMr)(comm, data, size, type, &mh));
  }
  *mh_p = mh;
  return ncclSuccess;
}

ncclResult_t net_reg_mr_dmabuf(net_t* net, void* comm, void* data, size_t size, int type,
                               uint64_t offset, int fd, void** mh_p) {
  /* Same slot and signature in every version, but optional. */
  if (NET_SAME(regMrDmaBuf) == NULL)
    return net_unsupported("NET", net_name(net), net->lib.version, "regMrDmaBuf");
  void* mh = NULL;
  NET_CALL(net, "regMrDmaBuf", NET_SAME(regMrDmaBuf)(comm, data, size, type, offset, fd, &mh));
  *mh_p = mh;
  return ncclSuccess;
}

ncclResult_t net_dereg_mr(net_t* net, void* comm, void* mh) {
  NET_CALL(net, "deregMr", NET_SAME(deregMr)(comm, mh));
  return ncclSuccess;
}

/* ---- data path ---- */

ncclResult_t net_isend(net_t* net, void* send_comm, void* data, size_t size, int tag, void* mh,
                       void* phandle, void** req_p) {
  void* req = NULL;
  int v = net->lib.version;
  if (v <= 8) {
    if (size > NET_OLD_P2P_MAX) {
      WARN("NET/Plugin: cannot send %zu bytes with plugin %s: v%d sends at most %zu bytes", size,
           net_name(net), v, NET_OLD_P2P_MAX);
      return ncclInvalidUsage;
    }
    NET_CALL(net, "isend",
             (v == 6   ? NET_T(6)->isend
              : v == 7 ? NET_T(7)->isend
                       : NET_T(8)->isend)(send_comm, data, (int)size, tag, mh, &req));
  } else if (v == 9) {
    NET_CALL(net, "isend", NET_T(9)->isend(send_comm, data, size, tag, mh, &req));
  } else {
    NET_CALL(net, "isend",
             (v == 10   ? NET_T(10)->isend
              : v == 11 ? NET_T(11)->isend
                        : NET_T(12)->isend)(send_comm, data, size, tag, mh, phandle, &req));
  }
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t net_irecv(net_t* net, void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                       void** mhs, void** phandles_in, void** req_p) {
  int v = net->lib.version;
  if (n < 1 || n > NCCL_NET_MAX_REQUESTS) {
    WARN("NET/Plugin: irecv of %d buffers with plugin %s (1 to %d)", n, net_name(net),
         NCCL_NET_MAX_REQUESTS);
    return ncclInvalidUsage;
  }
  /* The optional-completion hint exists from v9 on; older plugins would take it for a request. */
  void* req = v >= 9 ? *req_p : NULL;
  if (v <= 8) {
    int isizes[NCCL_NET_MAX_REQUESTS];
    for (int i = 0; i < n; i++) {
      if (sizes[i] > NET_OLD_P2P_MAX) {
        WARN(
            "NET/Plugin: cannot receive %zu bytes with plugin %s: v%d receives at most %zu "
            "bytes",
            sizes[i], net_name(net), v, NET_OLD_P2P_MAX);
        return ncclInvalidUsage;
      }
      isizes[i] = (int)sizes[i];
    }
    NET_CALL(net, "irecv",
             (v == 6   ? NET_T(6)->irecv
              : v == 7 ? NET_T(7)->irecv
                       : NET_T(8)->irecv)(recv_comm, n, data, isizes, tags, mhs, &req));
  } else if (v == 9) {
    NET_CALL(net, "irecv", NET_T(9)->irecv(recv_comm, n, data, sizes, tags, mhs, &req));
  } else {
    void* phandles[NCCL_NET_MAX_REQUESTS] = {NULL};
    if (phandles_in != NULL)
      for (int i = 0; i < n; i++) phandles[i] = phandles_in[i];
    NET_CALL(net, "irecv",
             (v == 10   ? NET_T(10)->irecv
              : v == 11 ? NET_T(11)->irecv
                        : NET_T(12)->irecv)(recv_comm, n, data, sizes, tags, mhs, phandles, &req));
  }
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t net_iflush(net_t* net, void* recv_comm, int n, void** data, int* sizes, void** mhs,
                        void** req_p) {
  void* req = NULL;
  NET_CALL(net, "iflush", NET_SAME(iflush)(recv_comm, n, data, sizes, mhs, &req));
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t net_test(net_t* net, void* req, int* done_p, int* sizes) {
  int done = 0;
  NET_CALL(net, "test", NET_SAME(test)(req, &done, sizes));
  *done_p = done;
  return ncclSuccess;
}

ncclResult_t net_close_send(net_t* net, void* send_comm) {
  NET_CALL(net, "closeSend", NET_SAME(closeSend)(send_comm));
  return ncclSuccess;
}

ncclResult_t net_close_recv(net_t* net, void* recv_comm) {
  NET_CALL(net, "closeRecv", NET_SAME(closeRecv)(recv_comm));
  return ncclSuccess;
}

ncclResult_t net_close_listen(net_t* net, void* listen_comm) {
  NET_CALL(net, "closeListen", NET_SAME(closeListen)(listen_comm));
  return ncclSuccess;
}

/* ---- optional entries ---- */

ncclResult_t net_get_device_mr(net_t* net, void* comm, void* mh, void** dptr_mh_p) {
  if (net->lib.version < 7 || NET_SAME7(getDeviceMr) == NULL)
    return net_unsupported("NET", net_name(net), net->lib.version, "getDeviceMr");
  void* d = NULL;
  NET_CALL(net, "getDeviceMr", NET_SAME7(getDeviceMr)(comm, mh, &d));
  *dptr_mh_p = d;
  return ncclSuccess;
}

ncclResult_t net_irecv_consumed(net_t* net, void* recv_comm, int n, void* req) {
  if (net->lib.version < 7 || NET_SAME7(irecvConsumed) == NULL)
    return net_unsupported("NET", net_name(net), net->lib.version, "irecvConsumed");
  NET_CALL(net, "irecvConsumed", NET_SAME7(irecvConsumed)(recv_comm, n, req));
  return ncclSuccess;
}

ncclResult_t net_make_vdevice(net_t* net, const ncclNetVDeviceProps_v12_t* props, int* dev_p) {
  int v = net->lib.version;
  bool have = v == 9    ? NET_T(9)->makeVDevice != NULL
              : v == 10 ? NET_T(10)->makeVDevice != NULL
              : v == 11 ? NET_T(11)->makeVDevice != NULL
              : v >= 12 ? NET_T(12)->makeVDevice != NULL
                        : false;
  if (!have) return net_unsupported("NET", net_name(net), v, "makeVDevice");
  int max = v >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12 : NCCL_NET_MAX_DEVS_PER_NIC_V11;
  if (props->ndevs < 1 || props->ndevs > max) {
    WARN("NET/Plugin: plugin %s (v%d) fuses 1 to %d devices, not %d", net_name(net), v, max,
         props->ndevs);
    return ncclInvalidUsage;
  }
  int d = -1;
  ncclResult_t res;
#define NET_VDEV_CALL(ver)                                             \
  do {                                                                 \
    ncclNetVDeviceProps_v##ver##_t p;                                  \
    memset(&p, 0, sizeof(p));                                          \
    p.ndevs = props->ndevs;                                            \
    for (int i = 0; i < props->ndevs; i++) p.devs[i] = props->devs[i]; \
    res = NET_T(ver)->makeVDevice(&d, &p);                             \
  } while (0)
  switch (v) {
    case 9: NET_VDEV_CALL(9); break;
    case 10: NET_VDEV_CALL(10); break;
    case 11: NET_VDEV_CALL(11); break;
    default: NET_VDEV_CALL(12); break;
  }
#undef NET_VDEV_CALL
  if (res != ncclSuccess) return net_call_failed("NET", net_name(net), "makeVDevice", res);
  *dev_p = d;
  return ncclSuccess;
}

ncclResult_t net_set_attr(net_t* net, const ncclNetAttr_v12_t* attr) {
  /* Only a hint: plugins without it (or older than v11) simply do not get it. */
  if (net->lib.version == 11 && NET_T(11)->setNetAttr != NULL) {
    ncclNetAttr_v11_t a;
    _Static_assert(sizeof(a) == sizeof(*attr), "net attr v11 and v12 share a layout");
    memcpy(&a, attr, sizeof(a));
    NET_CALL(net, "setNetAttr", NET_T(11)->setNetAttr(net->ctx, &a));
  } else if (net->lib.version >= 12 && NET_T(12)->setNetAttr != NULL) {
    ncclNetAttr_v12_t a = *attr;
    NET_CALL(net, "setNetAttr", NET_T(12)->setNetAttr(net->ctx, &a));
  }
  return ncclSuccess;
}
