/*
 * Graph search on the fixture topologies (test/data/topo): rings, double binary trees, channel
 * counts and bandwidths, NCCL_RINGS and channel limits, 2- and 16-node clusters.
 *   test-graph DATA_DIR [all|rings|env-limits]
 * The modes other than "all" run with knobs set by Meson (knobs are read once per process).
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "graph.h"
#include "topo.h"

static const char* data_dir;

static topo_system_t* load(const char* name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", data_dir, name);
  topo_system_t* sys = NULL;
  ncclResult_t res = topo_system_from_xml_file(path, &sys);
  CHECK_MSG(res == ncclSuccess && sys != NULL, "loading %s", path);
  return sys;
}

static topo_xml_node_t* load_xml(const char* name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", data_dir, name);
  topo_xml_node_t* x = NULL;
  CHECK_MSG(topo_xml_load(path, &x) == ncclSuccess, "parsing %s", path);
  return x;
}

/* Ranks of `nnodes` copies of sys: rank r is on node r / ngpus, on the GPU whose rank attribute
 * is r % ngpus. */
static graph_rank_info_t* cluster_ranks(const topo_system_t* sys, int nnodes) {
  int ng = topo_gpu_count(sys);
  graph_rank_info_t* ranks = calloc((size_t)ng * nnodes, sizeof(*ranks));
  for (int r = 0; r < ng * nnodes; r++) {
    int g = -1;
    CHECK_TRUE(topo_rank_to_gpu(sys, r % ng, &g) == ncclSuccess);
    ranks[r].node = r / ng;
    ranks[r].local_gpu = g;
  }
  return ranks;
}

/* Search every node (each node runs its own search, as on a real cluster) and combine. */
static graph_t* cluster_graph(const topo_system_t* sys, int nnodes, const graph_limits_t* lim) {
  int ng = topo_gpu_count(sys);
  graph_rank_info_t* ranks = cluster_ranks(sys, nnodes);
  graph_node_result_t* res = calloc((size_t)nnodes, sizeof(*res));
  graph_t* g = NULL;
  for (int n = 0; n < nnodes; n++)
    CHECK_TRUE(graph_search_node(sys, ranks, ng * nnodes, n, nnodes, &res[n]) == ncclSuccess);
  CHECK_TRUE(graph_combine(res, nnodes, ranks, ng * nnodes, lim, &g) == ncclSuccess);
  free(res);
  free(ranks);
  return g;
}

static void check_rings(const graph_t* g) {
  char* seen = calloc((size_t)g->nranks, 1);
  CHECK_TRUE(g->nchannels >= 1 && g->nchannels <= GRAPH_MAX_CHANNELS);
  for (int c = 0; c < g->nchannels; c++) {
    memset(seen, 0, (size_t)g->nranks);
    const int32_t* ring = graph_ring(g, c);
    int ok = 1;
    for (int i = 0; i < g->nranks; i++) {
      if (ring[i] < 0 || ring[i] >= g->nranks || seen[ring[i]])
        ok = 0;
      else
        seen[ring[i]] = 1;
    }
    CHECK_MSG(ok, "channel %d ring visits every rank exactly once", c);
    int r = ring[0];
    CHECK_EQ_INT(graph_ring_prev(g, c, graph_ring_next(g, c, r)), r);
  }
  free(seen);
}

/* Each channel's tree: one root, up/down consistent, no cycle; node-level double binary tree:
 * across the two trees (channels 0 and 1) every node is interior in at most one. */
