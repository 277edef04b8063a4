/*
 * Communicator creation: allocation, the creation job (run now, at group end, or in the
 * background for non-blocking communicators), and the setup every creation path ends with.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "choir_config.h"
#include "comm.h"

ncclResult_t comm_alloc(const comm_config_t* config, ncclComm_t* comm_p) {
  ncclComm_t comm = NULL;
  CHECK(MEM_CALLOC(&comm, 1));
  if (comm_config_copy(config, &comm->config) != ncclSuccess) {
    free(comm);
    return ncclSystemError;
  }
  comm->magic_start = comm->magic_end = COMM_MAGIC;
  comm->rank = -1;
  comm->cuda_dev = -1;
  comm->status = ncclInProgress;
  pthread_mutex_init(&comm->bootstrap_lock, NULL);
  comm_regs_init(&comm->regs);
  comm_wins_init(&comm->wins);
  *comm_p = comm;
  return ncclSuccess;
}

void comm_free(ncclComm_t comm) {
  bootstrap_watch_stop(comm->watch, BOOTSTRAP_LEAVE_ABORT); /* first: its thread reads dp */
  enqueue_comm_destroy(comm->dp);
  topo_system_free(comm->topo);
  if (comm->bootstrap != NULL) bootstrap_close(comm->bootstrap);
  pthread_mutex_destroy(&comm->bootstrap_lock);
  comm_config_free(&comm->config);
  free(comm->peers);
  comm_wins_free(comm);
  comm_regs_free(comm);
  /* A stale handle used after destroy must fail the magic check, not find a valid object. */
  comm->magic_start = comm->magic_end = 0;
  free(comm);
}

/* ---- creation jobs ---- */

struct comm_job {
  group_job_t base;
  ncclComm_t comm;   /* publishes into comm->status; NULL when the job creates nothing */
  ncclComm_t parent; /* holds parent->pending while the job runs; may be NULL */
  ncclResult_t (*work)(comm_job_t* job);
  max_align_t arg[];
};

void* comm_job_arg(comm_job_t* job) { return job->arg; }
ncclComm_t comm_job_comm(comm_job_t* job) { return job->comm; }

static ncclResult_t comm_job_run(group_job_t* g) {
  comm_job_t* job = (comm_job_t*)g;
  return job->work(job);
}

static void comm_job_complete(group_job_t* g, ncclResult_t res) {
  comm_job_t* job = (comm_job_t*)g;
  ncclComm_t comm = job->comm, parent = job->parent;
  free(job);
  /* After these stores another thread may destroy either communicator: touch nothing after. */
  if (comm != NULL) __atomic_store_n(&comm->status, (int)res, __ATOMIC_RELEASE);
  if (parent != NULL) __atomic_sub_fetch(&parent->pending, 1, __ATOMIC_ACQ_REL);
}

bool comm_job_uses(const group_job_t* g, ncclComm_t comm) {
  const comm_job_t* job = (const comm_job_t*)g;
  return g->run == comm_job_run && (job->comm == comm || job->parent == comm);
}

ncclResult_t comm_job_submit_full(ncclComm_t comm, ncclComm_t parent, bool nonblocking,
                                  ncclResult_t (*work)(comm_job_t* job), const void* arg,
                                  size_t arg_size) {
  comm_job_t* job = (comm_job_t*)calloc(1, sizeof(*job) + arg_size);
  if (job == NULL) {
    WARN("out of host memory for a communicator creation job");
    return ncclSystemError;
  }
  job->base.run = comm_job_run;
  job->base.complete = comm_job_complete;
  job->base.nonblocking = nonblocking;
  if (parent != NULL)
    job->base.cuda_dev = parent->cuda_dev;
  else if (cuda_get_device(&job->base.cuda_dev) != ncclSuccess)
    job->base.cuda_dev = -1;
  job->comm = comm;
  job->parent = parent;
  job->work = work;
  memcpy(job->arg, arg, arg_size);
  if (parent != NULL) __atomic_add_fetch(&parent->pending, 1, __ATOMIC_ACQ_REL);
  return enqueue_job_submit(&job->base);
}

