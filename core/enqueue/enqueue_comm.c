/*
 * The data path of one communicator: ring channels and their connections (made at creation),
 * send/recv connections (made when an operation first needs them), the device-side communicator
 * the kernels read, and the user's reduction operators.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "enqueue_internal.h"

/* Ring channels when the user does not say otherwise. Each channel is one CTA; a CTA moves a
 * slot, then waits for the next, so it needs company to fill NVLink: on 4 x H200 all_reduce
 * busbw at 1 GB was 307/339/352/355 GB/s with 16/32/48/64 channels (4 MiB buffers). Over host
 * memory (shm) the link is the bottleneck and every channel costs pinned host memory. */
#define ENQ_DEFAULT_CHANNELS_P2P 64
#define ENQ_DEFAULT_CHANNELS_SHM 8
/* Through the network every channel is a pair of plugin connections and host buffers; more of
 * them keep more requests in flight: on 4 x H200 with net-socket over loopback, all_reduce busbw
 * at 64 MB was 3.4/5.5/12.3 GB/s with 2/4/8 channels. */
#define ENQ_DEFAULT_CHANNELS_NET 8
/* Send/recv connections per peer and direction over p2p (NCCL_MAX_P2P_NCHANNELS caps it). */
#define ENQ_DEFAULT_P2P_NCH 32
/* Over shm every connection is a host buffer: fewer of them. */
#define ENQ_SHM_P2P_NCH 4
/* Over the network every connection is also a pair of plugin comms with their own helper threads
 * (net-socket): with 4 per peer, alltoall on 4 x H200 ran ~40 comms per rank, and the helpers
 * oversubscribed the CPUs. config.nChannelsPerNetPeer / NCCL_NCHANNELS_PER_NET_PEER override. */
#define ENQ_NET_P2P_NCH 2

/* A slot of a connection buffer of `bytes` (NCCL_*BUFFSIZE / KERN_NSLOTS): whole 128-byte lines
 * (an LL128 line, and a multiple of every protocol's unit), at least 4 KiB, at most 1 GiB. */
static uint32_t enq_slot_bytes(int64_t bytes) {
  uint64_t b = bytes > 0 ? (uint64_t)bytes : 0;
  b &= ~(uint64_t)127;
  if (b < 4096) b = 4096;
  if (b > (1u << 30)) b = 1u << 30;
  return (uint32_t)b;
}

static int enq_clamp(int64_t v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* The number of ring channels: Choir's default for the ring's slowest transport, brought within
 * the communicator's limits (computed once: graph_limits_make). Equal on every rank. */
static int enq_ring_nchannels(const enq_comm_t* dp, int slowest) {
  int n = slowest == KERN_TRANSPORT_P2P   ? ENQ_DEFAULT_CHANNELS_P2P
          : slowest == KERN_TRANSPORT_SHM ? ENQ_DEFAULT_CHANNELS_SHM
                                          : ENQ_DEFAULT_CHANNELS_NET;
  return enq_clamp(graph_limits_apply(&dp->lim, n), 1, KERN_MAX_CHANNELS);
}

void enqueue_ring_slots(kern_transport_t slowest, const uint32_t asked[KERN_PROTO_NUM],
                        uint32_t out[KERN_PROTO_NUM]) {
  memcpy(out, asked, sizeof(uint32_t) * KERN_PROTO_NUM);
  for (int kind = KERN_TRANSPORT_P2P; kind <= (int)slowest; kind++) {
    uint32_t eff[KERN_PROTO_NUM];
    transport_slots_effective((kern_transport_t)kind, asked, eff);
    for (int p = 0; p < KERN_PROTO_NUM; p++)
      if (eff[p] < out[p]) out[p] = eff[p];
  }
}

tune_link_t enqueue_link_of(kern_transport_t kind, int gpu_share, int graph_type_intra) {
  switch (kind) {
    case KERN_TRANSPORT_P2P:
      /* Ranks sharing a GPU reach each other through its memory (p2p on the device). */
      if (gpu_share > 1) return TUNE_LINK_SAME_GPU;
      return graph_type_intra >= 0 && graph_type_intra <= TOPO_PATH_NVB ? TUNE_LINK_NVLINK
                                                                        : TUNE_LINK_PCIE;
    case KERN_TRANSPORT_SHM: return TUNE_LINK_SHM;
    default: return TUNE_LINK_NET;
  }
}

/* The slowest transport (kinds order p2p < shm < net) of this rank's hops, among the peers on
 * its host ([0]) and among all ([1]); no peer on the host: net (no intra-node hop). */
static void enq_local_slowest(enq_comm_t* dp, int32_t out[2]) {
  out[0] = out[1] = KERN_TRANSPORT_P2P;
  int local_peers = 0;
  for (int r = 0; r < dp->nranks; r++) {
    if (r == dp->rank) continue;
    const int k = (int)transport_kind(dp->transport, r);
    if (k > out[1]) out[1] = k;
    if (dp->peers[r].host_hash != dp->peers[dp->rank].host_hash) continue;
    local_peers++;
    if (k > out[0]) out[0] = k;
  }
  if (local_peers == 0) out[0] = KERN_TRANSPORT_NET;
}

/* What the model knows before the ring is connected, from the slowest transports (intra-node,
 * overall): links, channel count, the protocols and slots the ring connections get. */
static ncclResult_t enq_tune_topo(enq_comm_t* dp, int slow_intra, int slow_all, tune_topo_t* tp) {
  memset(tp, 0, sizeof(*tp));
  tp->nranks = dp->nranks;
  tp->nnodes = dp->nnodes > 0 ? dp->nnodes : 1;
  tp->local_ranks = dp->local_ranks > 0 ? dp->local_ranks : dp->nranks;
  tp->gpu_share = dp->gpu_share > 0 ? dp->gpu_share : 1;
  tp->link_intra = enqueue_link_of((kern_transport_t)slow_intra, dp->gpu_share,
                                   dp->graph_type_intra);
  tp->link_inter = tp->nnodes > 1 ? TUNE_LINK_NET : tp->link_intra;
  tp->ring_nchannels = enq_ring_nchannels(dp, slow_all);
  tp->bw_intra = dp->graph_bw_intra;
  tp->bw_inter = dp->graph_bw_inter;
  /* The graph's whole bandwidth inside a node; not for ranks sharing a GPU (its memory, not the
   * graph's links, bounds them: the same-GPU row's own constants). */
  if (tp->link_intra != TUNE_LINK_SAME_GPU && dp->ngraph_rings > 0 && dp->graph_bw_intra > 0)
    tp->bw_total_intra = dp->graph_bw_intra * (float)dp->ngraph_rings;
  tp->cta_cap = dp->cta_cap;
  int sm = 90;
  if (cuda_device_sm(dp->cuda_dev, &sm) != ncclSuccess || sm <= 0) sm = 90;
  tp->cuda_arch = sm;
  tp->algo_mask = 1u << NCCL_ALGO_RING;
  /* Every hop of a ring carries the ring's protocols: those of both kinds of link. */
  uint32_t m_intra = 0, m_inter = 0;
  CHECK(tune_protocols_for_link(tp->link_intra, &m_intra));
  CHECK(tune_protocols_for_link(tp->link_inter, &m_inter));
  tp->proto_mask = (m_intra & m_inter) | 1u << NCCL_PROTO_SIMPLE;
  const int64_t bufs[KERN_PROTO_NUM] = {[KERN_PROTO_LL] = param_int(PARAM_LL_BUFFSIZE),
                                        [KERN_PROTO_LL128] = param_int(PARAM_LL128_BUFFSIZE),
                                        [KERN_PROTO_SIMPLE] = param_int(PARAM_BUFFSIZE)};
  for (int p = 0; p < KERN_PROTO_NUM; p++)
    tp->slot_bytes[p] = tp->proto_mask >> p & 1u ? enq_slot_bytes(bufs[p] / KERN_NSLOTS) : 0;
  return ncclSuccess;
}

static ncclResult_t enq_upload(enq_comm_t* dp, void* dst, const void* src, size_t size) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyHostToDevice, dp->setup_stream));
  CUDA_CHECK(cudaStreamSynchronize(dp->setup_stream));
  return ncclSuccess;
}

