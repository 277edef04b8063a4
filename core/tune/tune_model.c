/*
 * The cost model: one table of constants (below), and what it gives for one operation: a time,
 * a channel and thread count, a chunk.
 *
 *   time = base(proto) * ops + intra_steps * hop(link_intra, proto) + inter_steps * hop(net, proto)
 *          + nBytes * factor(coll) / (nchannels * per-channel bandwidth(proto))
 *
 * with ring steps 2(n-1) for AllReduce and n-1 for the others (Broadcast and Reduce pipeline a
 * chain of n-1 hops), and factor = 2(n-1)/n for AllReduce, (n-1)/n for AllGather and
 * ReduceScatter (nBytes is the whole gathered buffer), 1 for Broadcast and Reduce. For ranks
 * sharing one GPU, hop grows with every rank beyond two polling the same memory (crowd_us), and
 * Simple's per-channel bandwidth (fitted with 2 ranks) grows as ranks / 2, each rank having
 * fewer channels (tune_model_build).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "tune_internal.h"

/* =============================================================================================
 * THE CONSTANTS. Every number the model uses is here.
 * ============================================================================================= */

/* Per link type (rows) and protocol (LL, LL128, Simple).
 *   hw       NCCL's hardware-latency row that stands for this link in ncclTunerConstants_t
 *            (-1: none; a v5/v6 tuner's change of that row applies to this link too)
 *   hop_us   latency of one ring step over the link
 *   bw_ch    GB/s of one channel when the graph gives no bandwidth (bw_intra/bw_inter <= 0)
 *   cap_ch   per-channel cap of a protocol's bandwidth, GB/s (0: none besides the ones below)
 *   total_frac  the fraction of the graph's whole ring bandwidth inside a node (tune_topo_t's
 *            bw_total_intra) that a protocol reaches over all its channels (0: not measured,
 *            no such cap); where LL's is set it replaces NCCL's llMaxBws on one node
 * Sources:
 *   PCIE, NET hop_us: NCCL's published ring hardware latencies (src/graph/tuning.cc,
 *     hwLat[NCCL_HW_PCI|NET][Ring]: PCI 1.0/2.5/5.7, net 2.7/4.0/14.0; NVLink's .6/1.9/3.4 were
 *     used until 2026-11-29, below).
 *   NVLINK hop_us, base_us, total_frac: fitted to Choir on 2 x H200 (NV18), one process, CUDA
 *     graphs, each protocol forced: `all_reduce_perf -g 2 -b 8 -e 1G -f 4 -c 1 -n 20 -w 5 -G 20`
 *     with NCCL_PROTO=LL, LL128, Simple, and broadcast_perf, reduce_perf, all_gather_perf,
 *     reduce_scatter_perf the same way to 256 MB (2026-11-29, one run each). Up to 2 KB every
 *     operation is latency: AllReduce (2 ring steps) LL 4.9, LL128 5.2-5.7, Simple 7.6-8.1 us;
 *     Broadcast (1 step) 2.9, 3.0-3.2, 4.1-4.2; Reduce 3.2, 3.3-3.6, 4.1-4.3; AllGather and
 *     ReduceScatter 3.8-4.0, 4.0-4.4, 5.4-5.7. AllReduce minus Broadcast gives a step: LL 2.0,
 *     LL128 2.3, Simple 3.6 us; Broadcast minus a step the rest (LL 0.9, LL128 0.8, Simple 0.5).
 *     The whole ring's rate from 2 MB (time minus latency): LL about 165 GB/s (AllReduce 166 at
 *     8 MB, Broadcast 177, AllGather 154), LL128 about 250 (AllReduce 283 at 2 MB and 243 at 8
 *     MB, Broadcast 287, AllGather 206-211, ReduceScatter 164-181), Simple about 340 (AllReduce
 *     325 at 8 MB and 353 at 512 MB, Broadcast 348, AllGather 294-302). The graph search gives
 *     that machine 24 channels of 15 GB/s, 360 GB/s in all: total_frac is each rate over 360.
 *     LL128's and Simple's bases are those of the middle sizes, where they compete: from 8 KB
 *     LL128 is about 1 us slower than at 8 B (Broadcast 4.4 against 3.1 us), and from 128 KB
 *     Simple about 3 (Broadcast 6.9 against 4.1, AllReduce 10.9 against 7.6). LL128's rate,
 *     283 GB/s at 2 MB but 234-243 at 8-32 MB, is taken as 270 (0.75). So the plan takes LL up
 *     to 512 KB, LL128 from 512 KB or 1 MB to 2-4 MB, Simple from 4-8 MB, which the forced
 *     runs show best at every measured size but one (2 MB: AllReduce LL128 12.8 us against
 *     Simple's 15.2 and LL's 19.1, Broadcast 10.4 against 10.9 and 14.8; ReduceScatter, where
 *     Simple's 10.0 beats LL128's 10.6, is the one).
 *     OneShot and TwoShot (NCCL_ALGO forced, the same runs): OneShot 5.0 us up to 2 KB (base
 *     and one step of 4.1 us: as long as the ring's two LL steps), 6.8 at 32 KB on 4 CTAs, 9.5
 *     at 128 KB and 99 at 2 MB on 8: about 4.9 GB/s written per CTA alone, 5% less for each
 *     other CTA (direct_bw_cta, direct_cta_crowd). TwoShot 5.3-5.6 us up to 2 KB: two steps
 *     of 2.3 (twoshot_hop_us). On two GPUs neither beats the ring with LL (OneShot 4.99 against 4.95 us
 *     at 8 B); with 4 GPUs or more the ring's steps grow and OneShot's one does not (not yet
 *     measured).
 *     The steps' share with 4 GPUs or more (6 steps of AllReduce) is not measured yet.
 *   SHM: NCCL uses its PCI latencies for shared-memory paths; so do we.
 *   bw_ch: NCCL's per-channel link speeds as its graph search uses them (SM90 NVLink 20.6 GB/s,
 *     PCIe 12 GB/s, a 100 Gb/s NIC 12.5 GB/s); shm through host memory: Choir's estimate, 6 GB/s.
 *   SAME_GPU (ranks sharing one GPU): fitted to Choir's own all_reduce with 2 and 4 ranks sharing
 *     one H200 (all_reduce_perf -g R --ranks-per-gpu R -b 8 -e 4M -f 2 -G 20, NCCL_PROTO forced,
 *     medians of 3, 2026-11-29, after LL's warp-wide polling), and for the bandwidths 2 ranks
 *     on one H100 (2026-11-25). About 3.4 us per operation is the same for every protocol
 *     (launch, prologue, epilogue). Per ring step with 2 ranks: LL 0.7, LL128 1.05, Simple
 *     1.58 us (4.8, 5.5 and 6.6 us at 32 B..2 KB); each rank beyond two adds LL 0.21, LL128
 *     0.11, Simple 0.66 us to every step (4 ranks: 10.1, 11.0 and 20.8 us: the pollers share
 *     the GPU's memory). Per channel about 8 GB/s of LL data, 4.5 of LL128 and 12 of Simple
 *     with 2 ranks (bw_ch 16 with LL's 8-of-16 bytes gives LL's 8; caps give the others), on
 *     33 channels a rank. With 4 ranks a rank has 16 channels (the CTA cap): LL about 8 GB/s a
 *     channel at 2 to 4 MB (a rank's whole rate halved), Simple about 18 (a rank's whole rate
 *     held). (Until 2026-11-29 this fit assumed 33 channels with 4 ranks too, and scaled LL's
 *     and LL128's rates by 2 / ranks instead: the same choices between ring protocols, but
 *     ring times too long by up to 40%, which made TwoShot look faster than the ring at 512 KB
 *     with 4 ranks, where it is 1.23x slower.) NCCL's llMaxBws does not apply
 *     (tune_model_build). So: LL up to about 1.3 MB with 2 ranks and 1.4 MB with 4, Simple
 *     above; LL128 nowhere (within 4% of LL at best, 64..256 B with 4 ranks).
 *   cap_ch[LL]: LL's polling receiver moves far less than the link per channel (NCCL caps LL at
 *     llMaxBws for the whole ring, below); over the network the proxy moves LL lines in whole
 *     slots, at most the NIC's rate: 0 there. Choir's estimates.
 *   SAME_GPU direct_*: fitted to OneShot and TwoShot forced with 2 and 4 ranks sharing one H200
 *     (test/device-run.sh algo-sweep, -G 20, medians of 2, 2026-11-29). OneShot's step: 0.15 us
 *     with 2 ranks (3.5 us at 8 B..2 KB), 0.48 more per rank beyond two (4.5 with 4); its bytes
 *     about 13 GB/s of writes to peers per CTA (4 ranks, 8 KB on one CTA: 6.28 us), 8% slower
 *     per other CTA (8 CTAs of 16 KB: 10.76 us with 4 ranks, 6.43 with 2). TwoShot's second
 *     step waits for every peer's first: 7.3-7.7 us at 128 B..8 KB with 4 ranks against 4.8 with
 *     2, but 8.69 at 128 KB, where the data hides part of it; 0.3 us per step and rank beyond
 *     two fits both ends within 15%. */
