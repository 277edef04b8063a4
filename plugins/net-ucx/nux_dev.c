/*
 * net-ucx devices, contexts and workers.
 *
 * Devices are UCX's own network devices: every uct transport resource of type NET (tcp's
 * interfaces, the verbs transports' HCA ports, ...), one entry per device name, filtered by
 * UCX_NET_DEVICES and (roughly, nux_tls_selected) UCX_TLS, non-loopback ones first; `lo` only when
 * it is the sole device or UCX_NET_DEVICES names it. None usable: 0 devices, which is no error.
 * Each device also needs an IP address for the connection handshake (nux_conn.c): its own when it
 * is an interface, else its netdev's (IPoIB, RoCE), else the interface net-socket would pick.
 *
 * Each device gets its own ucp_context (NET_DEVICES set to that device) at first use; workers
 * belong to a plugin context (one per NCCL communicator) and a device.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uct/api/uct.h>

#include "nux.h"

ncclDebugLogger_t nux_logger;
nux_global_t nux_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool nux_inited;
static nux_ctx_t* nux_default_ctx;

/* ---- Knobs ---------------------------------------------------------------------------------- */

static const char* nux_getenv(const char* name) { return getenv(name); }

static void nux_knob_bad(const nux_knob_t* k, const char* value, void* arg) {
  (void)arg;
  NUX_WARN("net-ucx: %s=%s is not an integer in %d..%d; using %d", k->name, value, k->lo, k->hi,
           k->def);
}

/* ---- Device discovery ----------------------------------------------------------------------- */

typedef struct {
  char name[64];
  char tls[128];
} nux_cand_t;

/* Adds (tl, dev) to the candidate list, merging transports of one device. */
static void nux_cand_add(nux_cand_t* c, int* n, int max, const char* tl, const char* dev) {
  for (int i = 0; i < *n; i++) {
    if (strcmp(c[i].name, dev) != 0) continue;
    size_t len = strlen(c[i].tls);
    if (strstr(c[i].tls, tl) == NULL && len + strlen(tl) + 2 < sizeof(c[i].tls))
      snprintf(c[i].tls + len, sizeof(c[i].tls) - len, ",%s", tl);
    return;
  }
  if (*n >= max) return;
  snprintf(c[*n].name, sizeof(c[*n].name), "%.63s", dev);
  snprintf(c[*n].tls, sizeof(c[*n].tls), "%.127s", tl);
  (*n)++;
}

/* Every UCT resource of type NET that UCX_NET_DEVICES and UCX_TLS let through. */
static int nux_scan_uct(nux_cand_t* c, int max) {
  const char* netdevs = getenv("UCX_NET_DEVICES");
  const char* tls = getenv("UCX_TLS");
  uct_component_h* comps = NULL;
  unsigned ncomps = 0;
  int n = 0;
  ucs_status_t st = uct_query_components(&comps, &ncomps);
  if (st != UCS_OK) {
    NUX_WARN("net-ucx: listing UCX components failed: %s", ucs_status_string(st));
    return 0;
  }
  for (unsigned i = 0; i < ncomps; i++) {
    uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                                             UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
    if (uct_component_query(comps[i], &ca) != UCS_OK || ca.md_resource_count == 0) continue;
    uct_md_resource_desc_t* mds = calloc(ca.md_resource_count, sizeof(*mds));
    if (mds == NULL) break;
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    ca.md_resources = mds;
    if (uct_component_query(comps[i], &ca) != UCS_OK) {
      free(mds);
      continue;
    }
    for (unsigned m = 0; m < ca.md_resource_count; m++) {
      uct_md_config_t* cfg = NULL;
      uct_md_h md = NULL;
      if (uct_md_config_read(comps[i], NULL, NULL, &cfg) != UCS_OK) continue;
      st = uct_md_open(comps[i], mds[m].md_name, cfg, &md);
      uct_config_release(cfg);
      if (st != UCS_OK) {
        NUX_INFO(NCCL_INIT | NCCL_NET, "net-ucx: UCX memory domain %s does not open: %s",
                 mds[m].md_name, ucs_status_string(st));
        continue;
      }
      uct_tl_resource_desc_t* res = NULL;
      unsigned nres = 0;
      if (uct_md_query_tl_resources(md, &res, &nres) == UCS_OK) {
        for (unsigned r = 0; r < nres; r++) {
          if (res[r].dev_type != UCT_DEVICE_TYPE_NET) continue;
          if (!nux_netdev_selected(netdevs, res[r].dev_name)) continue;
          if (!nux_tls_selected(tls, res[r].tl_name)) continue;
          nux_cand_add(c, &n, max, res[r].tl_name, res[r].dev_name);
        }
        uct_release_tl_resource_list(res);
      }
      uct_md_close(md);
    }
    free(mds);
  }
  uct_release_component_list(comps);
  return n;
}