/* ---- setup shared by every creation path ---- */

static pthread_once_t comm_banner_once = PTHREAD_ONCE_INIT;

static void comm_banner(void) {
  log_message(NCCL_LOG_VERSION, NCCL_INIT, __FILE__, __LINE__,
              "NCCL version %d.%d.%d (Choir %s, CUDA %s)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
              CHOIR_VERSION, CHOIR_CUDA_VERSION);
}

static ncclResult_t comm_gpu_sm(void* ctx, int dev, int* sm_p) {
  (void)ctx;
  return cuda_device_sm(dev, sm_p);
}

/* The data path's p2p rule from the topology (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE). */
static int comm_p2p_policy(void* ctx, int peer, int* use_read_p) {
  ncclComm_t comm = (ncclComm_t)ctx;
  int allowed = 0, read = 0;
  if (topo_p2p_check(comm->topo, comm->rank, peer, &allowed, &read) != ncclSuccess) return 0;
  if (use_read_p) *use_read_p = read;
  return allowed;
}

/* The hosts the ranks span, numbered by their first rank from the all-gathered host hashes (so
 * alike on every rank): returns how many; gr[r].node when gr is not NULL; *most_p (when not
 * NULL) the most ranks on one host. */
static int comm_hosts(const comm_peer_info_t* peers, int n, graph_rank_info_t* gr, int* most_p) {
  int nnodes = 0, most = 0;
  for (int r = 0; r < n; r++) {
    int q = 0;
    while (q < r && peers[q].host_hash != peers[r].host_hash) q++;
    if (gr != NULL) gr[r].node = q < r ? gr[q].node : nnodes;
    if (q < r) continue;
    nnodes++;
    int here = 0;
    for (int k = r; k < n; k++) here += peers[k].host_hash == peers[r].host_hash;
    if (here > most) most = here;
  }
  if (most_p != NULL) *most_p = most;
  return nnodes;
}

/* Ranks on several hosts: every rank models its own host with the network's devices in it,
 * searches it (graph_search_node), and the per-host results, all-gathered, are combined into
 * the same rings everywhere (graph_combine). Nodes are numbered by their first rank. Every rank
 * takes part in both exchanges even when its own part failed, so that all of them agree: then
 * nobody gets a graph (rings in rank order), with an INFO line. */
