/*
 * The system model: nodes and links from an XML tree (the only way a model is made), then the
 * paths between nodes by a breadth-first search that keeps, among the paths with fewest hops,
 * the widest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_internal.h"

/* ---- Names and constants ------------------------------------------------------------------- */

const char* topo_node_type_name(topo_node_type_t t) {
  static const char* names[TOPO_NODE_TYPES] = {"GPU", "PCI", "NVS", "CPU", "NIC", "NET"};
  return (unsigned)t < TOPO_NODE_TYPES ? names[t] : "?";
}

const char* topo_link_type_name(topo_link_type_t t) {
  switch (t) {
    case TOPO_LINK_LOC: return "LOC";
    case TOPO_LINK_NVL: return "NVL";
    case TOPO_LINK_C2C: return "C2C";
    case TOPO_LINK_PCI: return "PCI";
    case TOPO_LINK_SYS: return "SYS";
    case TOPO_LINK_NET: return "NET";
  }
  return "?";
}

static const char* path_names[TOPO_PATH_TYPES] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                                  "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};

const char* topo_path_type_name(int t) {
  return t >= 0 && t < TOPO_PATH_TYPES ? path_names[t] : "?";
}

float topo_nvlink_bw_per_link(int sm) {
  if (sm < 60) return 0.0f;
  if (sm < 70) return 18.0f;
  if (sm == 86 || sm == 87 || sm == 89) return 12.0f;
  if (sm < 90) return 20.0f;
  if (sm < 100) return 20.6f;
  return 40.1f;
}

float topo_pci_bw(const char* link_speed, int link_width) {
  /* NCCL's rule: GB/s = width * per-lane factor / 80, the factor being 15, 30, 60, 120, 240, 480
   * for 2.5, 5, 8, 16, 32, 64 GT/s (gen3 x16 = 12 GB/s). */
  if (link_speed == NULL || link_width <= 0) return TOPO_PCI_BW_DEFAULT;
  double gts = strtod(link_speed, NULL);
  static const struct {
    double gts;
    int factor;
  } gens[] = {{2.5, 15}, {5.0, 30}, {8.0, 60}, {16.0, 120}, {32.0, 240}, {64.0, 480}};
  for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
    if (gts > gens[i].gts - 0.1 && gts < gens[i].gts + 0.1)
      return (float)(link_width * gens[i].factor) / 80.0f;
  }
  return TOPO_PCI_BW_DEFAULT;
}

static float cpu_sys_bw(const topo_node_t* cpu) {
  switch (cpu->cpu.arch) {
    case TOPO_CPU_ARCH_POWER: return 32.0f;
    case TOPO_CPU_ARCH_ARM: return 6.0f;
    case TOPO_CPU_ARCH_X86:
      if (cpu->cpu.vendor == TOPO_CPU_VENDOR_INTEL) {
        if (cpu->cpu.model >= 0xCF) return 40.0f; /* Emerald Rapids */
        if (cpu->cpu.model >= 0x8F) return 22.0f; /* Sapphire Rapids */
        if (cpu->cpu.model >= 0x55) return 10.0f; /* Skylake */
        return 6.0f;                              /* Broadwell and older */
      }
      if (cpu->cpu.vendor == TOPO_CPU_VENDOR_AMD) {
        if (cpu->cpu.family >= 0x1A) return 32.0f; /* Zen 5 */
        if (cpu->cpu.family == 0x19) return 24.0f; /* Zen 3/4 */
        return 16.0f;
      }
      if (cpu->cpu.vendor == TOPO_CPU_VENDOR_ZHAOXIN) return cpu->cpu.model == 0x5b ? 9.0f : 6.0f;
      return 6.0f;
    case TOPO_CPU_ARCH_UNKNOWN: break;
  }
  return 6.0f;
}

