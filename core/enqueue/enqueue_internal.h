/*
 * Private to core/enqueue: the data-path state of a communicator, shared by the files that set
 * it up (enqueue_comm.c), plan and launch its operations (enqueue_plan.c), and run groups
 * (enqueue_group.c).
 */
#ifndef CHOIR_ENQUEUE_INTERNAL_H
#define CHOIR_ENQUEUE_INTERNAL_H

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "enqueue.h"
#include "kernels.h"
#include "nccl_common.h"
#include "prof.h"
#include "tune.h"

/* Setup work (allocations, IPC, uploads on a private stream) may run while the application
 * captures a CUDA graph, even in the global capture mode that forbids such calls; like NCCL,
 * relax the calling thread's capture mode around it and restore it after. */
static inline enum cudaStreamCaptureMode enq_capture_relax(void) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  return mode;
}
static inline void enq_capture_restore(enum cudaStreamCaptureMode mode) {
  cudaThreadExchangeStreamCaptureMode(&mode);
}

/* Bootstrap tags of the data path's connection rounds. */
#define ENQ_TAG_RING 0x43520001
#define ENQ_TAG_P2P 0x43520002
#define ENQ_TAG_TREE 0x43520003
/* Connection ids of OneShot's direct connections (ENQ_DIRECT_ID_BASE + CTA), in the ring's
 * connect call: above every ring channel's id. */
#define ENQ_DIRECT_ID_BASE 0x1000
/* Connection ids of the tree channels (a connect call of their own, ENQ_TAG_TREE):
 * ENQ_TREE_UP_ID_BASE + channel for the connection from a child to its parent (the reduction
 * going up), ENQ_TREE_DOWN_ID_BASE + channel for the one from a parent to its child (the result
 * coming down). */
#define ENQ_TREE_UP_ID_BASE 0x2000
#define ENQ_TREE_DOWN_ID_BASE 0x3000
/* Tree channels at most: each is up to eight connections with Simple buffers (a parent and three
 * children, both ways). */
#define ENQ_TREE_MAX_CHANNELS 16

/* A user-created reduction operator (ncclRedOpCreatePreMulSum). */
typedef struct enq_redop {
  int live;
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  uint64_t scalar_bits;    /* host-immediate scalar, as memcpy leaves it */
  const void* scalar_ptr;  /* device-resident scalar: the user's pointer, read by the kernel */
} enq_redop_t;

struct enq_comm {
  int rank;
  int nranks;
  int cuda_dev;
  uint64_t comm_hash;
  char* net_name;  /* for the transport's choice of net plugin (NULL: any) */
  int traffic_class;
  bootstrap_t* bs;
  transport_t* transport;
  transport_peer_t* peers;
  volatile uint32_t* host_abort;

  /* Abort flag the kernels poll: pinned host memory mapped into the device. */
  uint32_t* abort_host;
  uint32_t* abort_dev;