static ncclResult_t comm_topology_hosts(ncclComm_t comm, const comm_peer_info_t* peers,
                                        const graph_limits_t* lim, graph_t** graph_p) {
  const int n = comm->nranks;
  topo_rank_info_t* tr = NULL;
  graph_rank_info_t* gr = NULL;
  graph_node_result_t* res_all = NULL;
  graph_node_result_t* per_node = NULL;
  topo_nic_props_t* nics = NULL;
  int nnics = 0, nnodes = 0, nlocal = 0;
  const char* why = NULL;
  ncclResult_t res = MEM_CALLOC(&tr, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&gr, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&res_all, (size_t)n);
  if (res != ncclSuccess) goto out;
  /* Every rank numbers the nodes alike from the all-gathered host hashes; only the GPUs'
   * places in their hosts' models need exchanging. */
  nnodes = comm_hosts(peers, n, gr, NULL);
  const int me = comm->rank;
  const int my_node = gr[me].node;
  for (int r = 0; r < n; r++)
    if (gr[r].node == my_node)
      tr[nlocal++] = (topo_rank_info_t){.rank = r, .cuda_dev = peers[r].cuda_dev,
                                        .bus_id = peers[r].bus_id};
  /* This rank's part: its host's model with the NICs, its GPU there, its host's search. */
  int g = -1;
  if (transport_net_nics(comm->config.net_name, comm->comm_hash, comm->config.traffic_class,
                         &nics, &nnics) != ncclSuccess)
    why = "no network to describe";
  topo_detect_env_t env = {.gpu_sm = comm_gpu_sm};
  if (why == NULL && topo_system_build(&env, tr, nlocal, me, nics, nnics, &comm->topo) != ncclSuccess)
    why = "no topology of this host";
  if (why == NULL && topo_rank_to_gpu(comm->topo, me, &g) != ncclSuccess) why = "no GPU here";
  gr[me].local_gpu = g;
  res = bootstrap_allgather(comm->bootstrap, gr, sizeof(*gr));
  if (res != ncclSuccess) goto out;
  int all_placed = 1;
  for (int r = 0; r < n; r++) all_placed &= gr[r].local_gpu >= 0;
  if (why == NULL && all_placed &&
      graph_search_node(comm->topo, gr, n, my_node, nnodes, &res_all[me]) != ncclSuccess)
    why = "the search of this host failed";
  if (why != NULL || !all_placed) res_all[me].magic = 0;
  res = bootstrap_allgather(comm->bootstrap, res_all, sizeof(*res_all));
  if (res != ncclSuccess) goto out;
  res = MEM_CALLOC(&per_node, (size_t)nnodes);
  if (res != ncclSuccess) goto out;
  int complete = 1;
  for (int r = n - 1; r >= 0; r--) per_node[gr[r].node] = res_all[r]; /* the node's first rank */
  for (int k = 0; k < nnodes; k++) complete &= per_node[k].magic == GRAPH_NODE_RESULT_MAGIC;
  if (!complete) {
    INFO(NCCL_GRAPH, "comm 0x%llx rank %d: %s; rings in rank order across %d hosts",
         (unsigned long long)comm->comm_hash, me,
         why ? why : "another rank could not search its host", nnodes);
    goto out;
  }
  if (graph_combine(per_node, nnodes, gr, n, lim, graph_p) != ncclSuccess) {
    /* The same inputs on every rank: they all get here, and all use rank order. */
    INFO(NCCL_GRAPH, "comm 0x%llx: the hosts' searches do not combine; rings in rank order",
         (unsigned long long)comm->comm_hash);
    *graph_p = NULL;
  } else {
    INFO(NCCL_GRAPH, "comm 0x%llx rank %d: %d rings from the searches of %d hosts (%d NICs here)",
         (unsigned long long)comm->comm_hash, me, graph_nchannels(*graph_p), nnodes, nnics);
  }
out:
  transport_nics_free(nics, nnics);
  free(per_node);
  free(res_all);
  free(gr);
  free(tr);
  return res;
}

/* Topology of this host and the ring search. Identical on every rank: the same all-gathered
 * input and a deterministic search. Fills *graph_p (NULL when skipped). */
static ncclResult_t comm_topology(ncclComm_t comm, const comm_peer_info_t* peers,
                                  const graph_limits_t* lim, graph_t** graph_p) {
  *graph_p = NULL;
  const int n = comm->nranks;
  if (comm->gpu_share > 1) {
    /* The topology model has one node per GPU: it cannot place two ranks on one. */
    INFO(NCCL_GRAPH, "comm 0x%llx rank %d: ranks share GPUs: no topology search, rings in rank "
         "order", (unsigned long long)comm->comm_hash, comm->rank);
    return ncclSuccess;
  }
  for (int r = 0; r < n; r++)
    if (peers[r].host_hash != peers[comm->rank].host_hash)
      return comm_topology_hosts(comm, peers, lim, graph_p);
  topo_rank_info_t* tr = NULL;
  graph_rank_info_t* gr = NULL;
  ncclResult_t res = MEM_CALLOC(&tr, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&gr, (size_t)n);
  for (int r = 0; r < n && res == ncclSuccess; r++)
    tr[r] = (topo_rank_info_t){.rank = r, .cuda_dev = peers[r].cuda_dev, .bus_id = peers[r].bus_id};
  topo_detect_env_t env = {.gpu_sm = comm_gpu_sm};
  if (res == ncclSuccess) res = topo_system_build(&env, tr, n, comm->rank, NULL, 0, &comm->topo);
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    int g = -1;
    res = topo_rank_to_gpu(comm->topo, r, &g);
    gr[r] = (graph_rank_info_t){.node = 0, .local_gpu = g};
  }
  if (res == ncclSuccess) res = graph_compute(comm->topo, gr, n, lim, graph_p);
  free(gr);
  free(tr);
  return res;
}

