/*
 * core/enqueue: from API call to kernel launch, and group semantics. It holds the group state
 * (nesting per thread), the jobs a group end runs (communicator creation, split and shrink, which
 * must progress together when one thread drives several ranks), and the data path of each
 * communicator: its transports and connections, its device-side communicator, the operations a
 * group collects, their plan and their kernel launches.
 */
#ifndef CHOIR_ENQUEUE_H
#define CHOIR_ENQUEUE_H

#include <stdbool.h>

#include "base.h"
#include "bootstrap.h"
#include "graph.h"
#include "nccl.h"
#include "transport.h"

/* A piece of work that may need to wait for other ranks (embedded in a larger struct). */
typedef struct group_job group_job_t;
struct group_job {
  /* Does the work. Runs on its own thread when several jobs must progress together or when the
   * communicator is non-blocking, else on the caller's thread. The job's CUDA device is current. */
  ncclResult_t (*run)(group_job_t* job);
  /* Called exactly once after run (or instead of it, with the error that prevented it): publishes
   * the result and releases the job. Must not block on other ranks. */
  void (*complete)(group_job_t* job, ncclResult_t res);
  int cuda_dev;     /* device current when the job was submitted, -1 for none */
  bool nonblocking; /* from a non-blocking communicator: nobody waits for it */
  group_job_t* next;
};

/*
 * Outside a group: a blocking job runs now on this thread and its result is returned; a
 * non-blocking one starts on a thread of its own and ncclInProgress is returned. Inside a group:
 * the job waits for the outermost ncclGroupEnd, and ncclSuccess is returned.
 */
ncclResult_t enqueue_job_submit(group_job_t* job);

ncclResult_t enqueue_group_start(void);
/* Close one level; the outermost close runs what the group holds: every job on its own thread,
 * waiting for all of them unless they are non-blocking (then ncclInProgress), then the queued
 * operations (connections, launches; for non-blocking communicators that must connect first,
 * on a thread of their own: ncclInProgress, see enqueue_comm_deferred_running). With sim_info,
 * fill sim_info->estimatedTime as well. When a call inside the group failed (see
 * enqueue_group_fail), it runs and launches nothing and returns that error instead. */
ncclResult_t enqueue_group_end(ncclSimInfo_t* sim_info);
/* Nesting depth of the calling thread's group (0: not in a group). */
int enqueue_group_depth(void);
/* Called by the API with the result of every call that would have added to a group (operations,
 * communicator creation): inside a group, an error (not ncclInProgress) becomes the group's, as
 * in NCCL, and the outermost ncclGroupEnd returns it. Returns res. */
ncclResult_t enqueue_group_fail(ncclResult_t res);
/* Jobs still waiting in the calling thread's open group (not yet run) for which match(job, ctx)
 * is true: enqueue_group_holds counts them; enqueue_group_cancel takes them out of the group and
 * completes each with res (they never run) and returns how many. For destroying a communicator
 * whose creation, or a split of which, waits for an ncclGroupEnd that this thread has yet to
 * call. */
int enqueue_group_holds(bool (*match)(const group_job_t* job, const void* ctx), const void* ctx);
int enqueue_group_cancel(bool (*match)(const group_job_t* job, const void* ctx), const void* ctx,
                         ncclResult_t res);

/* ---- The data path of one communicator ---------------------------------------------------- */

typedef struct enq_comm enq_comm_t; /* opaque */

typedef struct enq_comm_args {
  bootstrap_t* bs; /* the communicator's; outlives the data path */
  int rank;
  int nranks;
  int cuda_dev;
  const transport_peer_t* peers; /* nranks entries (copied) */
  volatile uint32_t* abort_flag; /* the communicator's host-side abort flag */
  /* The channel limits (graph_limits_make: config minCTAs/maxCTAs, NCCL_MIN/MAX_NCHANNELS and
   * the CTA cap, computed once by the communicator): the ring channel count is Choir's default
   * for the ring's slowest transport brought within them. */
  graph_limits_t lim;
  int net_peer_nch;              /* config nChannelsPerNetPeer, -1: Choir's default */
  uint64_t comm_hash;
  const char* net_name;          /* config netName (NCCL_NET applied), NULL: any; copied */
  int traffic_class;             /* config trafficClass, -1: undefined */
  /* From the topology search (may be NULL: rings in rank order): nrings rings of nranks ranks,
   * which the ring channels reuse cyclically. The p2p policy (NCCL_P2P_LEVEL on the topology
   * model) is handed to the transport. Both are copied / must outlive the data path. */
  const int32_t* rings;
  int nrings;
  transport_p2p_policy_fn p2p_policy;
  void* p2p_policy_ctx;
  /* Most CTAs one launch of this rank may use (0: no cap), the same on every rank: ranks that
   * share a GPU spin on each other, so all their CTAs must be resident at once. */
  int cta_cap;
  /* For the cost model (core/tune), equal on every rank: the most ranks on one GPU (1: none
   * share), the graph's farthest intra-node hop (topo_path_type_t; -1: no graph) and per-channel
   * bandwidths in GB/s (<= 0: unknown), the hosts spanned and the most ranks on one. */
  int gpu_share;
  int graph_type_intra;
  float graph_bw_intra;
  float graph_bw_inter;
  int nnodes;
  int local_ranks;
  /* nranks entries: each rank's host (.node, hosts numbered by their first rank, < nnodes), as
   * the tree channels' links need it (graph_tree_build); copied. */
  const graph_rank_info_t* hosts;
  const char* comm_name; /* config commName, or NULL: for the profiler plugin's init */
  /* config.blocking == 0: a group end that must first make connections hands them and its
   * launches to a thread of their own and returns ncclInProgress (enqueue_comm_deferred_*). */
  bool nonblocking;
} enq_comm_args_t;

