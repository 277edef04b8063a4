/*
 * Detection into the XML tree: the PCI chain of each GPU and NIC from sysfs, CPUs by NUMA node,
 * NVLinks from NVML, and topo_system_build, the entry communicator creation calls.
 *
 * sysfs layout used (all under env->sysfs_root):
 *   bus/pci/devices/<busid>  symlink to devices/pciDDDD:BB/<bridge>/.../<busid>
 *   <device dir>/{class,vendor,device,subsystem_vendor,subsystem_device}  "0x060400"
 *   <device dir>/{max_link_speed,max_link_width,numa_node}
 *   devices/system/node/node<N>/cpumap   the NUMA node's CPU mask
 */
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include <cuda_runtime_api.h>

#include "topo.h"
#include "topo_internal.h"

#define BUSID_LEN 32

/* First line of a small sysfs file, without the newline; false when unreadable or empty. */
static bool read_line(const char* dir, const char* name, char* buf, size_t size) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) return false;
  FILE* f = fopen(path, "r");
  if (f == NULL) return false;
  bool ok = fgets(buf, (int)size, f) != NULL;
  fclose(f);
  if (!ok) return false;
  buf[strcspn(buf, "\n")] = '\0';
  return buf[0] != '\0';
}

static ncclResult_t set_from_file(topo_xml_node_t* x, const char* attr, const char* dir,
                                  const char* file) {
  char buf[256];
  if (read_line(dir, file, buf, sizeof(buf))) CHECK(topo_xml_set_default(x, attr, buf));
  return ncclSuccess;
}

/* ---- CPUs ---------------------------------------------------------------------------------- */

static void cpuinfo_field(const char* path, const char* key, char* out, size_t size) {
  out[0] = '\0';
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[512];
  size_t klen = strlen(key);
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, klen) != 0) continue;
    const char* p = line + klen;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != ':') continue;
    p++;
    while (*p == ' ') p++;
    sys_strlcpy(out, p, size);
    out[strcspn(out, "\n")] = '\0';
    break;
  }
  fclose(f);
}

static ncclResult_t cpu_get(const topo_detect_env_t* env, topo_xml_node_t* root, int numa,
                            topo_xml_node_t** cpu_p) {
  char id[16];
  snprintf(id, sizeof(id), "%d", numa);
  topo_xml_node_t* cpu = topo_xml_find_child(root, "cpu", "numaid", id);
  if (cpu == NULL) CHECK(topo_xml_add_child(root, "cpu", &cpu));
  CHECK(topo_xml_set_default(cpu, "numaid", id));
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s/devices/system/node/node%d", env->sysfs_root, numa);
  CHECK(set_from_file(cpu, "affinity", dir, "cpumap"));
  struct utsname u;
  const char* arch = uname(&u) == 0 ? u.machine : NULL;
  /* A fake sysfs comes with its own cpuinfo; the machine name then follows the cpuinfo kind. */
  if (arch != NULL) CHECK(topo_xml_set_default(cpu, "arch", arch));
  char v[128];
  cpuinfo_field(env->cpuinfo_path, "vendor_id", v, sizeof(v));
  if (v[0]) CHECK(topo_xml_set_default(cpu, "vendor", v));
  cpuinfo_field(env->cpuinfo_path, "cpu family", v, sizeof(v));
  if (v[0]) CHECK(topo_xml_set_default(cpu, "familyid", v));
  cpuinfo_field(env->cpuinfo_path, "model", v, sizeof(v));
  if (v[0]) CHECK(topo_xml_set_default(cpu, "modelid", v));
  *cpu_p = cpu;
  return ncclSuccess;
}

/* ---- PCI chains ---------------------------------------------------------------------------- */

/* The <pci> element of busid with its whole sysfs chain, created where missing. Without sysfs
 * (or without the device in it) the element hangs directly off a CPU: the flat case. */