/* Hardware work queues the CUDA runtime gives this process per device: streams beyond them
 * share queues, where a kernel waits behind the ones queued before it. CUDA's own variable
 * (CUDA_DEVICE_MAX_CONNECTIONS, read when CUDA starts; default 8); an MPS client gets fewer by
 * default: on an H100 under MPS, 4 ranks of one process hung in a group of several operations
 * and passed with CUDA_DEVICE_MAX_CONNECTIONS=32, 2 ranks passed; 2 is assumed. */
static int32_t comm_hw_queues(int mps) {
  const char* s = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  int v = s != NULL ? atoi(s) : 0;
  return v > 0 ? v : mps ? 2 : 8;
}

/* Fewest CTAs per rank that the data path needs when ranks share a GPU: the send/recv batches
 * of AlltoAll-like operations put 8 operations of one CTA each in one launch. */
#define COMM_SHARED_MIN_CTAS 8

/* Ranks on one GPU (same host, same PCI location). NCCL refuses them; with CHOIR_RANKS_SHARE_GPU
 * they are allowed, for testing several ranks on a machine with fewer GPUs. Their kernels spin on
 * each other, so every sharing rank's CTAs must be resident at once: each rank's launches are
 * capped at multiprocessors / (2 x ranks on the GPU) CTAs (the kernels take a whole SM each; the
 * factor 2 leaves room for a second communicator per rank running at the same time, as a split
 * one may). Ranks of different processes only run at the same time under MPS. Decided from the
 * all-gathered peer information, so every rank reaches the same verdict and the same cap. */