void topo_cpu_kind_parse(const char* arch, const char* vendor, topo_cpu_arch_t* arch_p,
                         topo_cpu_vendor_t* vendor_p) {
  *arch_p = TOPO_CPU_ARCH_UNKNOWN;
  *vendor_p = TOPO_CPU_VENDOR_UNKNOWN;
  if (arch != NULL) {
    if (strcmp(arch, "x86_64") == 0) *arch_p = TOPO_CPU_ARCH_X86;
    else if (strncmp(arch, "ppc64", 5) == 0) *arch_p = TOPO_CPU_ARCH_POWER;
    else if (strcmp(arch, "arm64") == 0 || strcmp(arch, "aarch64") == 0)
      *arch_p = TOPO_CPU_ARCH_ARM;
  }
  if (vendor != NULL) {
    if (strcmp(vendor, "GenuineIntel") == 0) *vendor_p = TOPO_CPU_VENDOR_INTEL;
    else if (strcmp(vendor, "AuthenticAMD") == 0) *vendor_p = TOPO_CPU_VENDOR_AMD;
    else if (strcmp(vendor, "CentaurHauls") == 0 || strstr(vendor, "Shanghai") != NULL)
      *vendor_p = TOPO_CPU_VENDOR_ZHAOXIN;
  }
}

/* ---- Building ------------------------------------------------------------------------------ */

static ncclResult_t node_add(topo_system_t* sys, topo_node_type_t type, int64_t id,
                             const topo_xml_node_t* xml, topo_node_t** node_p) {
  if (sys->count[type] >= TOPO_MAX_NODES) {
    WARN("topology: more than %d %s nodes (element <%s> line %d); the topology is not a single "
         "host's",
         TOPO_MAX_NODES, topo_node_type_name(type), xml ? xml->name : "?", xml ? xml->line : 0);
    return ncclInvalidArgument;
  }
  topo_node_t* n = &sys->nodes[type][sys->count[type]];
  memset(n, 0, sizeof(*n));
  n->type = type;
  n->index = sys->count[type]++;
  n->id = id;
  n->xml = xml;
  *node_p = n;
  return ncclSuccess;
}

static topo_node_t* node_find(const topo_system_t* sys, topo_node_type_t type, int64_t id) {
  for (int i = 0; i < sys->count[type]; i++)
    if (sys->nodes[type][i].id == id) return &sys->nodes[type][i];
  return NULL;
}

/* One direction. Parallel links of one type between the same two nodes add up (NVLinks). */
static ncclResult_t link_add(topo_node_t* a, topo_node_t* b, topo_link_type_t type, float bw,
                             int count) {
  for (int i = 0; i < a->nlinks; i++) {
    topo_link_t* l = &a->links[i];
    if (l->rem == b && l->type == type) {
      l->bw += bw;
      l->count += count;
      return ncclSuccess;
    }
  }
  topo_link_t* links = realloc(a->links, sizeof(*links) * (size_t)(a->nlinks + 1));
  if (links == NULL) {
    WARN("out of host memory adding a topology link");
    return ncclSystemError;
  }
  a->links = links;
  links[a->nlinks++] = (topo_link_t){.type = type, .bw = bw, .count = count, .rem = b};
  return ncclSuccess;
}

static ncclResult_t link_both(topo_node_t* a, topo_node_t* b, topo_link_type_t type, float bw,
                              int count) {
  CHECK(link_add(a, b, type, bw, count));
  CHECK(link_add(b, a, type, bw, count));
  return ncclSuccess;
}

static bool class_is(const char* cls, const char* prefix) {
  return cls != NULL && strncmp(cls, prefix, strlen(prefix)) == 0;
}

static ncclResult_t build_nic(topo_system_t* sys, const topo_xml_node_t* nic_xml, int64_t id,
                              topo_node_t* parent, float bw) {
  topo_node_t* nic = node_find(sys, TOPO_NODE_NIC, id);
  if (nic == NULL) {
    CHECK(node_add(sys, TOPO_NODE_NIC, id, nic_xml, &nic));
    CHECK(link_both(nic, parent, TOPO_LINK_PCI, bw, 1));
  }
  for (int i = 0; i < nic_xml->nchildren; i++) {
    const topo_xml_node_t* x = nic_xml->children[i];
    if (strcmp(x->name, "net") != 0) continue;
    int64_t dev = topo_xml_get_int(x, "dev", -1);
    if (dev < 0) {
      WARN("topology: <net> at line %d has no dev attribute (the net plugin's device index)",
           x->line);
      return ncclInvalidArgument;
    }
    if (node_find(sys, TOPO_NODE_NET, dev) != NULL) {
      WARN("topology: two <net> elements with dev=\"%lld\" (line %d); each net device appears "
           "once", (long long)dev, x->line);
      return ncclInvalidArgument;
    }
    topo_node_t* net;
    CHECK(node_add(sys, TOPO_NODE_NET, dev, x, &net));
    net->net.guid = (uint64_t)topo_xml_get_int(x, "guid", dev);
    int64_t speed = topo_xml_get_int(x, "speed", 0);
    net->net.bw = speed > 0 ? (float)speed / 8000.0f : 12.0f;
    const char* lat = topo_xml_get(x, "latency");
    net->net.latency_us = lat ? (float)strtod(lat, NULL) : 0.0f;
    net->net.port = (int)topo_xml_get_int(x, "port", 1);
    net->net.max_comms = (int)topo_xml_get_int(x, "maxconn", 65536);
    net->net.gdr = (int)topo_xml_get_int(x, "gdr", 0);
    net->net.coll = (int)topo_xml_get_int(x, "coll", 0);
    CHECK(link_both(net, nic, TOPO_LINK_NET, net->net.bw, 1));
  }
  return ncclSuccess;
}

