/*
 * core/comm: the communicator's lifecycle: creation (one rank, several ids, a clique, a split, a
 * shrink), configuration, readiness, finalize, destroy, abort, revoke.
 */
#ifndef CHOIR_COMM_H
#define CHOIR_COMM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "bootstrap.h"
#include "enqueue.h"
#include "graph.h"
#include "nccl.h"
#include "nccl_device.h"
#include "topo.h"

#define COMM_MAGIC 0x63686f6972636f6dull /* "choircom" */

/* The configuration a communicator runs with: ncclConfig_t after defaults, version gating,
 * environment overrides and validation. Strings are owned copies. */
typedef struct comm_config {
  int blocking;
  int cga_cluster_size;
  int min_ctas;
  int max_ctas;
  char* net_name; /* NULL: any */
  int split_share;
  int traffic_class;
  char* comm_name; /* NULL: none */
  int collnet_enable;
  int cta_policy;
  int shrink_share;
  int nvls_ctas;
  int nchannels_per_net_peer;
  int nvlink_centric_sched;
} comm_config_t;

/* What every rank tells the others at creation. Fixed layout: it crosses process boundaries. */
typedef struct comm_peer_info {
  int32_t rank;
  int32_t cuda_dev;
  int64_t bus_id;     /* cuda_bus_id() form */
  uint64_t host_hash; /* sys_host_hash() */
  uint64_t pid_hash;  /* sys_pid_hash() */
  int32_t pid;
  int32_t mp_count; /* multiprocessors of the rank's GPU */
  int32_t mps;      /* 1: the rank's process is an MPS client on that GPU */
  int32_t hw_queues; /* the process's hardware work queues per device (comm_hw_queues) */
} comm_peer_info_t;

/* Symmetric memory windows (comm_win.c). */
typedef struct comm_win comm_win_t;
typedef struct comm_devcomm comm_devcomm_t;
typedef struct win_job win_job_t;
typedef struct comm_wins {
  pthread_mutex_t lock;
  pthread_mutex_t run_lock; /* held by the job working the queue */
  win_job_t *q_head, *q_tail; /* registrations and device communicators, in call order */
  comm_devcomm_t* devcomms;
  comm_win_t* head;
  uint64_t seq;  /* registrations attempted on this communicator, failed ones included */
  ipcsock_t sock; /* descriptors from the ranks of this host; bound at the first registration */
} comm_wins_t;

/* Why a rank cannot register its buffer (told to every rank, so that all fail together). */
enum {
  COMM_WIN_OK = 0,
  COMM_WIN_NOT_MEMALLOC,
  COMM_WIN_NOT_CUMEM,
  COMM_WIN_MISALIGNED,
  COMM_WIN_TOO_LONG,
  COMM_WIN_EXPORT,
  COMM_WIN_ZERO,
  COMM_WIN_NULL,
};
const char* comm_win_err_str(int err);

/* What each rank tells the others about the window it registers. Crosses processes. */
typedef struct comm_win_desc {
  uint64_t magic;
  uint64_t seq;       /* the rank's registration count before this one */
  uint64_t size;      /* bytes registered */
  uint64_t offset;    /* from its allocation's start */
  uint64_t mapped;    /* bytes its allocation maps (granularity-rounded) */
  uint64_t host_hash; /* the LSA team: ranks of one host */
  int32_t err;        /* COMM_WIN_*: why it cannot register */
  int32_t rank;
  int32_t flags;      /* winFlags (NCCL_WIN_*): the same on every rank */
  int32_t pad;
} comm_win_desc_t;

#define COMM_WIN_MAX_LSA 64
/* The layout every rank derives alike from all descriptions. */
typedef struct comm_win_plan {
  int nlsa;                        /* ranks on this host */
  int lsa_rank;                    /* this rank's index among them */
  int lsa_ranks[COMM_WIN_MAX_LSA]; /* their world ranks, ascending */
  uint64_t stride;                 /* between LSA ranks' copies: a multiple of 4 GiB */
  uint64_t offset;                 /* of the buffers in their allocations */
} comm_win_plan_t;

/* The agreement rules: every rank able to register, same registration count, size and winFlags,
 * equal offsets on one host. ncclSuccess and the plan, or the error and why (naming the ranks). */
ncclResult_t comm_win_agree(const comm_win_desc_t* d, int n, int me, comm_win_plan_t* plan,
                            char* why, size_t whylen);