static ncclResult_t pci_get(const topo_detect_env_t* env, topo_xml_node_t* root, const char* busid,
                            const char* sysfs_path, topo_xml_node_t** pci_p) {
  topo_xml_node_t* found = topo_xml_find(root, "pci", "busid", busid);
  if (found != NULL) {
    *pci_p = found;
    return ncclSuccess;
  }
  char link[PATH_MAX], real[PATH_MAX];
  if (sysfs_path != NULL) sys_strlcpy(link, sysfs_path, sizeof(link));
  else snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", env->sysfs_root, busid);
  bool have_sysfs = realpath(link, real) != NULL;

  char numa_str[16];
  int numa = 0;
  if (have_sysfs && read_line(real, "numa_node", numa_str, sizeof(numa_str)))
    numa = atoi(numa_str) < 0 ? 0 : atoi(numa_str);
  topo_xml_node_t* parent;
  if (!have_sysfs && root->nchildren > 0 && topo_xml_find_child(root, "cpu", NULL, NULL)) {
    parent = topo_xml_find_child(root, "cpu", NULL, NULL);
  } else {
    CHECK(cpu_get(env, root, numa, &parent));
  }
  if (!have_sysfs) {
    INFO(NCCL_GRAPH, "topology: %s not in sysfs (%s): attached directly to CPU %s", busid, link,
         topo_xml_get(parent, "numaid"));
    topo_xml_node_t* pci;
    CHECK(topo_xml_add_child(parent, "pci", &pci));
    CHECK(topo_xml_set(pci, "busid", busid));
    *pci_p = pci;
    return ncclSuccess;
  }
  /* The bus-id components of the resolved path, root port first, the device last. Like NCCL,
   * a PCIe switch is one node named by its upstream port: from the device up, every other
   * component is kept (the downstream port above each device or switch, and the root port,
   * are links, not nodes). */
  size_t len = strlen(real);
  size_t starts[64], ends[64];
  int ncomp = 0;
  for (size_t start = 0; start < len && ncomp < 64;) {
    size_t end = start;
    while (end < len && real[end] != '/') end++;
    char comp[BUSID_LEN];
    size_t clen = end - start;
    if (clen > 0 && clen < sizeof(comp)) {
      memcpy(comp, real + start, clen);
      comp[clen] = '\0';
      /* Two colons: "dddd:bb:dd.f" (the root complex "pci0000:00" is not a device). */
      if (topo_busid_parse(comp) >= 0 && strchr(comp, ':') != strrchr(comp, ':')) {
        starts[ncomp] = start;
        ends[ncomp++] = end;
      }
    }
    start = end + 1;
  }
  topo_xml_node_t* cur = parent;
  for (int i = (ncomp - 1) % 2; i < ncomp; i += 2) {
    char comp[BUSID_LEN];
    snprintf(comp, sizeof(comp), "%.*s", (int)(ends[i] - starts[i]), real + starts[i]);
    for (char* c = comp; *c; c++)
      if (*c >= 'A' && *c <= 'F') *c += 32;
    topo_xml_node_t* pci = topo_xml_find_child(cur, "pci", "busid", comp);
    if (pci == NULL) {
      CHECK(topo_xml_add_child(cur, "pci", &pci));
      CHECK(topo_xml_set(pci, "busid", comp));
    }
    /* This level's directory: the resolved path up to and including the component. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.*s", (int)ends[i], real);
    CHECK(set_from_file(pci, "class", dir, "class"));
    CHECK(set_from_file(pci, "vendor", dir, "vendor"));
    CHECK(set_from_file(pci, "device", dir, "device"));
    CHECK(set_from_file(pci, "subsystem_vendor", dir, "subsystem_vendor"));
    CHECK(set_from_file(pci, "subsystem_device", dir, "subsystem_device"));
    CHECK(set_from_file(pci, "link_speed", dir, "max_link_speed"));
    CHECK(set_from_file(pci, "link_width", dir, "max_link_width"));
    cur = pci;
  }
  if (cur == parent || strcmp(topo_xml_get(cur, "busid"), busid) != 0) {
    /* The path did not end at the device (a sysfs we do not understand): flat again. */
    topo_xml_node_t* pci;
    CHECK(topo_xml_add_child(parent, "pci", &pci));
    CHECK(topo_xml_set(pci, "busid", busid));
    cur = pci;
  }
  *pci_p = cur;
  return ncclSuccess;
}