/* Build the data path: ring channels (order and count from the topology and graph), their
 * connections, the device-side communicator. Collective over the communicator's ranks (uses the
 * bootstrap). The current device must be the rank's. */
ncclResult_t enqueue_comm_create(const enq_comm_args_t* args, enq_comm_t** dp_p);
/* Make running and future kernels of this communicator give up waiting for peers. */
void enqueue_comm_abort(enq_comm_t* dp);
/* ncclSuccess, or the error that stopped the communicator's data path behind the user's back
 * (a network failure seen by the proxy thread), and what failed into msg (proxy_error). */
ncclResult_t enqueue_comm_async_error(enq_comm_t* dp, char* msg, size_t size);
/* Non-blocking communicators: whether a group end still connects and launches in the background
 * (it returned ncclInProgress); the API's refusal, for func, of what would touch the queued
 * operations or the operators meanwhile (ncclInvalidUsage with a message); the result of the
 * last one once it is done (handed over once, then ncclSuccess); and a wait for it (destroy,
 * finalize and abort call it after raising the abort flag, which cuts its connecting short). */
bool enqueue_comm_deferred_running(const enq_comm_t* dp);
ncclResult_t enqueue_comm_deferred_idle(const enq_comm_t* dp, const char* func);
ncclResult_t enqueue_comm_deferred_result(enq_comm_t* dp);
void enqueue_comm_deferred_wait(const enq_comm_t* dp);
/* Whether operations launched outside graph capture have not completed yet (0 after an error
 * of the query: nothing to wait for then). Any thread. */
bool enqueue_comm_busy(enq_comm_t* dp);
/* Collectives launched so far (every operation but send and receive, whatever its count: every
 * rank launches the same sequence of them). Any thread. */
uint64_t enqueue_comm_colls(enq_comm_t* dp);
/* "AllReduce of 1048576 x float (group 57 of this communicator, 1 operation)", or "none":
 * the last group launched, for messages. Any thread. */
void enqueue_comm_last_op(enq_comm_t* dp, char* buf, size_t size);
/* Wait until every operation launched so far has completed on the GPU. */
ncclResult_t enqueue_comm_finalize(enq_comm_t* dp);
/* Free everything (after finalize, or after abort). Safe with NULL. */
void enqueue_comm_destroy(enq_comm_t* dp);
/* Symmetric windows (comm_win.c) the data path may read and write directly: buff..buff+size of
 * this rank, LSA rank q's copy at flat0 + q * stride4g x 4 GiB (flat0: LSA rank 0's copy of
 * buff), nlsa ranks in the LSA team. A collective whose buffers lie in windows of a team that
 * holds every rank of the communicator may take a Sym kernel (CHOIR_SYM_KERNELS). Any thread. */
ncclResult_t enqueue_comm_window_add(enq_comm_t* dp, const void* buff, size_t size, char* flat0,
                                     uint32_t stride4g, int nlsa);
/* Forget the window whose flat0 this is (each window has a flat range of its own). */
void enqueue_comm_window_remove(enq_comm_t* dp, const char* flat0);
/* Take dp out of the calling thread's open group, dropping the operations it queued there (for a
 * communicator destroyed before the ncclGroupEnd that would launch them). Returns how many were
 * dropped. Safe with NULL. */
int enqueue_group_forget(enq_comm_t* dp);

/* ncclRedOpCreatePreMulSum / ncclRedOpDestroy on this communicator. */
ncclResult_t enqueue_redop_create(enq_comm_t* dp, ncclRedOp_t* op_p, const void* scalar,
                                  ncclDataType_t type, ncclScalarResidence_t residence);
ncclResult_t enqueue_redop_destroy(enq_comm_t* dp, ncclRedOp_t op);
/* ncclInvalidArgument with a message when op is neither built-in nor live on this comm for
 * type. */
ncclResult_t enqueue_redop_check(enq_comm_t* dp, const char* func, ncclRedOp_t op,
                                 ncclDataType_t type);

typedef enum {
  ENQ_BROADCAST = 0, /* = kern_coll_t for the ring collectives */
  ENQ_REDUCE = 1,
  ENQ_ALLGATHER = 2,
  ENQ_REDUCESCATTER = 3,
  ENQ_ALLREDUCE = 4,
  ENQ_SEND,
  ENQ_RECV,
  ENQ_ALLTOALL,
  ENQ_GATHER,
  ENQ_SCATTER,
} enq_kind_t;

/* One API operation, arguments already checked (see core/api). count is the API's count. */
typedef struct enq_op {
  enq_kind_t kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root; /* root, or peer of send/recv */
  cudaStream_t stream;
  void* prof_api; /* the profiler's CollApi/P2pApi event of the call (enqueue_prof.c), or NULL */
} enq_op_t;

/* Queue an operation: inside a group it waits for the outermost ncclGroupEnd; outside, it is
 * planned and launched now. Returns once it is enqueued on its stream. */
ncclResult_t enqueue_op(enq_comm_t* dp, const enq_op_t* op);

/* Bytes of one element of type (the kernels' definition); 0 for an invalid type. */
size_t enqueue_type_size(ncclDataType_t type);

/* Bytes of device and host memory the data path holds (connections and device structures). */
void enqueue_comm_mem_usage(const enq_comm_t* dp, uint64_t* dev_p, uint64_t* host_p);

#endif