typedef struct tune_link_row {
  const char* name;
  int hw;
  float hop_us[NCCL_NUM_PROTOCOLS];
  float bw_ch;
  float cap_ch[NCCL_NUM_PROTOCOLS];
  float base_us[NCCL_NUM_PROTOCOLS]; /* once per operation; 0: NCCL's ring base (tune_base_us) */
  /* Ranks sharing one GPU only (0 elsewhere: not measured there): added to hop_us per rank
   * beyond two. */
  float crowd_us[NCCL_NUM_PROTOCOLS];
  /* OneShot and TwoShot (tune_model_direct_time), 0 where not measured: GB/s of bytes written to
   * peers per CTA (0: LL's per-channel rate of the ring), the fraction a CTA slows per other
   * CTA of the operation; OneShot's step (0: LL's hop_us) and what each rank beyond two adds to
   * it; what each rank beyond two adds to a TwoShot step (LL's hop_us). */
  float direct_bw_cta, direct_cta_crowd, oneshot_hop_us, oneshot_crowd_us, twoshot_crowd_us;
  float total_frac[NCCL_NUM_PROTOCOLS];
  float twoshot_hop_us; /* one TwoShot step (0: LL's hop_us) */
} tune_link_row_t;

/* clang-format off */
static const tune_link_row_t tune_link_table[TUNE_LINK_NUM] = {
  /*                       name        hw              hop_us LL, LL128, Simple  bw_ch  cap_ch LL, LL128, Simple   base_us LL, LL128, Simple  crowd_us LL, LL128, Simple */
  /*                       ...  direct_bw_cta, direct_cta_crowd, oneshot_hop_us, oneshot_crowd_us, twoshot_crowd_us, total_frac LL, LL128, Simple, twoshot_hop_us */
  [TUNE_LINK_NVLINK]   = {"NVLink",   NCCL_HW_NVLINK, {2.0f, 2.3f,  3.6f},     20.6f, {8.0f, 0,    0},           {0.9f, 1.8f, 3.3f},         {0,     0,     0},     4.9f,  0.05f, 4.1f,  0,     0,    {0.46f, 0.75f, 0.95f}, 2.3f},
  [TUNE_LINK_PCIE]     = {"PCIe",     NCCL_HW_PCI,    {1.0f, 2.5f,  5.7f},     12.0f, {6.0f, 0,    0},           {0,    0,    0},            {0,     0,     0},     0,     0,     0,     0,     0,    {0,     0,     0}, 0},
  [TUNE_LINK_SHM]      = {"shm",      NCCL_HW_PCI,    {1.0f, 2.5f,  5.7f},      6.0f, {4.0f, 0,    0},           {0,    0,    0},            {0,     0,     0},     0,     0,     0,     0,     0,    {0,     0,     0}, 0},
  [TUNE_LINK_NET]      = {"net",      NCCL_HW_NET,    {2.7f, 4.0f, 14.0f},     12.5f, {0,    0,    0},           {0,    0,    0},            {0,     0,     0},     0,     0,     0,     0,     0,    {0,     0,     0}, 0},
  [TUNE_LINK_SAME_GPU] = {"same GPU", -1,             {0.7f, 1.05f, 1.58f},    16.0f, {8.0f, 4.5f, 12.0f},       {3.4f, 3.4f, 3.4f},         {0.21f, 0.11f, 0.66f}, 13.0f, 0.08f, 0.15f, 0.48f, 0.3f, {0,     0,     0}, 0},
};
/* clang-format on */