/* ---- GPUs and NICs ------------------------------------------------------------------------- */

static ncclResult_t cuda_sm(void* ctx, int dev, int* sm_p) {
  (void)ctx;
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess) {
    WARN("cannot read the compute capability of CUDA device %d: %s", dev, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  *sm_p = major * 10 + minor;
  return ncclSuccess;
}

static ncclResult_t gpu_nvlinks(const topo_nvml_ops_t* nvml, const char* busid,
                                topo_xml_node_t* gpu) {
  if (topo_xml_find_child(gpu, "nvlink", NULL, NULL) != NULL) return ncclSuccess; /* from file */
  int nlinks = 0;
  CHECK(nvml->link_count(nvml->ctx, busid, &nlinks));
  for (int l = 0; l < nlinks; l++) {
    int active = 0;
    char remote[BUSID_LEN] = "";
    topo_nvl_remote_t kind = TOPO_NVL_REMOTE_SWITCH;
    CHECK(nvml->link_remote(nvml->ctx, busid, l, &active, remote, sizeof(remote), &kind));
    if (!active) continue;
    const char* cls = kind == TOPO_NVL_REMOTE_GPU   ? "0x030200"
                      : kind == TOPO_NVL_REMOTE_CPU ? "0x060400"
                                                    : "0x068000";
    topo_xml_node_t* nv = topo_xml_find_child(gpu, "nvlink", "target", remote);
    if (nv == NULL) {
      CHECK(topo_xml_add_child(gpu, "nvlink", &nv));
      CHECK(topo_xml_set(nv, "target", remote));
      CHECK(topo_xml_set_int(nv, "count", 0));
      CHECK(topo_xml_set(nv, "tclass", cls));
    }
    CHECK(topo_xml_set_int(nv, "count", topo_xml_get_int(nv, "count", 0) + 1));
  }
  return ncclSuccess;
}

static ncclResult_t detect_gpu(const topo_detect_env_t* env, const topo_nvml_ops_t* nvml,
                               const topo_rank_info_t* r, topo_xml_node_t* root) {
  char busid[BUSID_LEN];
  topo_busid_str(r->bus_id, busid, sizeof(busid));
  topo_xml_node_t* pci;
  CHECK(pci_get(env, root, busid, NULL, &pci));
  CHECK(topo_xml_set_default(pci, "class", "0x030200"));
  topo_xml_node_t* gpu = topo_xml_find_child(pci, "gpu", NULL, NULL);
  if (gpu == NULL) CHECK(topo_xml_add_child(pci, "gpu", &gpu));
  /* dev and rank belong to this run, whatever a loaded file says. */
  CHECK(topo_xml_set_int(gpu, "dev", r->cuda_dev));
  if (topo_xml_get(gpu, "sm") == NULL) {
    int sm;
    CHECK(env->gpu_sm(env->gpu_sm_ctx, r->cuda_dev, &sm));
    CHECK(topo_xml_set_int(gpu, "sm", sm));
  }
  CHECK(topo_xml_set_int(gpu, "rank", r->rank));
  CHECK(topo_xml_set_default(gpu, "gdr", "1"));
  if (nvml != NULL) CHECK(gpu_nvlinks(nvml, busid, gpu));
  return ncclSuccess;
}

static ncclResult_t detect_nic(const topo_detect_env_t* env, const topo_nic_props_t* p, int dev,
                               topo_xml_node_t* root) {
  if (topo_xml_find(root, "net", "name", p->name) != NULL) return ncclSuccess; /* from file */
  topo_xml_node_t* parent = NULL;
  char real[PATH_MAX];
  if (p->pci_path != NULL && realpath(p->pci_path, real) != NULL) {
    const char* base = strrchr(real, '/');
    base = base ? base + 1 : real;
    if (topo_busid_parse(base) >= 0) {
      char busid[BUSID_LEN];
      sys_strlcpy(busid, base, sizeof(busid));
      CHECK(pci_get(env, root, busid, real, &parent));
      CHECK(topo_xml_set_default(parent, "class", "0x020000"));
    }
  }
  if (parent == NULL) {
    parent = topo_xml_find_child(root, "cpu", NULL, NULL);
    if (parent == NULL) CHECK(cpu_get(env, root, 0, &parent));
  }
  topo_xml_node_t* nic = topo_xml_find_child(parent, "nic", NULL, NULL);
  if (nic == NULL) CHECK(topo_xml_add_child(parent, "nic", &nic));
  topo_xml_node_t* net;
  CHECK(topo_xml_add_child(nic, "net", &net));
  char buf[64];
  CHECK(topo_xml_set(net, "name", p->name ? p->name : "net"));
  CHECK(topo_xml_set_int(net, "dev", dev));
  CHECK(topo_xml_set_int(net, "speed", p->speed_mbps));
  CHECK(topo_xml_set_int(net, "port", p->port));
  snprintf(buf, sizeof(buf), "%f", (double)p->latency_us);
  CHECK(topo_xml_set(net, "latency", buf));
  snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)p->guid);
  CHECK(topo_xml_set(net, "guid", buf));
  CHECK(topo_xml_set_int(net, "maxconn", p->max_comms));
  CHECK(topo_xml_set_int(net, "gdr", p->gdr ? 1 : 0));
  CHECK(topo_xml_set_int(net, "coll", p->coll ? 1 : 0));
  return ncclSuccess;
}