void comm_wins_init(comm_wins_t* w);
/* Frees what is still registered (at destroy). */
void comm_wins_free(ncclComm_t comm);
/* Collective: register buff (size bytes) now, on every rank. */
ncclResult_t comm_win_register(ncclComm_t comm, void* buff, size_t size, int flags,
                               comm_win_t** win_p);
/* ncclCommWindowRegister: now, or at the end of the calling thread's group. */
ncclResult_t comm_win_submit(ncclComm_t comm, void* buff, size_t size, int flags,
                             ncclWindow_t* win_p);
/* Local: unmap this rank's view of win. */
ncclResult_t comm_win_deregister(ncclComm_t comm, ncclWindow_t win);

/* LSA device communicators (comm_win.c): the resource window's layout, from the requirements
 * (ncclDevCommCreate's refusals already passed). Handles are in units of 128 bytes. */
#define COMM_DEVCOMM_SHOWN 64
typedef struct comm_devcomm_layout {
  size_t bytes; /* the resource window, 4 KiB multiple */
  ncclLsaBarrierHandle_t lsa_barrier;
  int nres;
  ncclDevResourceHandle_t res_handles[COMM_DEVCOMM_SHOWN]; /* the first buffers' handles */
} comm_devcomm_layout_t;
ncclResult_t comm_devcomm_layout(const ncclDevCommRequirements_t* reqs, int lsa_size,
                                 comm_devcomm_layout_t* out);
/* ncclDevCommCreate (collective; now or at the group's end) and ncclDevCommDestroy (local). */
ncclResult_t comm_devcomm_submit(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                 ncclDevComm_t* out);
ncclResult_t comm_devcomm_destroy(ncclComm_t comm, const ncclDevComm_t* dev);

/* User buffer registrations (comm_reg.c): sorted by start address. */
typedef struct comm_reg comm_reg_t;
typedef struct comm_regs {
  pthread_mutex_t lock;
  comm_reg_t** slots;
  int n, cap;
} comm_regs_t;

struct ncclComm {
  uint64_t magic_start;
  int rank;
  int nranks;
  int cuda_dev;
  int64_t bus_id;
  uint64_t comm_hash; /* identifies the communicator in logs and to plugins */
  comm_config_t config;
  bootstrap_t* bootstrap;
  comm_peer_info_t* peers; /* nranks entries, after creation */
  /* ncclInProgress while a (non-blocking) creation runs; then its result, or the first error
   * found later. Read and written atomically. */
  int status;
  volatile uint32_t abort_flag; /* set by ncclCommAbort: blocking steps return promptly */
  int pending;                  /* split/shrink jobs using this communicator; atomic */
  pthread_mutex_t bootstrap_lock; /* serializes collective use of `bootstrap` by jobs */
  bool revoked;
  bool finalized;
  uint64_t nsplits; /* splits and shrinks made from this communicator, to tag them */
  enq_comm_t* dp;   /* the data path (core/enqueue), after creation */
  topo_system_t* topo; /* this host's topology model (NULL when ranks span hosts) */
  int gpu_share;       /* most ranks of this communicator on one GPU (1: none share) */
  int cta_cap;         /* CTAs one rank may run at once (0: no cap; see comm_gpu_sharing) */
  /* Liveness of the other ranks (core/bootstrap's watch; NULL with one rank or before creation
   * ends): 1 + the rank whose failure broke this communicator (0: none), 1 + the first rank
   * known to have failed (died, went silent, or made a peer abort: the root cause, 0: none yet),
   * and how many ranks left it without breaking it (destroyed it, or aborted or exited while
   * this rank was idle). Written by the watch thread, read atomically. */
  bootstrap_watch_t* watch;
  int peer_failed;
  int root_failed;
  int departed;
  /* Why the communicator broke, for ncclGetLastError: written once, by whoever claims it (the
   * watch thread, or the thread that finds the network's error), then fail_ready published. */
  int fail_claim;
  int fail_ready;
  char fail_msg[640];
  comm_regs_t regs;
  comm_wins_t wins;
  uint64_t magic_end;
};

/* The checks every API call on a communicator makes: a valid object, not corrupted. */
ncclResult_t comm_check(const char* func, ncclComm_t comm);
/* comm_check, then: creation finished successfully (ncclInvalidArgument while it runs, as in
 * NCCL; its error if it failed), and not revoked. */