/* Once per ring operation, per protocol: NCCL's published base latencies of the ring
 * (baseLat[Ring] = LL 6.6, LL128 14.0, Simple 8.4 us). */
static const float tune_base_us[NCCL_NUM_PROTOCOLS] = {6.6f, 14.0f, 8.4f};

/* The fraction of the bytes a protocol moves that are data: LL 8 of 16, LL128 120 of 128. */
static const float tune_proto_eff[NCCL_NUM_PROTOCOLS] = {0.5f, 120.0f / 128.0f, 1.0f};

/* Per GPU generation (Volta, Ampere, Hopper, Blackwell) and scale (1 node, 2 nodes, 4 or more):
 * NCCL's published caps (src/graph/tuning.cc): LL's bandwidth on the whole ring (llMaxBws), and
 * LL128's per channel on a ring (perChMaxRingLL128Bws), GB/s. */
static const double tune_ll_max_bw[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
static const double tune_ll128_max_bw_ch[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 73.4, 73.4}};

/* Channel and thread count for small operations, NCCL's way: while nBytes < channels * threads *
 * threshold * nranks, drop a channel, then halve the threads (down to 64). Thresholds in bytes per
 * thread and rank (NCCL's NCCL_LL_THREAD_THRESHOLD 8, LL128 8, SIMPLE 64). */