/* Upload the communicator's fixed part and the ring channels. Only at creation: later, kernels
 * own the connection steps in device memory. */
static ncclResult_t enq_upload_comm(enq_comm_t* dp) {
  return enq_upload(dp, dp->dev_kc, &dp->host_kc, sizeof(dp->host_kc));
}

/* One INFO line with what the communicator holds now (after `what` was made): device memory
 * (its own and its connections' buffers) and pinned or shared host memory. */
static void enq_mem_report(const enq_comm_t* dp, const char* what) {
  uint64_t dev = 0, host = 0;
  enqueue_comm_mem_usage(dp, &dev, &host);
  INFO(NCCL_INIT, "comm 0x%llx rank %d: memory after %s: %.1f MiB of GPU memory, %.1f MiB of "
       "pinned or shared host memory",
       (unsigned long long)dp->comm_hash, dp->rank, what, (double)dev / 1048576.0,
       (double)host / 1048576.0);
}

/* The tree channels a communicator of ring_nch ring channels makes: where the tree may run
 * (several hosts, or NCCL_ALGO naming it for AllReduce: tune_tree_wanted; equal on every rank),
 * as many as the ring's, at most ENQ_TREE_MAX_CHANNELS; 0 otherwise. */
static int enq_tree_nchannels(const enq_comm_t* dp, int ring_nch) {
  if (dp->nranks < 2 || !tune_tree_wanted(dp->nnodes)) return 0;
  return ring_nch < ENQ_TREE_MAX_CHANNELS ? ring_nch : ENQ_TREE_MAX_CHANNELS;
}

/* This rank's links in every tree channel: the graph's rule (graph_tree_build) over the ring
 * channels' rings and the ranks' hosts, the same on every rank. */
static ncclResult_t enq_tree_links(const enq_comm_t* dp, int tree_nch, kern_tree_t* htree) {
  const int n = dp->nranks, nnodes = dp->nnodes > 0 ? dp->nnodes : 1;
  graph_tree_t* tr = NULL;
  int* scratch = NULL;
  ncclResult_t res = MEM_CALLOC(&tr, (size_t)n);
  if (res == ncclSuccess) res = MEM_CALLOC(&scratch, (size_t)2 * nnodes);
  for (int c = 0; c < tree_nch && res == ncclSuccess; c++) {
    graph_tree_build(dp->ring_ranks + (size_t)c * n, dp->hosts, n, nnodes, c, tr, scratch,
                     scratch + nnodes);
    htree[c].up = tr[dp->rank].up;
    for (int i = 0; i < KERN_TREE_ARITY; i++) htree[c].down[i] = tr[dp->rank].down[i];
  }
  free(tr);
  free(scratch);
  return res;
}

/* The tree channels' connection requests into reqs (at most 8 per channel): with the parent,
 * a send end (up) and a receive end (down); with each child the mirror. Buffers of slots[p]
 * bytes for the protocols the tree runs (Simple, and LL where the ring has it; 0: none). */
static int enq_tree_reqs(enq_comm_t* dp, int tree_nch, kern_tree_t* htree,
                         const uint32_t slots[KERN_PROTO_NUM], transport_req_t* reqs) {
  int k = 0;
  for (int c = 0; c < tree_nch; c++) {
    kern_tree_t* kt = &htree[c];
    kern_tree_t* dt = dp->dev_tree + c; /* the ends' names for the profiler (stable) */
    const int up_id = ENQ_TREE_UP_ID_BASE + c, down_id = ENQ_TREE_DOWN_ID_BASE + c;
    if (kt->up >= 0) {
      reqs[k++] = (transport_req_t){.peer = kt->up, .is_send = 1, .id = up_id,
                                    .out = &kt->up_send, .key = &dt->up_send};
      reqs[k++] = (transport_req_t){.peer = kt->up, .is_send = 0, .id = down_id,
                                    .out = &kt->up_recv, .key = &dt->up_recv};
    }
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (kt->down[i] < 0) continue;
      reqs[k++] = (transport_req_t){.peer = kt->down[i], .is_send = 0, .id = up_id,
                                    .out = &kt->down_recv[i], .key = &dt->down_recv[i]};
      reqs[k++] = (transport_req_t){.peer = kt->down[i], .is_send = 1, .id = down_id,
                                    .out = &kt->down_send[i], .key = &dt->down_send[i]};
    }
  }
  for (int i = 0; i < k; i++)
    for (int p = 0; p < KERN_PROTO_NUM; p++) reqs[i].slot_bytes[p] = slots[p];
  return k;
}

/* After the connect: every tree connection (the ends reqs[0..n) were made into) must have the
 * slots asked for, since every end of a tree channel cuts its steps from the first end's slot
 * (kern_tree.cuh): Simple's exactly; LL's at least (the network shares the Simple buffer among
 * the protocols, so its LL slot is Simple's), which holds the plan's chunk, at most the ring's
 * LL step, everywhere. */
