/*
 * core/topo: the topology of this host. Three layers, each usable alone:
 *
 *   1. An XML tree in NCCL's topology format (<system version="1"><cpu ...><pci ...><gpu ...>
 *      <nvlink .../></gpu></pci> ... <nic><net .../></nic></cpu></system>), with a parser and a
 *      writer. Unknown elements and attributes are kept and written back unchanged, so that a
 *      dump from NVIDIA's NCCL loads here and is written back with nothing lost.
 *   2. Detection into that tree (CUDA bus ids from the caller, sysfs for the PCI chain and the
 *      CPUs, NVML for NVLinks, the net plugins' properties for NICs). The sysfs root and NVML are
 *      injectable so tests run detection on a fake tree.
 *   3. The system model built from a tree (detected or loaded: there is exactly one path from
 *      tree to model): nodes, links with bandwidths, and the path (type, bottleneck bandwidth,
 *      hops) between every node and every GPU, CPU, NIC, NET and NVSwitch node; plus the rules
 *      that other modules ask (p2p allowed? GPUDirect RDMA? shm?).
 *
 * Units: bandwidths are GB/s in one direction (NCCL's convention: 1 NVLink of an H100 is 20.6);
 * bus ids are int64 in cuda_bus_id() form (domain << 20 | bus << 12 | device << 4 | function),
 * which is also what the hex digits of "dddd:bb:dd.f" read as one number give.
 *
 * Determinism: the same tree gives the same model (same node indices, same links in the same
 * order) on every rank: children are ordered by bus id when a tree is detected, and nodes are
 * numbered in tree order.
 *
 * This is the module's only header for the rest of the core.
 */
#ifndef CHOIR_TOPO_H
#define CHOIR_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* ==== 1. XML tree ========================================================================== */

typedef struct topo_xml_attr {
  char* name;
  char* value; /* unescaped */
} topo_xml_attr_t;

typedef struct topo_xml_node {
  char* name;
  int nattrs;
  topo_xml_attr_t* attrs; /* in document order; names unique within a node */
  int nchildren;
  struct topo_xml_node** children; /* in document order */
  struct topo_xml_node* parent;    /* NULL for the root */
  int line;                        /* line of the start tag in the source; 0 when built */
} topo_xml_node_t;

/* Parse a whole document. `source` names the input in error messages ("file.xml"). The root
 * must be one element (normally <system>); comments, <?xml ...?> declarations and whitespace
 * are skipped. Malformed input: ncclInvalidArgument with a WARN naming source, line and what is
 * wrong. Entities &lt; &gt; &amp; &quot; &apos; and &#N; / &#xN; are decoded. */
ncclResult_t topo_xml_parse(const char* text, size_t len, const char* source,
                            topo_xml_node_t** root_p);
/* Read and parse a file (errors name the path). */
ncclResult_t topo_xml_load(const char* path, topo_xml_node_t** root_p);
/* Write the tree as text, indented two spaces per level, empty elements as <x .../>; attribute
 * values escaped. *text_p is malloc'd, NUL-terminated; *len_p (may be NULL) its length. */
ncclResult_t topo_xml_write(const topo_xml_node_t* root, char** text_p, size_t* len_p);
/* Write the tree to a file (atomically: a temporary file renamed over path). */
ncclResult_t topo_xml_dump(const topo_xml_node_t* root, const char* path);
/* Free a node, its attributes and its whole subtree (does not unlink it from its parent). */
void topo_xml_free(topo_xml_node_t* node);

/* New detached element. */
ncclResult_t topo_xml_new(const char* name, topo_xml_node_t** node_p);
/* New element appended as the last child of parent. */
ncclResult_t topo_xml_add_child(topo_xml_node_t* parent, const char* name,
                                topo_xml_node_t** child_p);
