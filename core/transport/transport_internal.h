/*
 * core/transport, private: the transport state, the resources a connect leaves behind, the
 * message two ranks exchange, and the CUDA calls behind a table (so that CPU tests can stand in
 * for the GPU). Tests include this header white-box; the rest of the core includes transport.h.
 */
#ifndef CHOIR_TRANSPORT_INTERNAL_H
#define CHOIR_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin.h"
#include "proxy.h"
#include "topo.h"
#include "transport.h"

/* Alignment of every connection buffer, and the line each counter has to itself (no false
 * sharing between a counter one GPU polls and one another GPU writes). */
#define TRANSPORT_BUFF_ALIGN 4096u
#define TRANSPORT_LINE 128u

/* "/choir-<pid>-<counter>-<16 hex digits>" and its terminator. */
#define TRANSPORT_SHM_NAME_MAX 64

/* ---- CUDA behind a table --------------------------------------------------------------- */

/* Every CUDA call the transport makes. Each returns ncclResult_t (WARN with CUDA's message on
 * failure) or cannot fail in a way the caller could act on (the release calls, which log). */
typedef struct transport_cuda_ops {
  ncclResult_t (*get_device)(int* dev_p);
  ncclResult_t (*set_device)(int dev);
  /* The ordinal this process gives the GPU at bus_id (cuda_bus_id() form); -1 when it does not
   * see that GPU (CUDA_VISIBLE_DEVICES). */
  ncclResult_t (*device_by_bus_id)(int64_t bus_id, int* dev_p);
  /* *can_p = 1 when dev can map peer_dev's memory. */
  ncclResult_t (*can_access_peer)(int dev, int peer_dev, int* can_p);
  /* From the current device to peer_dev; "already enabled" is success. */
  ncclResult_t (*enable_peer_access)(int peer_dev);
  /* bytes of zeroed memory on the current device; the zeroing has completed on return. */
  ncclResult_t (*dev_alloc)(size_t bytes, void** ptr_p);
  void (*dev_free)(void* ptr);
  /* An IPC handle (64 bytes) for the allocation whose base is ptr; opened in another process
   * of the host, it maps that allocation. */
  ncclResult_t (*ipc_get)(void* ptr, unsigned char handle[64]);
  ncclResult_t (*ipc_open)(const unsigned char handle[64], void** ptr_p);
  void (*ipc_close)(void* ptr);
  /* Pin and map host memory for every device of the process; *dev_ptr_p: the address GPUs use. */
  ncclResult_t (*host_register)(void* ptr, size_t bytes, void** dev_ptr_p);
  void (*host_unregister)(void* ptr);
} transport_cuda_ops_t;

extern const transport_cuda_ops_t transport_cuda_runtime; /* the real CUDA runtime */
/* The table every transport of the process uses; NULL restores the runtime. Tests only: set it
 * before creating transports. */
void transport_set_cuda_ops(const transport_cuda_ops_t* ops);
const transport_cuda_ops_t* transport_cuda(void);

/* ---- Kind selection --------------------------------------------------------------------- */

/* The rule, as a pure function of its inputs (every input 0 or 1):
 *   another host -> net; p2p when not disabled, allowed by the policy and peer access works both
 *   ways; else shm unless disabled; else net, as NCCL does, unless NCCL_NET_DISABLE_INTRA=1;
 *   else none (connecting fails, naming the knobs). */
kern_transport_t transport_kind_rule(int same_host, int p2p_disable, int policy_allows,
                                     int peer_access, int shm_disable, int net_intra_disable);

/* ---- Resources -------------------------------------------------------------------------- */

typedef enum {
  TRANSPORT_RES_DEV = 0, /* device memory this rank allocated (dev_alloc) */
  TRANSPORT_RES_IPC = 1, /* a peer's device memory opened by IPC handle */
  TRANSPORT_RES_SHM = 2, /* a shared-memory segment mapped here (created or opened) */
  TRANSPORT_RES_HOST = 3 /* host memory of a net connection end, registered with CUDA */
} transport_res_kind_t;

