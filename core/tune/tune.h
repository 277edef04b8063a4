/*
 * core/tune: the cost model and the plan's choice of (algorithm, protocol, channels, threads,
 * chunk) for one operation, between the graph (which says what the links are) and enqueue
 * (which launches what was chosen).
 *
 * The model: a time per (algorithm, protocol) for a collective of nBytes on this communicator,
 *   time = latency(algo, proto, link) * steps + nBytes * factor(coll, algo) / bandwidth(...)
 * from one declarative table of constants per link type (NVLink, PCIe, shm, network, the same
 * GPU shared by several ranks) and the graph's per-channel bandwidths. Unusable entries (an
 * algorithm not built, a protocol the connections lack, a protocol NCCL_PROTO excludes) cost
 * NCCL_ALGO_PROTO_IGNORE (-1.0), as in the tuner ABI's cost table.
 *
 * Knobs (read once per communicator, at tune_create):
 *   NCCL_ALGO, NCCL_PROTO  NCCL 2.24 syntax: a list ("ring,tree"), "^" to exclude ("^LL128"),
 *                          or per collective ("allreduce:tree,ring;broadcast:ring"); names are
 *                          case-insensitive. A value that leaves some collective with no usable
 *                          (algorithm, protocol) fails tune_create with ncclInvalidUsage and a WARN
 *                          naming the knob, the collective and what is built.
 * The tuner plugin (NCCL_TUNER_PLUGIN; v2..v6, adapted to the v6 calls): init after the
 * topology, getCollInfo with the cost table on every choice (it may change costs and the channel
 * count), getChunkSize where it exists, finalize at tune_destroy. Its answer must not depend on
 * the rank: it is asked with the same inputs on every rank.
 *
 * Every rank of a communicator that calls tune_create with equal tune_topo_t and environment
 * gets equal choices for equal (coll, nBytes, numPipeOps) - the plan relies on it.
 */
#ifndef CHOIR_TUNE_H
#define CHOIR_TUNE_H

#include <stdint.h>

#include "base.h"
#include "nccl_common.h"

/* Algorithms: NCCL's (NCCL_ALGO_TREE .. NCCL_ALGO_PAT, the tuner ABI's table rows), then Choir's
 * own, which a tuner plugin never sees (its table has NCCL's rows only; a tuner that wants the
 * ring everywhere gives it cost 0, and NCCL's rows win ties):
 *   TUNE_ALGO_ONESHOT  within one node where every pair of ranks is p2p, AllReduce: each rank
 *                      writes its input to every peer (LL lines over the direct connections) and
 *                      reduces what arrives from all of them, in rank order. Also AllGather
 *                      (each rank writes its block to every peer) and ReduceScatter (each rank
 *                      writes block q to rank q and folds its own). NCCL_ALGO name "OneShot".
 *   TUNE_ALGO_TWOSHOT  the same where OneShot is: rank q reduces slice q from every rank and
 *                      writes it to every peer (two steps, 2(n-1)/n of the data moved per rank
 *                      instead of n-1). NCCL_ALGO name "TwoShot". */
#define TUNE_ALGO_ONESHOT NCCL_NUM_ALGORITHMS
#define TUNE_ALGO_TWOSHOT (NCCL_NUM_ALGORITHMS + 1)
#define TUNE_NUM_ALGOS (NCCL_NUM_ALGORITHMS + 2)
/* The direct algorithms (OneShot, TwoShot; AllReduce, and OneShot also AllGather and
 * ReduceScatter: tune_algos_for), LL over the direct connections. */
#define TUNE_ALGO_DIRECT_MASK (1u << TUNE_ALGO_ONESHOT | 1u << TUNE_ALGO_TWOSHOT)
/* The protocols the tree runs (kern_tree.cuh). */
#define TUNE_TREE_PROTOS (1u << NCCL_PROTO_SIMPLE | 1u << NCCL_PROTO_LL | 1u << NCCL_PROTO_LL128)

typedef enum {
  TUNE_LINK_NVLINK = 0,   /* GPUs of a node through NVLink (p2p transport) */
  TUNE_LINK_PCIE = 1,     /* GPUs of a node through PCIe peer access (p2p transport) */
  TUNE_LINK_SHM = 2,      /* GPUs of a node through host shared memory */
  TUNE_LINK_NET = 3,      /* through the net plugin (other nodes, or p2p and shm off) */
  TUNE_LINK_SAME_GPU = 4, /* ranks sharing one GPU (CHOIR_RANKS_SHARE_GPU), p2p on the device */
  TUNE_LINK_NUM = 5
} tune_link_t;