static ncclResult_t build_gpu(topo_system_t* sys, const topo_xml_node_t* gpu_xml, int64_t id,
                              topo_node_t* parent, float bw) {
  const char* what = NULL;
  if (topo_xml_get(gpu_xml, "dev") == NULL) what = "dev";
  else if (topo_xml_get(gpu_xml, "sm") == NULL) what = "sm";
  if (id < 0) what = "a <pci busid=...> parent";
  if (what != NULL) {
    WARN("topology: <gpu> at line %d lacks %s", gpu_xml->line, what);
    return ncclInvalidArgument;
  }
  if (node_find(sys, TOPO_NODE_GPU, id) != NULL) {
    char b[20];
    WARN("topology: GPU %s appears twice (line %d)", topo_busid_str(id, b, sizeof(b)),
         gpu_xml->line);
    return ncclInvalidArgument;
  }
  topo_node_t* gpu;
  CHECK(node_add(sys, TOPO_NODE_GPU, id, gpu_xml, &gpu));
  gpu->gpu.dev = (int)topo_xml_get_int(gpu_xml, "dev", 0);
  gpu->gpu.rank = (int)topo_xml_get_int(gpu_xml, "rank", -1);
  gpu->gpu.sm = (int)topo_xml_get_int(gpu_xml, "sm", 0);
  gpu->gpu.gdr = (int)topo_xml_get_int(gpu_xml, "gdr", 0);
  CHECK(link_both(gpu, parent, TOPO_LINK_PCI, bw, 1));
  return ncclSuccess;
}

/* Children of a <cpu> or <pci> element, attached below `parent`. */
static ncclResult_t build_pci_children(topo_system_t* sys, const topo_xml_node_t* x,
                                       topo_node_t* parent) {
  for (int i = 0; i < x->nchildren; i++) {
    const topo_xml_node_t* c = x->children[i];
    if (strcmp(c->name, "nic") == 0) {
      /* A NIC without its own <pci> (virtual, or the file leaves the PCI chain out): it hangs
       * off its parent at local bandwidth, with an id that cannot be a real bus id. */
      int64_t id = ((int64_t)1 << 56) | (parent->id << 8) | i;
      CHECK(build_nic(sys, c, id, parent, TOPO_LOC_BW));
      continue;
    }
    if (strcmp(c->name, "pci") != 0) continue;
    const char* busid = topo_xml_get(c, "busid");
    int64_t id = topo_busid_parse(busid);
    if (id < 0) {
      WARN("topology: <pci> at line %d has %s busid \"%s\" (expected dddd:bb:dd.f)", c->line,
           busid ? "a malformed" : "no", busid ? busid : "");
      return ncclInvalidArgument;
    }
    float bw = topo_pci_bw(topo_xml_get(c, "link_speed"), (int)topo_xml_get_int(c, "link_width", 0));
    topo_xml_node_t* gpu = topo_xml_find_child(c, "gpu", NULL, NULL);
    topo_xml_node_t* nic = topo_xml_find_child(c, "nic", NULL, NULL);
    if (gpu != NULL) {
      CHECK(build_gpu(sys, gpu, id, parent, bw));
    } else if (nic != NULL) {
      /* Functions of one NIC (ports on .0 and .1) share one PCI link: NCCL merges them. */
      CHECK(build_nic(sys, nic, id & ~(int64_t)0xf, parent, bw));
    } else {
      bool has_pci = topo_xml_find_child(c, "pci", NULL, NULL) != NULL;
      if (!has_pci && !class_is(topo_xml_get(c, "class"), "0x0604")) continue; /* leaf device */
      topo_node_t* sw = node_find(sys, TOPO_NODE_PCI, id);
      if (sw == NULL) {
        CHECK(node_add(sys, TOPO_NODE_PCI, id, c, &sw));
        CHECK(link_both(sw, parent, TOPO_LINK_PCI, bw, 1));
      }
      CHECK(build_pci_children(sys, c, sw));
    }
  }
  return ncclSuccess;
}