static ncclResult_t comm_gpu_sharing(ncclComm_t comm, const comm_peer_info_t* peers) {
  const int n = comm->nranks;
  comm->gpu_share = 1;
  comm->cta_cap = 0;
  for (int r = 0; r < n; r++) {
    int share = 0, same_process = 0; /* ranks on r's GPU; of them, in r's process */
    for (int q = 0; q < n; q++) {
      if (peers[q].host_hash != peers[r].host_hash || peers[q].bus_id != peers[r].bus_id) continue;
      share++;
      same_process += peers[q].pid_hash == peers[r].pid_hash;
      if (q <= r) continue;
      if (!param_int(PARAM_RANKS_SHARE_GPU)) {
        WARN("duplicate GPU: ranks %d and %d of this communicator both use the GPU at PCI %llx "
             "(CUDA device %d of rank %d); give each rank its own GPU (or, to test several "
             "ranks on one GPU, set CHOIR_RANKS_SHARE_GPU=1)", r, q,
             (unsigned long long)peers[r].bus_id, peers[r].cuda_dev, r);
        return ncclInvalidUsage;
      }
      if (peers[q].pid_hash != peers[r].pid_hash && !(peers[q].mps && peers[r].mps)) {
        WARN("ranks %d and %d share the GPU at PCI %llx from different processes without MPS "
             "(rank %d's process is %san MPS client, rank %d's is %s): their kernels would take "
             "turns and wait for each other forever; start MPS (nvidia-cuda-mps-control -d) "
             "before the processes, or drive those ranks from one process", r, q,
             (unsigned long long)peers[r].bus_id, r, peers[r].mps ? "" : "not ", q,
             peers[q].mps ? "one" : "not");
        return ncclInvalidUsage;
      }
    }
    if (share <= 1) continue;
    /* Ranks of one process on one GPU run their kernels from different streams of one context:
     * each needs a hardware queue of its own, or one rank's kernel can sit behind another's that
     * waits for it. */
    if (same_process > peers[r].hw_queues) {
      WARN("%d ranks of one process (rank %d's) share the GPU at PCI %llx, but the process has %d "
           "hardware work queues per device (CUDA_DEVICE_MAX_CONNECTIONS%s): one rank's kernel "
           "could wait in a queue behind another's that waits for it; set "
           "CUDA_DEVICE_MAX_CONNECTIONS=32 in the environment before CUDA starts", same_process, r,
           (unsigned long long)peers[r].bus_id, peers[r].hw_queues,
           peers[r].mps ? " unset: an MPS client gets few" : " or its default of 8");
      return ncclInvalidUsage;
    }
    int cap = peers[r].mp_count / (2 * share);
    if (cap < COMM_SHARED_MIN_CTAS) {
      WARN("CHOIR_RANKS_SHARE_GPU: %d ranks share the GPU at PCI %llx, which has %d "
           "multiprocessors: each rank would get %d CTAs, fewer than the %d the data path needs; "
           "put at most %d ranks on it", share, (unsigned long long)peers[r].bus_id,
           peers[r].mp_count, cap, COMM_SHARED_MIN_CTAS,
           peers[r].mp_count / (2 * COMM_SHARED_MIN_CTAS));
      return ncclInvalidUsage;
    }
    if (share > comm->gpu_share) comm->gpu_share = share;
    if (comm->cta_cap == 0 || cap < comm->cta_cap) comm->cta_cap = cap;
  }
  if (comm->gpu_share > 1)
    INFO(NCCL_INIT, "comm 0x%llx rank %d: up to %d ranks share a GPU (CHOIR_RANKS_SHARE_GPU): at "
         "most %d CTAs per launch on every rank, so that all sharing ranks' CTAs are resident at "
         "once", (unsigned long long)comm->comm_hash, comm->rank, comm->gpu_share, comm->cta_cap);
  return ncclSuccess;
}