/* Remove child from its parent and free it. */
void topo_xml_remove(topo_xml_node_t* child);
/* Deep copy (line numbers kept). */
ncclResult_t topo_xml_copy(const topo_xml_node_t* node, topo_xml_node_t** copy_p);
/* Value of attribute `name`, NULL when absent. */
const char* topo_xml_get(const topo_xml_node_t* node, const char* name);
/* Integer value of attribute `name` (decimal or 0x hex); def when absent or not a number. */
int64_t topo_xml_get_int(const topo_xml_node_t* node, const char* name, int64_t def);
/* Set (add or replace) an attribute. */
ncclResult_t topo_xml_set(topo_xml_node_t* node, const char* name, const char* value);
ncclResult_t topo_xml_set_int(topo_xml_node_t* node, const char* name, int64_t value);
/* Set only when the attribute is absent (detection filling a loaded file keeps the file's). */
ncclResult_t topo_xml_set_default(topo_xml_node_t* node, const char* name, const char* value);
/* First child named `name` whose attribute attr equals value (attr NULL: any), else NULL. */
topo_xml_node_t* topo_xml_find_child(const topo_xml_node_t* parent, const char* name,
                                     const char* attr, const char* value);
/* First node of the subtree (parent included) named `name` with attr == value, depth first. */
topo_xml_node_t* topo_xml_find(const topo_xml_node_t* root, const char* name, const char* attr,
                               const char* value);
/* Same names, same attributes (order included) and same children, recursively. */
bool topo_xml_equal(const topo_xml_node_t* a, const topo_xml_node_t* b);

/* "0000:19:00.0" (any case; "19:00.0" with domain 0 too) to the int64 form; -1 when malformed. */
int64_t topo_busid_parse(const char* str);
/* The int64 form back to "dddd:bb:dd.f" (lowercase hex). buf: at least 16 bytes. */
const char* topo_busid_str(int64_t id, char* buf, size_t size);

/* ==== 2. Detection ========================================================================= */

/* A rank of this host whose GPU detection adds (from the all-gathered peer info). */
typedef struct topo_rank_info {
  int rank;
  int cuda_dev;   /* device index in that rank's process (the <gpu dev=> attribute) */
  int64_t bus_id; /* cuda_bus_id() form */
} topo_rank_info_t;

/* A NIC as the net plugin describes it (ncclNetProperties fields detection uses). */
typedef struct topo_nic_props {
  const char* name;     /* "mlx5_0" */
  const char* pci_path; /* sysfs path of the device ("/sys/devices/pci0000:00/.../0000:0c:00.0"),
                         * NULL or unresolvable: the NIC hangs off the first CPU */
  uint64_t guid;
  int speed_mbps;       /* port speed in Mb/s */
  int port;
  float latency_us;
  int max_comms;
  int gdr;              /* 1 when the plugin can register CUDA memory (NCCL_PTR_CUDA) */
  int coll;             /* 1 for a CollNet device */
} topo_nic_props_t;

/* NVML as detection uses it. The real one is loaded with dlopen("libnvidia-ml.so.1"); tests pass
 * a fake. Bus ids are strings in "dddd:bb:dd.f" form. */
typedef enum {
  TOPO_NVL_REMOTE_GPU = 0,
  TOPO_NVL_REMOTE_SWITCH = 1, /* NVSwitch, also when NVML cannot say (VMs hide switches) */
  TOPO_NVL_REMOTE_CPU = 2     /* IBM NPU / CPU NVLink */
} topo_nvl_remote_t;

typedef struct topo_nvml_ops {
  void* ctx;
  /* Number of NVLink link indices to probe for the GPU at busid (0: none). */
  ncclResult_t (*link_count)(void* ctx, const char* busid, int* n_p);
  /* Link `link` of the GPU: *active_p 1 when up; then the remote end's bus id (lowercase, NUL-
   * terminated, into remote[size]) and what it is. */
  ncclResult_t (*link_remote)(void* ctx, const char* busid, int link, int* active_p,
                              char* remote, size_t size, topo_nvl_remote_t* kind_p);
} topo_nvml_ops_t;

