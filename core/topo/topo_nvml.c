/*
 * NVML for NVLink discovery, loaded with dlopen so that Choir neither needs NVML's headers to
 * build nor the library to run. The few types used are declared here with NVML's layouts.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "topo.h"

typedef int nvml_return_t; /* NVML_SUCCESS is 0 */
typedef void* nvml_device_t;

/* nvmlPciInfo_t (the _v2/_v3 layout used by the *_v2 entry points). */
typedef struct {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
} nvml_pci_info_t;

/* nvmlIntNvLinkDeviceType_t values. */
enum { NVML_NVL_DEV_GPU = 0, NVML_NVL_DEV_IBMNPU = 1, NVML_NVL_DEV_SWITCH = 2 };
/* NVML_NVLINK_MAX_LINKS of the NVML versions Choir supports. */
#define NVML_MAX_LINKS 18

static struct {
  nvml_return_t (*init)(void);
  nvml_return_t (*handle_by_bus_id)(const char*, nvml_device_t*);
  nvml_return_t (*link_state)(nvml_device_t, unsigned int, int*);
  nvml_return_t (*remote_pci)(nvml_device_t, unsigned int, nvml_pci_info_t*);
  nvml_return_t (*remote_type)(nvml_device_t, unsigned int, int*); /* may be NULL (old NVML) */
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static ncclResult_t nvml_status = ncclSystemError;

static void nvml_load(void) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    INFO(NCCL_INIT | NCCL_GRAPH, "NVML not available (%s): no NVLink detection", dlerror());
    return;
  }
  *(void**)&nvml.init = dlsym(lib, "nvmlInit_v2");
  *(void**)&nvml.handle_by_bus_id = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void**)&nvml.link_state = dlsym(lib, "nvmlDeviceGetNvLinkState");
  *(void**)&nvml.remote_pci = dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  *(void**)&nvml.remote_type = dlsym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType");
  if (!nvml.init || !nvml.handle_by_bus_id || !nvml.link_state || !nvml.remote_pci) {
    INFO(NCCL_INIT | NCCL_GRAPH, "NVML lacks the NVLink entry points: no NVLink detection");
    dlclose(lib);
    return;
  }
  nvml_return_t r = nvml.init();
  if (r != 0) {
    INFO(NCCL_INIT | NCCL_GRAPH, "nvmlInit_v2 failed (%d): no NVLink detection", r);
    dlclose(lib);
    return;
  }
  /* The library stays loaded for the process: NVML handles are used until exit. */
  nvml_status = ncclSuccess;
}

static ncclResult_t nvml_device(const char* busid, nvml_device_t* dev_p) {
  nvml_return_t r = nvml.handle_by_bus_id(busid, dev_p);
  if (r != 0) {
    INFO(NCCL_GRAPH, "NVML has no device at %s (%d)", busid, r);
    return ncclSystemError;
  }
  return ncclSuccess;
}

static ncclResult_t nvml_link_count(void* ctx, const char* busid, int* n_p) {
  (void)ctx;
  nvml_device_t dev;
  *n_p = 0;
  if (nvml_device(busid, &dev) != ncclSuccess) return ncclSuccess;
  *n_p = NVML_MAX_LINKS;
  return ncclSuccess;
}

/* NVML writes 8-digit domains ("00000000:19:00.0"); the XML uses 4 ("0000:19:00.0") where the
 * domain fits. Lowercase either way. */
static void busid_normalize(const char* in, char* out, size_t size) {
  const char* s = in;
  if (strlen(in) == 16 && strncmp(in, "0000", 4) == 0 && in[8] == ':') s = in + 4;
  size_t i = 0;
  for (; s[i] && i + 1 < size; i++) out[i] = (s[i] >= 'A' && s[i] <= 'Z') ? s[i] + 32 : s[i];
  out[i] = '\0';
}

static ncclResult_t nvml_link_remote(void* ctx, const char* busid, int link, int* active_p,
                                     char* remote, size_t size, topo_nvl_remote_t* kind_p) {
  (void)ctx;
  nvml_device_t dev;
  *active_p = 0;
  if (nvml_device(busid, &dev) != ncclSuccess) return ncclSuccess;
  int state = 0;
  if (nvml.link_state(dev, (unsigned)link, &state) != 0 || state != 1) return ncclSuccess;
  nvml_pci_info_t pci;
  memset(&pci, 0, sizeof(pci));
  if (nvml.remote_pci(dev, (unsigned)link, &pci) != 0) return ncclSuccess;
  pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
  busid_normalize(pci.bus_id, remote, size);
  /* What is on the other side: NVML says so where it can; otherwise a GPU is something NVML
   * can open by that bus id, and anything else is an NVSwitch (VMs hide them). */
  int type = -1;
  if (nvml.remote_type == NULL || nvml.remote_type(dev, (unsigned)link, &type) != 0) type = -1;
  if (type == NVML_NVL_DEV_GPU) *kind_p = TOPO_NVL_REMOTE_GPU;
  else if (type == NVML_NVL_DEV_IBMNPU) *kind_p = TOPO_NVL_REMOTE_CPU;
  else if (type == NVML_NVL_DEV_SWITCH) *kind_p = TOPO_NVL_REMOTE_SWITCH;
  else {
    nvml_device_t peer;
    *kind_p = nvml.handle_by_bus_id(pci.bus_id, &peer) == 0 ? TOPO_NVL_REMOTE_GPU
                                                             : TOPO_NVL_REMOTE_SWITCH;
  }
  *active_p = 1;
  return ncclSuccess;
}

static const topo_nvml_ops_t nvml_ops = {
    .ctx = NULL, .link_count = nvml_link_count, .link_remote = nvml_link_remote};

ncclResult_t topo_nvml_ops_system(const topo_nvml_ops_t** ops_p) {
  pthread_once(&nvml_once, nvml_load);
  if (nvml_status != ncclSuccess) return nvml_status;
  *ops_p = &nvml_ops;
  return ncclSuccess;
}