ncclResult_t comm_setup(ncclComm_t comm, bootstrap_t* bs, const char* how) {
  pthread_once(&comm_banner_once, comm_banner);
  comm->bootstrap = bs;
  comm->rank = bootstrap_rank(bs);
  comm->nranks = bootstrap_nranks(bs);
  CHECK(cuda_get_device(&comm->cuda_dev));
  CHECK(cuda_bus_id(comm->cuda_dev, &comm->bus_id));

  comm_peer_info_t* peers = NULL;
  CHECK(MEM_CALLOC(&peers, (size_t)comm->nranks));
  comm_peer_info_t* me = &peers[comm->rank];
  me->rank = comm->rank;
  me->cuda_dev = comm->cuda_dev;
  me->bus_id = comm->bus_id;
  me->host_hash = sys_host_hash();
  me->pid_hash = sys_pid_hash();
  me->pid = (int32_t)getpid();
  CHECK(cuda_device_mp_count(comm->cuda_dev, &me->mp_count));
  CHECK(cuda_device_mps(comm->cuda_dev, &me->mps));
  me->hw_queues = comm_hw_queues(me->mps);
  ncclResult_t res = bootstrap_allgather(bs, peers, sizeof(*peers));
  if (res != ncclSuccess) {
    free(peers);
    return res;
  }
  comm->peers = peers;
  for (int r = 0; r < comm->nranks; r++) {
    if (peers[r].rank != r) {
      WARN("rank %d: peer information from rank %d is inconsistent (claims rank %d)", comm->rank,
           r, peers[r].rank);
      return ncclInternalError;
    }
  }
  CHECK(comm_config_check_net(&comm->config));
  CHECK(comm_gpu_sharing(comm, peers));
  transport_peer_t* tpeers = NULL;
  CHECK(MEM_CALLOC(&tpeers, (size_t)comm->nranks));
  for (int r = 0; r < comm->nranks; r++) {
    tpeers[r].host_hash = peers[r].host_hash;
    tpeers[r].pid_hash = peers[r].pid_hash;
    tpeers[r].bus_id = peers[r].bus_id;
    tpeers[r].cuda_dev = peers[r].cuda_dev;
    tpeers[r].pid = peers[r].pid;
  }
  /* The channel limits, once: the graph and the data path apply these and nothing else. */
  graph_limits_t lim;
  graph_limits_make(comm->config.min_ctas, comm->config.max_ctas, comm->cta_cap, &lim);
  int local_ranks = 0;
  graph_rank_info_t* hosts = NULL;
  res = MEM_CALLOC(&hosts, (size_t)comm->nranks);
  if (res != ncclSuccess) {
    free(tpeers);
    return res;
  }
  const int nnodes = comm_hosts(peers, comm->nranks, hosts, &local_ranks);
  graph_t* graph = NULL;
  res = comm_topology(comm, peers, &lim, &graph);
  enq_comm_args_t dargs = {.bs = bs, .rank = comm->rank, .nranks = comm->nranks,
                           .cuda_dev = comm->cuda_dev, .peers = tpeers,
                           .abort_flag = &comm->abort_flag, .lim = lim,
                           .net_peer_nch = comm->config.nchannels_per_net_peer,
                           .comm_hash = comm->comm_hash,
                           .net_name = comm->config.net_name,
                           .traffic_class = comm->config.traffic_class,
                           .rings = graph ? graph->rings : NULL,
                           .nrings = graph ? graph_nchannels(graph) : 0,
                           .p2p_policy = comm->topo ? comm_p2p_policy : NULL,
                           .p2p_policy_ctx = comm,
                           .cta_cap = comm->cta_cap,
                           .gpu_share = comm->gpu_share,
                           /* What the cost model knows of the links (graph_t is freed below). */
                           .graph_type_intra = graph ? graph->type_intra : -1,
                           .graph_bw_intra = graph ? graph->bw_intra : 0.0f,
                           .graph_bw_inter = graph ? graph->bw_inter : 0.0f,
                           .nnodes = nnodes,
                           .local_ranks = local_ranks,
                           .hosts = hosts,
                           .comm_name = comm->config.comm_name,
                           .nonblocking = comm->config.blocking == 0};
  if (res == ncclSuccess) res = enqueue_comm_create(&dargs, &comm->dp);
  graph_free(graph);
  free(hosts);
  free(tpeers);
  CHECK(res);
  CHECK(comm_watch_start(comm));
  INFO(NCCL_INIT, "comm %p rank %d nranks %d cudaDev %d busId %llx commId 0x%llx%s%s - %s complete",
       (void*)comm, comm->rank, comm->nranks, comm->cuda_dev, (unsigned long long)comm->bus_id,
       (unsigned long long)comm->comm_hash, comm->config.comm_name ? " name " : "",
       comm->config.comm_name ? comm->config.comm_name : "", how);
  return ncclSuccess;
}

/* ---- ncclGetUniqueId, ncclCommInitRank* ---- */

ncclResult_t comm_get_unique_id(ncclUniqueId* id) { return bootstrap_get_unique_id(id); }

typedef struct {
  int nranks;
  int rank;
  int nids;
  ncclUniqueId ids[];
} comm_init_arg_t;

static ncclResult_t comm_init_work(comm_job_t* job) {
  comm_init_arg_t* a = (comm_init_arg_t*)comm_job_arg(job);
  ncclComm_t comm = comm_job_comm(job);
  bootstrap_t* bs = NULL;
  CHECK(bootstrap_init(a->ids, a->nids, a->rank, a->nranks, &comm->abort_flag, &bs));
  comm->comm_hash = sys_hash(a->ids, (size_t)a->nids * sizeof(ncclUniqueId));
  return comm_setup(comm, bs, "init");
}