  /* Device-side communicator and its host mirror (the mirror's connection steps are stale: the
   * kernels own them; uploads write only what changed). */
  kern_comm_t host_kc;
  kern_comm_t* dev_kc;
  int32_t* dev_ring_ranks; /* [nchannels][nranks] */
  int32_t* ring_ranks;     /* host copy */
  int32_t* graph_rings;    /* [ngraph_rings][nranks] from the topology search, or NULL */
  int ngraph_rings;
  transport_p2p_policy_fn p2p_policy;
  void* p2p_policy_ctx;
  kern_conn_t* dev_p2p;    /* [2][nranks * KERN_MAX_P2P_CHANNELS]: send, then recv */
  /* OneShot's connections, [2][nranks * KERN_DIRECT_MAX_CTAS] (send, then recv), made with the
   * ring where every pair is p2p (CHOIR_ONESHOT); NULL otherwise. */
  kern_conn_t* dev_direct;
  int direct_ctas;
  /* The tree channels (NCCL_ALGO_TREE): tree_nch of them where the tree may run
   * (tune_tree_wanted; 0 otherwise), counted by the model from the ring's connect, connected
   * when a plan first picks the tree, with buffers of tree_slots bytes per protocol: dev_tree,
   * and host_tree its host copy as connected (non-NULL: the tree is connected). */
  kern_tree_t* dev_tree;
  kern_tree_t* host_tree;
  int tree_nch;
  uint32_t tree_slots[KERN_PROTO_NUM];
  graph_rank_info_t* hosts; /* [nranks]: each rank's host (enq_comm_args_t.hosts) */
  int nchannels;            /* ring channels, decided at the first collective */
  graph_limits_t lim;       /* the communicator's channel limits (enq_comm_args_t) */
  int net_peer_nch;         /* config nChannelsPerNetPeer, -1: ENQ_NET_P2P_NCH */
  /* What the cost model is told (enq_comm_args_t). */
  int gpu_share;
  int graph_type_intra;
  float graph_bw_intra, graph_bw_inter;
  int nnodes, local_ranks;
  /* The cost model of the connected ring (NULL until then, and with one rank), and one made
   * without connecting for ncclGroupSimulateEnd before that (enqueue_plan_estimate). */
  tune_t* tune;
  tune_t* tune_sim;
  int p2p_nch;             /* connections per peer and direction (p2p transport) */
  int cta_cap;             /* most CTAs of one launch (0: no cap): ranks sharing a GPU */
  uint8_t* p2p_nch_peer;   /* per peer: connections made per direction (0: not connected) */
  uint64_t dev_bytes;
  int device_ready; /* streams, events, device structures, transport: at the first operation */
  int ring_ready;   /* ring channels connected: at the first collective */

  cudaStream_t setup_stream; /* non-blocking: uploads never wait for the user's work */
  cudaEvent_t done_ev;       /* recorded after every launch outside capture */
  cudaEvent_t join_ev;       /* joins the streams of one launch */
  cudaStream_t last_stream;
  int launched;

  /* The last group launched, for the messages of a failure found later on another thread
   * (enqueue_comm_last_op): its last operation and how many it had; each field is written and
   * read atomically (a torn combination only garbles a message). */
  int last_kind;
  size_t last_count;
  int last_type;
  int last_peer;
  int last_nops;
  uint64_t groups_launched;
  uint64_t colls_launched; /* enqueue_comm_colls */

  /* Operations collected by the current group, in call order. */
  enq_op_t* ops;
  int nops;
  int ops_cap;
  enq_comm_t* group_next; /* the thread's list of communicators with operations */
  int in_group;
  /* Non-blocking communicators: a group end finishing on a thread of its own (enqueue_group.c):
   * 1 while it runs (atomic; the thread owns the queued operations then), and its result once
   * done, until enqueue_comm_deferred_result hands it over. */
  bool nonblocking;
  int deferred;
  int deferred_res;

  enq_redop_t* redops;
  int nredops;

  /* The profiler plugin's context (core/prof; NULL: none) and this group's events on dp
   * (enqueue_prof.c). */
  prof_t* prof;
  void* prof_group_api;
  void* prof_group;
  int prof_group_open;
  uint64_t prof_seq; /* collectives launched so far: the Coll events' seqNumber */
  /* The queued collectives' plans (plans[i] for ops[i], non-empty collectives only), made once
   * per group: when the connect must know whether the tree is wanted, else at the launch;
   * plans_valid until the queue is cleared. */
  struct enq_plan* plans;
  int plans_cap;
  int plans_valid;
  /* KernelCh events (enqueue_prof.c): ENQ_KCH_RECS timestamp records in host-mapped memory
   * (allocated when the profiler first wants them), handed to launches in order; record i's
   * parent event and channel; records handed out and consumed so far (head - tail pending). */
  kern_prof_rec_t* kch_host;
  kern_prof_rec_t* kch_dev;
  void** kch_parent;
  uint8_t* kch_channel;
  uint64_t kch_head, kch_tail;
  int kch_failed; /* the allocation failed once: no KernelCh events on this communicator */
  /* Symmetric windows (enqueue_comm_window_add), under wins_lock: registration runs on the
   * group's job thread, planning on the thread that ends a group (which reads nwins without the
   * lock first, to skip it when there are none). */
  pthread_mutex_t wins_lock;
  struct enq_win* wins;
  int nwins, wins_cap;
};

/* A symmetric window as the plan sees it (enqueue_comm_window_add). */
typedef struct enq_win {
  const char* buff;
  size_t size;
  char* flat0;
  uint32_t stride4g;
  int nlsa;
} enq_win_t;

