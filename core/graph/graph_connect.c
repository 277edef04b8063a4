/*
 * From per-node search results to the communicator's rings and trees (graph.h). Everything here
 * is a pure function of the all-gathered results, the rank table and the knobs, so every rank
 * computes the same graph.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* ---- Double binary tree ------------------------------------------------------------------ */

/* Nodes sit at positions 1..N of an in-order binary tree where position p with lowest set bit b
 * has children p - b/2 and p + c (c the largest power of two <= min(b/2, N - p)). Odd
 * positions are leaves, even ones have at least a left child. Tree 0 puts node i at i + 1;
 * tree 1 at N - i (N even) or at i + 2, wrapping the last node to 1 (N odd): both flip the
 * parity of every node's position (but the last when N is odd, which is a leaf in both), so no
 * node is interior in both trees. */
static int dbt_pos(int nnodes, int t, int n) {
  if (t == 0) return n + 1;
  if (nnodes % 2 == 0) return nnodes - n;
  return (n + 1) % nnodes + 1;
}

static int dbt_node(int nnodes, int t, int p) {
  if (t == 0) return p - 1;
  if (nnodes % 2 == 0) return nnodes - p;
  return (p - 2 + nnodes) % nnodes;
}

static void dbt_children(int nnodes, int p, int* l_p, int* r_p) {
  *l_p = *r_p = -1;
  int b = p & -p;
  if (b == 1) return;
  *l_p = p - b / 2;
  for (int c = b / 2; c >= 1; c /= 2) {
    if (p + c <= nnodes) {
      *r_p = p + c;
      return;
    }
  }
}

void graph_dbtree(int nnodes, int t, int n, int* parent_p, int* child0_p, int* child1_p) {
  int p = dbt_pos(nnodes, t, n);
  int root = 1;
  while (root * 2 <= nnodes) root *= 2;
  int parent = -1, cur = root;
  while (cur != p) {
    int l, r;
    dbt_children(nnodes, cur, &l, &r);
    parent = cur;
    cur = p < cur ? l : r;
  }
  int l, r;
  dbt_children(nnodes, p, &l, &r);
  *parent_p = parent < 0 ? -1 : dbt_node(nnodes, t, parent);
  *child0_p = l < 0 ? -1 : dbt_node(nnodes, t, l);
  *child1_p = r < 0 ? -1 : dbt_node(nnodes, t, r);
}

/* ---- NCCL_RINGS -------------------------------------------------------------------------- */

ncclResult_t graph_rings_parse(const char* str, int nranks, int32_t* rings, int* n_p) {
  int n = 0, len = 0;
  char* seen = NULL;
  CHECK(MEM_CALLOC(&seen, nranks));
  const char* p = str;
  for (;;) {
    while (*p == ' ' || *p == '-' || *p == '\t') p++;
    if (*p >= '0' && *p <= '9') {
      char* end;
      long v = strtol(p, &end, 10);
      if (len >= nranks) {
        WARN("NCCL_RINGS=\"%s\": ring %d names more than the communicator's %d ranks", str, n,
             nranks);
        goto fail;
      }
      if (v >= nranks || seen[v]) {
        WARN(
            "NCCL_RINGS=\"%s\": ring %d %s rank %ld (the communicator has ranks 0..%d, each "
            "once per ring)",
            str, n, v >= nranks ? "names the unknown" : "repeats", v, nranks - 1);
        goto fail;
      }
      if (n >= GRAPH_MAX_CHANNELS) {
        WARN("NCCL_RINGS=\"%s\": more than %d rings", str, GRAPH_MAX_CHANNELS);
        goto fail;
      }
      seen[v] = 1;
      rings[(size_t)n * nranks + len++] = (int32_t)v;
      p = end;
      continue;
    }
    if (*p == '|' || *p == '\0') {
      if (len != nranks) {
        WARN("NCCL_RINGS=\"%s\": ring %d has %d ranks, every ring must name all %d ranks", str, n,
             len, nranks);
        goto fail;
      }
      n++;
      len = 0;
      memset(seen, 0, (size_t)nranks);
      if (*p == '\0') break;
      p++;
      continue;
    }
    WARN(
        "NCCL_RINGS=\"%s\": unexpected character '%c'; use ranks separated by spaces or dashes, "
        "rings by |",
        str, *p);
    goto fail;
  }
  free(seen);
  *n_p = n;
  return ncclSuccess;
fail:
  free(seen);
  return ncclInvalidUsage;
}

/* ---- Combination ------------------------------------------------------------------------- */

void graph_free(graph_t* g) {
  if (g == NULL) return;
  free(g->rings);
  free(g->trees);
  free(g->tree_root);
  free(g->net_in);
  free(g->net_out);
  free(g);
}