/* What the model knows of the communicator: equal on every rank. */
typedef struct tune_topo {
  int nranks;
  int nnodes;
  int local_ranks;        /* most ranks on one node */
  int gpu_share;          /* most ranks on one GPU (1: none share) */
  tune_link_t link_intra; /* the slowest link of the ring's hops inside a node */
  tune_link_t link_inter; /* between nodes (TUNE_LINK_NET); = link_intra with one node */
  int ring_nchannels;     /* ring channels connected (every limit already applied), >= 1 */
  float bw_intra;         /* graph GB/s per channel inside a node; <= 0: the table's */
  float bw_inter;         /* graph GB/s per channel between nodes; <= 0: the table's */
  /* The graph's whole ring bandwidth inside a node, GB/s (its channels x bw per channel); 0:
   * unknown. Choir may run more ring channels than the graph searched: they share this. */
  float bw_total_intra;
  int cta_cap;            /* most CTAs per launch (0: no cap) */
  int cuda_arch;          /* 90 for sm_90 */
  /* Protocols the ring connections were made with (bit 1 << NCCL_PROTO_*) and their slot
   * sizes (for the chunk: a step moves at most kern_proto_step_capacity(proto, slot)). */
  uint32_t proto_mask;
  uint32_t slot_bytes[NCCL_NUM_PROTOCOLS];
  uint32_t algo_mask;     /* algorithms usable (bit 1 << algorithm): the ring always; ONESHOT
                           * and TWOSHOT where the direct connections were made */
  /* The direct connections (OneShot, TwoShot): CTAs (connections per peer and direction) and
   * their LL slot size; 0 when there are none. */
  int direct_ctas;
  uint32_t direct_slot_bytes;
  /* Tree channels connected (NCCL_ALGO_TREE in algo_mask: AllReduce, Simple, whose slot is
   * slot_bytes[SIMPLE]); 0 when there are none. */
  int tree_nchannels;
} tune_topo_t;

/* The protocols connections over `link` should be made with (bit 1 << NCCL_PROTO_*), for the
 * transport, before any model exists: SIMPLE always; LL unless NCCL_PROTO excludes it for every
 * collective; LL128 where the link keeps 128-byte stores whole (NVLink, the same GPU) unless
 * excluded, or anywhere NCCL_PROTO names it explicitly (the user's risk, as in NCCL). A
 * malformed NCCL_PROTO gives ncclInvalidUsage with a WARN (the same check tune_create makes). */
ncclResult_t tune_protocols_for_link(tune_link_t link, uint32_t* mask_p);

/* Whether a communicator over nnodes hosts should connect tree channels: NCCL_ALGO and
 * NCCL_PROTO leave AllReduce the tree with a protocol, and either there are several hosts
 * (where the model may pick it) or NCCL_ALGO names the tree for AllReduce (inside one node the
 * tree is a chain, which the ring beats; it is made only when asked for). A malformed knob gives
 * 0 here (tune_create reports it). Equal on every rank given equal environments. */
int tune_tree_wanted(int nnodes);

typedef struct tune tune_t; /* one per communicator */

/* Build the model for topo, parse NCCL_ALGO / NCCL_PROTO, open the tuner plugin (if any) and
 * call its init. comm_hash and rank are for logs and the plugin. */
ncclResult_t tune_create(const tune_topo_t* topo, uint64_t comm_hash, int rank, tune_t** t_p);
/* Calls the plugin's finalize and frees. Safe with NULL. */
void tune_destroy(tune_t* t);

/* The plan's decision for one operation. */
typedef struct tune_choice {
  int algo;             /* NCCL_ALGO_RING or _TREE, TUNE_ALGO_ONESHOT or TUNE_ALGO_TWOSHOT */
  int proto;            /* NCCL_PROTO_* */
  int nchannels;        /* 1..topo.ring_nchannels (tree: 1..topo.tree_nchannels; direct: CTAs,
                         * 1..topo.direct_ctas) */
  int nthreads;         /* threads per CTA, multiple of 32 */
  uint32_t chunk_bytes; /* data bytes per step (multiple of 16, within the protocol's capacity) */
  float time_us;        /* the model's estimate (after the tuner) */
} tune_choice_t;

/*
 * Choose for a collective (ncclFuncBroadcast .. ncclFuncAllReduce). nbytes is NCCL's nBytes:
 * count * type size, times nranks for AllGather and ReduceScatter (the tuner ABI's convention).
 * numPipeOps: operations of the group planned together (1 for one). One INFO line under
 * NCCL_DEBUG_SUBSYS=TUNING per call: the operation, the choice, its estimate, and whether the
 * tuner or a knob changed it. Without a tuner plugin and TUNING lines, the last few answers are
 * remembered and a repeated question takes its answer (the same as asking again). Errors:
 * ncclInvalidUsage when nothing usable is left (cannot happen after a successful tune_create),
 * the plugin's error when getCollInfo fails.
 */
ncclResult_t tune_choose(tune_t* t, ncclFunc_t coll, uint64_t nbytes, int num_pipe_ops,
                         tune_choice_t* out);

/* The same for a run of nops alike operations of one group that launch together (the plan's
 * runs, NCCL's aggregation), nbytes being their bytes together and numPipeOps nops for the
 * tuner. The model costs what each algorithm does with such a run: OneShot streams it as one
 * operation (each work after the first adding a few tens of nanoseconds); the ring gives each
 * operation channels of its own, side by side, so a channel runs ceil(nops / channels) of them
 * in turn; TwoShot and the tree run them one after the other. */
ncclResult_t tune_choose_run(tune_t* t, ncclFunc_t coll, uint64_t nbytes, int nops,
                             tune_choice_t* out);

/* CTAs for OneShot over nbytes of AllReduce input (1..topo.direct_ctas; 0 without the direct
 * connections): what the plan gives one work of that size, and a run of OneShot works of one
 * launch (which share their steps) their bytes together. */
int tune_direct_ctas(const tune_t* t, uint64_t nbytes);
/* An algorithm's name as the TUNING lines print it ("Ring", "OneShot"); "?" out of range. */
const char* tune_algo_name(int algo);

/* The model's time in microseconds for one operation of any ncclFunc_t (send/recv, AlltoAll,
 * Gather and Scatter included: bytes is what this rank sends), without the plugin: for
 * ncclGroupSimulateEnd. */
float tune_estimate_us(const tune_t* t, ncclFunc_t coll, uint64_t nbytes);

#endif