static int nux_family(void) {
  const char* v = getenv("NCCL_SOCKET_FAMILY");
  if (v == NULL || v[0] == '\0') return AF_UNSPEC;
  if (strcasecmp(v, "AF_INET") == 0) return AF_INET;
  if (strcasecmp(v, "AF_INET6") == 0) return AF_INET6;
  NUX_WARN("net-ucx: NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6; ignoring it", v);
  return AF_UNSPEC;
}

/* The first usable address of interface `ifname` (exact name). */
static bool nux_if_addr(const char* ifname, int family, sock_if_t* out) {
  char spec[80];
  snprintf(spec, sizeof(spec), "=%.70s", ifname);
  int n = 0;
  return sock_if_scan(spec, family, out, 1, &n) == 0 && n == 1;
}

/* The handshake address of UCX device `name`. */
static bool nux_dev_hs_addr(const char* name, int family, sock_if_t* out) {
  if (strchr(name, ':') == NULL) return nux_if_addr(name, family, out);
  /* "mlx5_0:1": a netdev of the HCA (IPoIB or RoCE) if one has an address. */
  char hca[64], path[PATH_MAX];
  snprintf(hca, sizeof(hca), "%s", name);
  *strchr(hca, ':') = '\0';
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", hca);
  DIR* d = opendir(path);
  bool found = false;
  if (d != NULL) {
    struct dirent* e;
    while (!found && (e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') found = nux_if_addr(e->d_name, family, out);
    closedir(d);
  }
  if (found) return true;
  /* Any interface the hosts share (the bootstrap's choice): the handshake only carries worker
   * addresses; data goes through UCX on the device itself. */
  const char* spec = getenv("NCCL_SOCKET_IFNAME");
  int n = 0;
  return sock_if_scan(spec != NULL && spec[0] ? spec : NULL, family, out, 1, &n) == 0 && n == 1;
}

static int nux_read_int(const char* path) {
  FILE* f = fopen(path, "r");
  int v = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

static void nux_dev_sysfs(nux_dev_t* d) {
  char path[PATH_MAX];
  const char* colon = strchr(d->name, ':');
  if (colon == NULL) {
    snprintf(path, sizeof(path), "/sys/class/net/%.32s/device", d->name);
    d->pci_path = realpath(path, NULL);
    snprintf(path, sizeof(path), "/sys/class/net/%.32s/speed", d->name);
    d->speed = nux_read_int(path);
  } else {
    int hl = (int)(colon - d->name);
    snprintf(path, sizeof(path), "/sys/class/infiniband/%.*s/device", hl, d->name);
    d->pci_path = realpath(path, NULL);
    snprintf(path, sizeof(path), "/sys/class/infiniband/%.*s/ports/%s/rate", hl, d->name,
             colon + 1);
    int gbps = nux_read_int(path); /* "100 Gb/sec (4X EDR)" */
    d->speed = gbps > 0 ? gbps * 1000 : -1;
  }
  /* Virtual interfaces (lo, veth, most VMs) report nothing or -1. */
  if (d->speed <= 0) d->speed = 10000;
}

static void nux_init_once(void) {
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  nux_knobs_read(&nux_g.knobs, nux_getenv, nux_knob_bad, NULL);
  if (maj != UCP_API_MAJOR || min < UCP_API_MINOR) {
    NUX_WARN(
        "net-ucx: built for UCX %d.%d but the loaded libucp is %u.%u.%u; not using UCX "
        "(0 devices)",
        UCP_API_MAJOR, UCP_API_MINOR, maj, min, rel);
    return;
  }
  nux_cand_t cand[NUX_MAX_DEVS];
  int ncand = nux_scan_uct(cand, NUX_MAX_DEVS);
  const char* netdevs = getenv("UCX_NET_DEVICES");
  int family = nux_family();
  /* Non-loopback devices first; lo when alone or named. */
  int nonlo = 0;
  for (int i = 0; i < ncand; i++) nonlo += strcmp(cand[i].name, "lo") != 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < ncand; i++) {
      bool lo = strcmp(cand[i].name, "lo") == 0;
      if (lo != (pass == 1)) continue;
      if (lo && nonlo > 0 && !nux_netdev_named(netdevs, "lo")) continue;
      nux_dev_t* d = &nux_g.dev[nux_g.ndev];
      memset(d, 0, sizeof(*d));
      memcpy(d->name, cand[i].name, sizeof(d->name));
      memcpy(d->tls, cand[i].tls, sizeof(d->tls));
      sock_if_t hs;
      if (!nux_dev_hs_addr(d->name, family, &hs)) {
        NUX_INFO(NCCL_INIT | NCCL_NET,
                 "net-ucx: UCX device %s (%s) skipped: no IP address for the connection "
                 "handshake",
                 d->name, d->tls);
        continue;
      }
      d->hs = hs.addr;
      snprintf(d->hs_if, sizeof(d->hs_if), "%s", hs.name);
      nux_dev_sysfs(d);
      nux_g.ndev++;
    }
  }
  char list[512];
  size_t off = 0;
  list[0] = '\0';
  for (int i = 0; i < nux_g.ndev && off < sizeof(list); i++)
    off +=
        (size_t)snprintf(list + off, sizeof(list) - off, "%s[%d]%s (%s; handshake on %s)",
                         i ? " " : "", i, nux_g.dev[i].name, nux_g.dev[i].tls, nux_g.dev[i].hs_if);
  const char* tls = getenv("UCX_TLS");
  if (nux_g.ndev == 0 && ((netdevs != NULL && netdevs[0]) || (tls != NULL && tls[0])))
    /* The user chose devices or transports and nothing is left: say so loudly. */
    NUX_WARN(
        "net-ucx: UCX %u.%u.%u offers no usable network device with UCX_NET_DEVICES=%s "
        "UCX_TLS=%s (%d candidate(s) before the handshake-address check): 0 devices",
        maj, min, rel, netdevs ? netdevs : "(unset)", tls ? tls : "(unset)", ncand);
  else if (nux_g.ndev == 0)
    NUX_INFO(NCCL_INIT | NCCL_NET, "net-ucx: UCX %u.%u.%u offers no network device: 0 devices", maj,
             min, rel);
  else
    NUX_INFO(NCCL_INIT | NCCL_NET,
             "net-ucx: UCX %u.%u.%u, %d device(s): %s; maxRecvs %d, close timeout %d ms, peer "
             "errors %s",
             maj, min, rel, nux_g.ndev, list, nux_g.knobs.max_recvs, nux_g.knobs.close_timeout_ms,
             nux_g.knobs.peer_errors ? "on" : "off");
}

ncclResult_t nux_init(ncclDebugLogger_t logger) {
  pthread_mutex_lock(&nux_g.lock);
  if (nux_logger == NULL && logger != NULL) __atomic_store_n(&nux_logger, logger, __ATOMIC_RELEASE);
  if (!nux_inited) {
    nux_init_once();
    nux_inited = true;
  }
  pthread_mutex_unlock(&nux_g.lock);
  return ncclSuccess;
}

ncclResult_t nux_devices(int* ndev) {
  *ndev = nux_g.ndev;
  return ncclSuccess;
}

ncclResult_t nux_get_properties(int dev, ncclNetProperties_v12_t* props) {
  if (dev < 0 || dev >= nux_g.ndev) {
    NUX_WARN("net-ucx: getProperties: device %d does not exist (%d devices)", dev, nux_g.ndev);
    return ncclInvalidArgument;
  }
  nux_dev_t* d = &nux_g.dev[dev];
  memset(props, 0, sizeof(*props));
  props->name = d->name;
  props->pciPath = d->pci_path;
  props->guid = (uint64_t)dev;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d->speed;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = nux_g.knobs.max_recvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = nux_max_bytes();
  props->maxCollBytes = nux_max_bytes();
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

/* ---- Contexts and workers ------------------------------------------------------------------- */

/* The device's ucp_context, created at first use (nux_g.lock held). */
static ncclResult_t nux_dev_ucp(int dev, ucp_context_h* ucp_p) {
  nux_dev_t* d = &nux_g.dev[dev];
  if (d->ucp != NULL) {
    *ucp_p = d->ucp;
    return ncclSuccess;
  }
  if (d->ucp_failed) return ncclSystemError;
  ucp_config_t* cfg = NULL;
  ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
  if (st == UCS_OK) st = ucp_config_modify(cfg, "NET_DEVICES", d->name);
  if (st == UCS_OK) {
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                      .features = UCP_FEATURE_TAG,
                      .mt_workers_shared = 1};
    st = ucp_init(&p, cfg, &d->ucp);
  }
  if (cfg != NULL) ucp_config_release(cfg);
  if (st != UCS_OK) {
    d->ucp = NULL;
    d->ucp_failed = true;
    NUX_WARN("net-ucx: ucp_init on device %s failed: %s (check UCX_TLS=%s and UCX_NET_DEVICES)",
             d->name, ucs_status_string(st), getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)");
    return ncclSystemError;
  }
  *ucp_p = d->ucp;
  return ncclSuccess;
}

ncclResult_t nux_ctx_create(uint64_t comm_id, nux_ctx_t** ctx_p) {
  nux_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NUX_WARN("net-ucx: init: out of memory");
    return ncclSystemError;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->comm_id = comm_id;
  *ctx_p = c;
  return ncclSuccess;
}

void nux_ctx_destroy(nux_ctx_t* ctx) {
  if (ctx == NULL) return;
  for (int i = 0; i < NUX_MAX_DEVS; i++)
    if (ctx->workers[i] != NULL) nux_worker_put(ctx->workers[i]);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}

nux_ctx_t* nux_ctx_default(void) {
  pthread_mutex_lock(&nux_g.lock);
  if (nux_default_ctx == NULL) (void)nux_ctx_create(0, &nux_default_ctx);
  nux_ctx_t* c = nux_default_ctx;
  pthread_mutex_unlock(&nux_g.lock);
  return c;
}

static ncclResult_t nux_worker_create(int dev, nux_worker_t** w_p) {
  ucp_context_h ucp = NULL;
  pthread_mutex_lock(&nux_g.lock);
  nux_worker_t* w = nux_g.dev[dev].idle;
  if (w != NULL) {
    /* Reuse: comm ids keep counting, so a stale message of an old comm never matches. */
    nux_g.dev[dev].idle = w->next_idle;
    w->next_idle = NULL;
    w->refs = 1;
    pthread_mutex_unlock(&nux_g.lock);
    *w_p = w;
    return ncclSuccess;
  }
  ncclResult_t res = nux_dev_ucp(dev, &ucp);
  pthread_mutex_unlock(&nux_g.lock);
  if (res != ncclSuccess) return res;
  w = calloc(1, sizeof(*w));
  if (w == NULL) {
    NUX_WARN("net-ucx: out of memory creating a worker");
    return ncclSystemError;
  }
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SERIALIZED};
  ucs_status_t st = ucp_worker_create(ucp, &wp, &w->ucp);
  if (st != UCS_OK) {
    NUX_WARN("net-ucx: ucp_worker_create on device %s failed: %s", nux_g.dev[dev].name,
             ucs_status_string(st));
    free(w);
    return ncclSystemError;
  }
  st = ucp_worker_get_address(w->ucp, &w->addr, &w->addr_len);
  if (st != UCS_OK || w->addr_len > NUX_MAX_ADDR) {
    NUX_WARN("net-ucx: worker address on device %s: %s (%zu bytes)", nux_g.dev[dev].name,
             st != UCS_OK ? ucs_status_string(st) : "too large", w->addr_len);
    if (st == UCS_OK) ucp_worker_release_address(w->ucp, w->addr);
    ucp_worker_destroy(w->ucp);
    free(w);
    return ncclSystemError;
  }
  pthread_mutex_init(&w->lock, NULL);
  w->dev = dev;
  w->refs = 1;
  NUX_INFO(NCCL_NET, "net-ucx: worker on %s, address %zu bytes", nux_g.dev[dev].name, w->addr_len);
  *w_p = w;
  return ncclSuccess;
}