static ncclResult_t enq_tree_check(const enq_comm_t* dp, const transport_req_t* reqs, int n,
                                   const uint32_t slots[KERN_PROTO_NUM]) {
  for (int j = 0; j < n; j++) {
    const kern_conn_t* e = reqs[j].out;
    for (int p = 0; p < KERN_PROTO_NUM; p++) {
      const uint32_t got = e->slot_bytes[p];
      if (slots[p] == 0 ||
          (e->connected && (p == KERN_PROTO_SIMPLE ? got == slots[p] : got >= slots[p])))
        continue;
      WARN("rank %d: tree connection %#x with rank %d has a %s slot of %u bytes (connected %u), "
           "not the %u asked for; the tree's steps would not agree",
           dp->rank, (unsigned)reqs[j].id, reqs[j].peer, kern_proto_name(p), got, e->connected,
           slots[p]);
      return ncclInternalError;
    }
  }
  return ncclSuccess;
}

static ncclResult_t enq_ring_setup(enq_comm_t* dp) {
  /* The channel count and the protocols must be equal everywhere: agree on the slowest
   * transport any pair of ranks uses, within a node and overall. */
  int32_t* slowest = NULL;
  CHECK(MEM_CALLOC(&slowest, (size_t)2 * dp->nranks));
  enq_local_slowest(dp, &slowest[2 * dp->rank]);
  ncclResult_t ares = bootstrap_allgather(dp->bs, slowest, 2 * sizeof(int32_t));
  int slow_intra = KERN_TRANSPORT_P2P, slow_all = KERN_TRANSPORT_P2P;
  for (int r = 0; r < dp->nranks; r++) {
    if (slowest[2 * r] > slow_intra) slow_intra = slowest[2 * r];
    if (slowest[2 * r + 1] > slow_all) slow_all = slowest[2 * r + 1];
  }
  free(slowest);
  CHECK(ares);
  tune_topo_t tp;
  CHECK(enq_tune_topo(dp, slow_intra, slow_all, &tp));
  dp->nchannels = tp.ring_nchannels;
  const int n = dp->nranks, nch = dp->nchannels;
  CHECK(MEM_CALLOC(&dp->ring_ranks, (size_t)nch * n));
  /* The topology search's rings, reused cyclically (the kernels want more channels than the
   * search's bandwidth model asks for); without them, rank order. */
  for (int c = 0; c < nch; c++)
    for (int i = 0; i < n; i++)
      dp->ring_ranks[c * n + i] =
          dp->ngraph_rings > 0 ? dp->graph_rings[(size_t)(c % dp->ngraph_rings) * n + i] : i;
  CUDA_CHECK(cudaMalloc((void**)&dp->dev_ring_ranks, sizeof(int32_t) * (size_t)nch * n));
  dp->dev_bytes += sizeof(int32_t) * (size_t)nch * n;
  CHECK(enq_upload(dp, dp->dev_ring_ranks, dp->ring_ranks, sizeof(int32_t) * (size_t)nch * n));

  /* OneShot: where every pair of ranks is p2p, its direct connections are made in the same
   * call as the ring's (ids from ENQ_DIRECT_ID_BASE): one LL buffer per peer, CTA and direction.
   * The condition is equal on every rank (slow_all was all-gathered). */
  const int direct = n > 1 && n <= KERN_DIRECT_MAX_RANKS && slow_all == KERN_TRANSPORT_P2P &&
                     param_int(PARAM_ONESHOT) != 0 && tp.slot_bytes[KERN_PROTO_LL] != 0;
  /* CTAs with direct connections (CHOIR_DIRECT_CTAS): the device table keeps the stride
   * KERN_DIRECT_MAX_CTAS, the rest of each peer's row stays unconnected and unused. */
  const int dctas = enq_clamp(param_int(PARAM_DIRECT_CTAS), 1, KERN_DIRECT_MAX_CTAS);
  const int ndirect = direct ? 2 * (n - 1) * dctas : 0;
  kern_conn_t* dconns = NULL;
  if (direct) {
    const size_t bytes = sizeof(kern_conn_t) * 2 * (size_t)n * KERN_DIRECT_MAX_CTAS;
    CUDA_CHECK(cudaMalloc((void**)&dp->dev_direct, bytes));
    dp->dev_bytes += bytes;
    CUDA_CHECK(cudaMemsetAsync(dp->dev_direct, 0, bytes, dp->setup_stream));
    CHECK(MEM_CALLOC(&dconns, (size_t)2 * n * KERN_DIRECT_MAX_CTAS));
  }
  /* Tree channels, where the tree may run (NCCL_ALGO, several hosts: tune_tree_wanted; equal
   * on every rank): the model counts them from here, but they are connected only when a plan
   * first picks the tree (enqueue_comm_connect_tree). */
  const int tree_nch = enq_tree_nchannels(dp, nch);
  /* Ring connections get a buffer per protocol the model may choose (tp.slot_bytes). */
  transport_req_t* reqs = NULL;
  if (n > 1) {
    ncclResult_t mres = MEM_CALLOC(&reqs, (size_t)2 * nch + (size_t)ndirect);
    if (mres != ncclSuccess) {
      free(dconns);
      return mres;
    }
  }
  for (int c = 0; c < nch; c++) {
    const int32_t* ring = dp->ring_ranks + (size_t)c * n;
    int idx = 0;
    while (ring[idx] != dp->rank) idx++;
    kern_channel_t* ch = &dp->host_kc.channels[c];
    ch->index = idx;
    ch->prev = ring[(idx + n - 1) % n];
    ch->next = ring[(idx + 1) % n];
    ch->ranks = dp->dev_ring_ranks + (size_t)c * n;
    if (n > 1) {
      reqs[2 * c] = (transport_req_t){.peer = ch->next, .is_send = 1, .id = c, .out = &ch->send};
      reqs[2 * c + 1] =
          (transport_req_t){.peer = ch->prev, .is_send = 0, .id = c, .out = &ch->recv};
      memcpy(reqs[2 * c].slot_bytes, tp.slot_bytes, sizeof(reqs[2 * c].slot_bytes));
      memcpy(reqs[2 * c + 1].slot_bytes, tp.slot_bytes, sizeof(reqs[2 * c + 1].slot_bytes));
    }
  }
  int k = 2 * nch;
  for (int q = 0; q < n && direct; q++) {
    if (q == dp->rank) continue;
    for (int g = 0; g < dctas; g++)
      for (int dir = 0; dir < 2; dir++, k++) {
        const size_t at = (size_t)(dir == 0 ? 0 : n) * KERN_DIRECT_MAX_CTAS +
                          (size_t)q * KERN_DIRECT_MAX_CTAS + (size_t)g;
        /* Named by their place in the device table (stable) for the profiler. */
        reqs[k] = (transport_req_t){.peer = q, .is_send = dir == 0,
                                    .id = ENQ_DIRECT_ID_BASE + g, .out = &dconns[at],
                                    .key = dp->dev_direct + at};
        reqs[k].slot_bytes[KERN_PROTO_LL] = tp.slot_bytes[KERN_PROTO_LL];
        /* SIMPLE is always made (transport.h); the smallest slot the transport takes. */
        reqs[k].slot_bytes[KERN_PROTO_SIMPLE] = 128;
      }
  }
  uint32_t slots[KERN_PROTO_NUM];
  enqueue_ring_slots((kern_transport_t)slow_all, tp.slot_bytes, slots);
  /* The tree's protocols (TUNE_TREE_PROTOS) with those slots, for its connect. */
  for (int p = 0; p < KERN_PROTO_NUM; p++)
    dp->tree_slots[p] = TUNE_TREE_PROTOS & (1u << p) ? slots[p] : 0;
  ncclResult_t res = ncclSuccess;
  if (n > 1) res = transport_connect(dp->transport, reqs, k, ENQ_TAG_RING);
  free(reqs);
  uint32_t dslot = 0;
  if (res == ncclSuccess && direct) {
    res = enq_upload(dp, dp->dev_direct, dconns,
                     sizeof(kern_conn_t) * 2 * (size_t)n * KERN_DIRECT_MAX_CTAS);
    /* The LL slot as the transport made it (every direct connection alike). */
    dslot = dconns[(size_t)(dp->rank == 0 ? 1 : 0) * KERN_DIRECT_MAX_CTAS].slot_bytes[KERN_PROTO_LL];
  }
  free(dconns);
  CHECK(res);
  if (direct) {
    dp->direct_ctas = dctas;
    dp->host_kc.direct_send = dp->dev_direct;
    dp->host_kc.direct_recv = dp->dev_direct + (size_t)n * KERN_DIRECT_MAX_CTAS;
    tp.algo_mask |= TUNE_ALGO_DIRECT_MASK;
    tp.direct_ctas = dctas;
    tp.direct_slot_bytes = dslot;
  }
  if (tree_nch > 0) {
    dp->tree_nch = tree_nch; /* host_kc.trees stays NULL until they are connected */
    tp.algo_mask |= 1u << NCCL_ALGO_TREE;
    tp.tree_nchannels = tree_nch;
  }
  dp->host_kc.nchannels = nch;
  if (n == 1) return ncclSuccess; /* one rank: no ring, no model (enq_launch_single) */
  /* The model of what the ring got: the slots above; every connection has at least those
   * (a kernel's step is the smaller of the plan's chunk and its own connections' capacity). */
  const kern_conn_t* c0 = &dp->host_kc.channels[0].send;
  for (int c = 0; c < nch; c++)
    for (int e = 0; e < 2; e++) {
      const kern_channel_t* ch = &dp->host_kc.channels[c];
      const kern_conn_t* conn = e == 0 ? &ch->send : &ch->recv;
      for (int p = 0; p < KERN_PROTO_NUM; p++) {
        if (slots[p] == 0 || conn->slot_bytes[p] >= slots[p]) continue;
        WARN("rank %d: ring channel %d's %s connection has a %s slot of %u bytes, less than the "
             "%u every rank plans with", dp->rank, c, e == 0 ? "send" : "receive",
             kern_proto_name(p), conn->slot_bytes[p], slots[p]);
        return ncclInternalError;
      }
    }
  tp.proto_mask = 0;
  for (int p = 0; p < KERN_PROTO_NUM; p++) {
    tp.slot_bytes[p] = slots[p];
    if (slots[p] != 0) tp.proto_mask |= 1u << p;
  }
  CHECK(tune_create(&tp, dp->comm_hash, dp->rank, &dp->tune));
  enq_mem_report(dp, "its ring connections");
  INFO(NCCL_INIT | NCCL_TUNING,
       "comm 0x%llx rank %d: %d ring channels connected via %s (links: %s %d, %s %d), slots LL "
       "%u LL128 %u Simple %u, protocol mask 0x%x, %d direct CTAs (OneShot, TwoShot), %d tree "
       "channels (connected when first used)",
       (unsigned long long)dp->comm_hash, dp->rank, nch, transport_kind_name(c0->transport),
       "intra", (int)tp.link_intra, "inter", (int)tp.link_inter, tp.slot_bytes[KERN_PROTO_LL],
       tp.slot_bytes[KERN_PROTO_LL128], tp.slot_bytes[KERN_PROTO_SIMPLE], tp.proto_mask,
       tp.direct_ctas, tree_nch);
  return ncclSuccess;
}

