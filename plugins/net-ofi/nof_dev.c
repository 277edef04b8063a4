/*
 * net-ofi devices: the provider (FI_PROVIDER, CHOIR_OFI_PROVIDER, else the first remote-capable
 * one fi_getinfo lists), its domains as devices, their properties, and the knobs. Decided once
 * per process, at the first init.
 */
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "nof.h"

ncclDebugLogger_t nof_logger;
nof_global_t nof_g;

static pthread_mutex_t nof_init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool nof_inited;
static ncclResult_t nof_init_res;

static int nof_env_int(const char* name, int def, int lo, int hi) {
  const char* v = getenv(name);
  if (v == NULL || v[0] == '\0') return def;
  long x = 0;
  if (!nof_parse_int(v, lo, hi, &x)) {
    NOF_WARN("net-ofi: %s=%s is not an integer in %d..%d; using %d", name, v, lo, hi, def);
    return def;
  }
  return (int)x;
}

/* Typical one-way latency of a provider's network (us): fi_info has no such field, so a table. */
static float nof_latency_of(const char* prov) {
  static const struct {
    const char* core;
    float us;
  } t[] = {{"efa", 15.0f}, {"cxi", 2.0f},  {"verbs", 2.0f}, {"psm2", 1.5f},    {"psm3", 2.0f},
           {"opx", 1.5f},  {"tcp", 20.0f}, {"net", 20.0f},  {"sockets", 25.0f}};
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    if (nof_prov_match(t[i].core, prov)) return t[i].us;
  return 10.0f;
}

static int nof_sysfs_speed(const char* ifname) {
  char path[160];
  snprintf(path, sizeof(path), "/sys/class/net/%.64s/speed", ifname);
  FILE* f = fopen(path, "r");
  int speed = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &speed) != 1) speed = -1;
    fclose(f);
  }
  return speed;
}

static char* nof_pci_path(const struct fi_info* info) {
  char path[192];
  const struct fid_nic* nic = info->nic;
  if (nic != NULL && nic->bus_attr != NULL && nic->bus_attr->bus_type == FI_BUS_PCI) {
    const struct fi_pci_attr* p = &nic->bus_attr->attr.pci;
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", p->domain_id, p->bus_id,
             p->device_id, p->function_id);
    char* r = realpath(path, NULL);
    if (r != NULL) return r;
  }
  /* IP providers name the domain after the interface. */
  snprintf(path, sizeof(path), "/sys/class/net/%.64s/device", info->domain_attr->name);
  return realpath(path, NULL); /* NULL for virtual interfaces */
}

static int nof_addr_family(const struct fi_info* info) {
  if (info->src_addr == NULL) return AF_UNSPEC;
  if (info->addr_format == FI_SOCKADDR_IN) return AF_INET;
  if (info->addr_format == FI_SOCKADDR_IN6) return AF_INET6;
  if (info->addr_format == FI_SOCKADDR) return ((const struct sockaddr*)info->src_addr)->sa_family;
  return AF_UNSPEC;
}

static bool nof_link_local6(const struct fi_info* info) {
  if (nof_addr_family(info) != AF_INET6) return false;
  const struct sockaddr_in6* s = info->src_addr;
  return IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr); /* needs a scope id the peer cannot know */
}

static struct fi_info* nof_hints(bool hmem) {
  struct fi_info* h = fi_allocinfo();
  if (h == NULL) return NULL;
  h->caps = FI_TAGGED | (hmem ? FI_HMEM : 0);
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  /* Every registration mode this plugin can live with; fi_info tells which ones are required. */
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR |
                            FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
  h->domain_attr->threading = FI_THREAD_DOMAIN; /* one comm, one domain, one caller at a time */
  return h;
}

static const char* nof_family_name(int f) {
  return f == AF_INET ? " (AF_INET)" : f == AF_INET6 ? " (AF_INET6)" : "";
}

