/*
 * net-ib devices: the knobs, the port list (every ACTIVE port of every HCA that NCCL_IB_HCA
 * selects, IB or RoCE), GID selection, properties, async events, the registration cache.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "nib.h"

ncclDebugLogger_t nib_logger;
nib_global_t nib_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t nib_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void nib_bad_knob(const nib_knob_t* k, const char* value, void* arg) {
  (void)arg;
  NIB_WARN("net-ib: %s=%s is not an integer in [%d, %d]; using %d", k->name, value, k->lo, k->hi,
           k->def);
}

static const char* nib_getenv(const char* name) { return getenv(name); }

static int nib_family(const char* var, const char* v, int def) {
  if (v == NULL || v[0] == '\0') return def;
  if (strcasecmp(v, "AF_INET") == 0) return AF_INET;
  if (strcasecmp(v, "AF_INET6") == 0) return AF_INET6;
  NIB_WARN("net-ib: %s=%s is not AF_INET or AF_INET6; ignoring it", var, v);
  return def;
}

/* The GID type of a table entry, from sysfs (when _ibv_query_gid_ex is missing). */
static int nib_gid_type_sysfs(const char* hca, int port, int index) {
  char path[PATH_MAX], buf[32] = "";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", hca, port,
           index);
  FILE* f = fopen(path, "r");
  if (f == NULL) return -1;
  bool ok = fgets(buf, sizeof(buf), f) != NULL;
  fclose(f);
  if (!ok) return -1;
  if (strncasecmp(buf, "RoCE v2", 7) == 0) return NIB_GID_ROCE_V2;
  if (strncasecmp(buf, "IB/RoCE v1", 10) == 0) return NIB_GID_ROCE_V1;
  return -1;
}

/* Picks the GID of a RoCE port; false when it has none usable. */
static bool nib_pick_gid(nib_dev_t* d, const struct ibv_port_attr* pa, int family,
                         const nib_range_t* range) {
  int n = pa->gid_tbl_len;
  if (n <= 0) return false;
  if (n > 1024) n = 1024;
  nib_gid_t* gids = calloc((size_t)n, sizeof(*gids));
  if (gids == NULL) return false;
  for (int i = 0; i < n; i++) {
    gids[i].type = -1;
    if (nib_v.query_gid_ex != NULL) {
      struct ibv_gid_entry e;
      if (nib_v.query_gid_ex(d->ctx, (uint32_t)d->port, (uint32_t)i, &e, 0, sizeof(e)) != 0)
        continue; /* an empty slot */
      memcpy(gids[i].raw, e.gid.raw, 16);
      gids[i].type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? NIB_GID_ROCE_V2
                     : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? NIB_GID_ROCE_V1
                                                          : NIB_GID_IB;
    } else {
      union ibv_gid g;
      if (nib_v.query_gid(d->ctx, (uint8_t)d->port, i, &g) != 0) continue;
      memcpy(gids[i].raw, g.raw, 16);
      gids[i].type = nib_gid_type_sysfs(d->hca, d->port, i);
    }
  }
  int idx = nib_g.knobs.gid_index;
  if (idx < 0) idx = nib_gid_pick(gids, n, nib_g.knobs.roce_version, family, range);
  bool ok = idx >= 0 && idx < n && gids[idx].type >= 0;
  if (ok) {
    d->gid_index = idx;
    memcpy(d->gid.raw, gids[idx].raw, 16);
  }
  free(gids);
  return ok;
}

static void nib_gid_str(const union ibv_gid* g, char* buf, size_t size) {
  if (nib_gid_is_v4(g->raw))
    inet_ntop(AF_INET, g->raw + 12, buf, (socklen_t)size);
  else
    inet_ntop(AF_INET6, g->raw, buf, (socklen_t)size);
}