ncclResult_t enqueue_comm_sim_tune(enq_comm_t* dp, tune_t** t_p) {
  if (dp->tune != NULL) {
    *t_p = dp->tune;
    return ncclSuccess;
  }
  if (dp->tune_sim == NULL) {
    /* Without connecting: this rank's own view of the links (the connect agrees on the slowest
     * over all ranks; an estimate needs no agreement). */
    int32_t slow[2] = {KERN_TRANSPORT_P2P, KERN_TRANSPORT_P2P};
    if (dp->transport != NULL) enq_local_slowest(dp, slow);
    tune_topo_t tp;
    CHECK(enq_tune_topo(dp, slow[0], slow[1], &tp));
    /* The tree channels the connect would make (enq_ring_setup's rule). */
    tp.tree_nchannels = enq_tree_nchannels(dp, tp.ring_nchannels);
    if (tp.tree_nchannels > 0) tp.algo_mask |= 1u << NCCL_ALGO_TREE;
    CHECK(tune_create(&tp, dp->comm_hash, dp->rank, &dp->tune_sim));
  }
  *t_p = dp->tune_sim;
  return ncclSuccess;
}

ncclResult_t enqueue_comm_create(const enq_comm_args_t* a, enq_comm_t** dp_p) {
  enq_comm_t* dp = NULL;
  CHECK(MEM_CALLOC(&dp, 1));
  ncclResult_t res = ncclSuccess;
  pthread_mutex_init(&dp->wins_lock, NULL);
  dp->rank = a->rank;
  dp->nranks = a->nranks;
  dp->cuda_dev = a->cuda_dev;
  dp->comm_hash = a->comm_hash;
  dp->traffic_class = a->traffic_class;
  dp->bs = a->bs;
  dp->host_abort = a->abort_flag;
  dp->nonblocking = a->nonblocking;
  dp->lim = a->lim;
  dp->net_peer_nch = a->net_peer_nch;
  dp->gpu_share = a->gpu_share > 0 ? a->gpu_share : 1;
  dp->graph_type_intra = a->graph_type_intra;
  dp->graph_bw_intra = a->graph_bw_intra;
  dp->graph_bw_inter = a->graph_bw_inter;
  dp->nnodes = a->nnodes;
  dp->local_ranks = a->local_ranks;
  {
    /* A malformed NCCL_PROTO fails the communicator's creation, not its first collective. */
    uint32_t mask = 0;
    CHECK_GOTO(tune_protocols_for_link(TUNE_LINK_NVLINK, &mask), res, err);
  }
  int64_t p2p_max = param_int(PARAM_MAX_P2P_NCHANNELS);
  dp->p2p_nch =
      enq_clamp(p2p_max > 0 ? (int)p2p_max : ENQ_DEFAULT_P2P_NCH, 1, KERN_MAX_P2P_CHANNELS);
  dp->cta_cap = a->cta_cap;
  /* A send/recv launch holds up to three operations with every connection of a peer (a send, a
   * receive and the local copy of a pairwise AlltoAll step): keep them within the cap. */
  if (dp->cta_cap > 0 && dp->p2p_nch > dp->cta_cap / 3)
    dp->p2p_nch = enq_clamp(dp->cta_cap / 3, 1, KERN_MAX_P2P_CHANNELS);
  if (dp->cta_cap > 0)
    INFO(NCCL_INIT, "comm 0x%llx rank %d: CTA cap %d: at most %d ring channels, %d send/recv "
         "connections per peer, %d CTAs per send/recv launch", (unsigned long long)dp->comm_hash,
         dp->rank, dp->cta_cap, graph_limits_apply(&dp->lim, KERN_MAX_CHANNELS), dp->p2p_nch,
         enq_p2p_batch_ctas(dp));
  if (a->net_name != NULL && (dp->net_name = strdup(a->net_name)) == NULL) {
    WARN("rank %d: out of memory", a->rank);
    res = ncclSystemError;
    goto err;
  }
  CHECK_GOTO(MEM_CALLOC(&dp->peers, (size_t)a->nranks), res, err);
  memcpy(dp->peers, a->peers, sizeof(*dp->peers) * (size_t)a->nranks);
  if (a->hosts == NULL) {
    WARN("rank %d: the data path was created without the ranks' hosts", a->rank);
    res = ncclInternalError;
    goto err;
  }
  CHECK_GOTO(MEM_CALLOC(&dp->hosts, (size_t)a->nranks), res, err);
  memcpy(dp->hosts, a->hosts, sizeof(*dp->hosts) * (size_t)a->nranks);
  if (a->rings != NULL && a->nrings > 0) {
    CHECK_GOTO(MEM_CALLOC(&dp->graph_rings, (size_t)a->nrings * a->nranks), res, err);
    memcpy(dp->graph_rings, a->rings, sizeof(int32_t) * (size_t)a->nrings * a->nranks);
    dp->ngraph_rings = a->nrings;
  }
  dp->p2p_policy = a->p2p_policy;
  dp->p2p_policy_ctx = a->p2p_policy_ctx;
  CHECK_GOTO(MEM_CALLOC(&dp->p2p_nch_peer, (size_t)a->nranks), res, err);
  /* Last: nothing after it can fail, so a profiler's init is always matched by a finalize. */
  prof_create(a->comm_hash, a->comm_name, a->nnodes > 0 ? a->nnodes : 1, a->nranks, a->rank,
              &dp->prof);
  *dp_p = dp;
  return ncclSuccess;
err:
  enqueue_comm_destroy(dp);
  return res;
}