static ncclResult_t nof_init_once(void) {
  uint32_t v = fi_version();
  if (FI_MAJOR(v) < FI_MAJOR(NOF_FI_VERSION) ||
      (FI_MAJOR(v) == FI_MAJOR(NOF_FI_VERSION) && FI_MINOR(v) < FI_MINOR(NOF_FI_VERSION))) {
    NOF_WARN("net-ofi: libfabric %u.%u is too old (%u.%u or newer needed); no device", FI_MAJOR(v),
             FI_MINOR(v), FI_MAJOR(NOF_FI_VERSION), FI_MINOR(NOF_FI_VERSION));
    return ncclSuccess;
  }
  const char* want = getenv("CHOIR_OFI_PROVIDER");
  if (want != NULL && want[0] == '\0') want = NULL;
  const char* fi_prov = getenv("FI_PROVIDER");
  const char* domains = getenv("CHOIR_OFI_DOMAINS");
  if (domains != NULL && domains[0] == '\0') domains = NULL;
  nof_g.probe_ms = nof_env_int("CHOIR_OFI_PROBE_MS", NOF_DEFAULT_PROBE_MS, 0, NOF_MAX_PROBE_MS);
  nof_g.probe_timeout_ms = nof_env_int("CHOIR_OFI_PROBE_TIMEOUT_MS", NOF_DEFAULT_PROBE_TIMEOUT_MS,
                                       100, NOF_MAX_PROBE_MS);
  nof_g.reg_always = nof_env_int("CHOIR_OFI_REG", 0, 0, 1);
  int use_hmem = nof_env_int("CHOIR_OFI_HMEM", 1, 0, 1);
  int family = AF_UNSPEC;
  const char* fam = getenv("NCCL_SOCKET_FAMILY");
  if (fam != NULL && strcasecmp(fam, "AF_INET") == 0) family = AF_INET;
  if (fam != NULL && strcasecmp(fam, "AF_INET6") == 0) family = AF_INET6;

  /* Two queries: with FI_HMEM (CUDA memory) first, then without; a domain found by the first
   * keeps that fi_info, so its endpoints can take CUDA buffers. */
  struct fi_info* lists[2] = {NULL, NULL};
  for (int pass = use_hmem ? 0 : 1; pass < 2; pass++) {
    struct fi_info* hints = nof_hints(pass == 0);
    if (hints == NULL) {
      NOF_WARN("net-ofi: fi_allocinfo: out of memory");
      return ncclSystemError;
    }
    int rc = fi_getinfo(NOF_FI_VERSION, NULL, NULL, 0, hints, &lists[pass]);
    fi_freeinfo(hints);
    if (rc != 0) {
      lists[pass] = NULL;
      if (pass == 1 && rc != -FI_ENODATA)
        NOF_WARN("net-ofi: fi_getinfo failed: %s", fi_strerror(-rc));
    }
  }
  if (lists[1] == NULL) {
    NOF_WARN(
        "net-ofi: no libfabric provider offers reliable datagram endpoints with tagged "
        "messages (FI_EP_RDM, FI_TAGGED)%s%s; no device",
        fi_prov ? " with FI_PROVIDER=" : "", fi_prov ? fi_prov : "");
    fi_freeinfo(lists[0]);
    return ncclSuccess;
  }
  /* The provider: the first one the knob names, else the first that reaches other hosts. */
  const char* prov = NULL;
  for (struct fi_info* i = lists[1]; i != NULL && prov == NULL; i = i->next) {
    const char* p = i->fabric_attr->prov_name;
    if (want ? nof_prov_match(want, p) : !nof_prov_match("shm", p)) prov = p;
  }
  if (prov == NULL) {
    NOF_WARN(
        "net-ofi: no provider matches CHOIR_OFI_PROVIDER=%s%s%s (fi_info -t FI_EP_RDM lists "
        "them); no device",
        want ? want : "", fi_prov ? ", FI_PROVIDER=" : "", fi_prov ? fi_prov : "");
    fi_freeinfo(lists[0]);
    fi_freeinfo(lists[1]);
    return ncclSuccess;
  }
  snprintf(nof_g.prov, sizeof(nof_g.prov), "%s", prov);

  /* Devices: one per domain of that provider. */
  bool any_other = false; /* a domain other than loopback exists */
  for (struct fi_info* i = lists[1]; i != NULL; i = i->next)
    if (strcmp(i->fabric_attr->prov_name, nof_g.prov) == 0 && strcmp(i->domain_attr->name, "lo"))
      any_other = true;
  int n = 0;
  for (struct fi_info* i = lists[1]; i != NULL && n < NOF_MAX_DEVS; i = i->next) {
    const char* dom = i->domain_attr->name;
    if (strcmp(i->fabric_attr->prov_name, nof_g.prov) != 0) continue;
    if (!nof_list_match(domains, dom)) continue;
    if (domains == NULL && any_other && strcmp(dom, "lo") == 0) continue;
    if (nof_link_local6(i)) continue;
    if (family != AF_UNSPEC && nof_addr_family(i) != AF_UNSPEC && nof_addr_family(i) != family)
      continue;
    bool dup = false;
    for (int k = 0; k < n && !dup; k++)
      dup = strcmp(nof_g.dev[k].info->domain_attr->name, dom) == 0;
    if (dup) continue;
    /* The FI_HMEM variant of the same domain and address, when the provider has one. */
    const struct fi_info* use = i;
    for (struct fi_info* h = lists[0]; h != NULL; h = h->next)
      if (strcmp(h->fabric_attr->prov_name, nof_g.prov) == 0 &&
          strcmp(h->domain_attr->name, dom) == 0 && h->addr_format == i->addr_format &&
          h->src_addrlen == i->src_addrlen &&
          (i->src_addr == NULL || memcmp(h->src_addr, i->src_addr, i->src_addrlen) == 0)) {
        use = h;
        break;
      }
    nof_dev_t* d = &nof_g.dev[n];
    d->info = fi_dupinfo(use);
    if (d->info == NULL) {
      NOF_WARN("net-ofi: fi_dupinfo: out of memory");
      break;
    }
    int rc = fi_fabric(d->info->fabric_attr, &d->fabric, NULL);
    if (rc != 0) {
      NOF_WARN("net-ofi: %s: fi_fabric(%s) failed: %s; device skipped", nof_g.prov,
               d->info->fabric_attr->name, fi_strerror(-rc));
      fi_freeinfo(d->info);
      d->info = NULL;
      continue;
    }
    d->name = strdup(dom);
    d->pci_path = nof_pci_path(d->info);
    d->hmem = (d->info->caps & FI_HMEM) != 0;
    d->mr_local = (d->info->domain_attr->mr_mode & (FI_MR_LOCAL | FI_MR_BASIC)) != 0;
    d->latency = nof_latency_of(nof_g.prov);
    uint64_t bps = d->info->nic && d->info->nic->link_attr ? d->info->nic->link_attr->speed : 0;
    d->speed = bps >= 1000000 ? (int)(bps / 1000000 > INT_MAX ? INT_MAX : bps / 1000000) : 0;
    if (d->speed <= 0) d->speed = nof_sysfs_speed(dom);
    if (d->speed <= 0) d->speed = 10000; /* virtual interfaces report nothing */
    uint64_t g = 0xcbf29ce484222325ULL;  /* FNV-1a of the domain name: same NIC, same guid */
    for (const char* c = dom; *c; c++) g = (g ^ (uint8_t)*c) * 0x100000001b3ULL;
    d->guid = g;
    n++;
  }
  fi_freeinfo(lists[0]);
  fi_freeinfo(lists[1]);
  nof_g.ndev = n;
  if (n == 0) {
    NOF_WARN("net-ofi: provider %s has no usable domain%s%s%s; no device", nof_g.prov,
             domains ? " matching CHOIR_OFI_DOMAINS=" : "", domains ? domains : "",
             nof_family_name(family));
    return ncclSuccess;
  }
  char list[512];
  size_t off = 0;
  list[0] = '\0';
  for (int i = 0; i < n && off < sizeof(list); i++)
    off += (size_t)snprintf(list + off, sizeof(list) - off, "%s[%d]%s%s%s", i ? " " : "", i,
                            nof_g.dev[i].name,
                            nof_addr_family(nof_g.dev[i].info) == AF_INET    ? "/IPv4"
                            : nof_addr_family(nof_g.dev[i].info) == AF_INET6 ? "/IPv6"
                                                                             : "",
                            nof_g.dev[i].hmem ? "/hmem" : "");
  NOF_INFO(NCCL_INIT | NCCL_NET,
           "net-ofi: libfabric %u.%u, provider %s, %d device(s): %s; registration %s, "
           "liveness probe every %d ms, peer gone after %d ms without an answer",
           FI_MAJOR(v), FI_MINOR(v), nof_g.prov, n, list,
           nof_g.dev[0].mr_local ? "required"
           : nof_g.reg_always    ? "forced"
                                 : "only if needed",
           nof_g.probe_ms, nof_g.probe_timeout_ms);
  return ncclSuccess;
}