/* Publish a new communicator and start its creation; on a blocking failure, free it again. */
ncclResult_t comm_create(ncclComm_t comm, ncclComm_t* comm_p, ncclComm_t parent,
                         ncclResult_t (*work)(comm_job_t*), const void* arg, size_t arg_size) {
  *comm_p = comm;
  ncclResult_t res = comm_job_submit_full(comm, parent, comm->config.blocking == 0, work, arg,
                                          arg_size);
  if (res != ncclSuccess && res != ncclInProgress && enqueue_group_depth() == 0 &&
      comm->config.blocking) {
    comm_free(comm);
    *comm_p = NULL;
  }
  return res;
}

ncclResult_t comm_init_rank(const char* func, ncclComm_t* comm_p, int nranks, int nids,
                            const ncclUniqueId* ids, int rank, const ncclConfig_t* config) {
  comm_config_t cfg;
  CHECK(comm_config_build(func, config, NULL, &cfg));
  ncclComm_t comm = NULL;
  ncclResult_t res = comm_alloc(&cfg, &comm);
  comm_config_free(&cfg);
  CHECK(res);

  size_t arg_size = sizeof(comm_init_arg_t) + (size_t)nids * sizeof(ncclUniqueId);
  comm_init_arg_t* arg = (comm_init_arg_t*)calloc(1, arg_size);
  if (arg == NULL) {
    comm_free(comm);
    WARN("%s: out of host memory", func);
    return ncclSystemError;
  }
  arg->nranks = nranks;
  arg->rank = rank;
  arg->nids = nids;
  memcpy(arg->ids, ids, (size_t)nids * sizeof(ncclUniqueId));
  res = comm_create(comm, comm_p, NULL, comm_init_work, arg, arg_size);
  free(arg);
  return res;
}

ncclResult_t comm_init_all(ncclComm_t* comms, int ndev, const int* devlist) {
  int count = 0;
  CHECK(cuda_device_count(&count));
  for (int i = 0; i < ndev; i++) {
    int dev = devlist ? devlist[i] : i;
    if (dev < 0 || dev >= count) {
      WARN("ncclCommInitAll: %s[%d] = %d is not a CUDA device (this process sees %d)",
           devlist ? "devlist" : "device", i, dev, count);
      return ncclInvalidArgument;
    }
    for (int j = 0; j < i; j++) {
      if (devlist && devlist[j] == dev && !param_int(PARAM_RANKS_SHARE_GPU)) {
        WARN("ncclCommInitAll: devlist[%d] and devlist[%d] are both device %d; each rank needs "
             "its own GPU (or set CHOIR_RANKS_SHARE_GPU=1 to test several ranks on one)", j, i,
             dev);
        return ncclInvalidUsage;
      }
    }
    comms[i] = NULL;
  }
  ncclUniqueId id;
  CHECK(comm_get_unique_id(&id));
  int saved = -1;
  CHECK(cuda_get_device(&saved));
  ncclResult_t res = enqueue_group_start();
  for (int i = 0; i < ndev && res == ncclSuccess; i++) {
    res = cuda_set_device(devlist ? devlist[i] : i);
    if (res == ncclSuccess) res = comm_init_rank("ncclCommInitAll", &comms[i], ndev, 1, &id, i, NULL);
  }
  /* Close the group whatever happened: it runs (or, on error, releases) what was queued. */
  ncclResult_t end = enqueue_group_end(NULL);
  if (res == ncclSuccess) res = end;
  cuda_set_device(saved);
  if (res != ncclSuccess) {
    for (int i = 0; i < ndev; i++) {
      if (comms[i] != NULL) comm_destroy(comms[i]);
      comms[i] = NULL;
    }
  }
  return res;
}