/* Frees what enqueue_comm_setup_device made (any part of it) and forgets it, so that a failed
 * setup leaves nothing behind and a retry starts afresh. The caller has made the device current
 * and no kernel uses the resources any more. */
static void enq_device_release(enq_comm_t* dp) {
  transport_destroy(dp->transport);
  dp->transport = NULL;
  if (dp->dev_kc) cudaFree(dp->dev_kc);
  if (dp->dev_p2p) cudaFree(dp->dev_p2p);
  if (dp->dev_direct) cudaFree(dp->dev_direct);
  if (dp->dev_tree) cudaFree(dp->dev_tree);
  free(dp->host_tree);
  dp->dev_tree = NULL;
  dp->host_tree = NULL;
  dp->host_kc.trees = NULL;
  dp->host_kc.tree_nchannels = 0;
  if (dp->abort_host) cudaFreeHost(dp->abort_host);
  if (dp->done_ev) cudaEventDestroy(dp->done_ev);
  if (dp->join_ev) cudaEventDestroy(dp->join_ev);
  if (dp->setup_stream) cudaStreamDestroy(dp->setup_stream);
  dp->dev_kc = NULL;
  dp->dev_p2p = NULL;
  dp->dev_direct = NULL;
  dp->direct_ctas = 0;
  dp->host_kc.direct_send = dp->host_kc.direct_recv = NULL;
  dp->abort_host = dp->abort_dev = NULL;
  dp->done_ev = dp->join_ev = NULL;
  dp->setup_stream = NULL;
  dp->dev_bytes = 0;
  dp->device_ready = 0;
}