typedef struct transport_res {
  struct transport_res* next;
  transport_res_kind_t kind;
  void* ptr;        /* DEV: allocation base; IPC: mapped base; SHM: host mapping; HOST: malloc */
  size_t bytes;     /* DEV, SHM, HOST: size; IPC: 0 (not ours) */
  bool registered;  /* SHM, HOST: host_register done */
  bool created;     /* SHM: this rank created it */
  bool named;       /* SHM: the name may still exist (unlink when released) */
  char name[TRANSPORT_SHM_NAME_MAX];
} transport_res_t;

/* Release what r holds and free r. Safe with NULL. */
void transport_res_release(transport_res_t* r);
/* bytes of device memory (transport_cuda()->dev_alloc, zeroed): a TRANSPORT_RES_DEV. */
ncclResult_t transport_res_dev(size_t bytes, transport_res_t** res_p);
void transport_res_release_list(transport_res_t* list);
/* Keep r until transport_destroy (and count its bytes). Safe with NULL. */
void transport_res_push(transport_t* t, transport_res_t* r);

/* ---- Shared memory segments (transport_shm.c) -------------------------------------------- */

/* Create a new segment of bytes (zeroed) with a fresh name, and map it: a TRANSPORT_RES_SHM
 * with created and named set, not registered yet. */
ncclResult_t transport_shm_create(size_t bytes, transport_res_t** res_p);
/* Map the segment `name`, which must hold at least bytes. */
ncclResult_t transport_shm_open(const char* name, size_t bytes, transport_res_t** res_p);
/* Remove the name (mappings stay valid); the segment goes away with its last mapping. */
void transport_shm_unlink(transport_res_t* r);
/* Register the mapping with CUDA (transport_cuda()->host_register); *dev_ptr_p as there. */
ncclResult_t transport_shm_register(transport_res_t* r, void** dev_ptr_p);

/* ---- The state -------------------------------------------------------------------------- */

/* One per communicator. Calls on one transport do not overlap (the communicator makes them one
 * at a time); different transports share nothing but transport_cuda(). */

#define TRANSPORT_MAX_NET_DEVS 64

/* NIC placement: this host's topology (detected, or NCCL_TOPO_FILE) with the net plugin's
 * devices in it, and the devices nearest me's GPU (topo_rank_nets). gdr (may be NULL): for each
 * of the nnics devices, whether its receive ([0]) and send ([1]) buffers may be GPU memory
 * (topo_net_gdr: the plugin takes CUDA pointers and the path is within NCCL_NET_GDR_LEVEL). */
ncclResult_t transport_net_nearest(const topo_rank_info_t* me, const topo_nic_props_t* nics,
                                   int nnics, int* devs, int max, int* n_p, int* type_p,
                                   uint8_t (*gdr)[2]);

struct transport {
  bootstrap_t* bs;
  int rank;
  int nranks;
  int cuda_dev;
  transport_peer_t* peers; /* nranks */
  volatile uint32_t* abort_flag;
  transport_p2p_policy_fn policy;
  void* policy_ctx;
  int8_t* kinds;           /* per peer: kern_transport_t, -1 until decided */
  int32_t* peer_devs;      /* per peer: its GPU's ordinal here, -1 when not visible */
  transport_res_t* res;    /* everything the connects so far left */
  uint64_t dev_bytes;
  uint64_t host_bytes;
  /* Network: chosen at the first net connection (transport_set_net gives the inputs). */
  char* net_name;          /* config.netName / NCCL_NET, or NULL */
  uint64_t comm_id;
  int traffic_class;
  volatile uint32_t* kernel_abort;
  net_t* net;
  int net_devs[TRANSPORT_MAX_NET_DEVS]; /* the devices this rank's connections use, nearest */
  int net_ndevs;                        /* first; 0: every device in turn */
  uint8_t net_gdr[TRANSPORT_MAX_NET_DEVS][2]; /* per device: GPUDirect RDMA [receive, send]; all
                                                0 unless CHOIR_NET_GDR=1 */
  proxy_t* proxy;
  prof_t* prof; /* the communicator's profiler (transport_prof_attach), or NULL */
};

