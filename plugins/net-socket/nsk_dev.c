/*
 * net-socket devices: the interfaces chosen as the core's bootstrap chooses them
 * (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY, default order; common/sock_if.c), their properties
 * from sysfs, and the helper-thread knobs. Decided once per process, at the first init.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nsk.h"

ncclDebugLogger_t nsk_logger;
nsk_global_t nsk_g;

static pthread_mutex_t nsk_init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool nsk_inited;
static ncclResult_t nsk_init_res;

/* An integer knob in [lo, hi]; unset, malformed or out of range gives def (with a WARN). */
static int nsk_env_int(const char* name, int def, int lo, int hi) {
  const char* v = getenv(name);
  if (v == NULL || v[0] == '\0') return def;
  char* end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    NSK_WARN("net-socket: %s=%s is not an integer in %d..%d; using %d", name, v, lo, hi, def);
    return def;
  }
  return (int)x;
}

static int nsk_env_family(void) {
  const char* v = getenv("NCCL_SOCKET_FAMILY");
  if (v == NULL || v[0] == '\0') return AF_UNSPEC;
  if (strcasecmp(v, "AF_INET") == 0) return AF_INET;
  if (strcasecmp(v, "AF_INET6") == 0) return AF_INET6;
  NSK_WARN("net-socket: NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6; ignoring it", v);
  return AF_UNSPEC;
}

static int nsk_sysfs_speed(const char* ifname) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%.15s/speed", ifname);
  FILE* f = fopen(path, "r");
  int speed = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &speed) != 1) speed = -1;
    fclose(f);
  }
  /* Virtual interfaces (lo, veth, some VMs) report nothing or -1. */
  return speed > 0 ? speed : 10000;
}

static char* nsk_sysfs_pci(const char* ifname) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/net/%.15s/device", ifname);
  return realpath(path, NULL); /* NULL for virtual interfaces */
}

static ncclResult_t nsk_init_once(void) {
  const char* spec = getenv("NCCL_SOCKET_IFNAME");
  if (spec != NULL && spec[0] == '\0') spec = NULL;
  int family = nsk_env_family();
  sock_if_t ifs[NSK_MAX_DEVS];
  int n = 0;
  int err = sock_if_scan(spec, family, ifs, NSK_MAX_DEVS, &n);
  if (err != 0) {
    NSK_WARN("net-socket: listing network interfaces: getifaddrs failed: %s", strerror(err));
    return ncclSystemError;
  }
  if (n == 0) {
    NSK_WARN("net-socket: no network interface is up with a usable address%s%s%s",
             spec ? " matching NCCL_SOCKET_IFNAME=" : "", spec ? spec : "",
             family == AF_INET    ? " (AF_INET)"
             : family == AF_INET6 ? " (AF_INET6)"
                                  : "");
    return ncclSystemError;
  }
  for (int i = 0; i < n; i++) {
    nsk_dev_t* d = &nsk_g.dev[i];
    d->iface = ifs[i];
    d->pci_path = nsk_sysfs_pci(ifs[i].name);
    d->speed = nsk_sysfs_speed(ifs[i].name);
  }
  nsk_g.ndev = n;

  nsk_g.nthreads = nsk_env_int("NCCL_SOCKET_NTHREADS", NSK_DEFAULT_NTHREADS, 0, NSK_MAX_THREADS);
  nsk_g.nsocks = nsk_env_int("NCCL_NSOCKS_PERTHREAD", NSK_DEFAULT_NSOCKS, 1, NSK_MAX_SOCKS);
  nsk_g.spin_us = nsk_env_int("CHOIR_SOCKET_SPIN_US", NSK_DEFAULT_SPIN_US, 0, NSK_MAX_SPIN_US);
  nsk_g.inline_max = nsk_env_int("CHOIR_SOCKET_INLINE", NSK_DEFAULT_INLINE, 0, NSK_MAX_INLINE);
  if (nsk_g.nthreads > 0 && nsk_g.nthreads * nsk_g.nsocks > NSK_MAX_SOCKS) {
    int cut = NSK_MAX_SOCKS / nsk_g.nthreads;
    NSK_INFO(NCCL_INIT | NCCL_NET,
             "net-socket: NCCL_SOCKET_NTHREADS=%d x NCCL_NSOCKS_PERTHREAD=%d exceeds %d sockets; "
             "using %d sockets per thread",
             nsk_g.nthreads, nsk_g.nsocks, NSK_MAX_SOCKS, cut);
    nsk_g.nsocks = cut;
  }

  char list[512];
  size_t off = 0;
  list[0] = '\0';
  for (int i = 0; i < n && off < sizeof(list); i++)
    off +=
        (size_t)snprintf(list + off, sizeof(list) - off, "%s[%d]%s", i ? " " : "", i, ifs[i].name);
  NSK_INFO(NCCL_INIT | NCCL_NET,
           "net-socket: %d device(s): %s; %d helper thread(s) x %d socket(s) per connection, "
           "helpers poll %d us before sleeping, requests up to %d bytes on the control socket",
           n, list, nsk_g.nthreads, nsk_g.nsocks, nsk_g.spin_us, nsk_g.inline_max);
  return ncclSuccess;
}

ncclResult_t nsk_init(ncclDebugLogger_t logger) {
  pthread_mutex_lock(&nsk_init_lock);
  if (nsk_logger == NULL && logger != NULL) __atomic_store_n(&nsk_logger, logger, __ATOMIC_RELEASE);
  if (!nsk_inited) {
    nsk_init_res = nsk_init_once();
    nsk_inited = true;
  }
  ncclResult_t res = nsk_init_res;
  pthread_mutex_unlock(&nsk_init_lock);
  return res;
}

ncclResult_t nsk_devices(int* ndev) {
  *ndev = nsk_g.ndev;
  return ncclSuccess;
}

ncclResult_t nsk_get_properties(int dev, ncclNetProperties_v12_t* props) {
  if (dev < 0 || dev >= nsk_g.ndev) {
    NSK_WARN("net-socket: getProperties: device %d does not exist (%d devices)", dev, nsk_g.ndev);
    return ncclInvalidArgument;
  }
  nsk_dev_t* d = &nsk_g.dev[dev];
  memset(props, 0, sizeof(*props));
  props->name = d->iface.name;
  props->pciPath = d->pci_path;
  props->guid = (uint64_t)dev;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d->speed;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = NSK_MAX_BYTES;
  props->maxCollBytes = NSK_MAX_BYTES;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}