/* The real NVML through dlopen. ncclSystemError (INFO, not WARN) when the library or a symbol
 * is missing: detection then just finds no NVLinks. The table lives for the process. */
ncclResult_t topo_nvml_ops_system(const topo_nvml_ops_t** ops_p);

/* Where detection looks. Zero-initialized fields take the defaults (marked). */
typedef struct topo_detect_env {
  const char* sysfs_root;   /* default "/sys"; a missing one is the VM/flat case */
  const char* cpuinfo_path; /* default "/proc/cpuinfo" */
  const topo_nvml_ops_t* nvml; /* default: topo_nvml_ops_system() */
  int no_nvml;                 /* 1: do not probe NVLinks */
  /* SM version (major*10+minor) of a local device; default: CUDA. NULL ctx is fine. */
  ncclResult_t (*gpu_sm)(void* ctx, int cuda_dev, int* sm_p);
  void* gpu_sm_ctx;
} topo_detect_env_t;

/* Add the given GPUs and NICs to the tree *root_p (NULL: a new <system version="1">). Elements
 * already in the tree (same bus id / NIC name) are kept; their missing attributes are filled
 * in. For each device: its sysfs PCI chain up to the root complex becomes nested <pci>
 * elements under the <cpu> of its NUMA node; without sysfs the device hangs directly off one
 * CPU node (numaid 0 or the tree's first). GPUs get <nvlink> children from NVML. Children are
 * sorted by bus id afterwards so that every rank builds the same tree. */
ncclResult_t topo_detect(const topo_detect_env_t* env, const topo_rank_info_t* ranks, int nranks,
                         const topo_nic_props_t* nics, int nnics, topo_xml_node_t** root_p);

/* ==== 3. System model ====================================================================== */

/* NCCL's numbering (2.28): kept so that logs, dumps and levels read the same. */
typedef enum {
  TOPO_NODE_GPU = 0,
  TOPO_NODE_PCI = 1, /* a PCI switch or bridge */
  TOPO_NODE_NVS = 2, /* the NVSwitch fabric (all switches of the host are one node) */
  TOPO_NODE_CPU = 3, /* one NUMA node */
  TOPO_NODE_NIC = 4,
  TOPO_NODE_NET = 5, /* one network device (port) of a NIC, as the net plugin numbers it */
  TOPO_NODE_TYPES = 6
} topo_node_type_t;

typedef enum {
  TOPO_LINK_LOC = 0,
  TOPO_LINK_NVL = 1,
  TOPO_LINK_C2C = 3,
  TOPO_LINK_PCI = 4,
  TOPO_LINK_SYS = 9, /* between CPUs (QPI/UPI/xGMI) */
  TOPO_LINK_NET = 10 /* NIC to NET */
} topo_link_type_t;

/* Path types, nearest first; a path's type is the farthest of its hops. Same values as NCCL
 * 2.28 (LOC 0 ... DIS 11, with C2C and P2C between). */
typedef enum {
  TOPO_PATH_LOC = 0, /* the node itself */
  TOPO_PATH_NVL = 1, /* NVLink, direct or through NVSwitches */
  TOPO_PATH_NVB = 2, /* NVLink through an intermediate GPU */
  TOPO_PATH_C2C = 3, /* chip-to-chip link to the CPU (Grace) */
  TOPO_PATH_PIX = 4, /* at most one PCIe switch */
  TOPO_PATH_PXB = 5, /* several PCIe switches, no host bridge */
  TOPO_PATH_P2C = 6, /* GPU to NIC through C2C and the CPU's PCIe */
  TOPO_PATH_PXN = 7, /* GPU to NIC through another GPU */
  TOPO_PATH_PHB = 8, /* through a PCIe host bridge (the CPU) */
  TOPO_PATH_SYS = 9, /* across CPUs (NUMA nodes) */
  TOPO_PATH_NET = 10,
  TOPO_PATH_DIS = 11, /* not connected */
  TOPO_PATH_TYPES = 12
} topo_path_type_t;