static ncclResult_t build_cpu(topo_system_t* sys, const topo_xml_node_t* x) {
  int64_t numa = topo_xml_get_int(x, "numaid", -1);
  if (numa < 0) numa = sys->count[TOPO_NODE_CPU];
  if (node_find(sys, TOPO_NODE_CPU, numa) != NULL) {
    WARN("topology: two <cpu> elements with numaid=\"%lld\" (line %d)", (long long)numa, x->line);
    return ncclInvalidArgument;
  }
  topo_node_t* cpu;
  CHECK(node_add(sys, TOPO_NODE_CPU, numa, x, &cpu));
  topo_cpu_kind_parse(topo_xml_get(x, "arch"), topo_xml_get(x, "vendor"), &cpu->cpu.arch,
                      &cpu->cpu.vendor);
  cpu->cpu.family = (int)topo_xml_get_int(x, "familyid", 0);
  cpu->cpu.model = (int)topo_xml_get_int(x, "modelid", 0);
  return build_pci_children(sys, x, cpu);
}

/* The CPU whose <cpu> element holds the node's element. */
static topo_node_t* local_cpu(const topo_system_t* sys, const topo_node_t* n) {
  for (const topo_xml_node_t* x = n->xml; x != NULL; x = x->parent) {
    if (strcmp(x->name, "cpu") != 0) continue;
    for (int i = 0; i < sys->count[TOPO_NODE_CPU]; i++)
      if (sys->nodes[TOPO_NODE_CPU][i].xml == x) return &sys->nodes[TOPO_NODE_CPU][i];
  }
  return NULL;
}

static ncclResult_t build_nvlinks(topo_system_t* sys) {
  for (int g = 0; g < sys->count[TOPO_NODE_GPU]; g++) {
    topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
    float per_link = topo_nvlink_bw_per_link(gpu->gpu.sm);
    for (int i = 0; i < gpu->xml->nchildren; i++) {
      const topo_xml_node_t* x = gpu->xml->children[i];
      if (strcmp(x->name, "c2c") == 0) {
        /* Grace: bw is per link in MB/s as NVML reports it. */
        int count = (int)topo_xml_get_int(x, "count", 0);
        float bw = (float)topo_xml_get_int(x, "bw", 0) / 1000.0f * (float)count;
        topo_node_t* cpu = local_cpu(sys, gpu);
        if (cpu != NULL && count > 0 && bw > 0) CHECK(link_both(gpu, cpu, TOPO_LINK_C2C, bw, count));
        continue;
      }
      if (strcmp(x->name, "nvlink") != 0) continue;
      int count = (int)topo_xml_get_int(x, "count", 0);
      if (count <= 0) continue;
      /* NCCL writes the target class as tclass; accept tgtclass too. */
      const char* cls = topo_xml_get(x, "tclass");
      if (cls == NULL) cls = topo_xml_get(x, "tgtclass");
      const char* target = topo_xml_get(x, "target");
      float bw = per_link * (float)count;
      if (class_is(cls, "0x0680")) {
        topo_node_t* nvs = sys->count[TOPO_NODE_NVS] ? &sys->nodes[TOPO_NODE_NVS][0] : NULL;
        if (nvs == NULL) CHECK(node_add(sys, TOPO_NODE_NVS, 0, NULL, &nvs));
        CHECK(link_both(gpu, nvs, TOPO_LINK_NVL, bw, count));
      } else if (class_is(cls, "0x0302") || class_is(cls, "0x0300")) {
        topo_node_t* peer = node_find(sys, TOPO_NODE_GPU, topo_busid_parse(target));
        /* Only this side's links: the peer's own <nvlink> elements give the reverse. */
        if (peer != NULL && peer != gpu) CHECK(link_add(gpu, peer, TOPO_LINK_NVL, bw, count));
        else
          INFO(NCCL_GRAPH, "topology: NVLink of GPU line %d to %s: no such GPU, ignored", x->line,
               target ? target : "?");
      } else if (class_is(cls, "0x0604") || class_is(cls, "0x0680")) {
        topo_node_t* cpu = local_cpu(sys, gpu);
        if (cpu != NULL) CHECK(link_both(gpu, cpu, TOPO_LINK_NVL, bw, count));
      } else {
        INFO(NCCL_GRAPH, "topology: NVLink at line %d to class %s ignored", x->line,
             cls ? cls : "(none)");
      }
    }
  }
  /* A GPU-GPU NVLink named by one side only still carries traffic both ways. */
  for (int g = 0; g < sys->count[TOPO_NODE_GPU]; g++) {
    topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
    for (int i = 0; i < gpu->nlinks; i++) {
      topo_link_t l = gpu->links[i];
      if (l.type != TOPO_LINK_NVL || l.rem->type != TOPO_NODE_GPU) continue;
      bool back = false;
      for (int j = 0; j < l.rem->nlinks; j++)
        back |= l.rem->links[j].rem == gpu && l.rem->links[j].type == TOPO_LINK_NVL;
      if (!back) CHECK(link_add(l.rem, gpu, TOPO_LINK_NVL, l.bw, l.count));
    }
  }
  return ncclSuccess;
}