/* Adds port `port` of the open device; takes ownership of nothing. */
static void nib_add_port(struct ibv_device* dev, const char* hca, int port,
                         const struct ibv_device_attr* da, int family, const nib_range_t* range) {
  if (nib_g.ndev == NIB_MAX_DEVS) {
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: more than %d ports; %s:%d and later are not used",
             NIB_MAX_DEVS, hca, port);
    return;
  }
  nib_dev_t* d = &nib_g.dev[nib_g.ndev];
  memset(d, 0, sizeof(*d));
  snprintf(d->hca, sizeof(d->hca), "%s", hca);
  snprintf(d->name, sizeof(d->name), "%s:%d", hca, port);
  d->port = port;
  d->ctx = nib_v.open_device(dev);
  if (d->ctx == NULL) {
    NIB_WARN("net-ib: ibv_open_device(%s) failed: %s; skipping it", hca, strerror(errno));
    return;
  }
  struct ibv_port_attr pa;
  if (nib_query_port(d->ctx, (uint8_t)port, &pa) != 0) goto skip;
  d->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                           : IBV_LINK_LAYER_INFINIBAND;
  d->lid = pa.lid;
  d->mtu = pa.active_mtu;
  d->max_msg = pa.max_msg_sz;
  d->speed = nib_port_speed_mbps(pa.active_speed, 0, pa.active_width); /* no _ex in rdma-core 44 */
  d->max_qp_wr = da->max_qp_wr;
  d->max_cqe = da->max_cqe;
  d->max_sge = da->max_sge;
  d->guid = be64toh(nib_v.get_device_guid(dev));
  if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
    if (!nib_pick_gid(d, &pa, family, range)) {
      NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: %s is RoCE but has no usable GID; skipping it",
               d->name);
      goto skip;
    }
  } else {
    d->gid_index = nib_g.knobs.gid_index >= 0 ? nib_g.knobs.gid_index : 0;
    if (nib_v.query_gid(d->ctx, (uint8_t)port, d->gid_index, &d->gid) != 0)
      memset(&d->gid, 0, sizeof(d->gid));
  }
  d->pd = nib_v.alloc_pd(d->ctx);
  if (d->pd == NULL) {
    NIB_WARN("net-ib: ibv_alloc_pd on %s failed: %s; skipping it", d->name, strerror(errno));
    goto skip;
  }
  int fl = fcntl(d->ctx->async_fd, F_GETFL);
  if (fl < 0 || fcntl(d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    NIB_WARN("net-ib: %s: making the async event queue non-blocking failed: %s; skipping it",
             d->name, strerror(errno));
    nib_v.dealloc_pd(d->pd);
    goto skip;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", hca);
  d->pci_path = realpath(path, NULL);
  pthread_mutex_init(&d->lock, NULL);
  nib_g.ndev++;
  return;
skip:
  nib_v.close_device(d->ctx);
  memset(d, 0, sizeof(*d));
}

static void nib_init_once(void) {
  nib_knobs_read(&nib_g.knobs, nib_getenv, nib_bad_knob, NULL);
  if (nib_g.knobs.disable) {
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: NCCL_IB_DISABLE=1: no devices");
    return;
  }
  const char* why = NULL;
  if (!nib_verbs_open(&why)) {
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: no devices: %s (install rdma-core's libibverbs)", why);
    return;
  }
  nib_hca_spec_t spec;
  const char* hca_env = getenv("NCCL_IB_HCA");
  if (!nib_hca_parse(hca_env, &spec))
    NIB_WARN("net-ib: NCCL_IB_HCA=%s is malformed (name[:port],... with an optional leading ^ "
             "or =); using every device",
             hca_env);
  int family = nib_family("NCCL_IB_ADDR_FAMILY", getenv("NCCL_IB_ADDR_FAMILY"), AF_INET);
  nib_range_t range;
  const char* range_env = getenv("NCCL_IB_ADDR_RANGE");
  if (!nib_range_parse(range_env, &range))
    NIB_WARN("net-ib: NCCL_IB_ADDR_RANGE=%s is not an address/length range; ignoring it",
             range_env);
  int n = 0;
  struct ibv_device** list = nib_v.get_device_list(&n);
  if (list == NULL) {
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: no devices: ibv_get_device_list failed: %s",
             strerror(errno));
    return;
  }
  for (int i = 0; i < n; i++) {
    const char* hca = nib_v.get_device_name(list[i]);
    struct ibv_context* ctx = nib_v.open_device(list[i]);
    if (ctx == NULL) {
      NIB_WARN("net-ib: ibv_open_device(%s) failed: %s; skipping it", hca, strerror(errno));
      continue;
    }
    struct ibv_device_attr da;
    int ports = 0;
    if (nib_v.query_device(ctx, &da) == 0) ports = da.phys_port_cnt;
    for (int p = 1; p <= ports; p++) {
      struct ibv_port_attr pa;
      if (nib_query_port(ctx, (uint8_t)p, &pa) != 0) continue;
      if (!nib_hca_match(&spec, hca, p)) continue;
      if (pa.state != IBV_PORT_ACTIVE) {
        NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: %s:%d is not active (state %d); skipping it", hca,
                 p, (int)pa.state);
        continue;
      }
      nib_add_port(list[i], hca, p, &da, family, &range);
    }
    nib_v.close_device(ctx);
  }
  nib_v.free_device_list(list);
  /* The handshake address: an interface the hosts share, as the bootstrap's. */
  int sfam = nib_family("NCCL_SOCKET_FAMILY", getenv("NCCL_SOCKET_FAMILY"), AF_UNSPEC);
  const char* ifs = getenv("NCCL_SOCKET_IFNAME");
  sock_if_t hs;
  int nif = 0;
  if (sock_if_scan(ifs != NULL && ifs[0] ? ifs : NULL, sfam, &hs, 1, &nif) == 0 && nif == 1) {
    nib_g.hs = hs.addr;
    snprintf(nib_g.hs_if, sizeof(nib_g.hs_if), "%s", hs.name);
    nib_g.hs_ok = true;
  }
  char line[1024];
  size_t used = 0;
  line[0] = '\0';
  for (int i = 0; i < nib_g.ndev && used < sizeof(line); i++) {
    nib_dev_t* d = &nib_g.dev[i];
    char gid[INET6_ADDRSTRLEN] = "";
    int w;
    if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
      nib_gid_str(&d->gid, gid, sizeof(gid));
      w = snprintf(line + used, sizeof(line) - used, "%s[%d]%s/RoCE GID %d %s", i ? " " : "", i,
                   d->name, d->gid_index, gid);
    } else {
      w = snprintf(line + used, sizeof(line) - used, "%s[%d]%s/IB LID %u", i ? " " : "", i,
                   d->name, (unsigned)d->lid);
    }
    if (w > 0) used += (size_t)w;
  }
  if (nib_g.ndev == 0)
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: no devices: %d HCA(s), no active port selected%s%s",
             n, hca_env != NULL ? " by NCCL_IB_HCA=" : "", hca_env != NULL ? hca_env : "");
  else
    NIB_INFO(NCCL_INIT | NCCL_NET, "net-ib: %d device(s): %s; handshake on %s; %d QP(s) per "
             "connection, maxRecvs %d",
             nib_g.ndev, line, nib_g.hs_ok ? nib_g.hs_if : "(no interface)", nib_g.knobs.qps,
             nib_g.knobs.max_recvs);
}