/* ---- The exchange ----------------------------------------------------------------------- */

#define TRANSPORT_WIRE_MAGIC 0x43484f4952545032ull /* "CHOIRTP2": per-protocol buffers */
#define TRANSPORT_WIRE_MAX_CONNS 8192              /* more is garbage, not a request */
#define TRANSPORT_OFF_NONE UINT64_MAX              /* a part the sender does not host */

enum { TRANSPORT_STATUS_OK = 0, TRANSPORT_STATUS_FAILED = 1 };

/* First message from a rank to a peer: what the rank decided and what it hosts for the peer.
 * Fixed size; the body (nconns transport_wire_conn_t) follows as a second message. */
typedef struct transport_wire_hdr {
  uint64_t magic;
  uint64_t pid_hash;      /* the sender's process */
  int32_t rank;           /* sender */
  int32_t peer;           /* receiver */
  int32_t kind;           /* the sender's kern_transport_t for this pair */
  int32_t nconns;
  int32_t status;         /* FAILED: the sender could not set up its side; the rest is void */
  int32_t has_block;      /* the sender hosts memory for this peer (offsets below refer to it) */
  uint64_t block_ptr;     /* p2p: the block's device address in the sender's process */
  uint64_t block_offset;  /* p2p: where the block starts inside the IPC allocation */
  uint64_t block_bytes;   /* size of the block (bounds every offset) */
  unsigned char ipc_handle[64]; /* p2p across processes */
  char shm_name[TRANSPORT_SHM_NAME_MAX]; /* shm: the sender's segment */
} transport_wire_hdr_t;

/* One connection end as its owner describes it. Offsets are into the owner's block, or
 * TRANSPORT_OFF_NONE for a part the other end hosts. */
typedef struct transport_wire_conn {
  int32_t id;
  int32_t is_send; /* from the owner's side */
  uint32_t slot_bytes[KERN_PROTO_NUM]; /* as requested (transport_req_t) */
  uint32_t pad;
  /* Per protocol: its buffer; a protocol sharing the SIMPLE buffer has SIMPLE's offset,
   * one not made TRANSPORT_OFF_NONE. */
  uint64_t off_buff[KERN_PROTO_NUM];
  uint64_t off_tail;
  uint64_t off_head;
} transport_wire_conn_t;

/* Fill the buffers of c (buff, slot_bytes, tail_sync) for `kind` from the requested slots and
 * the offsets of host (the wire description of the end that hosts the buffers) into base. */
void transport_conn_buffers(kern_conn_t* c, kern_transport_t kind,
                            const transport_wire_conn_t* host, char* base);

/* Second message: whether the sender connected everything of the call (and so keeps it). */
typedef struct transport_wire_done {
  uint64_t magic;
  int32_t status;
  int32_t pad;
} transport_wire_done_t;

/* The layout of what a rank hosts for one peer: fills the off_* of conns (n entries, with
 * id, is_send and slot_bytes set) for `kind`, and returns the block's size (0: hosts nothing).
 *   p2p: receive ends host their buffers + tail, send ends host head;
 *   shm: receive ends host their buffers + tail + head, send ends nothing.
 * A receive end's buffers: one per protocol made that does not share SIMPLE's
 * (transport_shared_protos), KERN_NSLOTS * slot_bytes[p] each. Buffers are
 * TRANSPORT_BUFF_ALIGN-aligned and come first, then one TRANSPORT_LINE per counter; the size is
 * a multiple of TRANSPORT_BUFF_ALIGN. */
uint64_t transport_wire_layout(kern_transport_t kind, transport_wire_conn_t* conns, int n);