ncclResult_t enqueue_comm_setup_device(enq_comm_t* dp) {
  if (dp->device_ready) return ncclSuccess;
  const int rank = dp->rank, nranks = dp->nranks;
  ncclResult_t res = ncclUnhandledCudaError;
  if (kern_preload() != ncclSuccess) {
    WARN("rank %d: %s", rank, kern_last_error());
    return ncclUnhandledCudaError;
  }
  if (cudaStreamCreateWithFlags(&dp->setup_stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&dp->done_ev, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&dp->join_ev, cudaEventDisableTiming) != cudaSuccess) {
    WARN("rank %d: cannot create the communicator's CUDA stream and events on device %d", rank,
         dp->cuda_dev);
    goto err_release;
  }
  if (cudaHostAlloc((void**)&dp->abort_host, sizeof(uint32_t), cudaHostAllocMapped) !=
          cudaSuccess ||
      cudaHostGetDevicePointer((void**)&dp->abort_dev, dp->abort_host, 0) != cudaSuccess) {
    WARN("rank %d: cannot allocate the device-visible abort flag (cudaHostAlloc mapped)", rank);
    goto err_release;
  }
  *dp->abort_host = dp->host_abort && *dp->host_abort ? 1u : 0u;
  size_t p2p_bytes = sizeof(kern_conn_t) * 2 * (size_t)nranks * KERN_MAX_P2P_CHANNELS;
  if (cudaMalloc((void**)&dp->dev_kc, sizeof(kern_comm_t)) != cudaSuccess ||
      cudaMalloc((void**)&dp->dev_p2p, p2p_bytes) != cudaSuccess ||
      cudaMemsetAsync(dp->dev_p2p, 0, p2p_bytes, dp->setup_stream) != cudaSuccess) {
    WARN("rank %d: cannot allocate the device-side communicator (%zu bytes)", rank,
         sizeof(kern_comm_t) + p2p_bytes);
    goto err_release;
  }
  dp->dev_bytes += sizeof(kern_comm_t) + p2p_bytes;
  dp->host_kc.rank = rank;
  dp->host_kc.nranks = nranks;
  dp->host_kc.p2p_nchannels = dp->p2p_nch;
  dp->host_kc.abort_flag = dp->abort_dev;
  dp->host_kc.p2p_send = dp->dev_p2p;
  dp->host_kc.p2p_recv = dp->dev_p2p + (size_t)nranks * KERN_MAX_P2P_CHANNELS;
  CHECK_GOTO(transport_create(dp->bs, rank, nranks, dp->cuda_dev, dp->peers, dp->host_abort,
                              dp->p2p_policy, dp->p2p_policy_ctx, &dp->transport),
             res, err_release);
  CHECK_GOTO(transport_set_net(dp->transport, dp->net_name, dp->comm_hash, dp->traffic_class,
                               dp->abort_host),
             res, err_release);
  transport_prof_attach(dp->transport, dp->prof);
  CHECK_GOTO(enq_upload_comm(dp), res, err_release);
  dp->device_ready = 1;
  return ncclSuccess;
err_release:
  if (dp->setup_stream) (void)cudaStreamSynchronize(dp->setup_stream);
  enq_device_release(dp);
  return res;
}

ncclResult_t enqueue_comm_connect_ring(enq_comm_t* dp) {
  if (dp->ring_ready) return ncclSuccess;
  CHECK(enq_ring_setup(dp));
  /* The channels (not the p2p tables, which may be in use): fixed part and channels. */
  CHECK(enq_upload_comm(dp));
  dp->ring_ready = 1;
  return ncclSuccess;
}

ncclResult_t enqueue_comm_connect_tree(enq_comm_t* dp) {
  if (dp->host_tree != NULL || dp->tree_nch == 0) return ncclSuccess;
  if (!dp->ring_ready) {
    WARN("rank %d: the tree channels were asked for before the ring was connected", dp->rank);
    return ncclInternalError;
  }
  const int tree_nch = dp->tree_nch;
  const size_t bytes = sizeof(kern_tree_t) * (size_t)tree_nch;
  kern_tree_t* htree = NULL;
  transport_req_t* reqs = NULL;
  CHECK(MEM_CALLOC(&htree, (size_t)tree_nch));
  ncclResult_t res = MEM_CALLOC(&reqs, (size_t)(2 + 2 * KERN_TREE_ARITY) * tree_nch);
  if (res == ncclSuccess && cudaMalloc((void**)&dp->dev_tree, bytes) != cudaSuccess) {
    WARN("rank %d: cannot allocate %zu bytes of GPU memory for the tree channels", dp->rank,
         bytes);
    dp->dev_tree = NULL;
    res = ncclUnhandledCudaError;
  }
  int k = 0;
  if (res == ncclSuccess) res = enq_tree_links(dp, tree_nch, htree);
  if (res == ncclSuccess) {
    k = enq_tree_reqs(dp, tree_nch, htree, dp->tree_slots, reqs);
    res = transport_connect(dp->transport, reqs, k, ENQ_TAG_TREE);
  }
  if (res == ncclSuccess) res = enq_tree_check(dp, reqs, k, dp->tree_slots);
  if (res == ncclSuccess) res = enq_upload(dp, dp->dev_tree, htree, bytes);
  if (res == ncclSuccess) {
    /* Only the device communicator's tree fields: running kernels use the rest. */
    dp->host_kc.trees = dp->dev_tree;
    dp->host_kc.tree_nchannels = tree_nch;
    const size_t at = offsetof(kern_comm_t, trees);
    res = enq_upload(dp, (char*)dp->dev_kc + at, (const char*)&dp->host_kc + at,
                     offsetof(kern_comm_t, pad) - at);
  }
  free(reqs);
  if (res != ncclSuccess) {
    /* Connections the transport made stay with it (freed at destroy); the channels do not. */
    dp->host_kc.trees = NULL;
    dp->host_kc.tree_nchannels = 0;
    if (dp->dev_tree != NULL) cudaFree(dp->dev_tree);
    dp->dev_tree = NULL;
    free(htree);
    return res;
  }
  dp->dev_bytes += bytes;
  dp->host_tree = htree; /* connected; the ends' transports and slots, for the ProxyOps */
  INFO(NCCL_INIT | NCCL_TUNING, "comm 0x%llx rank %d: %d tree channels connected (%d ends)",
       (unsigned long long)dp->comm_hash, dp->rank, tree_nch, k);
  enq_mem_report(dp, "its tree connections");
  return ncclSuccess;
}

/* Send/recv connections per direction with a peer: fewer over host memory. */
static int enq_p2p_nch_with(enq_comm_t* dp, int peer) {
  const kern_transport_t kind = transport_kind(dp->transport, peer);
  if (kind == KERN_TRANSPORT_P2P) return dp->p2p_nch;
  if (kind == KERN_TRANSPORT_NET)
    return enq_clamp(dp->net_peer_nch > 0 ? dp->net_peer_nch : ENQ_NET_P2P_NCH, 1, dp->p2p_nch);
  return enq_clamp(ENQ_SHM_P2P_NCH, 1, dp->p2p_nch);
}

const kern_conn_t* enq_p2p_conn_key(const enq_comm_t* dp, int is_send, int peer, int c) {
  const kern_conn_t* base = is_send ? dp->host_kc.p2p_send : dp->host_kc.p2p_recv;
  return base + (size_t)peer * KERN_MAX_P2P_CHANNELS + (size_t)c;
}

uint32_t enq_p2p_slot_bytes(const enq_comm_t* dp, int peer) {
  const int p2p = transport_kind(dp->transport, peer) == KERN_TRANSPORT_P2P;
  return enq_slot_bytes(p2p ? param_int(PARAM_P2P_NVL_CHUNKSIZE)
                            : param_int(PARAM_P2P_PCI_CHUNKSIZE));
}

