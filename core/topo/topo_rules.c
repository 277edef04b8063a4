/*
 * The rules other modules ask the topology: p2p between two GPUs, shared memory, GPUDirect RDMA
 * between a GPU and a network device. They follow NCCL 2.28's decisions so that the same
 * machine and the same knobs give the same transports.
 */
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_internal.h"

ncclResult_t topo_level_parse(const char* knob, const char* str, int* level_p) {
  static const char* names[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                "P2C", "PXN", "PHB", "SYS"};
  for (int i = 0; i <= TOPO_PATH_SYS; i++) {
    if (strcmp(str, names[i]) == 0) {
      *level_p = i;
      return ncclSuccess;
    }
  }
  /* Numbers are the levels of NCCL before 2.4, mapped as NCCL still does. */
  if (str[0] >= '0' && str[0] <= '9') {
    char* end;
    long v = strtol(str, &end, 0);
    if (*end == '\0') {
      static const int old_to_new[] = {TOPO_PATH_LOC, TOPO_PATH_PIX, TOPO_PATH_PXB, TOPO_PATH_PHB,
                                       TOPO_PATH_SYS};
      *level_p = old_to_new[v > 4 ? 4 : v];
      return ncclSuccess;
    }
  }
  WARN("%s=\"%s\" is not a level: use LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS (or "
       "0..4)",
       knob, str);
  return ncclInvalidArgument;
}

void topo_policy_from_env(topo_policy_t* policy_p) {
  topo_policy_t p = {.p2p_level = -1, .shm_disable = 0, .net_gdr_level = -1, .net_gdr_read = -1};
  if (param_int(PARAM_P2P_DISABLE) == 1) {
    p.p2p_level = TOPO_PATH_LOC;
  } else {
    const char* s = param_str(PARAM_P2P_LEVEL);
    int level;
    if (s != NULL && topo_level_parse("NCCL_P2P_LEVEL", s, &level) == ncclSuccess)
      p.p2p_level = level;
  }
  p.shm_disable = param_int(PARAM_SHM_DISABLE) == 1;
  const char* g = param_str(PARAM_NET_GDR_LEVEL);
  int level;
  if (g != NULL && topo_level_parse("NCCL_NET_GDR_LEVEL", g, &level) == ncclSuccess)
    p.net_gdr_level = level;
  int64_t rd = param_int(PARAM_NET_GDR_READ);
  p.net_gdr_read = rd < 0 ? -1 : (rd > 0 ? 1 : 0);
  *policy_p = p;
}

/* NCCL's default p2p level: as far as SYS, but only PXB where the CPU forwards peer traffic
 * poorly (ARM, Intel and Zhaoxin x86). The first CPU decides (hosts have one kind). */
static int p2p_default_level(const topo_system_t* sys) {
  if (sys->count[TOPO_NODE_CPU] == 0) return TOPO_PATH_SYS;
  const topo_node_t* cpu = &sys->nodes[TOPO_NODE_CPU][0];
  if (cpu->cpu.arch == TOPO_CPU_ARCH_ARM) return TOPO_PATH_PXB;
  if (cpu->cpu.arch == TOPO_CPU_ARCH_X86 &&
      (cpu->cpu.vendor == TOPO_CPU_VENDOR_INTEL || cpu->cpu.vendor == TOPO_CPU_VENDOR_ZHAOXIN))
    return TOPO_PATH_PXB;
  return TOPO_PATH_SYS;
}

ncclResult_t topo_p2p_check(const topo_system_t* sys, int rank_a, int rank_b, int* allowed_p,
                            int* use_read_p) {
  int ga, gb;
  *allowed_p = 0;
  if (use_read_p) *use_read_p = 0;
  if (topo_rank_to_gpu(sys, rank_a, &ga) != ncclSuccess ||
      topo_rank_to_gpu(sys, rank_b, &gb) != ncclSuccess)
    return ncclSuccess;
  const topo_path_t* p = topo_path(sys, TOPO_NODE_GPU, ga, TOPO_NODE_GPU, gb);
  int level = sys->policy.p2p_level >= 0 ? sys->policy.p2p_level : p2p_default_level(sys);
  /* Two ranks on one GPU are LOC: allowed at every level but a disabled p2p (LOC level still
   * admits them; NCCL does the same). */
  if ((int)p->type <= level) *allowed_p = 1;
  if (use_read_p && p->type == TOPO_PATH_NVL) {
    const topo_node_t* a = topo_node(sys, TOPO_NODE_GPU, ga);
    const topo_node_t* b = topo_node(sys, TOPO_NODE_GPU, gb);
    if (a->gpu.sm == 80 && b->gpu.sm == 80) *use_read_p = 1;
  }
  return ncclSuccess;
}