static const int tune_thread_threshold[NCCL_NUM_PROTOCOLS] = {8, 8, 64};
/* Threads per CTA at most, per protocol: the kernels' KERN_NTHREADS for all three. */
static const int tune_max_threads[NCCL_NUM_PROTOCOLS] = {KERN_NTHREADS, KERN_NTHREADS,
                                                         KERN_NTHREADS};
#define TUNE_MIN_THREADS 64

/* Chunk. AllReduce, AllGather and ReduceScatter: a whole step's capacity (every link of the ring
 * is busy at every step already; smaller steps only add steps: measured on one H100, LL
 * all_reduce of 8 KB on 4 ranks took 34 us in 512-byte steps, 11 us in one step each). Broadcast
 * and Reduce are a chain: with three ranks or more each channel's part is cut into about
 * TUNE_PIPE_STEPS steps so that the chain fills, but no step carries less than the protocol's
 * minimum (a step costs a flag or a fence): LL 512 B (64 lines), LL128 3840 B (32 lines), Simple
 * 64 KiB; with two ranks (one hop) a whole step's capacity. */
#define TUNE_PIPE_STEPS 8
static const uint32_t tune_min_chunk[NCCL_NUM_PROTOCOLS] = {512, 3840, 65536};

/* ============================================================================================= */

static int tune_compcap_idx(int cuda_arch) {
  if (cuda_arch >= 100) return NCCL_BLACKWELL_COMPCAP_IDX;
  if (cuda_arch >= 90) return NCCL_HOPPER_COMPCAP_IDX;
  if (cuda_arch >= 80) return NCCL_AMPERE_COMPCAP_IDX;
  return NCCL_VOLTA_COMPCAP_IDX;
}

static int tune_scale_idx(int nnodes) {
  return nnodes <= 1   ? NCCL_TUNING_SCALE_1NODE
         : nnodes == 2 ? NCCL_TUNING_SCALE_2NODES
                       : NCCL_TUNING_SCALE_4NODES;
}