ncclResult_t nux_worker_get(nux_ctx_t* ctx, int dev, nux_worker_t** w_p) {
  if (dev < 0 || dev >= nux_g.ndev) {
    NUX_WARN("net-ucx: device %d does not exist (%d devices)", dev, nux_g.ndev);
    return ncclInvalidArgument;
  }
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&ctx->lock);
  if (ctx->workers[dev] == NULL) res = nux_worker_create(dev, &ctx->workers[dev]);
  if (res == ncclSuccess) {
    nux_worker_ref(ctx->workers[dev]);
    *w_p = ctx->workers[dev];
  }
  pthread_mutex_unlock(&ctx->lock);
  return res;
}

void nux_worker_ref(nux_worker_t* w) {
  pthread_mutex_lock(&w->lock);
  w->refs++;
  pthread_mutex_unlock(&w->lock);
}

void nux_worker_put(nux_worker_t* w) {
  pthread_mutex_lock(&w->lock);
  int left = --w->refs;
  pthread_mutex_unlock(&w->lock);
  if (left > 0) return;
  /* Kept for reuse instead of ucp_worker_destroy (see nux.h). Its endpoints are closed; its
   * orphans stay with it, since a closing endpoint may still call their error handler. */
  pthread_mutex_lock(&nux_g.lock);
  w->next_idle = nux_g.dev[w->dev].idle;
  nux_g.dev[w->dev].idle = w;
  pthread_mutex_unlock(&nux_g.lock);
}

void nux_worker_orphan(nux_worker_t* w, void* p) {
  if (w->norphans == w->cap_orphans) {
    int cap = w->cap_orphans ? 2 * w->cap_orphans : 8;
    void** o = realloc(w->orphans, (size_t)cap * sizeof(*o));
    if (o == NULL) return; /* p leaks: a few bytes, and never freed while UCX may write it */
    w->orphans = o;
    w->cap_orphans = cap;
  }
  w->orphans[w->norphans++] = p;
}

void nux_worker_progress_locked(nux_worker_t* w) {
  for (int i = 0; i < nux_g.knobs.progress; i++)
    if (ucp_worker_progress(w->ucp) == 0) break;
}

size_t nux_max_bytes(void) {
  size_t b = (size_t)nux_g.knobs.max_mib << 20;
  return b < NUX_MAX_BYTES ? b : NUX_MAX_BYTES;
}