ncclResult_t nof_init(ncclDebugLogger_t logger) {
  pthread_mutex_lock(&nof_init_lock);
  if (nof_logger == NULL && logger != NULL) __atomic_store_n(&nof_logger, logger, __ATOMIC_RELEASE);
  if (!nof_inited) {
    nof_init_res = nof_init_once();
    nof_inited = true;
  }
  ncclResult_t res = nof_init_res;
  pthread_mutex_unlock(&nof_init_lock);
  return res;
}

ncclResult_t nof_devices(int* ndev) {
  *ndev = nof_g.ndev;
  return ncclSuccess;
}

ncclResult_t nof_get_properties(int dev, ncclNetProperties_v12_t* props) {
  if (dev < 0 || dev >= nof_g.ndev) {
    NOF_WARN("net-ofi: getProperties: device %d does not exist (%d devices)", dev, nof_g.ndev);
    return ncclInvalidArgument;
  }
  nof_dev_t* d = &nof_g.dev[dev];
  size_t max_msg = d->info->ep_attr->max_msg_size;
  memset(props, 0, sizeof(*props));
  props->name = d->name;
  props->pciPath = d->pci_path;
  props->guid = d->guid;
  props->ptrSupport = NCCL_PTR_HOST | (d->hmem ? NCCL_PTR_CUDA : 0);
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d->speed;
  props->port = 0;
  props->latency = d->latency;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = max_msg != 0 && max_msg < NOF_MAX_BYTES ? max_msg : NOF_MAX_BYTES;
  props->maxCollBytes = props->maxP2pBytes;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}