/* The link whose latencies NCCL's hardware row h stands for in ncclTunerConstants_t. */
static tune_link_t tune_link_of_hw(int h) {
  return h == NCCL_HW_NVLINK ? TUNE_LINK_NVLINK : h == NCCL_HW_PCI ? TUNE_LINK_PCIE : TUNE_LINK_NET;
}

void tune_consts_fill(ncclTunerConstants_v5_t* c) {
  memset(c, 0, sizeof(*c));
  /* Only the ring is built: every other algorithm's entries stay 0. */
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
    c->baseLatencies[NCCL_ALGO_RING][p] = tune_base_us[p];
    for (int h = 0; h < NCCL_NUM_HW_LINKS; h++)
      c->hwLatencies[h][NCCL_ALGO_RING][p] = tune_link_table[tune_link_of_hw(h)].hop_us[p];
  }
  memcpy(c->llMaxBws, tune_ll_max_bw, sizeof(c->llMaxBws));
  memcpy(c->perChMaxRingLL128Bws, tune_ll128_max_bw_ch, sizeof(c->perChMaxRingLL128Bws));
}

/* hop latency of link for proto: the table's, or what a tuner wrote into its NCCL row. */
static float tune_hop(tune_link_t link, int p, const ncclTunerConstants_v5_t* c,
                      const ncclTunerConstants_v5_t* def) {
  const tune_link_row_t* row = &tune_link_table[link];
  if (row->hw >= 0 &&
      c->hwLatencies[row->hw][NCCL_ALGO_RING][p] != def->hwLatencies[row->hw][NCCL_ALGO_RING][p])
    return (float)c->hwLatencies[row->hw][NCCL_ALGO_RING][p];
  return row->hop_us[p];
}

static float tune_min_cap(float a, float b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return a < b ? a : b;
}