/* CPU kinds (for inter-CPU bandwidth and the default p2p level). */
typedef enum {
  TOPO_CPU_ARCH_UNKNOWN = 0,
  TOPO_CPU_ARCH_X86,
  TOPO_CPU_ARCH_POWER,
  TOPO_CPU_ARCH_ARM
} topo_cpu_arch_t;
typedef enum {
  TOPO_CPU_VENDOR_UNKNOWN = 0,
  TOPO_CPU_VENDOR_INTEL,
  TOPO_CPU_VENDOR_AMD,
  TOPO_CPU_VENDOR_ZHAOXIN
} topo_cpu_vendor_t;

/* Bandwidths NCCL uses (GB/s). */
#define TOPO_LOC_BW 5000.0f
#define TOPO_PCI_BW_DEFAULT 12.0f /* gen3 x16, when the tree does not say */

typedef struct topo_node topo_node_t;

typedef struct topo_link {
  topo_link_type_t type;
  float bw;          /* GB/s; for NVL: count * per-link bandwidth of the GPU */
  int count;         /* NVL: number of NVLinks; otherwise 1 */
  topo_node_t* rem;  /* the other end */
} topo_link_t;

typedef struct topo_path {
  topo_path_type_t type; /* TOPO_PATH_DIS and bw 0 when unreachable */
  float bw;              /* bottleneck bandwidth */
  int nhops;             /* links traversed; 0 for LOC and DIS */
  topo_link_t** hops;    /* nhops links, from the source outward (owned by the system) */
} topo_path_t;

struct topo_node {
  topo_node_type_t type;
  int index;  /* within its type */
  int64_t id; /* GPU/PCI/NIC: bus id; CPU: NUMA id; NVS: 0; NET: net device index */
  union {
    struct {
      int dev;  /* cuda device index (in its rank's process) */
      int rank; /* -1 when the tree names none */
      int sm;   /* major*10+minor */
      int gdr;  /* 1: GPUDirect RDMA capable */
    } gpu;
    struct {
      topo_cpu_arch_t arch;
      topo_cpu_vendor_t vendor;
      int family;
      int model;
    } cpu;
    struct {
      uint64_t guid;
      float bw; /* GB/s (speed Mb/s / 8000) */
      float latency_us;
      int port;
      int max_comms;
      int gdr;
      int coll;
    } net;
  };
  int nlinks;
  topo_link_t* links; /* sorted by bandwidth, widest first (ties: creation order) */
  /* paths[t][i]: path from this node to node i of type t. Computed from every node (PCI ones
   * included) to every node of each type but PCI: paths[TOPO_NODE_PCI] is NULL. */
  topo_path_t* paths[TOPO_NODE_TYPES];
  const topo_xml_node_t* xml; /* the element it came from (in sys->xml), NULL when synthetic */
};

/* Policy: the knobs the rules apply, read from the environment at build time. Tests and callers
 * may replace it with topo_system_set_policy. Levels are path types, or -1 for "the default". */
typedef struct topo_policy {
  int p2p_level;     /* NCCL_P2P_LEVEL; NCCL_P2P_DISABLE=1 makes it TOPO_PATH_LOC */
  int shm_disable;   /* NCCL_SHM_DISABLE */
  int net_gdr_level; /* NCCL_NET_GDR_LEVEL */
  int net_gdr_read;  /* NCCL_NET_GDR_READ: 1, 0, or -1 (decided by the topology) */
} topo_policy_t;

typedef struct topo_system {
  int count[TOPO_NODE_TYPES];
  topo_node_t* nodes[TOPO_NODE_TYPES]; /* count[t] nodes of type t */
  float max_bw;   /* widest GPU->GPU (or GPU->NET when NICs exist) path of any GPU */
  float total_bw; /* largest per-GPU total (NVLink sum or PCI link) */
  topo_policy_t policy;
  topo_xml_node_t* xml; /* the tree the model was built from (owned) */
} topo_system_t;