ncclResult_t nib_init(ncclDebugLogger_t logger) {
  pthread_mutex_lock(&nib_g.lock);
  if (nib_logger == NULL && logger != NULL) __atomic_store_n(&nib_logger, logger, __ATOMIC_RELEASE);
  if (!nib_g.initialized) {
    nib_init_once();
    nib_g.initialized = true;
  }
  pthread_mutex_unlock(&nib_g.lock);
  return ncclSuccess;
}

ncclResult_t nib_devices(int* ndev) {
  *ndev = nib_g.ndev;
  return ncclSuccess;
}

ncclResult_t nib_get_properties(int dev, ncclNetProperties_v12_t* props) {
  if (dev < 0 || dev >= nib_g.ndev) {
    NIB_WARN("net-ib: getProperties: device %d does not exist (%d devices)", dev, nib_g.ndev);
    return ncclInvalidArgument;
  }
  nib_dev_t* d = &nib_g.dev[dev];
  memset(props, 0, sizeof(*props));
  props->name = d->name;
  props->pciPath = d->pci_path;
  props->guid = d->guid;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1; /* registrations belong to the device's protection domain */
  props->forceFlush = 0;
  props->speed = d->speed;
  props->port = d->port;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = nib_g.knobs.max_recvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  /* One RDMA write per message: the port's largest message, and what test() reports (int). */
  size_t max = d->max_msg != 0 ? d->max_msg : (size_t)1 << 30;
  if (max > (size_t)0x7ffff000) max = 0x7ffff000;
  props->maxP2pBytes = max;
  props->maxCollBytes = max;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

void nib_dev_async_poll(nib_dev_t* d) {
  uint64_t now = nib_now_ms();
  if (now < __atomic_load_n(&d->async_next_ms, __ATOMIC_RELAXED)) return;
  __atomic_store_n(&d->async_next_ms, now + 100, __ATOMIC_RELAXED);
  for (;;) { /* the async fd is non-blocking (nib_add_port): this never waits */
    struct ibv_async_event ev;
    if (nib_v.get_async_event(d->ctx, &ev) != 0) break;
    switch (ev.event_type) {
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_PKEY_CHANGE:
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        NIB_INFO(NCCL_NET, "net-ib: %s: async event %s", d->name,
                 nib_v.event_type_str(ev.event_type));
        break;
      default: /* port down, fatal QP / CQ / device errors */
        NIB_WARN("net-ib: %s: async event %s", d->name, nib_v.event_type_str(ev.event_type));
        break;
    }
    nib_v.ack_async_event(&ev);
  }
}

/* ---- Registration cache --------------------------------------------------------------------
 * Per device: page-rounded ranges with reference counts. A registration that a live entry
 * covers takes a reference instead of a new memory region (the core registers the same buffers
 * for many connections); the last deregistration releases it. */

typedef struct {
  nib_dev_t* dev;
  struct ibv_mr* mr; /* the cache entry's (entries are found by it) */
} nib_mh_t;

ncclResult_t nib_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  nib_comm_t* c = comm;
  nib_dev_t* d = c->dev;
  *mhandle = NULL;
  if (type != NCCL_PTR_HOST) {
    NIB_WARN("net-ib: regMr of memory type %d; this plugin registers host memory only (%d): "
             "GPUDirect RDMA is not supported yet",
             type, NCCL_PTR_HOST);
    return ncclInvalidArgument;
  }
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t pg = page > 0 ? (uintptr_t)page : 4096;
  uintptr_t start = (uintptr_t)data & ~(pg - 1);
  uintptr_t end = ((uintptr_t)data + (size ? size : 1) + pg - 1) & ~(pg - 1);
  nib_mh_t* mh = calloc(1, sizeof(*mh));
  if (mh == NULL) {
    NIB_WARN("net-ib: regMr: out of memory");
    return ncclSystemError;
  }
  mh->dev = d;
  pthread_mutex_lock(&d->lock);
  for (int i = 0; i < d->nmrs; i++) {
    nib_mr_entry_t* e = &d->mrs[i];
    if ((uintptr_t)e->addr <= start && (uintptr_t)e->addr + e->len >= end) {
      e->refs++;
      mh->mr = e->mr;
      pthread_mutex_unlock(&d->lock);
      *mhandle = mh;
      return ncclSuccess;
    }
  }
  if (d->nmrs == d->cap_mrs) {
    int cap = d->cap_mrs ? 2 * d->cap_mrs : 16;
    nib_mr_entry_t* grown = realloc(d->mrs, (size_t)cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&d->lock);
      free(mh);
      NIB_WARN("net-ib: regMr: out of memory");
      return ncclSystemError;
    }
    d->mrs = grown;
    d->cap_mrs = cap;
  }
  struct ibv_mr* mr =
      nib_v.reg_mr(d->pd, (void*)start, end - start,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr == NULL) {
    int err = errno;
    pthread_mutex_unlock(&d->lock);
    free(mh);
    NIB_WARN("net-ib: ibv_reg_mr of %zu bytes at %p on %s failed: %s%s", (size_t)(end - start),
             (void*)start, d->name, strerror(err),
             err == ENOMEM ? " (raise the locked-memory limit: ulimit -l unlimited)" : "");
    return ncclSystemError;
  }
  d->mrs[d->nmrs++] = (nib_mr_entry_t){.addr = (void*)start, .len = end - start, .mr = mr,
                                       .refs = 1};
  mh->mr = mr;
  pthread_mutex_unlock(&d->lock);
  *mhandle = mh;
  return ncclSuccess;
}

ncclResult_t nib_dereg_mr(void* comm, void* mhandle) {
  (void)comm;
  nib_mh_t* mh = mhandle;
  if (mh == NULL) return ncclSuccess;
  nib_dev_t* d = mh->dev;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&d->lock);
  int i = 0;
  while (i < d->nmrs && d->mrs[i].mr != mh->mr) i++;
  if (i == d->nmrs) {
    res = ncclInternalError;
    NIB_WARN("net-ib: deregMr of a handle whose registration is not in %s's cache", d->name);
  } else if (--d->mrs[i].refs == 0) {
    if (nib_v.dereg_mr(d->mrs[i].mr) != 0) {
      NIB_WARN("net-ib: ibv_dereg_mr on %s failed: %s", d->name, strerror(errno));
      res = ncclSystemError;
    }
    d->mrs[i] = d->mrs[--d->nmrs];
  }
  pthread_mutex_unlock(&d->lock);
  free(mh);
  return res;
}

uint32_t nib_mh_lkey(void* mhandle) { return ((nib_mh_t*)mhandle)->mr->lkey; }
uint32_t nib_mh_rkey(void* mhandle) { return ((nib_mh_t*)mhandle)->mr->rkey; }