int graph_ring_next(const graph_t* g, int c, int rank) {
  const int32_t* ring = graph_ring(g, c);
  for (int i = 0; i < g->nranks; i++)
    if (ring[i] == rank) return ring[(i + 1) % g->nranks];
  return -1;
}

int graph_ring_prev(const graph_t* g, int c, int rank) {
  const int32_t* ring = graph_ring(g, c);
  for (int i = 0; i < g->nranks; i++)
    if (ring[i] == rank) return ring[(i + g->nranks - 1) % g->nranks];
  return -1;
}

/* Inputs must be consistent: every rank of node n appears exactly once in each of node n's
 * channels. Builds rank_of[n * TOPO_MAX_NODES + local_gpu]. */
static ncclResult_t check_inputs(const graph_node_result_t* results, int nnodes,
                                 const graph_rank_info_t* ranks, int nranks, int* rank_of) {
  for (int i = 0; i < nnodes * TOPO_MAX_NODES; i++) rank_of[i] = -1;
  for (int r = 0; r < nranks; r++) {
    int n = ranks[r].node, g = ranks[r].local_gpu;
    if (n < 0 || n >= nnodes || g < 0 || g >= TOPO_MAX_NODES ||
        rank_of[n * TOPO_MAX_NODES + g] >= 0) {
      WARN(
          "graph: rank %d is on node %d GPU %d: out of range (nodes 0..%d) or shared with "
          "another rank",
          r, n, g, nnodes - 1);
      return ncclInvalidUsage;
    }
    rank_of[n * TOPO_MAX_NODES + g] = r;
  }
  for (int n = 0; n < nnodes; n++) {
    const graph_node_result_t* res = &results[n];
    int count = 0;
    for (int r = 0; r < nranks; r++) count += ranks[r].node == n;
    if (res->magic != GRAPH_NODE_RESULT_MAGIC || res->node != n || res->ngpus != count ||
        res->nchannels < 1 || res->nchannels > GRAPH_MAX_SEARCH_CHANNELS) {
      WARN(
          "graph: the search result for node %d is not one (node %d, %d GPUs for %d ranks, %d "
          "channels); were the results all-gathered in node order?",
          n, res->node, res->ngpus, count, res->nchannels);
      return ncclInvalidUsage;
    }
    for (int c = 0; c < res->nchannels; c++) {
      for (int i = 0; i < res->ngpus; i++) {
        if (rank_of[n * TOPO_MAX_NODES + res->channel[c].gpu[i]] < 0) {
          WARN("graph: node %d channel %d names GPU %d, which no rank of that node uses", n, c,
               res->channel[c].gpu[i]);
          return ncclInvalidUsage;
        }
      }
    }
  }
  return ncclSuccess;
}

int graph_tree_build(const int32_t* ring, const graph_rank_info_t* ranks, int nr, int nn, int c,
                     graph_tree_t* tr, int* head, int* last) {
  for (int r = 0; r < nr; r++) {
    tr[r].up = -1;
    for (int k = 0; k < GRAPH_TREE_ARITY; k++) tr[r].down[k] = -1;
  }
  for (int n = 0; n < nn; n++) head[n] = last[n] = -1;
  for (int i = 0; i < nr; i++) {
    int r = ring[i], n = ranks[r].node;
    if (head[n] < 0) {
      head[n] = r;
    } else {
      tr[r].up = last[n];
      tr[last[n]].down[2] = r;
    }
    last[n] = r;
  }
  int t = c & 1, root = -1;
  for (int n = 0; n < nn; n++) {
    int parent, c0, c1;
    graph_dbtree(nn, t, n, &parent, &c0, &c1);
    if (parent >= 0)
      tr[head[n]].up = head[parent];
    else
      root = head[n];
    tr[head[n]].down[0] = c0 >= 0 ? head[c0] : -1;
    tr[head[n]].down[1] = c1 >= 0 ? head[c1] : -1;
  }
  return root;
}

static void trees_build(graph_t* g, const graph_rank_info_t* ranks, int c, int* head, int* last) {
  g->tree_root[c] = graph_tree_build(graph_ring(g, c), ranks, g->nranks, g->nnodes, c,
                                     g->trees + (size_t)c * g->nranks, head, last);
}