/* Parse a level for NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL: a path type name (LOC, NVL, NVB, C2C,
 * PIX, PXB, P2C, PXN, PHB, SYS) or the legacy number (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 or more
 * SYS). ncclInvalidArgument (WARN naming knob and value) otherwise. */
ncclResult_t topo_level_parse(const char* knob, const char* str, int* level_p);
/* The policy from the environment (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_SHM_DISABLE,
 * NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_READ). A malformed level WARNs and is left at default. */
void topo_policy_from_env(topo_policy_t* policy_p);

/* Build the model from a tree; takes ownership of xml (freed with the system, also on failure).
 * The policy is read from the environment. A tree without <system> root, a GPU without dev/sm,
 * or more than TOPO_MAX_NODES nodes of a type: ncclInvalidArgument naming the element. */
#define TOPO_MAX_NODES 256
ncclResult_t topo_system_from_xml(topo_xml_node_t* xml, topo_system_t** sys_p);
/* topo_xml_load + topo_system_from_xml. */
ncclResult_t topo_system_from_xml_file(const char* path, topo_system_t** sys_p);

/* The caller-facing entry used at communicator creation. ranks: the ranks on this host (this
 * one included); my_rank: this process's rank (for NCCL_TOPO_DUMP_FILE_RANK). With
 * NCCL_TOPO_FILE the file is loaded first, then detected GPUs/NICs missing from it are added.
 * NCCL_TOPO_DUMP_FILE: the rank NCCL_TOPO_DUMP_FILE_RANK writes the tree there. env NULL: the
 * real machine. */
ncclResult_t topo_system_build(const topo_detect_env_t* env, const topo_rank_info_t* ranks,
                               int nranks, int my_rank, const topo_nic_props_t* nics, int nnics,
                               topo_system_t** sys_p);
/* Safe with NULL. */
void topo_system_free(topo_system_t* sys);

/* Replace the policy (tests; a caller with its own overrides). */
void topo_system_set_policy(topo_system_t* sys, const topo_policy_t* policy);

/* Log the system at INFO (subsystem GRAPH) like NCCL: "=== System : maxBw %.1f totalBw %.1f ==="
 * then one line per node and link, indented by depth from the CPUs; then every GPU's paths. */
void topo_system_print(const topo_system_t* sys);
/* The same text into a malloc'd string (for tools and tests). */
ncclResult_t topo_system_format(const topo_system_t* sys, char** text_p);

/* ---- Accessors (what the graph search uses) ---------------------------------------------- */

static inline int topo_gpu_count(const topo_system_t* s) { return s->count[TOPO_NODE_GPU]; }
static inline int topo_nic_count(const topo_system_t* s) { return s->count[TOPO_NODE_NIC]; }
static inline int topo_net_count(const topo_system_t* s) { return s->count[TOPO_NODE_NET]; }
static inline int topo_nvs_count(const topo_system_t* s) { return s->count[TOPO_NODE_NVS]; }
static inline int topo_cpu_count(const topo_system_t* s) { return s->count[TOPO_NODE_CPU]; }
static inline topo_node_t* topo_node(const topo_system_t* s, topo_node_type_t t, int i) {
  return &s->nodes[t][i];
}
static inline int topo_gpu_rank(const topo_system_t* s, int g) {
  return s->nodes[TOPO_NODE_GPU][g].gpu.rank;
}
static inline int topo_gpu_dev(const topo_system_t* s, int g) {
  return s->nodes[TOPO_NODE_GPU][g].gpu.dev;
}
/* Path from node (ft, fi) to node (tt, ti); tt must not be TOPO_NODE_PCI. */
static inline const topo_path_t* topo_path(const topo_system_t* s, topo_node_type_t ft, int fi,
                                           topo_node_type_t tt, int ti) {
  return &s->nodes[ft][fi].paths[tt][ti];
}
/* Index of the GPU of `rank`; ncclInvalidArgument (no WARN) when no GPU has that rank. */
ncclResult_t topo_rank_to_gpu(const topo_system_t* sys, int rank, int* g_p);
/* Index of the GPU with bus id, -1 when none. */
int topo_gpu_by_busid(const topo_system_t* sys, int64_t bus_id);
/* Sum of GPU g's NVLink bandwidths (to GPUs, NVSwitches and CPUs), GB/s; and link count. */
float topo_gpu_nvlink_bw(const topo_system_t* sys, int g);
int topo_gpu_nvlink_count(const topo_system_t* sys, int g);
/* Bandwidth of NET node n (GB/s). */
static inline float topo_net_bw(const topo_system_t* s, int n) {
  return s->nodes[TOPO_NODE_NET][n].net.bw;
}
/* Per-link NVLink bandwidth of a GPU generation (GB/s): sm60 18, sm70/80 20, sm86 12,
 * sm90 20.6, sm100+ 40.1 (NCCL 2.28's figures); 0 below sm60. */