static int link_cmp(const void* a, const void* b) {
  const topo_link_t* x = a;
  const topo_link_t* y = b;
  if (x->bw != y->bw) return x->bw > y->bw ? -1 : 1;
  /* Deterministic tie order: by type, then by the remote node's type and index. */
  if (x->type != y->type) return (int)x->type - (int)y->type;
  if (x->rem->type != y->rem->type) return (int)x->rem->type - (int)y->rem->type;
  return x->rem->index - y->rem->index;
}

/* ---- Paths --------------------------------------------------------------------------------- */

static topo_link_t* link_find(topo_node_t* from, topo_node_t* to, topo_link_type_t type) {
  for (int i = 0; i < from->nlinks; i++)
    if (from->links[i].rem == to && from->links[i].type == type) return &from->links[i];
  return NULL;
}

/* Fill node->paths[base->type][base->index] for every node: BFS from base outward, each step
 * extending the path of `node` by the link rem -> node. */
static ncclResult_t paths_to(topo_node_t* base, topo_node_t** frontier,
                             topo_node_t** next, unsigned char* queued) {
  int t = base->type, b = base->index;
  topo_path_t* bp = &base->paths[t][b];
  bp->type = TOPO_PATH_LOC;
  bp->bw = TOPO_LOC_BW;
  bp->nhops = 0;
  int nf = 1;
  frontier[0] = base;
  while (nf > 0) {
    int nn = 0;
    for (int f = 0; f < nf; f++) {
      topo_node_t* node = frontier[f];
      topo_path_t* p = &node->paths[t][b];
      for (int l = 0; l < node->nlinks; l++) {
        topo_link_t* link = &node->links[l];
        topo_node_t* rem = link->rem;
        if (rem == base) continue;
        if (node != base) {
          /* Network devices are ends, never transit; a NIC only between its network devices
           * and the PCI side (never PCI to PCI through a NIC). GPUs are transit only for
           * NVLink to NVLink (NVB). */
          if (node->type == TOPO_NODE_NET) continue;
          if (node->type == TOPO_NODE_NIC &&
              (rem->type == TOPO_NODE_NET) == (p->hops[0]->rem->type == TOPO_NODE_NET))
            continue;
          if (node->type == TOPO_NODE_GPU &&
              !(link->type == TOPO_LINK_NVL && rem->type == TOPO_NODE_GPU &&
                p->type == TOPO_PATH_NVL))
            continue;
        }
        topo_link_t* rev = link_find(rem, node, link->type);
        if (rev == NULL) continue; /* one-way link: not a path toward base */
        float bw = p->bw < rev->bw ? p->bw : rev->bw;
        topo_path_t* rp = &rem->paths[t][b];
        if (!((rp->bw == 0 || rp->nhops > p->nhops) && rp->bw < bw)) continue;
        topo_link_t** hops = realloc(rp->hops, sizeof(*hops) * (size_t)(p->nhops + 1));
        if (hops == NULL) {
          WARN("out of host memory computing topology paths");
          return ncclSystemError;
        }
        hops[0] = rev;
        if (p->nhops) memcpy(hops + 1, p->hops, sizeof(*hops) * (size_t)p->nhops);
        rp->hops = hops;
        rp->nhops = p->nhops + 1;
        rp->bw = bw;
        int hop;
        switch (link->type) {
          case TOPO_LINK_NVL: hop = TOPO_PATH_NVL; break;
          case TOPO_LINK_C2C: hop = TOPO_PATH_C2C; break;
          case TOPO_LINK_PCI: hop = TOPO_PATH_PIX; break;
          case TOPO_LINK_SYS: hop = TOPO_PATH_SYS; break;
          default: hop = TOPO_PATH_LOC; break; /* LOC, NET: add no distance */
        }
        if (node->type == TOPO_NODE_PCI && rem->type == TOPO_NODE_PCI) hop = TOPO_PATH_PXB;
        if (link->type == TOPO_LINK_PCI &&
            (node->type == TOPO_NODE_CPU || rem->type == TOPO_NODE_CPU))
          hop = TOPO_PATH_PHB;
        if (node != base && node->type == TOPO_NODE_GPU && hop == TOPO_PATH_NVL)
          hop = TOPO_PATH_NVB;
        rp->type = (int)p->type > hop ? p->type : (topo_path_type_t)hop;
        if (!queued[rem->type * TOPO_MAX_NODES + rem->index]) {
          queued[rem->type * TOPO_MAX_NODES + rem->index] = 1;
          next[nn++] = rem;
        }
      }
    }
    for (int i = 0; i < nn; i++) queued[next[i]->type * TOPO_MAX_NODES + next[i]->index] = 0;
    topo_node_t** tmp = frontier;
    frontier = next;
    next = tmp;
    nf = nn;
  }
  return ncclSuccess;
}