void tune_model_build(const tune_topo_t* topo, const ncclTunerConstants_v5_t* c, tune_model_t* m) {
  ncclTunerConstants_v5_t def;
  tune_consts_fill(&def);
  if (c == NULL) c = &def;
  memset(m, 0, sizeof(*m));
  int cc = tune_compcap_idx(topo->cuda_arch), sc = tune_scale_idx(topo->nnodes);
  bool multi = topo->nnodes > 1;
  const tune_link_row_t* ri = &tune_link_table[topo->link_intra];
  const tune_link_row_t* rx = &tune_link_table[multi ? topo->link_inter : topo->link_intra];
  /* Ranks sharing one GPU: every rank beyond two adds to each step. Each rank's ring gets
   * 1/(2 ranks) of the GPU's multiprocessors as channels (comm_init's CTA cap: 33 with 2 ranks
   * on an H200, 16 with 4, 8 with 8); the row's per-channel bandwidths are for two ranks. With
   * more, LL's and LL128's per-channel rates held (the pollers share the GPU's memory: a rank's
   * whole rate shrinks with its channels, as 2 / ranks), Simple's grew as ranks / 2 (a rank's
   * whole rate held). */
  const int share =
      topo->link_intra == TUNE_LINK_SAME_GPU && topo->gpu_share > 2 ? topo->gpu_share : 2;
  const float crowd = (float)(share - 2), simple_scale = (float)share / 2.0f;
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
    /* A link's own base, unless a tuner changed NCCL's. */
    m->base_us[p] = (float)c->baseLatencies[NCCL_ALGO_RING][p];
    if (ri->base_us[p] > 0 &&
        c->baseLatencies[NCCL_ALGO_RING][p] == def.baseLatencies[NCCL_ALGO_RING][p])
      m->base_us[p] = ri->base_us[p];
    m->hop_intra_us[p] = tune_hop(topo->link_intra, p, c, &def) + ri->crowd_us[p] * crowd;
    m->hop_inter_us[p] = tune_hop(multi ? topo->link_inter : topo->link_intra, p, c, &def);
    m->cap_ch[p] = multi ? tune_min_cap(ri->cap_ch[p], rx->cap_ch[p]) : ri->cap_ch[p];
    if (p == NCCL_PROTO_SIMPLE) m->cap_ch[p] *= simple_scale;
  }
  m->cap_ch[NCCL_PROTO_LL128] =
      tune_min_cap(m->cap_ch[NCCL_PROTO_LL128], (float)c->perChMaxRingLL128Bws[cc][sc]);
  /* NCCL's cap stands for LL over real links; ranks sharing a GPU are bound by its memory,
   * which the same-GPU row's own per-channel caps describe. */
  m->direct_bw_cta = ri->direct_bw_cta;
  m->direct_cta_crowd = ri->direct_cta_crowd;
  m->oneshot_hop_us = ri->oneshot_hop_us > 0 ? ri->oneshot_hop_us + ri->oneshot_crowd_us * crowd
                                             : m->hop_intra_us[NCCL_PROTO_LL];
  m->twoshot_hop_us = (ri->twoshot_hop_us > 0 ? ri->twoshot_hop_us : m->hop_intra_us[NCCL_PROTO_LL]) +
                      ri->twoshot_crowd_us * crowd;
  /* On one node, a link's measured whole-ring rates cap each protocol (the graph's bandwidth is
   * for its own channel count; the rings may run more channels over the same links). LL's
   * replaces NCCL's llMaxBws unless a tuner changed that. */
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
    m->bw_total[p] = !multi && topo->bw_total_intra > 0 && ri->total_frac[p] > 0
                         ? topo->bw_total_intra * ri->total_frac[p]
                         : 0.0f;
  const bool ll_own = m->bw_total[NCCL_PROTO_LL] > 0 &&
                      c->llMaxBws[cc][sc] == def.llMaxBws[cc][sc];
  m->ll_max_bw = (!multi && topo->link_intra == TUNE_LINK_SAME_GPU) || ll_own
                     ? 0.0f
                     : (float)c->llMaxBws[cc][sc];
  float bi = topo->bw_intra > 0 ? topo->bw_intra : ri->bw_ch * simple_scale;
  float bx = topo->bw_inter > 0 ? topo->bw_inter : rx->bw_ch;
  m->bw_ch = multi && bx < bi ? bx : bi;
}

/* GB/s of data one channel moves with proto: the link's rate times the protocol's share of
 * data, within the protocol's per-channel cap. */
static double tune_channel_bw(const tune_model_t* m, int proto) {
  const double bw_ch = m->bw_ch * tune_proto_eff[proto];
  return m->cap_ch[proto] > 0 && bw_ch > m->cap_ch[proto] ? m->cap_ch[proto] : bw_ch;
}

float tune_model_time(const tune_model_t* m, const tune_topo_t* topo, ncclFunc_t coll, int proto,
                      uint64_t nbytes, int nchannels, int num_pipe_ops) {
  int n = topo->nranks, nn = topo->nnodes > 0 ? topo->nnodes : 1;
  int steps, inter;
  double factor;
  if (n <= 1) {
    steps = inter = 0;
    factor = 1.0; /* a local copy */
  } else if (coll == ncclFuncAllReduce) {
    steps = 2 * (n - 1);
    inter = 2 * (nn - 1);
    factor = 2.0 * (n - 1) / n;
  } else if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter) {
    steps = n - 1;
    inter = nn - 1;
    factor = (double)(n - 1) / n;
  } else { /* Broadcast, Reduce: a pipelined chain */
    steps = n - 1;
    inter = nn - 1;
    factor = 1.0;
  }
  if (inter > steps) inter = steps;
  double bw = tune_channel_bw(m, proto) * (nchannels > 0 ? nchannels : 1);
  if (proto == NCCL_PROTO_LL && m->ll_max_bw > 0 && bw > m->ll_max_bw) bw = m->ll_max_bw;
  if (m->bw_total[proto] > 0 && bw > m->bw_total[proto]) bw = m->bw_total[proto];
  /* A ring collective whose block per rank and channel exceeds a step's capacity goes around
   * the ring several times (tune_model_chunk): every extra round pays every step's latency. */
  double rounds = 1.0;
  uint32_t cap = tune_model_capacity(topo, proto);
  if (cap > 0 && n > 1 && coll != ncclFuncBroadcast && coll != ncclFuncReduce) {
    double blocks = (double)n * (nchannels > 0 ? nchannels : 1);
    rounds = ceil((double)nbytes / (blocks * cap));
    if (rounds < 1.0) rounds = 1.0;
  }
  double lat = (double)m->base_us[proto] * (num_pipe_ops > 1 ? num_pipe_ops : 1) +
               rounds * ((double)(steps - inter) * m->hop_intra_us[proto] +
                         (double)inter * m->hop_inter_us[proto]);
  /* GB/s = 1000 bytes per us */
  return (float)(lat + (double)nbytes * factor / (bw * 1000.0));
}