bool topo_shm_allowed(const topo_system_t* sys) { return !sys->policy.shm_disable; }

ncclResult_t topo_rank_nets(const topo_system_t* sys, int rank, int* devs, int max, int* n_p,
                            int* type_p) {
  *n_p = 0;
  if (type_p) *type_p = TOPO_PATH_DIS;
  int g;
  if (topo_rank_to_gpu(sys, rank, &g) != ncclSuccess) {
    WARN("topology: rank %d has no GPU in this host's topology (network device placement)", rank);
    return ncclInvalidArgument;
  }
  float best_bw = 0;
  int best_type = TOPO_PATH_DIS;
  for (int i = 0; i < sys->count[TOPO_NODE_NET]; i++) {
    const topo_path_t* p = topo_path(sys, TOPO_NODE_GPU, g, TOPO_NODE_NET, i);
    if (p->type == TOPO_PATH_DIS) continue;
    if (p->bw > best_bw || (p->bw == best_bw && (int)p->type < best_type)) {
      best_bw = p->bw;
      best_type = (int)p->type;
    }
  }
  if (best_type == TOPO_PATH_DIS) return ncclSuccess;
  /* NET nodes are not necessarily in device order: collect, then sort by device index. */
  int n = 0;
  for (int i = 0; i < sys->count[TOPO_NODE_NET]; i++) {
    const topo_path_t* p = topo_path(sys, TOPO_NODE_GPU, g, TOPO_NODE_NET, i);
    if (p->bw != best_bw || (int)p->type != best_type || n >= max) continue;
    const int dev = (int)topo_node(sys, TOPO_NODE_NET, i)->id;
    int k = n++;
    for (; k > 0 && devs[k - 1] > dev; k--) devs[k] = devs[k - 1];
    devs[k] = dev;
  }
  *n_p = n;
  if (type_p) *type_p = best_type;
  return ncclSuccess;
}

ncclResult_t topo_net_gdr(const topo_system_t* sys, int rank, int net, int is_send, int* gdr_p) {
  *gdr_p = 0;
  int g;
  if (topo_rank_to_gpu(sys, rank, &g) != ncclSuccess) {
    WARN("topology: rank %d has no GPU in this host's topology (GPUDirect RDMA check)", rank);
    return ncclInvalidArgument;
  }
  if (net < 0 || net >= sys->count[TOPO_NODE_NET]) {
    WARN("topology: network device %d does not exist (%d known)", net, sys->count[TOPO_NODE_NET]);
    return ncclInvalidArgument;
  }
  const topo_node_t* gpu = topo_node(sys, TOPO_NODE_GPU, g);
  const topo_node_t* n = topo_node(sys, TOPO_NODE_NET, net);
  if (!gpu->gpu.gdr || !n->net.gdr) return ncclSuccess;
  if (is_send) {
    if (sys->policy.net_gdr_read == 0) return ncclSuccess;
    if (sys->policy.net_gdr_read < 0 && gpu->gpu.sm < 80) {
      /* Pre-Ampere GPUs read over PCIe slowly when other flows share it: only with an NVLink
       * peer to take the GPU-GPU traffic, or when alone. */
      bool nvlink = sys->count[TOPO_NODE_GPU] == 1;
      for (int i = 0; i < sys->count[TOPO_NODE_GPU] && !nvlink; i++)
        nvlink = i != g && topo_path(sys, TOPO_NODE_GPU, g, TOPO_NODE_GPU, i)->type == TOPO_PATH_NVL;
      if (!nvlink) return ncclSuccess;
    }
  }
  int level = sys->policy.net_gdr_level >= 0 ? sys->policy.net_gdr_level : TOPO_PATH_PXB;
  const topo_path_t* p = topo_path(sys, TOPO_NODE_GPU, g, TOPO_NODE_NET, net);
  if ((int)p->type > level) {
    INFO(NCCL_NET, "GPU Direct RDMA disabled for GPU %d / net %d (distance %s > %s)", g, net,
         topo_path_type_name(p->type), topo_path_type_name(level));
    return ncclSuccess;
  }
  *gdr_p = 1;
  return ncclSuccess;
}
