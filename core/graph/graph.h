/*
 * core/graph: rings, trees and the number of channels, searched on the topology model.
 *
 * Flow at communicator creation:
 *   1. Every rank builds the model of its own node (topo_system_build) and calls
 *      graph_search_node(): a per-node search that fills a graph_node_result_t, a fixed-size,
 *      pointer-free struct. All ranks of a node compute the same result (same model, same
 *      deterministic search).
 *   2. The communicator all-gathers the results (one per rank; any rank of a node may stand for
 *      it) and calls graph_combine() with one result per node. graph_combine is a pure function of
 *      its inputs (and the NCCL_RINGS knob; the channel limits come in graph_limits_t): every rank
 *      gets the same rings, trees and channel count.
 *   graph_compute() does both for a communicator whose ranks are all on one node.
 *
 * The search (graph_search.c), in short:
 *   - A channel is a ring through the node's GPUs (multi-node: entering from a NET device and
 *     leaving through one). A channel of bandwidth b reserves b on every link of every path it
 *     uses (the links the topology model lists in its paths, one direction each), so paths that
 *     share a PCIe switch uplink or an NVSwitch port compete for it.
 *   - Per-channel bandwidths are tried from NCCL's steps, highest first (sm90+ and older GPUs
 *     have their own lists, intra-node and inter-node); at each step channels are added while
 *     one still fits. The result kept is the one with the most total bandwidth (channels x
 *     per-channel bandwidth); ties go to the higher per-channel bandwidth (fewer, fatter
 *     channels). The search is a depth-first search in a fixed order with a step budget, so it is
 *     deterministic and bounded.
 *   - Then NCCL's channel duplication: a search result of per-channel bandwidth >= 25 GB/s is
 *     doubled (half the bandwidth each) unless the GPUs are newer than sm80, the bandwidth is
 *     below 50 and there are more than 4 channels; and the channels the kernels run are twice the
 *     search channels (NCCL runs each search channel twice), at most GRAPH_MAX_CHANNELS. So 8
 *     H100 on NVSwitch (18 x 20.6 GB/s per GPU): 6 search channels at 60 GB/s -> 12 at 30 -> 24
 *     channels, which is what NCCL 2.28 runs there.
 *   - Trees: each channel's tree is, inside a node, the chain of the node's ranks in the
 *     channel's ring order (head = the rank the ring enters the node at); across nodes, NCCL's
 *     double binary tree: channels alternate between two binary trees of the nodes (even
 *     channels tree 0, odd channels tree 1) built so that every node is interior (has node
 *     children) in at most one of them.
 */
#ifndef CHOIR_GRAPH_H
#define CHOIR_GRAPH_H

#include <stdint.h>

#include "base.h"
#include "topo.h"

#define GRAPH_MAX_CHANNELS 64        /* channels the kernels may run (NCCL 2.28 MAXCHANNELS) */
#define GRAPH_MAX_SEARCH_CHANNELS 32 /* channels one search returns (half of the above) */
#define GRAPH_MAX_LOCAL_GPUS 32      /* GPUs of one node in one channel */
#define GRAPH_TREE_ARITY 3           /* tree children per rank: 2 other nodes + the chain */
#define GRAPH_PATTERN_RING 4         /* NCCL's pattern number, for the log */

/* Where a rank is: node (host) index in [0, nnodes), and the index of its GPU in that node's
 * topology model (topo_node(sys, TOPO_NODE_GPU, local_gpu)). Node indices must be dense. */
typedef struct graph_rank_info {
  int32_t node;
  int32_t local_gpu;
} graph_rank_info_t;

/* Limits on the channel count; 0: no limit. A communicator computes them once
 * (graph_limits_make) and hands the same struct to the graph and to the data path, which
 * apply nothing else. */
typedef struct graph_limits {
  int32_t min_channels;
  int32_t max_channels;
} graph_limits_t;

/* The communicator's limits, from config minCTAs / maxCTAs (0: none) and the environment's
 * NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (read here and nowhere else): the stricter of each
 * pair wins (the larger minimum, the smaller maximum); then cta_cap (0: none), the most CTAs
 * one launch may use when ranks share a GPU, caps both; a minimum above the maximum gives way
 * to it (INFO). The result is within [1, GRAPH_MAX_CHANNELS] and equal on every rank as long as
 * the inputs and the environment are (as NCCL assumes). */
void graph_limits_make(int min_ctas, int max_ctas, int cta_cap, graph_limits_t* lim_p);
/* n brought within lim (NULL: no limit) and [1, GRAPH_MAX_CHANNELS]; a minimum above the
 * maximum gives way to it. */
int graph_limits_apply(const graph_limits_t* lim, int n);

/* One node's search result, exchanged between ranks as bytes: fixed size, no pointers. Local GPU
 * indices are topology-model indices of that node; NET indices are its NET node indices. */
#define GRAPH_NODE_RESULT_MAGIC 0x43475231u /* "CGR1" */
typedef struct graph_node_result {
  uint32_t magic;
  int32_t node;       /* node index this result describes */
  int32_t ngpus;      /* GPUs in every channel chain */
  int32_t nchannels;  /* search channels, >= 1 */
  int32_t cross_nic;  /* 1: some channel leaves through another NET than it entered */
  int32_t min_sm;     /* lowest GPU generation of the node (duplication rule) */
  int32_t type_intra; /* farthest topo_path_type_t between consecutive GPUs */
  int32_t type_inter; /* farthest GPU<->NET path type; TOPO_PATH_LOC when single-node */
  float bw_intra;     /* GB/s per search channel */
  float bw_inter;     /* GB/s per search channel through the NETs (0 single-node) */
  struct {
    uint8_t gpu[GRAPH_MAX_LOCAL_GPUS]; /* chain order: gpu[0] is where the ring enters */
    int16_t net_in;                    /* NET the ring enters through, -1 single-node */
    int16_t net_out;                   /* NET the ring leaves through, -1 single-node */
  } channel[GRAPH_MAX_SEARCH_CHANNELS];
} graph_node_result_t;