static void graph_log(const graph_t* g) {
  if (!log_enabled(NCCL_LOG_INFO, NCCL_GRAPH)) return;
  INFO(NCCL_GRAPH,
       "graph: %d channels (search %d x %.1f GB/s), bw %.1f/%.1f GB/s per channel, "
       "type %s/%s, crossNic %d%s",
       g->nchannels, g->search_nchannels, g->search_bw, g->bw_intra, g->bw_inter,
       topo_path_type_name(g->type_intra), topo_path_type_name(g->type_inter), g->cross_nic,
       g->from_env ? ", rings from NCCL_RINGS" : "");
  size_t size = (size_t)g->nranks * 12 + 64;
  char* line = malloc(size);
  if (line == NULL) return;
  for (int c = 0; c < g->nchannels; c++) {
    size_t len = 0;
    const int32_t* ring = graph_ring(g, c);
    for (int i = 0; i < g->nranks && len < size; i++)
      len += (size_t)snprintf(line + len, size - len, " %d", ring[i]);
    INFO(NCCL_GRAPH, "Channel %02d/%02d :%s", c, g->nchannels, line);
  }
  free(line);
}

static int32_t limits_clamp(int64_t v) {
  return v < 0 ? 0 : v > GRAPH_MAX_CHANNELS ? GRAPH_MAX_CHANNELS : (int32_t)v;
}

void graph_limits_make(int min_ctas, int max_ctas, int cta_cap, graph_limits_t* lim_p) {
  int32_t lo = limits_clamp(min_ctas), hi = limits_clamp(max_ctas);
  const int32_t env_lo = limits_clamp(param_int(PARAM_MIN_NCHANNELS));
  const int32_t env_hi = limits_clamp(param_int(PARAM_MAX_NCHANNELS));
  if (env_lo > lo) lo = env_lo;
  if (env_hi > 0 && (hi == 0 || env_hi < hi)) hi = env_hi;
  /* Residency beats every request: ranks sharing a GPU spin on each other. */
  if (cta_cap > 0 && (hi == 0 || cta_cap < hi)) hi = limits_clamp(cta_cap);
  if (lo < 1) lo = 1;
  if (hi == 0) hi = GRAPH_MAX_CHANNELS;
  if (lo > hi) {
    INFO(NCCL_GRAPH | NCCL_ENV,
         "channels: at least %d and at most %d asked (config minCTAs %d maxCTAs %d, "
         "NCCL_MIN_NCHANNELS %d, NCCL_MAX_NCHANNELS %d, CTA cap %d); the maximum wins",
         lo, hi, min_ctas, max_ctas, env_lo, env_hi, cta_cap);
    lo = hi;
  }
  *lim_p = (graph_limits_t){.min_channels = lo, .max_channels = hi};
}

int graph_limits_apply(const graph_limits_t* lim, int n) {
  int lo = 1, hi = GRAPH_MAX_CHANNELS;
  if (lim != NULL && lim->min_channels > lo) lo = limits_clamp(lim->min_channels);
  if (lim != NULL && lim->max_channels > 0 && lim->max_channels < hi) hi = lim->max_channels;
  if (lo > hi) lo = hi;
  return n < lo ? lo : n > hi ? hi : n;
}