ncclResult_t enqueue_comm_connect_p2p(enq_comm_t* dp, const int* peers, int npeers) {
  transport_req_t* reqs = NULL;
  kern_conn_t* conns = NULL;
  int nreq = 0;
  for (int i = 0; i < npeers; i++) nreq += 2 * enq_p2p_nch_with(dp, peers[i]);
  if (nreq == 0) return ncclSuccess;
  CHECK(MEM_CALLOC(&reqs, (size_t)nreq));
  ncclResult_t res = MEM_CALLOC(&conns, (size_t)nreq);
  if (res != ncclSuccess) {
    free(reqs);
    return res;
  }
  int k = 0;
  for (int i = 0; i < npeers; i++) {
    const int nch = enq_p2p_nch_with(dp, peers[i]);
    /* Send/recv connections are made with SIMPLE only: the p2p kernel runs Simple (no plan
     * chooses a protocol for send/recv yet), and LL buffers would cost memory for nothing. */
    const uint32_t slot = enq_p2p_slot_bytes(dp, peers[i]);
    /* Named by their place in the device tables (stable, unlike conns[]) for the profiler. */
    for (int c = 0; c < nch; c++)
      for (int dir = 0; dir < 2; dir++, k++)
        reqs[k] = (transport_req_t){
            .peer = peers[i], .is_send = dir == 0, .id = c,
            .slot_bytes = {[KERN_PROTO_SIMPLE] = slot}, .out = &conns[k],
            .key = enq_p2p_conn_key(dp, dir == 0, peers[i], c)};
  }
  CHECK_GOTO(transport_connect(dp->transport, reqs, nreq, ENQ_TAG_P2P), res, out);
  /* Upload the new connections only: other entries may be in use by running kernels. */
  for (k = 0; k < nreq; k++) {
    kern_conn_t* base = reqs[k].is_send ? dp->host_kc.p2p_send : dp->host_kc.p2p_recv;
    kern_conn_t* dst = base + (size_t)reqs[k].peer * KERN_MAX_P2P_CHANNELS + reqs[k].id;
    CHECK_GOTO(enq_upload(dp, dst, &conns[k], sizeof(kern_conn_t)), res, out);
  }
  for (int i = 0; i < npeers; i++)
    dp->p2p_nch_peer[peers[i]] = (uint8_t)enq_p2p_nch_with(dp, peers[i]);
  for (int i = 0; i < npeers; i++)
    INFO(NCCL_P2P, "comm 0x%llx rank %d: %d send/recv channels with rank %d via %s",
         (unsigned long long)dp->comm_hash, dp->rank, dp->p2p_nch_peer[peers[i]], peers[i],
         transport_kind_name(transport_kind(dp->transport, peers[i])));
  enq_mem_report(dp, "new send/recv connections");
out:
  free(conns);
  free(reqs);
  return res;
}

ncclResult_t enqueue_comm_async_error(enq_comm_t* dp, char* msg, size_t size) {
  return transport_async_error(dp == NULL ? NULL : dp->transport, msg, size, NULL);
}

void enqueue_comm_abort(enq_comm_t* dp) {
  if (dp && dp->abort_host) __atomic_store_n(dp->abort_host, 1u, __ATOMIC_SEQ_CST);
}

bool enqueue_comm_busy(enq_comm_t* dp) {
  if (dp == NULL || !__atomic_load_n(&dp->launched, __ATOMIC_ACQUIRE) || dp->done_ev == NULL)
    return false;
  return cudaEventQuery(dp->done_ev) == cudaErrorNotReady;
}

uint64_t enqueue_comm_colls(enq_comm_t* dp) {
  return dp == NULL ? 0 : __atomic_load_n(&dp->colls_launched, __ATOMIC_ACQUIRE);
}

void enqueue_comm_last_op(enq_comm_t* dp, char* buf, size_t size) {
  uint64_t groups = dp ? __atomic_load_n(&dp->groups_launched, __ATOMIC_ACQUIRE) : 0;
  if (groups == 0) {
    snprintf(buf, size, "none");
    return;
  }
  int kind = __atomic_load_n(&dp->last_kind, __ATOMIC_RELAXED);
  size_t count = __atomic_load_n(&dp->last_count, __ATOMIC_RELAXED);
  int type = __atomic_load_n(&dp->last_type, __ATOMIC_RELAXED);
  int peer = __atomic_load_n(&dp->last_peer, __ATOMIC_RELAXED);
  int nops = __atomic_load_n(&dp->last_nops, __ATOMIC_RELAXED);
  enq_op_t op = {.kind = (enq_kind_t)kind};
  const char* who =
      kind == ENQ_SEND   ? " to rank"
      : kind == ENQ_RECV ? " from rank"
      : kind == ENQ_BROADCAST || kind == ENQ_REDUCE || kind == ENQ_GATHER || kind == ENQ_SCATTER
          ? ", root"
          : NULL;
  char whom[32] = "";
  if (who != NULL) snprintf(whom, sizeof(whom), "%s %d", who, peer);
  snprintf(buf, size, "%s of %zu x %s%s (group %llu of this communicator, %d operation%s)",
           prof_func_name(enq_func(&op)), count, kern_type_name((ncclDataType_t)type), whom,
           (unsigned long long)groups, nops, nops == 1 ? "" : "s");
}

ncclResult_t enqueue_comm_finalize(enq_comm_t* dp) {
  if (dp == NULL || !dp->launched) return ncclSuccess;
  /* Poll rather than block, so that an abort from another thread ends the wait. */
  for (;;) {
    cudaError_t e = cudaEventQuery(dp->done_ev);
    if (e == cudaSuccess) {
      enq_prof_kch_poll(dp);
      return ncclSuccess;
    }
    if (e != cudaErrorNotReady) {
      WARN("rank %d: waiting for the communicator's operations failed: %s", dp->rank,
           cudaGetErrorString(e));
      return ncclUnhandledCudaError;
    }
    if (dp->host_abort && *dp->host_abort) return ncclSuccess;
    usleep(50);
  }
}