/* The plan of one collective: what tune_choose decided, as the kernel's work descriptor takes
 * it. Every rank derives the same plan from the same call (tune_choose is deterministic given
 * equal inputs, and its inputs are equal on every rank). */
typedef struct enq_plan {
  int algo;             /* NCCL_ALGO_* */
  int proto;            /* NCCL_PROTO_* = kern_proto_t */
  int nchannels;        /* CTAs, one ring channel each */
  int nthreads;         /* threads per CTA */
  uint32_t chunk_bytes; /* data bytes per step at most */
  float time_us;        /* the model's estimate */
  int channel0;         /* the ring's first channel (enqueue_plan_spread_ring); 0 otherwise */
  /* Sym kernels: LSA rank 0's copies of recvbuff and sendbuff, the windows' stride (kernels.h) */
  char* sym_recv0;
  const char* sym_send0;
  uint32_t sym_stride4g;
} enq_plan_t;

/* The plan of collective op (count > 0) in a group of num_pipe_ops collectives, on t (the
 * connected ring's model) for nranks ranks. Checks the choice against the ring: its protocol
 * must have buffers on the ring connections (ring_slot_bytes[proto] != 0), its channels within
 * 1..ring_nchannels (the tree: AllReduce, Simple, 1..tree_nchannels); an answer outside that is
 * a bug in the model or the tuner (ncclInternalError with a WARN). */
ncclResult_t enqueue_plan_make(tune_t* t, const enq_op_t* op, int nranks, int num_pipe_ops,
                               const uint32_t ring_slot_bytes[KERN_PROTO_NUM], int ring_nchannels,
                               int tree_nchannels, enq_plan_t* plan_p);
/* Whether collective op takes a Sym kernel (kernels.h: KERN_ALGO_SYM; CHOIR_SYM_KERNELS = mode):
 * AllReduce, AllGather or ReduceScatter whose buffers that other ranks read (the input of
 * AllReduce and ReduceScatter) or write (the output of AllReduce and AllGather) lie whole inside
 * windows wins[0..nwins) of a team of all nranks ranks (AllReduce's two with one stride); not
 * premulsum (its scalar is per rank, and each rank here reduces the others' data); the direct
 * connections made (direct_ctas > 0: CTAs at most, and at most cta_cap when > 0). Mode 0:
 * never; 1: where the model chose anything but OneShot (whose one LL hop beats the Sym kernels'
 * two barriers at the smallest sizes); 2: always. Then the plan becomes the Sym kernel's (CTAs
 * and threads by bytes, the windows' copies and stride) and 1 is returned; 0 leaves it. Every
 * rank decides alike when every rank's buffers lie in windows, which windows' collective
 * registration asks of the user, as NCCL's symmetric kernels do. */
int enqueue_plan_sym(const enq_win_t* wins, int nwins, int nranks, int direct_ctas, int cta_cap,
                     int64_t mode, const enq_op_t* op, enq_plan_t* plan);

/* What decides whether two planned collectives may share a launch (kernels.h:
 * kern_coll_batch_t): the kernel (the protocol; for reductions the kernel operator and the type;
 * Broadcast and AllGather share the copy kernel, marked op = type = -1). Not the stream: a group
 * on several streams launches on its first collective's, the others joined before and after
 * (NCCL's rule), so the batches depend on the calls alone, equal on every rank. */
typedef struct enq_batch_key {
  int tree; /* tree works run in a kernel of their own (kern_tree.cuh) */
  int solo; /* a Sym kernel: a launch of its own (kern_coll_sym_kernel, kern_copy_sym_kernel) */
  int proto;
  int op;   /* kern_op_t, or -1: the copy kernel */
  int type; /* ncclDataType_t, or -1: the copy kernel */
} enq_batch_key_t;
enq_batch_key_t enqueue_plan_batch_key(const enq_op_t* op, const enq_plan_t* plan);
/* The end (exclusive) of the batch that starts at keys[lo] of n planned collectives in call
 * order: the longest run of keys equal to keys[lo], at most max (>= 1) long. A function of the
 * list alone, so every rank cuts the same batches from the same calls. */