void tune_model_channels(const tune_topo_t* topo, int proto, uint64_t nbytes, int max_channels,
                         int* nchannels_p, int* nthreads_p) {
  int nc = max_channels;
  if (topo->cta_cap > 0 && nc > topo->cta_cap) nc = topo->cta_cap;
  if (nc < 1) nc = 1;
  int nt = tune_max_threads[proto];
  uint64_t thr =
      (uint64_t)tune_thread_threshold[proto] * (uint64_t)(topo->nranks > 0 ? topo->nranks : 1);
  while (nbytes < (uint64_t)nc * (uint64_t)nt * thr) {
    if (nc >= 2)
      nc--;
    else if (nt % 128 == 0 && nt / 2 >= TUNE_MIN_THREADS)
      nt /= 2;
    else
      break;
  }
  *nchannels_p = nc;
  *nthreads_p = nt;
}

/* The tree (AllReduce, Simple; kern_tree.cuh): the reduction climbs the tree and the result
 * comes back down, each a pipeline through every level: the chain inside a node (local ranks - 1
 * hops) and the double binary tree between nodes (ceil(log2 nodes) hops), each hop costing a
 * ring step's latency over its link, twice (up, then down). Every rank's link to its parent
 * carries the whole part both ways, and a parent folds up to three children's: NCCL's tree model
 * takes half the per-channel bandwidth for it (its algorithm bandwidth ratio of 0.5), and so does
 * this one. Not calibrated on a machine of several nodes: Choir has run on none yet. */
float tune_model_tree_time(const tune_model_t* m, const tune_topo_t* topo, int proto,
                           uint64_t nbytes, int nchannels, int num_pipe_ops) {
  const int nn = topo->nnodes > 0 ? topo->nnodes : 1;
  int local = topo->nranks / nn;
  if (local < 1) local = 1;
  int levels = 0;
  while ((1 << levels) < nn) levels++;
  const double bw = 0.5 * tune_channel_bw(m, proto) * (nchannels > 0 ? nchannels : 1);
  const double lat = (double)m->base_us[proto] * (num_pipe_ops > 1 ? num_pipe_ops : 1) +
                     2.0 * ((double)(local - 1) * m->hop_intra_us[proto] +
                            (double)levels * m->hop_inter_us[proto]);
  return (float)(lat + (double)nbytes / (bw * 1000.0));
}

/* OneShot (tune.h): one LL step over the direct connections instead of 2(n-1) ring steps, but
 * each rank writes its whole input to each of its n-1 peers: every CTA moves (n-1) times its
 * part, at LL's per-channel rate (or the link's own direct rate per CTA). TwoShot: two steps,
 * 2(n-1)/n of the part. Over links without direct constants, a guess from the ring's. */