float topo_nvlink_bw_per_link(int sm);
/* PCIe link bandwidth for "16.0 GT/s PCIe" style speed and a width, GB/s (NCCL: gen3 x16 = 12);
 * unknown or missing: TOPO_PCI_BW_DEFAULT. */
float topo_pci_bw(const char* link_speed, int link_width);

const char* topo_node_type_name(topo_node_type_t t); /* "GPU", "PCI", "NVS", "CPU", "NIC", "NET" */
const char* topo_link_type_name(topo_link_type_t t); /* "LOC", "NVL", "C2C", "PCI", "SYS", "NET" */
const char* topo_path_type_name(int t);              /* "LOC" ... "DIS"; "?" out of range */

/* ---- Rules ------------------------------------------------------------------------------- */

/* May rank_a and rank_b (both GPUs of this system) use p2p? Allowed when their path type is at
 * most the p2p level. Level: the policy's (NCCL_P2P_LEVEL; NCCL_P2P_DISABLE=1 means LOC, i.e.
 * never between two GPUs), else NCCL's default: SYS, lowered to PXB on ARM CPUs and on Intel
 * and Zhaoxin x86 (those CPUs forward peer traffic poorly). NVLink paths are always within
 * every level except LOC. *use_read_p: 1 when both GPUs are sm80 and linked by NVLink (NCCL
 * enables p2p read only for Ampere over NVLink). A rank without a GPU here: not allowed. */
ncclResult_t topo_p2p_check(const topo_system_t* sys, int rank_a, int rank_b, int* allowed_p,
                            int* use_read_p);
/* Shared memory between processes of this host: allowed unless NCCL_SHM_DISABLE=1. */
bool topo_shm_allowed(const topo_system_t* sys);
/* GPUDirect RDMA between rank's GPU and NET node `net`: both must be GDR capable and their path
 * at most the GDR level (NCCL_NET_GDR_LEVEL, default PXB). For sends (is_send, GPU memory read by
 * the NIC) NCCL_NET_GDR_READ=0 disables it; unset, GPUs older than sm80 use it only when they
 * have an NVLink peer (or are alone). */
ncclResult_t topo_net_gdr(const topo_system_t* sys, int rank, int net, int is_send, int* gdr_p);
/* The network devices nearest rank's GPU, as NCCL places a GPU's channels on NICs: the NET nodes
 * whose path from the GPU has the widest bottleneck, and among those the closest path type; in
 * net device order. Writes up to max net device indices (the plugin's numbering) to devs and
 * their count to *n_p (0 without NICs); *type_p (may be NULL): their path type. A rank without a
 * GPU here: ncclInvalidArgument with a WARN. */
ncclResult_t topo_rank_nets(const topo_system_t* sys, int rank, int* devs, int max, int* n_p,
                            int* type_p);

#endif