int enqueue_plan_batch_end(const enq_batch_key_t* keys, int n, int lo, int max);
/* Collectives per launch at most: CHOIR_AGG_MAX within 1..KERN_COLL_BATCH_MAX (read once). */
int enqueue_plan_batch_max(void);
/* A batch's runs of consecutive OneShot works (the kernel's merge condition) get the CTAs of
 * their bytes together (tune_direct_ctas), at least the most any of them has. */
void enqueue_plan_spread_oneshot(const tune_t* t, kern_coll_batch_t* b);
/* The group's ring plans (plans[0..n), in call order; other algorithms and the zeroed plans of
 * non-collectives are skipped) that use fewer than `limit` channels (the ring's) take channels
 * of their own: each starts where the one before ended, from 0 again when it would run past
 * limit, so that those a launch holds run side by side. limit < 1 (the knob
 * CHOIR_RING_SPREAD=0): every plan starts at 0. Placed per group in call order, not per launch:
 * a function of the calls alone, so every rank places each collective alike even where ranks
 * cut their launches differently (their streams differ). */
void enqueue_plan_spread_ring(int limit, enq_plan_t* plans, int n);
/* Consecutive alike collectives of a group planned together (CHOIR_GROUP_PLAN, NCCL's
 * aggregation): ops[0..n) with their plans (count 0 or not a collective: skipped, plan left),
 * runs of AllReduce, AllGather or ReduceScatter with one kernel operator and type (any
 * stream), each within 4x of the run's smallest size, at most max_run long. A run of two or more
 * is chosen for its bytes together (tune_choose_run); when the model picks the ring or OneShot,
 * every operation of the run takes that algorithm, protocol, thread count and chunk, and the
 * ring's channels are shared by bytes (each at least one). Otherwise the plans stay. Same inputs
 * on every rank, same plans. Errors: as enqueue_plan_make's. */
ncclResult_t enqueue_plan_runs(tune_t* t, const enq_op_t* ops, enq_plan_t* plans, int n,
                               int nranks, int max_run, int ring_nchannels);

/* NCCL's nBytes of an operation for the model: count * type size, times nranks for AllGather
 * and ReduceScatter (the tuner's convention) and for what AlltoAll sends. */
uint64_t enqueue_plan_nbytes(const enq_op_t* op, int nranks);

/* The model's view of the links, for tune_topo_t (enqueue_comm.c): the link of a hop of kind
 * `kind` (gpu_share and the graph's intra-node path type decide between NVLink, PCIe and the
 * same GPU), and the protocols the ring connections get over the links intra and inter. */
tune_link_t enqueue_link_of(kern_transport_t kind, int gpu_share, int graph_type_intra);
/* The ring's slots every rank plans with (the model's chunks, the tree's connections), equal on
 * every rank: a transport that puts a protocol in the Simple buffer (shm, net:
 * transport_slots_effective) gives it Simple's slot, so in a ring of several kinds of hops a
 * protocol's slots differ from hop to hop; out is the smallest any kind up to `slowest` (the
 * slowest transport any pair of ranks uses) makes of `asked`. Every connection has at least it. */
void enqueue_ring_slots(kern_transport_t slowest, const uint32_t asked[KERN_PROTO_NUM],
                        uint32_t out[KERN_PROTO_NUM]);

/* enqueue_plan.c */
/* Connections the pending operations need that do not exist yet: 1 if any. */
int enqueue_plan_needs_connect(enq_comm_t* dp);
/* Make them (blocking, talks to the peers concerned). */
ncclResult_t enqueue_plan_connect(enq_comm_t* dp);
/* Plan and launch every pending operation, then clear the list. */
ncclResult_t enqueue_plan_launch(enq_comm_t* dp);
/* Estimated time in microseconds of the pending operations (ncclGroupSimulateEnd): the sum of
 * the model's estimates (tune_estimate_us), on the connected ring's model or, before the ring is
 * connected, one made from what is known without connecting (enqueue_comm_sim_tune). 0 with
 * nothing pending. Errors: the model's (tune_create). */
ncclResult_t enqueue_plan_estimate(enq_comm_t* dp, float* us_p);
void enqueue_plan_clear(enq_comm_t* dp);