/* ---- Canonical order ----------------------------------------------------------------------- */

typedef struct {
  topo_xml_node_t* node;
  int64_t key;
  const char* skey;
  int pos;
} sort_item_t;

static int sort_cmp(const void* a, const void* b) {
  const sort_item_t* x = a;
  const sort_item_t* y = b;
  if (x->skey && y->skey) {
    int c = strcmp(x->skey, y->skey);
    if (c) return c;
  } else if (x->key != y->key) {
    return x->key < y->key ? -1 : 1;
  }
  return x->pos - y->pos;
}

/* Sort the children named `name` by their key among themselves, in the slots they occupy, so
 * that other elements (unknown ones included) keep their places. */
static ncclResult_t sort_named(topo_xml_node_t* x, const char* name, const char* attr,
                               bool numeric) {
  int n = 0;
  for (int i = 0; i < x->nchildren; i++) n += strcmp(x->children[i]->name, name) == 0;
  if (n < 2) return ncclSuccess;
  sort_item_t* items;
  CHECK(MEM_CALLOC(&items, (size_t)n));
  int k = 0;
  for (int i = 0; i < x->nchildren; i++) {
    topo_xml_node_t* c = x->children[i];
    if (strcmp(c->name, name) != 0) continue;
    const char* v = topo_xml_get(c, attr);
    items[k] = (sort_item_t){.node = c, .pos = i};
    if (numeric) {
      int64_t key = strcmp(attr, "busid") == 0 ? topo_busid_parse(v) : topo_xml_get_int(c, attr, -1);
      items[k].key = key < 0 ? INT64_MAX : key;
    } else {
      items[k].skey = v ? v : "";
    }
    k++;
  }
  qsort(items, (size_t)n, sizeof(*items), sort_cmp);
  k = 0;
  for (int i = 0; i < x->nchildren; i++)
    if (strcmp(x->children[i]->name, name) == 0) x->children[i] = items[k++].node;
  free(items);
  return ncclSuccess;
}

static ncclResult_t sort_tree(topo_xml_node_t* x) {
  CHECK(sort_named(x, "cpu", "numaid", true));
  CHECK(sort_named(x, "pci", "busid", true));
  CHECK(sort_named(x, "nvlink", "target", false));
  CHECK(sort_named(x, "net", "dev", true));
  for (int i = 0; i < x->nchildren; i++) CHECK(sort_tree(x->children[i]));
  return ncclSuccess;
}