/* One rank's links in one channel's tree; -1 where absent. Children: down[0], down[1] in other
 * nodes (first the tree's lower subtree, then the upper), down[2] the next rank of its node's
 * chain, each -1 when absent. */
typedef struct graph_tree {
  int32_t up;
  int32_t down[GRAPH_TREE_ARITY];
} graph_tree_t;

/* The result the data path uses. Arrays are indexed [channel * nranks + i]. */
typedef struct graph {
  int nranks;
  int nnodes;
  int nchannels;        /* channels the kernels run, in [1, GRAPH_MAX_CHANNELS] */
  int search_nchannels; /* channels the search found (before duplication and limits) */
  float search_bw;      /* GB/s per search channel (min of intra and inter) */
  float bw_intra;       /* GB/s each of the nchannels channels can carry inside a node */
  float bw_inter;       /* same through the network; 0 single-node */
  int type_intra;       /* topo_path_type_t, farthest hop between GPUs */
  int type_inter;       /* topo_path_type_t, farthest GPU<->NET hop; LOC single-node */
  int cross_nic;
  int from_env;        /* 1: rings from NCCL_RINGS */
  int32_t* rings;      /* nchannels x nranks: ranks in ring order (rank i sends to i+1) */
  graph_tree_t* trees; /* nchannels x nranks: tree links of rank r at [c * nranks + r] */
  int32_t* tree_root;  /* nchannels: the rank with up == -1 */
  int32_t* net_in;     /* nchannels x nnodes: NET the ring enters node n by (-1: none/any) */
  int32_t* net_out;    /* nchannels x nnodes */
} graph_t;

/* Search this node. sys: the node's model; ranks: all nranks ranks of the communicator; node:
 * which node sys describes; nnodes: how many nodes the communicator spans (> 1 makes the search
 * route every channel through this node's NET devices). Fills *res_p. */
ncclResult_t graph_search_node(const topo_system_t* sys, const graph_rank_info_t* ranks, int nranks,
                               int node, int nnodes, graph_node_result_t* res_p);

/* Combine per-node results (results[n] for node n, n < nnodes) into global rings and trees and
 * apply NCCL_RINGS, duplication and the channel limits lim (NULL: none; graph_limits_make).
 * Pure: the same inputs (and knobs) give the same graph on every rank. Logs the graph at INFO
 * (GRAPH). Free with graph_free. */
ncclResult_t graph_combine(const graph_node_result_t* results, int nnodes,
                           const graph_rank_info_t* ranks, int nranks, const graph_limits_t* lim,
                           graph_t** graph_p);

/* Single-node convenience: every rank must be on node 0 (ranks[r].node == 0) of sys.
 * lim may be NULL. */
ncclResult_t graph_compute(const topo_system_t* sys, const graph_rank_info_t* ranks, int nranks,
                           const graph_limits_t* lim, graph_t** graph_p);

void graph_free(graph_t* graph); /* safe with NULL */

static inline int graph_nchannels(const graph_t* g) { return g->nchannels; }
/* The ring of channel c: nranks ranks in order; ring[i] sends to ring[(i + 1) % nranks]. */
static inline const int32_t* graph_ring(const graph_t* g, int c) {
  return g->rings + (size_t)c * g->nranks;
}
static inline const graph_tree_t* graph_tree(const graph_t* g, int c, int rank) {
  return g->trees + (size_t)c * g->nranks + rank;
}
/* Ring neighbours of rank in channel c. */
int graph_ring_next(const graph_t* g, int c, int rank);
int graph_ring_prev(const graph_t* g, int c, int rank);

/* Parse an NCCL_RINGS value for nranks ranks into rings[GRAPH_MAX_CHANNELS][nranks];
 * *n_p = number of rings. Each ring must name every rank once; ncclInvalidUsage (WARN naming
 * the value and what is wrong) otherwise. Exposed for tests. */
ncclResult_t graph_rings_parse(const char* str, int nranks, int32_t* rings, int* n_p);

/* The tree of channel c for a ring of nr ranks (ring order) whose rank r is on node
 * ranks[r].node (dense, < nn; local_gpu unused): inside a node, the node's ranks in ring order
 * form a chain from its head (the first of them in the ring); heads link to the heads of their
 * parent and child nodes in tree c % 2 of graph_dbtree (children in down[0], down[1]; the next
 * rank of the chain in down[2]). Fills tr[0..nr-1]; head and last are nn ints of scratch.
 * Returns the root rank. Pure: the communicator builds its trees with it where no graph was
 * searched (ranks sharing GPUs), the graph where one was. */
int graph_tree_build(const int32_t* ring, const graph_rank_info_t* ranks, int nr, int nn, int c,
                     graph_tree_t* tr, int* head, int* last);

/* The double binary tree of nnodes nodes: for tree t (0 or 1) and node n, its parent node (-1
 * for the root) and up to two child nodes (-1 when absent). Exposed for tests. */
void graph_dbtree(int nnodes, int t, int n, int* parent_p, int* child0_p, int* child1_p);

#endif