/* The ncclFunc_t of an operation (enqueue_plan.c). */
ncclFunc_t enq_func(const enq_op_t* op);
/* Whether work enqueued on stream now is captured into a CUDA graph. */
bool enq_stream_capturing(cudaStream_t stream);

/* enqueue_prof.c: the profiler's events (see there). */
void enq_prof_op(enq_comm_t* dp, enq_op_t* op);
void enq_prof_group_end(enq_comm_t* dp);
void enq_prof_group_close(enq_comm_t* dp);
void* enq_prof_coll_start(enq_comm_t* dp, const enq_op_t* op, const enq_plan_t* plan);
/* A P2p event for one send or receive of op (a send/recv, or a part of an AlltoAll, Gather or
 * Scatter), under op's API event. */
void* enq_prof_p2p_start(enq_comm_t* dp, const enq_op_t* op, bool send, int peer,
                         const void* buff);
void* enq_prof_launch_start(enq_comm_t* dp, cudaStream_t stream);
/* Before a ring collective's launch outside capture: the steps it moves through each network
 * end, announced to the proxy for its ProxyOp events under parent. */
void enq_prof_ring_ops(enq_comm_t* dp, const kern_coll_work_t* w, void* parent);
/* The same for a send/recv batch: op o's CTAs, each over its connection with the op's peer. */
void enq_prof_p2p_ops(enq_comm_t* dp, const kern_p2p_batch_t* b, void* const* parents);

/* KernelCh events: a launch of n CTAs outside capture reserves n records (polling finished
 * ones first); NULL when the type is masked off, under capture, or no room is left (then the
 * launch has no KernelCh events). *first_p: the first record's number; the caller names each of
 * the n records with enq_prof_kch_set, and cancels them when the launch fails. */
kern_prof_rec_t* enq_prof_kch_reserve(enq_comm_t* dp, uint32_t n, int capturing,
                                      uint64_t* first_p);
void enq_prof_kch_set(enq_comm_t* dp, uint64_t rec, void* parent, int channel);
void enq_prof_kch_cancel(enq_comm_t* dp, uint64_t first);
/* Reports every record whose CTA finished, in order (never waits for the GPU). */
void enq_prof_kch_poll(enq_comm_t* dp);
/* At destroy, after the communicator's last kernel: reports what finished, drops the rest and
 * frees the records. */
void enq_prof_kch_release(enq_comm_t* dp);

/* enqueue_group.c */
/* Adds dp to the calling thread's group (once). */
void enqueue_group_add_comm(enq_comm_t* dp);

/* enqueue_comm.c */
void enqueue_redop_scalar(enq_comm_t* dp, ncclRedOp_t op, uint64_t* bits_p, const void** ptr_p);
/* Local device resources (no communication): at the first operation. */
ncclResult_t enqueue_comm_setup_device(enq_comm_t* dp);
/* Connect the ring channels (collective over all ranks): at the first collective. */
ncclResult_t enqueue_comm_connect_ring(enq_comm_t* dp);
/* Connect the tree channels (collective over every rank of the trees): when the plan of a
 * queued collective first picks the tree (enqueue_plan_connect). After the ring. */
ncclResult_t enqueue_comm_connect_tree(enq_comm_t* dp);
/* The model for ncclGroupSimulateEnd: the connected ring's, or else one made (once) from what
 * is known without connecting (this rank's transports, the graph, the limits). */
ncclResult_t enqueue_comm_sim_tune(enq_comm_t* dp, tune_t** t_p);
/* Connect both directions with each listed peer (p2p channels), update the device structures. */
ncclResult_t enqueue_comm_connect_p2p(enq_comm_t* dp, const int* peers, int npeers);

/* A send/recv connection's place in the device tables (dp->host_kc.p2p_send/recv; never
 * dereferenced on the host): its name for the profiler's ProxyOps. And the slot size of the
 * send/recv connections with peer. */
const kern_conn_t* enq_p2p_conn_key(const enq_comm_t* dp, int is_send, int peer, int c);
uint32_t enq_p2p_slot_bytes(const enq_comm_t* dp, int peer);

/* CTAs one send/recv launch may use: all must be resident together, and with ranks sharing a
 * GPU, within the communicator's cap (enqueue_plan.c). */
int enq_p2p_batch_ctas(const enq_comm_t* dp);

#endif