static void check_trees(const graph_t* g, const graph_rank_info_t* ranks) {
  int nr = g->nranks;
  for (int c = 0; c < g->nchannels; c++) {
    int roots = 0, ok = 1;
    for (int r = 0; r < nr; r++) {
      const graph_tree_t* t = graph_tree(g, c, r);
      if (t->up < 0) {
        roots++;
        if (r != g->tree_root[c]) ok = 0;
      } else {
        const graph_tree_t* p = graph_tree(g, c, t->up);
        int listed = 0;
        for (int k = 0; k < GRAPH_TREE_ARITY; k++) listed += p->down[k] == r;
        if (listed != 1) ok = 0;
      }
      for (int k = 0; k < GRAPH_TREE_ARITY; k++)
        if (t->down[k] >= 0 && graph_tree(g, c, t->down[k])->up != r) ok = 0;
      /* Walk up: must reach the root within nranks steps. */
      int cur = r, steps = 0;
      while (cur >= 0 && steps <= nr) {
        cur = graph_tree(g, c, cur)->up;
        steps++;
      }
      if (steps > nr) ok = 0;
    }
    CHECK_MSG(roots == 1, "channel %d tree has %d roots", c, roots);
    CHECK_MSG(ok, "channel %d tree links are consistent and acyclic", c);
  }
  if (g->nnodes > 1 && g->nchannels >= 2) {
    int* interior = calloc((size_t)g->nnodes, sizeof(int));
    for (int c = 0; c < 2; c++)
      for (int r = 0; r < nr; r++) {
        const graph_tree_t* t = graph_tree(g, c, r);
        if (t->down[0] >= 0 || t->down[1] >= 0) interior[ranks[r].node]++;
      }
    int ok = 1;
    for (int n = 0; n < g->nnodes; n++) ok &= interior[n] <= 1;
    CHECK_MSG(ok, "%d nodes: every node interior in at most one of the two trees", g->nnodes);
    free(interior);
  }
}

/* graph_tree_build on its own, as the data path uses it where no graph was searched (ranks
 * sharing a GPU): 8 ranks on 4 nodes, a ring that leaves and re-enters node 0 (rank order with
 * nodes {0,1,4}, {2,5}, {3,6}, {7}), both trees (channels 0 and 1). Every node's ranks form a
 * chain in ring order from the first of them; heads link to heads per graph_dbtree; one root. */