ncclResult_t graph_combine(const graph_node_result_t* results, int nnodes,
                           const graph_rank_info_t* ranks, int nranks, const graph_limits_t* lim,
                           graph_t** graph_p) {
  ncclResult_t res = ncclSuccess;
  graph_t* g = NULL;
  int* rank_of = NULL;
  int32_t* env_rings = NULL;
  int* head = NULL;
  int* last = NULL;
  if (nnodes < 1 || nranks < 1) {
    WARN("graph: %d nodes and %d ranks; both must be at least 1", nnodes, nranks);
    return ncclInvalidUsage;
  }
  CHECK_GOTO(MEM_CALLOC(&rank_of, (size_t)nnodes * TOPO_MAX_NODES), res, out);
  CHECK_GOTO(check_inputs(results, nnodes, ranks, nranks, rank_of), res, out);
  CHECK_GOTO(MEM_CALLOC(&g, 1), res, out);
  g->nranks = nranks;
  g->nnodes = nnodes;

  /* What every node can do: the fewest channels, the narrowest, the farthest. */
  int n0 = GRAPH_MAX_SEARCH_CHANNELS, min_sm = 1 << 30;
  float bw_intra = TOPO_LOC_BW, bw_inter = TOPO_LOC_BW;
  g->type_intra = g->type_inter = TOPO_PATH_LOC;
  for (int n = 0; n < nnodes; n++) {
    const graph_node_result_t* r = &results[n];
    if (r->nchannels < n0) n0 = r->nchannels;
    if (r->min_sm < min_sm) min_sm = r->min_sm;
    if (r->bw_intra < bw_intra) bw_intra = r->bw_intra;
    if (r->bw_inter < bw_inter) bw_inter = r->bw_inter;
    if (r->type_intra > g->type_intra) g->type_intra = r->type_intra;
    if (r->type_inter > g->type_inter) g->type_inter = r->type_inter;
    g->cross_nic |= r->cross_nic;
  }
  if (nnodes == 1) bw_inter = 0;
  float bw = nnodes > 1 && bw_inter < bw_intra ? bw_inter : bw_intra;
  g->search_nchannels = n0;
  g->search_bw = bw;

  /* NCCL's duplication (ncclTopoDupChannels), then the kernels run every channel twice. */
  int n1 = n0;
  if (bw >= 25.0f && !(min_sm > 80 && bw < 50.0f && n0 > 4)) n1 = 2 * n0;
  if (n1 > GRAPH_MAX_SEARCH_CHANNELS) n1 = GRAPH_MAX_SEARCH_CHANNELS;
  int n2 = 2 * n1 > GRAPH_MAX_CHANNELS ? GRAPH_MAX_CHANNELS : 2 * n1;

  /* Base rings: NCCL_RINGS, or the search channels; channel c of the result runs base ring
   * c % nbase (duplication copies, limits truncate or copy more). */
  int nbase = n0;
  const char* env = param_str(PARAM_RINGS);
  if (env != NULL && env[0] != '\0') {
    CHECK_GOTO(MEM_CALLOC(&env_rings, (size_t)GRAPH_MAX_CHANNELS * nranks), res, out);
    CHECK_GOTO(graph_rings_parse(env, nranks, env_rings, &nbase), res, out);
    if (nbase == 0) {
      WARN("NCCL_RINGS=\"%s\": no ring", env);
      res = ncclInvalidUsage;
      goto out;
    }
    g->from_env = 1;
    n2 = nbase;
    INFO(NCCL_GRAPH | NCCL_ENV, "NCCL_RINGS set by environment: %d rings", nbase);
  }

  /* The communicator's limits (graph_limits_make: config and knobs, computed once). */
  int nch = graph_limits_apply(lim, n2);
  g->nchannels = nch;

  /* Per-channel bandwidth: the search's total spread over the channels, but a channel never
   * carries more than a search channel could. */
  g->bw_intra = nch >= n0 ? bw_intra * n0 / nch : bw_intra;
  g->bw_inter = nch >= n0 ? bw_inter * n0 / nch : bw_inter;

  CHECK_GOTO(MEM_CALLOC(&g->rings, (size_t)nch * nranks), res, out);
  CHECK_GOTO(MEM_CALLOC(&g->trees, (size_t)nch * nranks), res, out);
  CHECK_GOTO(MEM_CALLOC(&g->tree_root, nch), res, out);
  CHECK_GOTO(MEM_CALLOC(&g->net_in, (size_t)nch * nnodes), res, out);
  CHECK_GOTO(MEM_CALLOC(&g->net_out, (size_t)nch * nnodes), res, out);
  for (int c = 0; c < nch; c++) {
    int b = c % nbase;
    int32_t* ring = g->rings + (size_t)c * nranks;
    if (g->from_env) {
      memcpy(ring, env_rings + (size_t)b * nranks, sizeof(int32_t) * (size_t)nranks);
      for (int n = 0; n < nnodes; n++) g->net_in[c * nnodes + n] = g->net_out[c * nnodes + n] = -1;
      continue;
    }
    int len = 0;
    for (int n = 0; n < nnodes; n++) {
      const graph_node_result_t* r = &results[n];
      for (int i = 0; i < r->ngpus; i++)
        ring[len++] = rank_of[n * TOPO_MAX_NODES + r->channel[b].gpu[i]];
      g->net_in[c * nnodes + n] = nnodes > 1 ? r->channel[b].net_in : -1;
      g->net_out[c * nnodes + n] = nnodes > 1 ? r->channel[b].net_out : -1;
    }
  }
  CHECK_GOTO(MEM_CALLOC(&head, nnodes), res, out);
  CHECK_GOTO(MEM_CALLOC(&last, nnodes), res, out);
  for (int c = 0; c < nch; c++) trees_build(g, ranks, c, head, last);
  graph_log(g);
  *graph_p = g;
  g = NULL;
out:
  graph_free(g);
  free(rank_of);
  free(env_rings);
  free(head);
  free(last);
  return res;
}

ncclResult_t graph_compute(const topo_system_t* sys, const graph_rank_info_t* ranks, int nranks,
                           const graph_limits_t* lim, graph_t** graph_p) {
  for (int r = 0; r < nranks; r++) {
    if (ranks[r].node != 0) {
      WARN(
          "graph_compute: rank %d is on node %d; this entry is for single-node communicators "
          "(use graph_search_node and graph_combine across nodes)",
          r, ranks[r].node);
      return ncclInvalidUsage;
    }
  }
  graph_node_result_t result;
  CHECK(graph_search_node(sys, ranks, nranks, 0, 1, &result));
  return graph_combine(&result, 1, ranks, nranks, lim, graph_p);
}