void enqueue_comm_destroy(enq_comm_t* dp) {
  if (dp == NULL) return;
  /* Kernels may still use the buffers: after an abort they leave promptly; wait for them. */
  int saved = -1;
  if (dp->setup_stream) {
    if (cuda_get_device(&saved) != ncclSuccess) saved = -1;
    cuda_set_device(dp->cuda_dev);
  }
  if (dp->launched && dp->done_ev) cudaEventSynchronize(dp->done_ev);
  enq_prof_kch_release(dp);
  if (dp->dev_ring_ranks) cudaFree(dp->dev_ring_ranks);
  enq_device_release(dp);
  tune_destroy(dp->tune);
  tune_destroy(dp->tune_sim);
  if (saved >= 0) cuda_set_device(saved);
  free(dp->ring_ranks);
  free(dp->graph_rings);
  free(dp->net_name);
  free(dp->peers);
  free(dp->hosts);
  free(dp->p2p_nch_peer);
  free(dp->ops);
  free(dp->plans);
  free(dp->redops);
  free(dp->wins);
  pthread_mutex_destroy(&dp->wins_lock);
  enq_prof_group_close(dp); /* a group left open by a destroyed communicator */
  prof_destroy(dp->prof);
  free(dp);
}

ncclResult_t enqueue_comm_window_add(enq_comm_t* dp, const void* buff, size_t size, char* flat0,
                                     uint32_t stride4g, int nlsa) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&dp->wins_lock);
  if (dp->nwins == dp->wins_cap) {
    const int cap = dp->wins_cap ? 2 * dp->wins_cap : 4;
    enq_win_t* w = realloc(dp->wins, sizeof(*w) * (size_t)cap);
    if (w == NULL) {
      WARN("rank %d: out of memory recording window %p for the data path", dp->rank, buff);
      res = ncclSystemError;
    } else {
      dp->wins = w;
      dp->wins_cap = cap;
    }
  }
  if (res == ncclSuccess) {
    dp->wins[dp->nwins] = (enq_win_t){.buff = (const char*)buff, .size = size, .flat0 = flat0,
                                      .stride4g = stride4g, .nlsa = nlsa};
    __atomic_store_n(&dp->nwins, dp->nwins + 1, __ATOMIC_RELEASE); /* enq_plan_sym peeks */
  }
  pthread_mutex_unlock(&dp->wins_lock);
  return res;
}

void enqueue_comm_window_remove(enq_comm_t* dp, const char* flat0) {
  pthread_mutex_lock(&dp->wins_lock);
  for (int i = 0; i < dp->nwins; i++) {
    if (dp->wins[i].flat0 != flat0) continue;
    dp->wins[i] = dp->wins[dp->nwins - 1];
    __atomic_store_n(&dp->nwins, dp->nwins - 1, __ATOMIC_RELEASE);
    break;
  }
  pthread_mutex_unlock(&dp->wins_lock);
}

size_t enqueue_type_size(ncclDataType_t type) { return kern_type_size(type); }

void enqueue_comm_mem_usage(const enq_comm_t* dp, uint64_t* dev_p, uint64_t* host_p) {
  uint64_t tdev = 0, thost = 0;
  if (dp->transport) transport_mem_usage(dp->transport, &tdev, &thost);
  *dev_p = dp->dev_bytes + tdev;
  *host_p = thost;
}

/* ---- Reduction operators ------------------------------------------------------------------ */

ncclResult_t enqueue_redop_create(enq_comm_t* dp, ncclRedOp_t* op_p, const void* scalar,
                                  ncclDataType_t type, ncclScalarResidence_t residence) {
  int slot = -1;
  for (int i = 0; i < dp->nredops; i++)
    if (!dp->redops[i].live) {
      slot = i;
      break;
    }
  if (slot < 0) {
    if (dp->nredops >= (int)ncclMaxRedOp - (int)ncclNumOps) {
      WARN(
          "ncclRedOpCreatePreMulSum: this communicator already has %d live operators; destroy "
          "some with ncclRedOpDestroy",
          dp->nredops);
      return ncclInvalidUsage;
    }
    enq_redop_t* grown = realloc(dp->redops, sizeof(*grown) * (size_t)(dp->nredops + 1));
    if (grown == NULL) {
      WARN("ncclRedOpCreatePreMulSum: out of memory");
      return ncclSystemError;
    }
    dp->redops = grown;
    slot = dp->nredops++;
  }
  enq_redop_t* r = &dp->redops[slot];
  memset(r, 0, sizeof(*r));
  r->live = 1;
  r->type = type;
  r->residence = residence;
  if (residence == ncclScalarHostImmediate)
    memcpy(&r->scalar_bits, scalar, kern_type_size(type));
  else
    r->scalar_ptr = scalar;
  *op_p = (ncclRedOp_t)((int)ncclNumOps + slot);
  return ncclSuccess;
}

static enq_redop_t* enq_redop_find(enq_comm_t* dp, ncclRedOp_t op) {
  int i = (int)op - (int)ncclNumOps;
  if (i < 0 || i >= dp->nredops || !dp->redops[i].live) return NULL;
  return &dp->redops[i];
}

ncclResult_t enqueue_redop_destroy(enq_comm_t* dp, ncclRedOp_t op) {
  if ((int)op >= 0 && (int)op < (int)ncclNumOps) {
    WARN(
        "ncclRedOpDestroy: op %d is a built-in operator; only operators from "
        "ncclRedOpCreatePreMulSum can be destroyed",
        (int)op);
    return ncclInvalidArgument;
  }
  enq_redop_t* r = enq_redop_find(dp, op);
  if (r == NULL) {
    WARN("ncclRedOpDestroy: op %d was not created on this communicator or was already destroyed",
         (int)op);
    return ncclInvalidArgument;
  }
  r->live = 0;
  return ncclSuccess;
}

ncclResult_t enqueue_redop_check(enq_comm_t* dp, const char* func, ncclRedOp_t op,
                                 ncclDataType_t type) {
  if ((int)op >= 0 && (int)op < (int)ncclNumOps) return ncclSuccess;
  enq_redop_t* r = enq_redop_find(dp, op);
  if (r == NULL) {
    WARN(
        "%s: op %d is neither a built-in operator nor a live one from ncclRedOpCreatePreMulSum "
        "on this communicator",
        func, (int)op);
    return ncclInvalidArgument;
  }
  if (r->type != type) {
    WARN("%s: op %d was created for datatype %d but is used with datatype %d", func, (int)op,
         (int)r->type, (int)type);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* For the planner: the premulsum scalar of a user operator. */
void enqueue_redop_scalar(enq_comm_t* dp, ncclRedOp_t op, uint64_t* bits_p, const void** ptr_p) {
  enq_redop_t* r = enq_redop_find(dp, op);
  *bits_p = r ? r->scalar_bits : 0;
  *ptr_p = r ? r->scalar_ptr : NULL;
}