static ncclResult_t paths_compute(topo_system_t* sys) {
  for (int t = 0; t < TOPO_NODE_TYPES; t++) {
    if (t == TOPO_NODE_PCI) continue;
    for (int s = 0; s < TOPO_NODE_TYPES; s++) {
      for (int i = 0; i < sys->count[s]; i++) {
        topo_node_t* n = &sys->nodes[s][i];
        if (sys->count[t] == 0) continue;
        CHECK(MEM_CALLOC(&n->paths[t], (size_t)sys->count[t]));
        for (int j = 0; j < sys->count[t]; j++) n->paths[t][j].type = TOPO_PATH_DIS;
      }
    }
  }
  size_t total = (size_t)TOPO_NODE_TYPES * TOPO_MAX_NODES;
  topo_node_t** frontier = NULL;
  topo_node_t** next = NULL;
  unsigned char* queued = NULL;
  ncclResult_t res = ncclSuccess;
  CHECK_GOTO(MEM_CALLOC(&frontier, total), res, out);
  CHECK_GOTO(MEM_CALLOC(&next, total), res, out);
  CHECK_GOTO(MEM_CALLOC(&queued, total), res, out);
  for (int t = 0; t < TOPO_NODE_TYPES; t++) {
    if (t == TOPO_NODE_PCI) continue;
    for (int i = 0; i < sys->count[t]; i++)
      CHECK_GOTO(paths_to(&sys->nodes[t][i], frontier, next, queued), res, out);
  }
out:
  free(frontier);
  free(next);
  free(queued);
  return res;
}

static void bw_summary(topo_system_t* sys) {
  int ngpu = sys->count[TOPO_NODE_GPU], nnet = sys->count[TOPO_NODE_NET];
  sys->max_bw = 0;
  sys->total_bw = 0;
  if (ngpu == 1 && nnet == 0) sys->max_bw = TOPO_LOC_BW;
  for (int g = 0; g < ngpu; g++) {
    topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
    int tt = nnet ? TOPO_NODE_NET : TOPO_NODE_GPU;
    if (!(ngpu == 1 && nnet == 0)) {
      for (int j = 0; j < sys->count[tt]; j++) {
        if (tt == TOPO_NODE_GPU && j == g) continue;
        topo_path_t* p = &gpu->paths[tt][j];
        if (p->nhops > 0 && p->bw > sys->max_bw) sys->max_bw = p->bw;
      }
    }
    float nvl = 0, pci = 0;
    for (int l = 0; l < gpu->nlinks; l++) {
      if (gpu->links[l].type == TOPO_LINK_NVL) nvl += gpu->links[l].bw;
      if (gpu->links[l].type == TOPO_LINK_PCI) pci = gpu->links[l].bw;
    }
    float tot = nvl > pci ? nvl : pci;
    if (tot > sys->total_bw) sys->total_bw = tot;
  }
}