static void test_tree_build(void) {
  const int nr = 8, nn = 4;
  const int node_of[8] = {0, 0, 1, 2, 0, 1, 2, 3};
  const int32_t ring[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  graph_rank_info_t ranks[8];
  for (int r = 0; r < nr; r++) ranks[r] = (graph_rank_info_t){.node = node_of[r], .local_gpu = 0};
  const int head[4] = {0, 2, 3, 7};
  for (int c = 0; c < 2; c++) {
    graph_tree_t tr[8];
    int h[4], l[4];
    const int root = graph_tree_build(ring, ranks, nr, nn, c, tr, h, l);
    /* The chains: 0 -> 1 -> 4, 2 -> 5, 3 -> 6, 7 alone. */
    CHECK_TRUE(tr[0].down[2] == 1 && tr[1].up == 0 && tr[1].down[2] == 4 && tr[4].up == 1 &&
               tr[4].down[2] == -1);
    CHECK_TRUE(tr[2].down[2] == 5 && tr[5].up == 2 && tr[3].down[2] == 6 && tr[6].up == 3);
    CHECK_TRUE(tr[7].down[2] == -1);
    /* Non-heads have no node children. */
    const int inner[4] = {1, 4, 5, 6};
    for (int i = 0; i < 4; i++)
      CHECK_TRUE(tr[inner[i]].down[0] == -1 && tr[inner[i]].down[1] == -1);
    int roots = 0;
    for (int n = 0; n < nn; n++) {
      int parent, c0, c1;
      graph_dbtree(nn, c, n, &parent, &c0, &c1);
      const graph_tree_t* t = &tr[head[n]];
      CHECK_MSG(t->up == (parent >= 0 ? head[parent] : -1), "channel %d node %d: up %d", c, n,
                t->up);
      CHECK_TRUE(t->down[0] == (c0 >= 0 ? head[c0] : -1) && t->down[1] == (c1 >= 0 ? head[c1] : -1));
      if (parent < 0) {
        roots++;
        CHECK_EQ_INT(root, head[n]);
      }
    }
    CHECK_EQ_INT(roots, 1);
    /* Every link is mirrored: a rank's children name it as their parent. */
    for (int r = 0; r < nr; r++)
      for (int k = 0; k < GRAPH_TREE_ARITY; k++)
        if (tr[r].down[k] >= 0) CHECK_MSG(tr[tr[r].down[k]].up == r, "channel %d: %d -> %d", c, r, tr[r].down[k]);
  }
}

/* Double binary trees for many sizes, directly. */
static void test_dbtree(void) {
  for (int nn = 1; nn <= 67; nn++) {
    int ok = 1;
    for (int t = 0; t < 2; t++) {
      int roots = 0;
      int* parent = calloc((size_t)nn, sizeof(int));
      for (int n = 0; n < nn; n++) {
        int p, c0, c1;
        graph_dbtree(nn, t, n, &p, &c0, &c1);
        parent[n] = p;
        if (p < 0) roots++;
        int cs[2] = {c0, c1};
        for (int k = 0; k < 2; k++) {
          if (cs[k] < 0) continue;
          int pp, a, b;
          graph_dbtree(nn, t, cs[k], &pp, &a, &b);
          if (pp != n) ok = 0;
        }
      }
      for (int n = 0; n < nn; n++) {
        int cur = n, steps = 0;
        while (cur >= 0 && steps <= nn) cur = parent[cur], steps++;
        if (steps > nn) ok = 0;
      }
      if (roots != 1) ok = 0;
      free(parent);
    }
    for (int n = 0; n < nn; n++) {
      int p, a0, b0, a1, b1;
      graph_dbtree(nn, 0, n, &p, &a0, &b0);
      graph_dbtree(nn, 1, n, &p, &a1, &b1);
      if ((a0 >= 0 || b0 >= 0) && (a1 >= 0 || b1 >= 0)) ok = 0;
    }
    CHECK_MSG(ok,
              "double binary tree of %d nodes: one root, consistent, acyclic, every node "
              "interior in at most one tree",
              nn);
  }
}

/* NVLink count of every GPU of a fixture (sum of <nvlink count> children): all equal. */
static int fixture_nvlinks(const char* name) {
  topo_xml_node_t* x = load_xml(name);
  int links = -1;
  for (topo_xml_node_t* gpu = topo_xml_find(x, "gpu", NULL, NULL); gpu != NULL;) {
    int sum = 0;
    for (int i = 0; i < gpu->nchildren; i++)
      if (strcmp(gpu->children[i]->name, "nvlink") == 0)
        sum += (int)topo_xml_get_int(gpu->children[i], "count", 0);
    CHECK_MSG(links < 0 || links == sum, "%s: every GPU has the same NVLink count", name);
    links = sum;
    /* Next <gpu> in document order: climb until a later sibling has one. */
    topo_xml_node_t* next = NULL;
    for (topo_xml_node_t* n = gpu; n->parent != NULL && next == NULL; n = n->parent) {
      topo_xml_node_t* p = n->parent;
      int i = 0;
      while (p->children[i] != n) i++;
      for (i++; i < p->nchildren && next == NULL; i++)
        next = topo_xml_find(p->children[i], "gpu", NULL, NULL);
    }
    gpu = next;
  }
  topo_xml_free(x);
  return links;
}

/* Best (channels, per-channel bw) over NCCL's bandwidth steps when every channel needs `per`
 * GB/s from a resource of `cap` GB/s: most total bandwidth, ties to the higher step. */
static void best_steps(const float* steps, int nsteps, float cap, int* n_p, float* bw_p) {
  *n_p = 0;
  *bw_p = 0;
  for (int i = 0; i < nsteps; i++) {
    int n = (int)((cap + 1e-3f) / steps[i]);
    if (n > GRAPH_MAX_SEARCH_CHANNELS) n = GRAPH_MAX_SEARCH_CHANNELS;
    if (n * steps[i] > *n_p * *bw_p + 1e-3f) *n_p = n, *bw_p = steps[i];
  }
}

static int near(float a, float b) { return fabsf(a - b) < 0.01f; }

static void test_nvswitch(const char* name, float per_link, const float* steps, int nsteps,
                          int newer_than_sm80) {
  topo_system_t* sys = load(name);
  if (sys == NULL) return;
  int links = fixture_nvlinks(name);
  /* On NVSwitch every ring order works: a channel takes its bandwidth once from each GPU's
   * NVLink port (in and out). So the channels are what one GPU's NVLink bandwidth holds. */
  float cap = links * per_link;
  int en;
  float ebw;
  best_steps(steps, nsteps, cap, &en, &ebw);
  graph_t* g = cluster_graph(sys, 1, NULL);
  if (g != NULL) {
    check_rings(g);
    graph_rank_info_t* ranks = cluster_ranks(sys, 1);
    check_trees(g, ranks);
    free(ranks);
    CHECK_MSG(g->search_nchannels == en && near(g->search_bw, ebw),
              "%s: %d NVLinks x %.1f = %.1f GB/s: expected %d search channels at %.1f, got %d "
              "at %.1f",
              name, links, per_link, cap, en, ebw, g->search_nchannels, g->search_bw);
    /* Duplication: >= 25 GB/s doubles unless newer than sm80 with < 50 GB/s and > 4 channels;
     * the kernels then run every channel twice. */
    int dup = ebw >= 25 && !(newer_than_sm80 && ebw < 50 && en > 4) ? 2 : 1;
    CHECK_EQ_INT(g->nchannels, 2 * dup * en);
    CHECK_MSG(near(g->bw_intra * g->nchannels, en * ebw), "%s: total bandwidth %.1f x %d", name,
              g->bw_intra, g->nchannels);
    CHECK_EQ_INT(g->type_intra, TOPO_PATH_NVL);
    printf("%s: %d channels (search %d x %.1f GB/s of %.1f)\n", name, g->nchannels,
           g->search_nchannels, g->search_bw, cap);
  }
  graph_free(g);
  topo_system_free(sys);
}

/* The switch (parent <pci> bus id) of every GPU of the PCIe fixture, by GPU rank. */
static void pcie_switches(const char* name, int64_t* sw, int n) {
  topo_xml_node_t* x = load_xml(name);
  for (int r = 0; r < n; r++) {
    char rank[16];
    snprintf(rank, sizeof(rank), "%d", r);
    topo_xml_node_t* gpu = topo_xml_find(x, "gpu", "rank", rank);
    CHECK_TRUE(gpu != NULL && gpu->parent != NULL && gpu->parent->parent != NULL);
    sw[r] = gpu ? topo_busid_parse(topo_xml_get(gpu->parent->parent, "busid")) : -1;
  }
  topo_xml_free(x);
}

static void test_pcie(void) {
  const char* name = "pcie-4gpu.xml";
  topo_system_t* sys = load(name);
  if (sys == NULL) return;
  int64_t sw[4];
  pcie_switches(name, sw, 4);
  graph_t* g = cluster_graph(sys, 1, NULL);
  if (g != NULL) {
    check_rings(g);
    /* Two switches: a ring must cross between them at least once each way, and the search
     * must not do more (each crossing takes the switch's uplink). */
    for (int c = 0; c < g->nchannels; c++) {
      const int32_t* ring = graph_ring(g, c);
      int cross = 0;
      for (int i = 0; i < 4; i++) cross += sw[ring[i]] != sw[ring[(i + 1) % 4]];
      CHECK_MSG(cross == 2, "channel %d crosses switches %d times (minimum 2)", c, cross);
    }
    /* PCIe Gen4 x16: NCCL counts 1.5 GB/s per lane (gen3 x16 = 12), so 24 GB/s per link. Each
     * channel takes its bandwidth once from each switch uplink per direction: 24 GB/s in
     * total, best as 2 channels at 12 (the steps below 40 are 30, 20, 18, 15, 12, ...). */
    static const float steps[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
    int en;
    float ebw;
    best_steps(steps, 13, 16 * 1.5f, &en, &ebw);
    CHECK_MSG(g->search_nchannels == en && near(g->search_bw, ebw),
              "pcie: expected %d x %.1f, got %d x %.1f", en, ebw, g->search_nchannels,
              g->search_bw);
    CHECK_EQ_INT(g->nchannels, 2 * en); /* 12 < 25: no duplication */
    CHECK_MSG(g->type_intra >= TOPO_PATH_PIX && g->type_intra != TOPO_PATH_NVL,
              "pcie: rings over PCIe (type %s)", topo_path_type_name(g->type_intra));
    printf("%s: %d channels (search %d x %.1f GB/s), rings cross switches twice\n", name,
           g->nchannels, g->search_nchannels, g->search_bw);
  }
  graph_free(g);
  topo_system_free(sys);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_cluster(const char* name, int nnodes, float nic_gbps, float pci_bw,
                         const float* steps, int nsteps, int assert_time) {
  topo_system_t* sys = load(name);
  if (sys == NULL) return;
  double t0 = now_s();
  graph_t* g = cluster_graph(sys, nnodes, NULL);
  double dt = now_s() - t0;
  if (g != NULL) {
    graph_rank_info_t* ranks = cluster_ranks(sys, nnodes);
    CHECK_EQ_INT(g->nranks, nnodes * topo_gpu_count(sys));
    check_rings(g);
    check_trees(g, ranks);
    /* Node chains are contiguous in every ring. */
    int ok = 1;
    for (int c = 0; c < g->nchannels; c++) {
      const int32_t* ring = graph_ring(g, c);
      for (int i = 0; i < g->nranks; i++)
        if (ranks[ring[i]].node != i / topo_gpu_count(sys)) ok = 0;
    }
    CHECK_MSG(ok, "%d x %s: each node's ranks are one stretch of every ring", nnodes, name);
    /* Every channel enters and leaves a node through one NIC; one NIC carries NIC-speed / bw
     * channels each way, and a GPU reaches its own NIC through one PCIe link: so per NIC,
     * floor(min(NIC, PCIe) / step) channels at each bandwidth step. */
    int nnic = topo_net_count(sys), per_nic;
    float ebw;
    float cap = nic_gbps / 8 < pci_bw ? nic_gbps / 8 : pci_bw;
    best_steps(steps, nsteps, cap, &per_nic, &ebw);
    int en = 0;
    float best = 0;
    for (int i = 0; i < nsteps; i++) {
      int n = nnic * (int)((cap + 1e-3f) / steps[i]);
      if (n > GRAPH_MAX_SEARCH_CHANNELS) n = GRAPH_MAX_SEARCH_CHANNELS;
      if (n * steps[i] > best + 1e-3f) best = n * steps[i], en = n, ebw = steps[i];
    }
    CHECK_MSG(g->search_nchannels == en && near(g->search_bw, ebw),
              "%d x %s: expected %d x %.1f GB/s, got %d x %.1f", nnodes, name, en, ebw,
              g->search_nchannels, g->search_bw);
    CHECK_MSG(g->type_inter == TOPO_PATH_PIX,
              "%d x %s: every GPU<->NIC hop under one switch "
              "(type %s)",
              nnodes, name, topo_path_type_name(g->type_inter));
    for (int c = 0; c < g->nchannels; c++)
      for (int n = 0; n < nnodes; n++)
        CHECK_TRUE(g->net_in[c * nnodes + n] >= 0 && g->net_out[c * nnodes + n] >= 0);
    printf("%d x %s: %d channels (search %d x %.1f GB/s), search+combine %.3f ms\n", nnodes, name,
           g->nchannels, g->search_nchannels, g->search_bw, dt * 1e3);
    free(ranks);
  }
  /* The issue asks for the 16 x 8 GPU search in under a second: assert a quarter of it. */
  if (assert_time) CHECK_MSG(dt < 0.25, "16-node search took %.3f s (bound 0.25 s)", dt);
  graph_free(g);
  topo_system_free(sys);
}

static void check_limits(int min_ctas, int max_ctas, int cap, int want_min, int want_max) {
  graph_limits_t lim = {-1, -1};
  graph_limits_make(min_ctas, max_ctas, cap, &lim);
  CHECK_MSG(lim.min_channels == want_min && lim.max_channels == want_max,
            "config min %d max %d, cap %d: limits [%d, %d], expected [%d, %d]", min_ctas, max_ctas,
            cap, lim.min_channels, lim.max_channels, want_min, want_max);
}

static void test_limits(void) {
  topo_system_t* sys = load("dgx-h100.xml");
  if (sys == NULL) return;
  graph_limits_t lim = {.min_channels = 40, .max_channels = 0};
  graph_t* g = cluster_graph(sys, 1, &lim);
  if (g != NULL) {
    CHECK_EQ_INT(g->nchannels, 40);
    check_rings(g);
    /* Extra channels repeat the search's rings in order. */
    for (int c = g->search_nchannels; c < 40; c++)
      CHECK_TRUE(memcmp(graph_ring(g, c), graph_ring(g, c % g->search_nchannels),
                        sizeof(int32_t) * 8) == 0);
  }
  graph_free(g);
  lim = (graph_limits_t){.min_channels = 0, .max_channels = 3};
  g = cluster_graph(sys, 1, &lim);
  if (g != NULL) {
    CHECK_EQ_INT(g->nchannels, 3);
    check_rings(g);
    /* Fewer channels than the search found: each still carries a search channel's bandwidth. */
    CHECK_TRUE(near(g->bw_intra, g->search_bw));
  }
  graph_free(g);
  lim = (graph_limits_t){.min_channels = 10, .max_channels = 4};
  g = cluster_graph(sys, 1, &lim);
  if (g != NULL) CHECK_EQ_INT(g->nchannels, 4); /* the maximum wins */
  graph_free(g);
  /* The limits of a communicator, no knob set: config, then the CTA cap on top. */
  check_limits(1, 64, 0, 1, 64);
  check_limits(0, 0, 0, 1, 64);
  check_limits(4, 8, 0, 4, 8);
  check_limits(10, 4, 0, 4, 4);
  check_limits(0, 0, 6, 1, 6);
  check_limits(8, 64, 6, 6, 6);
  check_limits(200, 300, 0, 64, 64);
  lim = (graph_limits_t){.min_channels = 4, .max_channels = 8};
  CHECK_EQ_INT(graph_limits_apply(&lim, 64), 8);
  CHECK_EQ_INT(graph_limits_apply(&lim, 2), 4);
  CHECK_EQ_INT(graph_limits_apply(&lim, 6), 6);
  CHECK_EQ_INT(graph_limits_apply(NULL, 100), GRAPH_MAX_CHANNELS);
  CHECK_EQ_INT(graph_limits_apply(NULL, 0), 1);
  topo_system_free(sys);
}

static void test_rings_parse(void) {
  int32_t rings[GRAPH_MAX_CHANNELS * 4];
  int n = 0;
  CHECK_TRUE(graph_rings_parse("0 1 2 3|3 2 1 0", 4, rings, &n) == ncclSuccess);
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(rings[4], 3);
  CHECK_EQ_INT(rings[7], 0);
  CHECK_TRUE(graph_rings_parse("0-2-1-3", 4, rings, &n) == ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(rings[1], 2);
  CHECK_TRUE(graph_rings_parse("0 1 2", 4, rings, &n) == ncclInvalidUsage);
  CHECK_TRUE(graph_rings_parse("0 1 2 2", 4, rings, &n) == ncclInvalidUsage);
  CHECK_TRUE(graph_rings_parse("0 1 2 4", 4, rings, &n) == ncclInvalidUsage);
  CHECK_TRUE(graph_rings_parse("0 1 x 3", 4, rings, &n) == ncclInvalidUsage);
  CHECK_TRUE(graph_rings_parse("0 1 2 3 0", 4, rings, &n) == ncclInvalidUsage);
}

/* Every fixture of the folder (the topo module's too) loads and searches, one node and two. */
static void test_all_fixtures(void) {
  DIR* d = opendir(data_dir);
  CHECK_MSG(d != NULL, "opening %s", data_dir);
  if (d == NULL) return;
  int nfiles = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml") != 0) continue;
    topo_system_t* sys = load(e->d_name);
    if (sys == NULL) continue;
    nfiles++;
    for (int nnodes = 1; nnodes <= (topo_net_count(sys) > 0 ? 2 : 1); nnodes++) {
      graph_t* g = cluster_graph(sys, nnodes, NULL);
      CHECK_MSG(g != NULL, "%s: %d node(s) searched", e->d_name, nnodes);
      if (g == NULL) continue;
      graph_rank_info_t* ranks = cluster_ranks(sys, nnodes);
      check_rings(g);
      check_trees(g, ranks);
      CHECK_MSG(g->bw_intra > 0 || g->nranks == 1, "%s: positive bandwidth", e->d_name);
      printf("fixture %s, %d node(s): %d channels, %.1f GB/s per channel\n", e->d_name, nnodes,
             g->nchannels, g->bw_intra);
      free(ranks);
      graph_free(g);
    }
    topo_system_free(sys);
  }
  closedir(d);
  CHECK_MSG(nfiles >= 3, "%d fixtures found in %s", nfiles, data_dir);
}

/* Same inputs, same bytes: the results are all-gathered and combined on every rank. */
static void test_determinism(void) {
  topo_system_t* sys = load("dgx-h100.xml");
  if (sys == NULL) return;
  graph_rank_info_t* ranks = cluster_ranks(sys, 4);
  graph_node_result_t a, b;
  CHECK_TRUE(graph_search_node(sys, ranks, 32, 2, 4, &a) == ncclSuccess);
  CHECK_TRUE(graph_search_node(sys, ranks, 32, 2, 4, &b) == ncclSuccess);
  CHECK_TRUE(memcmp(&a, &b, sizeof(a)) == 0);
  graph_node_result_t res[4];
  for (int n = 0; n < 4; n++) CHECK_TRUE(graph_search_node(sys, ranks, 32, n, 4, &res[n]) == 0);
  graph_t *g1 = NULL, *g2 = NULL;
  CHECK_TRUE(graph_combine(res, 4, ranks, 32, NULL, &g1) == ncclSuccess);
  CHECK_TRUE(graph_combine(res, 4, ranks, 32, NULL, &g2) == ncclSuccess);
  if (g1 != NULL && g2 != NULL) {
    CHECK_EQ_INT(g1->nchannels, g2->nchannels);
    CHECK_TRUE(memcmp(g1->rings, g2->rings, sizeof(int32_t) * 32 * (size_t)g1->nchannels) == 0);
    CHECK_TRUE(memcmp(g1->trees, g2->trees, sizeof(graph_tree_t) * 32 * (size_t)g1->nchannels) ==
               0);
  }
  /* A result whose node does not match its slot is rejected. */
  res[1].node = 3;
  graph_t* bad = NULL;
  CHECK_TRUE(graph_combine(res, 4, ranks, 32, NULL, &bad) == ncclInvalidUsage && bad == NULL);
  graph_free(g1);
  graph_free(g2);
  free(ranks);
  topo_system_free(sys);
}

static void test_bad_inputs(void) {
  topo_system_t* sys = load("pcie-4gpu.xml");
  if (sys == NULL) return;
  graph_rank_info_t ranks[4] = {{0, 0}, {0, 1}, {0, 1}, {0, 3}};
  graph_t* g = NULL;
  CHECK_TRUE(graph_compute(sys, ranks, 4, NULL, &g) == ncclInvalidUsage && g == NULL);
  graph_rank_info_t far[2] = {{0, 0}, {0, 9}};
  CHECK_TRUE(graph_compute(sys, far, 2, NULL, &g) == ncclInvalidUsage && g == NULL);
  /* A subset of the GPUs: the rings contain exactly the ranks given. */
  graph_rank_info_t two[2] = {{0, 1}, {0, 2}};
  CHECK_TRUE(graph_compute(sys, two, 2, NULL, &g) == ncclSuccess);
  if (g != NULL) check_rings(g);
  graph_free(g);
  graph_rank_info_t one[1] = {{0, 2}};
  g = NULL;
  CHECK_TRUE(graph_compute(sys, one, 1, NULL, &g) == ncclSuccess);
  if (g != NULL) {
    check_rings(g);
    CHECK_TRUE(graph_tree(g, 0, 0)->up == -1);
  }
  graph_free(g);
  topo_system_free(sys);
}

/* Run with NCCL_RINGS="0 1 2 3 4 5 6 7|7-6-5-4-3-2-1-0". */
static void mode_rings(void) {
  topo_system_t* sys = load("dgx-h100.xml");
  if (sys == NULL) return;
  graph_t* g = cluster_graph(sys, 1, NULL);
  if (g != NULL) {
    CHECK_EQ_INT(g->nchannels, 2);
    CHECK_TRUE(g->from_env);
    CHECK_EQ_INT(graph_ring(g, 0)[3], 3);
    CHECK_EQ_INT(graph_ring(g, 1)[0], 7);
    CHECK_EQ_INT(graph_tree(g, 1, 6)->up, 7);
    check_rings(g);
  }
  graph_free(g);
  topo_system_free(sys);
}

/* Run with NCCL_MIN_NCHANNELS=30 NCCL_MAX_NCHANNELS=34: the limits are made once from config and
 * knobs (the stricter wins), and the graph applies what it is given, reading no knob itself. */
static void mode_env_limits(void) {
  check_limits(0, 0, 0, 30, 34);
  check_limits(1, 64, 0, 30, 34);  /* config's defaults: the knobs are stricter */
  check_limits(32, 0, 0, 32, 34);  /* config's minimum is stricter */
  check_limits(0, 32, 0, 30, 32);  /* config's maximum is stricter */
  check_limits(20, 40, 0, 30, 34); /* the knobs are stricter on both ends */
  check_limits(0, 0, 16, 16, 16);  /* the CTA cap beats every minimum */
  check_limits(36, 0, 0, 34, 34);  /* config's minimum above the knob's maximum: the maximum */
  topo_system_t* sys = load("pcie-4gpu.xml");
  if (sys == NULL) return;
  graph_t* g = cluster_graph(sys, 1, NULL);
  if (g != NULL) CHECK_MSG(g->nchannels < 30, "no limits given: the graph read the knobs (%d)",
                           g->nchannels);
  graph_free(g);
  graph_limits_t lim;
  graph_limits_make(0, 0, 0, &lim);
  g = cluster_graph(sys, 1, &lim);
  if (g != NULL) CHECK_EQ_INT(g->nchannels, 30);
  graph_free(g);
  graph_limits_make(0, 32, 0, &lim);
  topo_system_t* h = load("dgx-h100.xml");
  g = h ? cluster_graph(h, 1, &lim) : NULL;
  if (g != NULL) CHECK_EQ_INT(g->nchannels, 30); /* 24 found, raised to 30 */
  graph_free(g);
  topo_system_free(h);
  topo_system_free(sys);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test-graph DATA_DIR [all|rings|env-limits]\n");
    return 2;
  }
  data_dir = argv[1];
  const char* mode = argc > 2 ? argv[2] : "all";
  if (strcmp(mode, "rings") == 0) {
    mode_rings();
  } else if (strcmp(mode, "env-limits") == 0) {
    mode_env_limits();
  } else {
    static const float intra_sm90[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
    static const float intra[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
    static const float inter_sm90[] = {48, 45, 42, 40, 30,   24,   22,    20,   17.5f,
                                       15, 12, 6,  3,  2.4f, 1.2f, 0.24f, 0.12f};
    static const float inter[] = {48, 30, 28, 24, 20, 18,   15,   12,    10,   9,
                                  7,  6,  5,  4,  3,  2.4f, 1.2f, 0.24f, 0.12f};
    test_dbtree();
    test_tree_build();
    test_rings_parse();
    /* NCCL's per-link NVLink figures: sm90 20.6 GB/s, sm80 20 GB/s. */
    test_nvswitch("dgx-h100.xml", 20.6f, intra_sm90, 11, 1);
    test_nvswitch("dgx-a100.xml", 20.0f, intra, 13, 0);
    test_pcie();
    /* NICs: 400 Gb/s (H100) and 200 Gb/s (A100); PCIe Gen5 x16 = 48 GB/s, Gen4 x16 = 24. */
    test_cluster("dgx-h100.xml", 2, 400, 48, inter_sm90, 17, 0);
    test_cluster("dgx-a100.xml", 2, 200, 24, inter, 19, 0);
    test_cluster("dgx-h100.xml", 16, 400, 48, inter_sm90, 17, 1);
    test_limits();
    test_bad_inputs();
    test_determinism();
    test_all_fixtures();
  }
  return check_finish("graph");
}