/* ---- Entry points -------------------------------------------------------------------------- */

static ncclResult_t topo_detect_locked(const topo_detect_env_t* env_in,
                                       const topo_rank_info_t* ranks, int nranks,
                                       const topo_nic_props_t* nics, int nnics,
                                       topo_xml_node_t** root_p) {
  topo_detect_env_t env = {0};
  if (env_in != NULL) env = *env_in;
  if (env.sysfs_root == NULL) env.sysfs_root = "/sys";
  if (env.cpuinfo_path == NULL) env.cpuinfo_path = "/proc/cpuinfo";
  if (env.gpu_sm == NULL) env.gpu_sm = cuda_sm;
  const topo_nvml_ops_t* nvml = env.nvml;
  if (env.no_nvml) nvml = NULL;
  else if (nvml == NULL && nranks > 0 && topo_nvml_ops_system(&nvml) != ncclSuccess) nvml = NULL;

  topo_xml_node_t* root = *root_p;
  bool created = false;
  if (root == NULL) {
    CHECK(topo_xml_new("system", &root));
    created = true;
    ncclResult_t r = topo_xml_set(root, "version", "1");
    if (r != ncclSuccess) {
      topo_xml_free(root);
      return r;
    }
  }
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nranks; i++) CHECK_GOTO(detect_gpu(&env, nvml, &ranks[i], root), res, fail);
  for (int i = 0; i < nnics; i++) CHECK_GOTO(detect_nic(&env, &nics[i], i, root), res, fail);
  CHECK_GOTO(sort_tree(root), res, fail);
  *root_p = root;
  return ncclSuccess;
fail:
  if (created) topo_xml_free(root);
  return res;
}

/* One detection at a time in a process: communicators created together (one thread per GPU)
 * raced on detection's process-wide state and came out with different models (some without
 * NVLinks), hence different transport choices on the two ends of a pair. */
ncclResult_t topo_detect(const topo_detect_env_t* env, const topo_rank_info_t* ranks, int nranks,
                         const topo_nic_props_t* nics, int nnics, topo_xml_node_t** root_p) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  ncclResult_t res = topo_detect_locked(env, ranks, nranks, nics, nnics, root_p);
  pthread_mutex_unlock(&lock);
  return res;
}

ncclResult_t topo_system_build(const topo_detect_env_t* env, const topo_rank_info_t* ranks,
                               int nranks, int my_rank, const topo_nic_props_t* nics, int nnics,
                               topo_system_t** sys_p) {
  topo_xml_node_t* root = NULL;
  const char* file = param_str(PARAM_TOPO_FILE);
  if (file != NULL && file[0] != '\0') {
    INFO(NCCL_GRAPH | NCCL_ENV, "NCCL_TOPO_FILE set by environment to %s", file);
    CHECK(topo_xml_load(file, &root));
    if (strcmp(root->name, "system") != 0) {
      WARN("topology file %s: the root element is <%s>, expected <system version=\"1\">", file,
           root->name);
      topo_xml_free(root);
      return ncclInvalidArgument;
    }
  }
  ncclResult_t res = topo_detect(env, ranks, nranks, nics, nnics, &root);
  if (res != ncclSuccess) {
    topo_xml_free(root);
    return res;
  }
  const char* dump = param_str(PARAM_TOPO_DUMP_FILE);
  if (dump != NULL && dump[0] != '\0' && my_rank == (int)param_int(PARAM_TOPO_DUMP_FILE_RANK)) {
    INFO(NCCL_GRAPH | NCCL_ENV, "NCCL_TOPO_DUMP_FILE set by environment to %s", dump);
    res = topo_xml_dump(root, dump);
    if (res != ncclSuccess) {
      topo_xml_free(root);
      return res;
    }
  }
  topo_system_t* sys;
  CHECK(topo_system_from_xml(root, &sys));
  topo_system_print(sys);
  *sys_p = sys;
  return ncclSuccess;
}