#define TUNE_DIRECT_BYTES_PER_CTA 8192 /* a CTA more per this many bytes of input */
float tune_model_direct_time(const tune_model_t* m, const tune_topo_t* topo, int algo,
                             uint64_t nbytes, int nctas) {
  const int n = topo->nranks;
  const bool two = algo == TUNE_ALGO_TWOSHOT;
  const int k = nctas > 0 ? nctas : 1;
  double bw_ch;
  if (m->direct_bw_cta > 0) {
    bw_ch = m->direct_bw_cta / (1.0 + m->direct_cta_crowd * (k - 1));
  } else {
    bw_ch = tune_channel_bw(m, NCCL_PROTO_LL);
  }
  const double bw = bw_ch * k;
  const uint32_t cap = kern_proto_step_capacity(NCCL_PROTO_LL, topo->direct_slot_bytes);
  /* Rounds beyond the first each pay their hops (a CTA's part, or TwoShot's slice of it, larger
   * than a step). */
  const double per_round = (double)(nctas > 0 ? nctas : 1) * cap * (two && n > 1 ? n : 1);
  double rounds = 1.0;
  if (cap > 0) {
    rounds = ceil((double)nbytes / per_round);
    if (rounds < 1.0) rounds = 1.0;
  }
  const double moved = two ? 2.0 * (n > 1 ? n - 1 : 1) / (n > 1 ? n : 1) : (n > 1 ? n - 1 : 1);
  return (float)((double)m->base_us[NCCL_PROTO_LL] +
                 rounds * (two ? 2.0 * m->twoshot_hop_us : m->oneshot_hop_us) +
                 moved * (double)nbytes / (bw * 1000.0));
}

void tune_model_direct_ctas(const tune_topo_t* topo, uint64_t nbytes, int* nctas_p,
                            int* nthreads_p) {
  int max = topo->direct_ctas > 0 ? topo->direct_ctas : 1;
  if (topo->cta_cap > 0 && max > topo->cta_cap) max = topo->cta_cap;
  uint64_t want = (nbytes + TUNE_DIRECT_BYTES_PER_CTA - 1) / TUNE_DIRECT_BYTES_PER_CTA;
  int nctas = want < 1 ? 1 : want > (uint64_t)max ? max : (int)want;
  /* A thread per LL line of a CTA's part (8 data bytes), in whole warps, 64..KERN_NTHREADS. */
  uint64_t lines = (nbytes / (uint64_t)nctas + 7) / 8;
  uint64_t nt = (lines + 31) / 32 * 32;
  if (nt < TUNE_MIN_THREADS) nt = TUNE_MIN_THREADS;
  if (nt > KERN_NTHREADS) nt = KERN_NTHREADS;
  *nctas_p = nctas;
  *nthreads_p = (int)nt;
}

uint32_t tune_model_capacity(const tune_topo_t* topo, int proto) {
  if (proto < 0 || proto >= NCCL_NUM_PROTOCOLS || !(topo->proto_mask & (1u << proto))) return 0;
  return kern_proto_step_capacity(proto, topo->slot_bytes[proto]);
}

uint32_t tune_model_chunk(const tune_topo_t* topo, ncclFunc_t coll, int proto, uint64_t nbytes,
                          int nchannels) {
  uint32_t cap = tune_model_capacity(topo, proto);
  if (cap == 0) return 0;
  if (coll != ncclFuncBroadcast && coll != ncclFuncReduce) return cap;
  /* A chain of one hop (two ranks) has nothing to fill: smaller steps only add steps. Measured on
   * 2 x H200 over NVLink with graphs: Broadcast took 2.7 us at 512 B (one step) and 7.8 us at 8
   * KB (eight steps of 1 KB), Reduce 2.9 and 9.1 us, where AllGather's 8 KB in one step took
   * 4.1. */
  if (topo->nranks <= 2) return cap;
  uint64_t blocks = (uint64_t)(nchannels > 0 ? nchannels : 1);
  uint64_t per_step = (nbytes / blocks + TUNE_PIPE_STEPS - 1) / TUNE_PIPE_STEPS;
  per_step = (per_step + 15) & ~(uint64_t)15;
  if (per_step < tune_min_chunk[proto]) per_step = tune_min_chunk[proto];
  if (per_step > cap) per_step = cap;
  return (uint32_t)per_step;
}
