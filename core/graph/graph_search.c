/*
 * Per-node channel search on the topology model (see graph.h for the rules). Every bandwidth
 * is GB/s in one direction. The search only reads the model; its bookkeeping (what each link
 * has left) lives in a search_t.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* NCCL's per-channel bandwidth steps (GB/s), highest first. */
static const float speeds_intra_sm90[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
static const float speeds_intra[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
static const float speeds_inter_sm90[] = {48, 45, 42, 40, 30,   24,   22,    20,   17.5f,
                                          15, 12, 6,  3,  2.4f, 1.2f, 0.24f, 0.12f};
static const float speeds_inter[] = {48, 30, 28, 24, 20, 18,   15,   12,    10,   9,
                                     7,  6,  5,  4,  3,  2.4f, 1.2f, 0.24f, 0.12f};
#define NSPEEDS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Tolerance when comparing bandwidths (the model's figures are products of floats). */
#define BW_EPS 1e-3f
/* Depth-first steps allowed for one channel attempt, and for one whole search. When a budget
 * runs out the attempt counts as failed: the result stays deterministic (steps, not time). */
#define STEPS_PER_CHANNEL (1 << 15)
#define STEPS_PER_SEARCH (1 << 21)

typedef struct {
  int nhops;
  int* links; /* indices into search_t.avail */
  int type;   /* topo_path_type_t */
  float bw;   /* bottleneck */
} path_ref_t;

typedef struct {
  const topo_system_t* sys;
  int multi;                     /* route through NETs */
  int n;                         /* GPUs in the chain */
  int gpu[GRAPH_MAX_LOCAL_GPUS]; /* model indices, ascending */
  int nnet;
  int nlinks;
  float* avail;   /* per link (one direction): bandwidth not reserved yet */
  int* link_base; /* per (type, node): index of its first link */
  path_ref_t* gg; /* n x n */
  path_ref_t* gn; /* n x nnet: GPU -> NET */
  path_ref_t* ng; /* nnet x n: NET -> GPU */
  int* hop_pool;
  int64_t steps, steps_total, channel_budget;
} search_t;

static int node_slot(const topo_system_t* sys, int t, int i) {
  int slot = 0;
  for (int u = 0; u < t; u++) slot += sys->count[u];
  return slot + i;
}

/* Index of a link object of the model; -1 when it belongs to no node (a model bug). */
static int link_index(const search_t* s, const topo_link_t* l) {
  const topo_system_t* sys = s->sys;
  for (int t = 0; t < TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->count[t]; i++) {
      const topo_node_t* nd = &sys->nodes[t][i];
      if (nd->nlinks > 0 && l >= nd->links && l < nd->links + nd->nlinks)
        return s->link_base[node_slot(sys, t, i)] + (int)(l - nd->links);
    }
  }
  return -1;
}

static ncclResult_t path_ref_make(search_t* s, const topo_path_t* p, int** pool, path_ref_t* r) {
  r->nhops = p->nhops;
  r->type = p->type;
  r->bw = p->bw;
  r->links = *pool;
  for (int h = 0; h < p->nhops; h++) {
    int idx = link_index(s, p->hops[h]);
    if (idx < 0) {
      WARN(
          "graph: a path of the topology model uses a link no node owns; the model is "
          "inconsistent");
      return ncclInternalError;
    }
    r->links[h] = idx;
  }
  *pool += p->nhops;
  return ncclSuccess;
}

static void search_free(search_t* s) {
  free(s->avail);
  free(s->link_base);
  free(s->gg);
  free(s->gn);
  free(s->ng);
  free(s->hop_pool);
}

static ncclResult_t search_init(search_t* s) {
  const topo_system_t* sys = s->sys;
  int nslots = 0, res;
  for (int t = 0; t < TOPO_NODE_TYPES; t++) nslots += sys->count[t];
  CHECK(MEM_CALLOC(&s->link_base, nslots + 1));
  int nl = 0;
  for (int t = 0; t < TOPO_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++) {
      s->link_base[node_slot(sys, t, i)] = nl;
      nl += sys->nodes[t][i].nlinks;
    }
  s->nlinks = nl;
  CHECK(MEM_CALLOC(&s->avail, nl + 1));
  for (int t = 0; t < TOPO_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++)
      for (int l = 0; l < sys->nodes[t][i].nlinks; l++)
        s->avail[s->link_base[node_slot(sys, t, i)] + l] = sys->nodes[t][i].links[l].bw;

  s->nnet = s->multi ? topo_net_count(sys) : 0;
  int n = s->n, nnet = s->nnet;
  size_t nhops = 0;
  for (int a = 0; a < n; a++) {
    for (int b = 0; b < n; b++)
      nhops += (size_t)topo_path(sys, TOPO_NODE_GPU, s->gpu[a], TOPO_NODE_GPU, s->gpu[b])->nhops;
    for (int k = 0; k < nnet; k++) {
      nhops += (size_t)topo_path(sys, TOPO_NODE_GPU, s->gpu[a], TOPO_NODE_NET, k)->nhops;
      nhops += (size_t)topo_path(sys, TOPO_NODE_NET, k, TOPO_NODE_GPU, s->gpu[a])->nhops;
    }
  }
  CHECK(MEM_CALLOC(&s->hop_pool, nhops + 1));
  CHECK(MEM_CALLOC(&s->gg, (size_t)n * n));
  CHECK(MEM_CALLOC(&s->gn, (size_t)n * nnet + 1));
  CHECK(MEM_CALLOC(&s->ng, (size_t)n * nnet + 1));
  int* pool = s->hop_pool;
  for (int a = 0; a < n; a++) {
    for (int b = 0; b < n; b++) {
      res = path_ref_make(s, topo_path(sys, TOPO_NODE_GPU, s->gpu[a], TOPO_NODE_GPU, s->gpu[b]),
                          &pool, &s->gg[a * n + b]);
      if (res != ncclSuccess) return res;
    }
    for (int k = 0; k < nnet; k++) {
      CHECK(path_ref_make(s, topo_path(sys, TOPO_NODE_GPU, s->gpu[a], TOPO_NODE_NET, k), &pool,
                          &s->gn[a * nnet + k]));
      CHECK(path_ref_make(s, topo_path(sys, TOPO_NODE_NET, k, TOPO_NODE_GPU, s->gpu[a]), &pool,
                          &s->ng[k * n + a]));
    }
  }
  return ncclSuccess;
}

/* Reserve bw on every hop of p when all of them have it (1), else change nothing (0). A path
 * may not repeat a link, but a ring may cross one link in several hops: reservations of the
 * hops before count. */
static int path_take(search_t* s, const path_ref_t* p, float bw) {
  if (p->type >= TOPO_PATH_DIS || p->bw + BW_EPS < bw) return 0;
  for (int h = 0; h < p->nhops; h++)
    if (s->avail[p->links[h]] + BW_EPS < bw) return 0;
  for (int h = 0; h < p->nhops; h++) s->avail[p->links[h]] -= bw;
  return 1;
}

static void path_give(search_t* s, const path_ref_t* p, float bw) {
  for (int h = 0; h < p->nhops; h++) s->avail[p->links[h]] += bw;
}

typedef struct {
  int order[GRAPH_MAX_LOCAL_GPUS]; /* local indices (into s->gpu) */
  int net_in, net_out;
} chan_t;

static int budget_left(search_t* s) {
  s->steps++;
  s->steps_total++;
  return s->steps <= s->channel_budget && s->steps_total <= STEPS_PER_SEARCH;
}

/* Leave the node from the chain's last GPU through the nearest NET (path type first: a GPU
 * reaching a NIC through the CPU would lose GPUDirect RDMA); among equally near ones, the NET the
 * channel entered by first (no cross-NIC), then in index order. */
static int dfs_exit(search_t* s, chan_t* ch, float bw) {
  int last = ch->order[s->n - 1];
  int cand[TOPO_MAX_NODES], nc = 0;
  for (int type = TOPO_PATH_LOC; type < TOPO_PATH_DIS; type++) {
    if (s->gn[last * s->nnet + ch->net_in].type == type) cand[nc++] = ch->net_in;
    for (int k = 0; k < s->nnet; k++)
      if (k != ch->net_in && s->gn[last * s->nnet + k].type == type) cand[nc++] = k;
  }
  for (int i = 0; i < nc; i++) {
    if (!budget_left(s)) return 0;
    if (path_take(s, &s->gn[last * s->nnet + cand[i]], bw)) {
      ch->net_out = cand[i];
      return 1;
    }
  }
  return 0;
}

/* Extend the chain at position depth (order[0..depth-1] placed, their hops reserved). On
 * success every hop of the channel stays reserved. */
static int dfs(search_t* s, chan_t* ch, int depth, uint32_t used, float bw) {
  int n = s->n;
  if (!budget_left(s)) return 0;
  if (depth == n) {
    if (s->multi) return dfs_exit(s, ch, bw);
    return path_take(s, &s->gg[ch->order[n - 1] * n + ch->order[0]], bw);
  }
  int prev = ch->order[depth - 1];
  /* Next GPUs in index order after the previous one: on symmetric systems this gives the
   * natural order 0 1 2 ..., and GPUs under one switch stay next to each other. */
  for (int k = 1; k < n; k++) {
    int g = (prev + k) % n;
    if (used & (1u << g)) continue;
    const path_ref_t* p = &s->gg[prev * n + g];
    if (!path_take(s, p, bw)) continue;
    ch->order[depth] = g;
    if (dfs(s, ch, depth + 1, used | (1u << g), bw)) return 1;
    path_give(s, p, bw);
    if (s->steps > s->channel_budget || s->steps_total > STEPS_PER_SEARCH) return 0;
  }
  return 0;
}

/* Find one more channel at bandwidth bw; reserves it on success. index: how many channels were
 * found before at this bandwidth (rotates the NET tried first, to spread channels over NICs). */
static int channel_find(search_t* s, int index, float bw, chan_t* ch) {
  s->steps = 0;
  s->channel_budget = STEPS_PER_CHANNEL;
  if (!s->multi) {
    ch->net_in = ch->net_out = -1;
    ch->order[0] = 0;
    if (s->n == 1) return 1;
    return dfs(s, ch, 1, 1u, bw);
  }
  for (int kk = 0; kk < s->nnet; kk++) {
    int k = (index + kk) % s->nnet;
    ch->net_in = k;
    /* Enter at the GPUs nearest to the NET first. */
    for (int type = TOPO_PATH_LOC; type < TOPO_PATH_DIS; type++) {
      for (int g = 0; g < s->n; g++) {
        const path_ref_t* p = &s->ng[k * s->n + g];
        if (p->type != type) continue;
        if (!path_take(s, p, bw)) continue;
        ch->order[0] = g;
        if (dfs(s, ch, 1, 1u << g, bw)) return 1;
        path_give(s, p, bw);
        if (s->steps_total > STEPS_PER_SEARCH) return 0;
      }
    }
  }
  return 0;
}

static void reset_avail(search_t* s) {
  const topo_system_t* sys = s->sys;
  for (int t = 0; t < TOPO_NODE_TYPES; t++)
    for (int i = 0; i < sys->count[t]; i++)
      for (int l = 0; l < sys->nodes[t][i].nlinks; l++)
        s->avail[s->link_base[node_slot(sys, t, i)] + l] = sys->nodes[t][i].links[l].bw;
}

/* An upper bound on the channels bandwidth bw can give: every GPU sends (or every NET
 * receives) each channel once. */
static int channel_bound(const search_t* s, float bw) {
  int bound = GRAPH_MAX_SEARCH_CHANNELS;
  if (s->multi) {
    int sum = 0;
    for (int k = 0; k < s->nnet; k++) sum += (int)((topo_net_bw(s->sys, k) + BW_EPS) / bw);
    if (sum < bound) bound = sum;
  } else if (s->n > 1) {
    for (int a = 0; a < s->n; a++) {
      const topo_node_t* g = topo_node(s->sys, TOPO_NODE_GPU, s->gpu[a]);
      float out = 0;
      for (int l = 0; l < g->nlinks; l++) out += g->links[l].bw;
      int c = (int)((out + BW_EPS) / bw);
      if (c < bound) bound = c;
    }
  }
  return bound;
}

static void result_fill_types(const search_t* s, const chan_t* chans, int nch,
                              graph_node_result_t* res) {
  int ti = TOPO_PATH_LOC, tn = TOPO_PATH_LOC;
  for (int c = 0; c < nch; c++) {
    const chan_t* ch = &chans[c];
    int hops = s->multi ? s->n - 1 : (s->n > 1 ? s->n : 0);
    for (int i = 0; i < hops; i++) {
      int t = s->gg[ch->order[i] * s->n + ch->order[(i + 1) % s->n]].type;
      if (t > ti) ti = t;
    }
    if (s->multi) {
      int t0 = s->ng[ch->net_in * s->n + ch->order[0]].type;
      int t1 = s->gn[ch->order[s->n - 1] * s->nnet + ch->net_out].type;
      if (t0 > tn) tn = t0;
      if (t1 > tn) tn = t1;
    }
  }
  res->type_intra = ti;
  res->type_inter = tn;
}

static const char* net_str(int k, char* buf, size_t size) {
  snprintf(buf, size, "NET/%d", k);
  return buf;
}

/* 1 when every channel has the same GPU order (NCCL's sameChannels). */
static int same_channels(const graph_node_result_t* r) {
  for (int c = 1; c < r->nchannels; c++)
    if (memcmp(r->channel[c].gpu, r->channel[0].gpu, (size_t)r->ngpus) != 0) return 0;
  return 1;
}

static void result_log(const topo_system_t* sys, const graph_node_result_t* r) {
  if (!log_enabled(NCCL_LOG_INFO, NCCL_GRAPH)) return;
  INFO(NCCL_GRAPH, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d",
       GRAPH_PATTERN_RING, r->cross_nic, r->nchannels, r->bw_intra, r->bw_inter,
       topo_path_type_name(r->type_intra), topo_path_type_name(r->type_inter), same_channels(r));
  for (int c = 0; c < r->nchannels; c++) {
    char line[1024], nb[16];
    size_t len = 0;
    len += (size_t)snprintf(line + len, sizeof(line) - len, "%2d :", c);
    if (r->channel[c].net_in >= 0 && len < sizeof(line))
      len += (size_t)snprintf(line + len, sizeof(line) - len, " %s",
                              net_str(r->channel[c].net_in, nb, sizeof(nb)));
    for (int i = 0; i < r->ngpus && len < sizeof(line); i++)
      len += (size_t)snprintf(line + len, sizeof(line) - len, " GPU/%d",
                              topo_gpu_rank(sys, r->channel[c].gpu[i]));
    if (r->channel[c].net_out >= 0 && len < sizeof(line))
      snprintf(line + len, sizeof(line) - len, " %s",
               net_str(r->channel[c].net_out, nb, sizeof(nb)));
    INFO(NCCL_GRAPH, "%s", line);
  }
}

static int cmp_int(const void* a, const void* b) {
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

ncclResult_t graph_search_node(const topo_system_t* sys, const graph_rank_info_t* ranks, int nranks,
                               int node, int nnodes, graph_node_result_t* res_p) {
  search_t s;
  memset(&s, 0, sizeof(s));
  s.sys = sys;
  s.multi = nnodes > 1;
  for (int r = 0; r < nranks; r++) {
    if (ranks[r].node != node) continue;
    int g = ranks[r].local_gpu;
    if (g < 0 || g >= topo_gpu_count(sys)) {
      WARN("graph: rank %d is GPU %d of node %d, but that node's topology has %d GPUs", r, g, node,
           topo_gpu_count(sys));
      return ncclInvalidUsage;
    }
    if (s.n == GRAPH_MAX_LOCAL_GPUS) {
      WARN("graph: node %d has more than %d ranks; the search supports at most %d per node", node,
           GRAPH_MAX_LOCAL_GPUS, GRAPH_MAX_LOCAL_GPUS);
      return ncclInvalidUsage;
    }
    s.gpu[s.n++] = g;
  }
  if (s.n == 0) {
    WARN("graph: node %d has no rank", node);
    return ncclInvalidUsage;
  }
  qsort(s.gpu, (size_t)s.n, sizeof(int), cmp_int);
  for (int i = 1; i < s.n; i++) {
    if (s.gpu[i] == s.gpu[i - 1]) {
      WARN("graph: two ranks of node %d use GPU %d; one rank per GPU is supported", node, s.gpu[i]);
      return ncclInvalidUsage;
    }
  }
  if (s.multi && topo_net_count(sys) == 0) {
    WARN(
        "graph: node %d has no network device in its topology, but the communicator spans %d "
        "nodes; give the node a NIC (or NCCL_TOPO_FILE with one)",
        node, nnodes);
    return ncclInvalidUsage;
  }

  ncclResult_t res = search_init(&s);
  if (res != ncclSuccess) {
    search_free(&s);
    return res;
  }

  int min_sm = 1 << 30;
  for (int a = 0; a < s.n; a++) {
    int sm = topo_node(sys, TOPO_NODE_GPU, s.gpu[a])->gpu.sm;
    if (sm < min_sm) min_sm = sm;
  }
  const float* speeds;
  int nspeeds;
  if (s.multi) {
    speeds = min_sm >= 90 ? speeds_inter_sm90 : speeds_inter;
    nspeeds = min_sm >= 90 ? NSPEEDS(speeds_inter_sm90) : NSPEEDS(speeds_inter);
  } else {
    speeds = min_sm >= 90 ? speeds_intra_sm90 : speeds_intra;
    nspeeds = min_sm >= 90 ? NSPEEDS(speeds_intra_sm90) : NSPEEDS(speeds_intra);
  }

  chan_t best[GRAPH_MAX_SEARCH_CHANNELS], cur[GRAPH_MAX_SEARCH_CHANNELS];
  int best_n = 0;
  float best_bw = 0;
  if (s.n == 1 && !s.multi) {
    /* One GPU alone: nothing to reserve; one channel that copies locally. */
    best[0].order[0] = 0;
    best[0].net_in = best[0].net_out = -1;
    best_n = 1;
    best_bw = 0;
  } else {
    for (int i = 0; i < nspeeds && s.steps_total <= STEPS_PER_SEARCH; i++) {
      float bw = speeds[i];
      int bound = channel_bound(&s, bw);
      /* Ties go to the higher bandwidth found before: skip what cannot do strictly better. */
      if ((float)bound * bw <= (float)best_n * best_bw + BW_EPS) continue;
      reset_avail(&s);
      int n = 0;
      while (n < bound && channel_find(&s, n, bw, &cur[n])) n++;
      if ((float)n * bw > (float)best_n * best_bw + BW_EPS) {
        memcpy(best, cur, sizeof(chan_t) * (size_t)n);
        best_n = n;
        best_bw = bw;
      }
    }
  }
  if (best_n == 0) {
    /* Not even the lowest step fits (or the budget ran out): one channel in index order at
     * whatever its narrowest path gives, so that the communicator still works. */
    INFO(NCCL_GRAPH,
         "graph: node %d: no channel fits the bandwidth steps; using one channel in "
         "GPU order",
         node);
    best_n = 1;
    float bw = TOPO_LOC_BW;
    for (int a = 0; a < s.n; a++) {
      best[0].order[a] = a;
      if (a + 1 < s.n || !s.multi) {
        float b = s.gg[a * s.n + (a + 1) % s.n].bw;
        if (s.n > 1 && b < bw) bw = b;
      }
    }
    best[0].net_in = best[0].net_out = s.multi ? 0 : -1;
    if (s.multi) {
      if (s.ng[0 * s.n + 0].bw < bw) bw = s.ng[0].bw;
      if (s.gn[(s.n - 1) * s.nnet].bw < bw) bw = s.gn[(s.n - 1) * s.nnet].bw;
    }
    best_bw = bw >= TOPO_LOC_BW ? 0 : bw;
  }

  graph_node_result_t* r = res_p;
  memset(r, 0, sizeof(*r));
  r->magic = GRAPH_NODE_RESULT_MAGIC;
  r->node = node;
  r->ngpus = s.n;
  r->nchannels = best_n;
  r->min_sm = min_sm;
  r->bw_intra = best_bw;
  r->bw_inter = s.multi ? best_bw : 0;
  for (int c = 0; c < best_n; c++) {
    for (int i = 0; i < s.n; i++) r->channel[c].gpu[i] = (uint8_t)s.gpu[best[c].order[i]];
    r->channel[c].net_in = (int16_t)best[c].net_in;
    r->channel[c].net_out = (int16_t)best[c].net_out;
    if (best[c].net_in != best[c].net_out) r->cross_nic = 1;
  }
  result_fill_types(&s, best, best_n, r);
  TRACE(NCCL_GRAPH, "graph: node %d search took %lld steps", node, (long long)s.steps_total);
  result_log(sys, r);
  search_free(&s);
  return ncclSuccess;
}