ncclResult_t topo_system_from_xml(topo_xml_node_t* xml, topo_system_t** sys_p) {
  topo_system_t* sys = NULL;
  ncclResult_t res = ncclSuccess;
  if (xml == NULL || strcmp(xml->name, "system") != 0) {
    WARN("topology: the root element is <%s>, expected <system version=\"1\">",
         xml ? xml->name : "(none)");
    topo_xml_free(xml);
    return ncclInvalidArgument;
  }
  res = MEM_CALLOC(&sys, 1);
  if (res != ncclSuccess) {
    topo_xml_free(xml);
    return res;
  }
  sys->xml = xml;
  topo_policy_from_env(&sys->policy);
  for (int t = 0; t < TOPO_NODE_TYPES; t++)
    CHECK_GOTO(MEM_CALLOC(&sys->nodes[t], TOPO_MAX_NODES), res, fail);
  for (int i = 0; i < xml->nchildren; i++)
    if (strcmp(xml->children[i]->name, "cpu") == 0)
      CHECK_GOTO(build_cpu(sys, xml->children[i]), res, fail);
  CHECK_GOTO(build_nvlinks(sys), res, fail);
  /* Every pair of CPUs talks over the inter-socket link. */
  for (int a = 0; a < sys->count[TOPO_NODE_CPU]; a++) {
    for (int b = 0; b < sys->count[TOPO_NODE_CPU]; b++) {
      if (a == b) continue;
      topo_node_t* ca = &sys->nodes[TOPO_NODE_CPU][a];
      CHECK_GOTO(link_add(ca, &sys->nodes[TOPO_NODE_CPU][b], TOPO_LINK_SYS, cpu_sys_bw(ca), 1),
                 res, fail);
    }
  }
  for (int t = 0; t < TOPO_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++) {
      topo_node_t* n = &sys->nodes[t][i];
      if (n->nlinks > 1) qsort(n->links, (size_t)n->nlinks, sizeof(*n->links), link_cmp);
    }
  CHECK_GOTO(paths_compute(sys), res, fail);
  bw_summary(sys);
  *sys_p = sys;
  return ncclSuccess;
fail:
  topo_system_free(sys);
  return res;
}

ncclResult_t topo_system_from_xml_file(const char* path, topo_system_t** sys_p) {
  topo_xml_node_t* xml;
  CHECK(topo_xml_load(path, &xml));
  return topo_system_from_xml(xml, sys_p);
}

void topo_system_free(topo_system_t* sys) {
  if (sys == NULL) return;
  for (int t = 0; t < TOPO_NODE_TYPES; t++) {
    if (sys->nodes[t] == NULL) continue;
    for (int i = 0; i < sys->count[t]; i++) {
      topo_node_t* n = &sys->nodes[t][i];
      for (int pt = 0; pt < TOPO_NODE_TYPES; pt++) {
        if (n->paths[pt] == NULL) continue;
        for (int j = 0; j < sys->count[pt]; j++) free(n->paths[pt][j].hops);
        free(n->paths[pt]);
      }
      free(n->links);
    }
    free(sys->nodes[t]);
  }
  topo_xml_free(sys->xml);
  free(sys);
}

void topo_system_set_policy(topo_system_t* sys, const topo_policy_t* policy) {
  sys->policy = *policy;
}

ncclResult_t topo_rank_to_gpu(const topo_system_t* sys, int rank, int* g_p) {
  for (int g = 0; g < sys->count[TOPO_NODE_GPU]; g++) {
    if (sys->nodes[TOPO_NODE_GPU][g].gpu.rank == rank) {
      *g_p = g;
      return ncclSuccess;
    }
  }
  return ncclInvalidArgument;
}

int topo_gpu_by_busid(const topo_system_t* sys, int64_t bus_id) {
  topo_node_t* n = node_find(sys, TOPO_NODE_GPU, bus_id);
  return n ? n->index : -1;
}

float topo_gpu_nvlink_bw(const topo_system_t* sys, int g) {
  const topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
  float bw = 0;
  for (int l = 0; l < gpu->nlinks; l++)
    if (gpu->links[l].type == TOPO_LINK_NVL) bw += gpu->links[l].bw;
  return bw;
}

int topo_gpu_nvlink_count(const topo_system_t* sys, int g) {
  const topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
  int n = 0;
  for (int l = 0; l < gpu->nlinks; l++)
    if (gpu->links[l].type == TOPO_LINK_NVL) n += gpu->links[l].count;
  return n;
}