ncclResult_t comm_check_ready(const char* func, ncclComm_t comm);
/* comm_check_ready, and not finalized (ncclInvalidUsage): what operations need. */
ncclResult_t comm_check_usable(const char* func, ncclComm_t comm);
ncclResult_t comm_check_not_finalized(const char* func, ncclComm_t comm);
/* An operation that needs rank `peer` (-1: every rank) on a communicator some rank left:
 * ncclInvalidUsage (it destroyed the communicator) or ncclRemoteError (it aborted or exited),
 * naming the rank, instead of an operation that would wait for it forever. */
ncclResult_t comm_check_peers(const char* func, ncclComm_t comm, int peer);
/* Start watching the other ranks (end of comm_setup). */
ncclResult_t comm_watch_start(ncclComm_t comm);

ncclResult_t comm_get_unique_id(ncclUniqueId* id);

/* ncclCommInitRank / ncclCommInitRankConfig / ncclCommInitRankScalable. config may be NULL. */
ncclResult_t comm_init_rank(const char* func, ncclComm_t* comm_p, int nranks, int nids,
                            const ncclUniqueId* ids, int rank, const ncclConfig_t* config);
ncclResult_t comm_init_all(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t comm_split(ncclComm_t comm, int color, int key, ncclComm_t* newcomm_p,
                        const ncclConfig_t* config);
ncclResult_t comm_shrink(ncclComm_t comm, const int* exclude, int nexclude, ncclComm_t* newcomm_p,
                         const ncclConfig_t* config, int flags);
ncclResult_t comm_finalize(ncclComm_t comm);
ncclResult_t comm_destroy(ncclComm_t comm);
ncclResult_t comm_abort(ncclComm_t comm);
ncclResult_t comm_revoke(ncclComm_t comm);
ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* res_p);
/* ncclCommRegister / ncclCommDeregister on a ready communicator (comm_reg.c). */
ncclResult_t comm_register(ncclComm_t comm, void* buff, size_t size, void** handle_p);
ncclResult_t comm_deregister(ncclComm_t comm, void* handle);
/* How many registry entries the communicator holds (one per distinct range). */
int comm_registrations(ncclComm_t comm);
void comm_regs_init(comm_regs_t* r);
void comm_regs_free(ncclComm_t comm);

/* Internal to the module, shared between its files. */
ncclResult_t comm_config_build(const char* func, const ncclConfig_t* user,
                               const comm_config_t* inherit, comm_config_t* out_p);
void comm_config_free(comm_config_t* c);
ncclResult_t comm_config_copy(const comm_config_t* src, comm_config_t* dst_p);
/* At creation: a network named by config.netName or NCCL_NET (already applied) must exist;
 * ncclInvalidUsage naming the networks that do, as NCCL fails creation. */
ncclResult_t comm_config_check_net(const comm_config_t* c);
ncclResult_t comm_alloc(const comm_config_t* config, ncclComm_t* comm_p);
void comm_free(ncclComm_t comm);
/* Everything after the rendezvous: peer exchange, checks, log line. Takes ownership of bs. */
ncclResult_t comm_setup(ncclComm_t comm, bootstrap_t* bs, const char* how);
/* Creation work runs as a job (see enqueue.h): now, at group end, or in the background. The job
 * publishes its result into comm->status (when comm is not NULL) and holds parent->pending while
 * it runs (when parent is not NULL). arg is copied. */
typedef struct comm_job comm_job_t;
ncclResult_t comm_job_submit_full(ncclComm_t comm, ncclComm_t parent, bool nonblocking,
                                  ncclResult_t (*work)(comm_job_t* job), const void* arg,
                                  size_t arg_size);
/* The device a creation job runs on: the parent's for a split or shrink (as in NCCL), else the
 * device current at the call. */
void* comm_job_arg(comm_job_t* job);
ncclComm_t comm_job_comm(comm_job_t* job);
/* True when job is a creation job (comm_job_submit_full) that creates comm or uses it as the
 * parent of a split or shrink. */
bool comm_job_uses(const group_job_t* job, ncclComm_t comm);
/* Set *comm_p to the new `comm` and submit its creation work; a blocking creation that fails
 * outside a group frees comm and sets *comm_p to NULL. */
ncclResult_t comm_create(ncclComm_t comm, ncclComm_t* comm_p, ncclComm_t parent,
                         ncclResult_t (*work)(comm_job_t*), const void* arg, size_t arg_size);

#endif