/* Checks the peer's message against ours (rank and peer: this rank and the other): the peer's
 * own status, the pair's kind (net or none fail here with ncclInvalidUsage and the reason),
 * that both chose the same kind, that the peer's connections mirror ours (same ids, opposite
 * directions, same slot_bytes for every protocol) and that every offset we will use (every
 * buffer of its own, tail, head) lies in the peer's block.
 * match[i]: the index in theirs_c of the mirror of mine_c[i]. WARNs and returns
 *   ncclRemoteError     the peer reported its own failure,
 *   ncclInvalidUsage    no transport for the pair (another host, or p2p and shm both off),
 *   ncclInternalError   anything else (the calls do not mirror each other, garbage). */
ncclResult_t transport_wire_check(int rank, int peer, const transport_wire_hdr_t* mine,
                                  const transport_wire_conn_t* mine_c,
                                  const transport_wire_hdr_t* theirs,
                                  const transport_wire_conn_t* theirs_c, int* match);

/* ---- p2p and shm halves of a connect (transport_p2p.c, transport_shm.c) ------------------- */

/* What one connect call does with one peer. */
typedef struct transport_group {
  int peer;
  int n;                         /* connection ends with this peer */
  int* req_idx;                  /* n indices into the call's reqs, ordered by (is_send, id) */
  kern_transport_t kind;
  transport_wire_hdr_t mine;
  transport_wire_hdr_t theirs;
  transport_wire_conn_t* mine_c; /* n */
  transport_wire_conn_t* theirs_c;
  int* match;                    /* n */
  transport_res_t* own;          /* the block this rank hosts for the peer (NULL: none) */
  char* own_base;                /* device address of the block's start */
  transport_res_t* mapped;       /* the peer's block mapped here (NULL: none, or raw) */
  char* peer_base;               /* device address of the peer's block's start */
  kern_conn_t* conns;            /* n: filled by map, copied to the outs on success */
  /* net only */
  struct transport_net_end* net_ends;               /* n */
  unsigned char (*mine_handles)[NCCL_NET_HANDLE_MAXSIZE];   /* n: receive ends' listen handles */
  unsigned char (*theirs_handles)[NCCL_NET_HANDLE_MAXSIZE]; /* theirs.nconns */
} transport_group_t;

/* One net connection end while a connect builds it. */
typedef struct transport_net_end {
  int dev;                /* the NIC (net device) it uses */
  void* listen_comm;      /* receive end, until accepted */
  void* comm;             /* send or receive comm, once up */
  void* mhandle;          /* its buffer's registration */
  transport_res_t* mem;   /* its host block: the slots (unless gdr), then the lines */
  char* dev_base;         /* the block's device address */
  int gdr;                /* GPUDirect RDMA: the slots are GPU memory the NIC reads or writes */
  transport_res_t* slots; /* gdr: the slots (device memory) */
} transport_net_end_t;

/* Allocate and describe (in g->mine, g->mine_c) what this rank hosts for g->peer. */
ncclResult_t transport_p2p_host(transport_t* t, transport_group_t* g);
ncclResult_t transport_shm_host(transport_t* t, transport_group_t* g);
/* After transport_wire_check: map the peer's block and fill g->conns. */
ncclResult_t transport_p2p_map(transport_t* t, transport_group_t* g);
ncclResult_t transport_shm_map(transport_t* t, transport_group_t* g);

/* ---- net (transport_net.c) ---------------------------------------------------------------- */

/* The net plugin and the proxy thread, made at the first net connection. */
ncclResult_t transport_net_ensure(transport_t* t);
/* Allocate every end's block and listen for the receive ends (g->mine_handles). */
ncclResult_t transport_net_host(transport_t* t, transport_group_t* g);
/* After round 1 (theirs_handles, match): connect and accept every net end of every group,
 * register the buffers and fill g->conns. */
ncclResult_t transport_net_establish(transport_t* t, transport_group_t* groups, int ngroups);
/* After round 2 succeeded: hand the ends to the proxy, keep the memory. */
ncclResult_t transport_net_commit(transport_t* t, transport_group_t* g,
                                  const transport_req_t* reqs);
/* Undo whatever of g's net ends exists (failure paths). */
void transport_net_release(transport_t* t, transport_group_t* g);

#endif
