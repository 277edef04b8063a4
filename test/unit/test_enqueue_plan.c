/*
 * The plan of a collective (core/enqueue: enqueue_plan_make) on the real cost model (core/tune),
 * on the CPU: the link each transport stands for, the bytes the model is told, the same plan on
 * every rank of a communicator for every collective, size and group size, every plan within
 * what the ring connections and the kernels can do, and a choice outside that (a protocol the
 * connections lack) refused loudly rather than launched; and how planned collectives are cut
 * into launch batches (enqueue_plan_batch_end).
 *
 *   test-enqueue-plan
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "enqueue_internal.h" /* white-box: enq_plan_t, enqueue_plan_make */
#include "topo.h"

/* A communicator as enqueue describes it to the model once its ring is connected: slots of the
 * protocols tune_protocols_for_link gives the link, at the default buffer sizes. */
static tune_topo_t topo_make(int nranks, int nnodes, tune_link_t link, int nch, int gpu_share) {
  tune_topo_t tp;
  memset(&tp, 0, sizeof(tp));
  tp.nranks = nranks;
  tp.nnodes = nnodes;
  tp.local_ranks = nranks / nnodes;
  tp.gpu_share = gpu_share;
  tp.link_intra = nnodes > 1 && nranks == nnodes ? TUNE_LINK_NET : link;
  tp.link_inter = nnodes > 1 ? TUNE_LINK_NET : tp.link_intra;
  tp.ring_nchannels = nch;
  tp.bw_intra = link == TUNE_LINK_NVLINK ? 20.0f : 0.0f;
  tp.bw_inter = nnodes > 1 ? 12.0f : 0.0f;
  tp.cta_cap = gpu_share > 1 ? 16 : 0;
  tp.cuda_arch = 90;
  tp.algo_mask = 1u << NCCL_ALGO_RING;
  uint32_t a = 0, b = 0;
  CHECK_EQ_INT(tune_protocols_for_link(tp.link_intra, &a), ncclSuccess);
  CHECK_EQ_INT(tune_protocols_for_link(tp.link_inter, &b), ncclSuccess);
  tp.proto_mask = (a & b) | 1u << NCCL_PROTO_SIMPLE;
  const uint32_t slot[KERN_PROTO_NUM] = {[KERN_PROTO_LL] = 64u << 10,
                                         [KERN_PROTO_LL128] = 600u << 10,
                                         [KERN_PROTO_SIMPLE] = 512u << 10};
  uint32_t asked[KERN_PROTO_NUM];
  for (int p = 0; p < KERN_PROTO_NUM; p++) asked[p] = tp.proto_mask >> p & 1u ? slot[p] : 0;
  /* The slots the core plans with, from the slowest transport (enqueue_ring_slots). */
  const kern_transport_t slowest = tp.link_inter == TUNE_LINK_NET ? KERN_TRANSPORT_NET
                                   : tp.link_intra == TUNE_LINK_SHM ? KERN_TRANSPORT_SHM
                                                                    : KERN_TRANSPORT_P2P;
  enqueue_ring_slots(slowest, asked, tp.slot_bytes);
  return tp;
}

/* The slots every rank plans with: the smallest that any transport up to the slowest makes of
 * the asked ones (shm puts LL128 in the Simple buffer, the network LL and LL128), so a ring of
 * p2p and network hops plans LL with p2p's slot and LL128 with the network's. */
static void case_ring_slots(void) {
  const uint32_t asked[KERN_PROTO_NUM] = {[KERN_PROTO_LL] = 64u << 10,
                                          [KERN_PROTO_LL128] = 600u << 10,
                                          [KERN_PROTO_SIMPLE] = 512u << 10};
  uint32_t out[KERN_PROTO_NUM];
  enqueue_ring_slots(KERN_TRANSPORT_P2P, asked, out);
  CHECK_EQ_INT(out[KERN_PROTO_LL], 64u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_LL128], 600u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_SIMPLE], 512u << 10);
  enqueue_ring_slots(KERN_TRANSPORT_SHM, asked, out);
  CHECK_EQ_INT(out[KERN_PROTO_LL], 64u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_LL128], 512u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_SIMPLE], 512u << 10);
  enqueue_ring_slots(KERN_TRANSPORT_NET, asked, out);
  CHECK_EQ_INT(out[KERN_PROTO_LL], 64u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_LL128], 512u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_SIMPLE], 512u << 10);
  /* A larger LL slot than Simple's: the network's (Simple's) is the smaller one. */
  const uint32_t big_ll[KERN_PROTO_NUM] = {[KERN_PROTO_LL] = 1u << 20,
                                           [KERN_PROTO_LL128] = 0,
                                           [KERN_PROTO_SIMPLE] = 512u << 10};
  enqueue_ring_slots(KERN_TRANSPORT_NET, big_ll, out);
  CHECK_EQ_INT(out[KERN_PROTO_LL], 512u << 10);
  CHECK_EQ_INT(out[KERN_PROTO_LL128], 0); /* not made stays not made */
  enqueue_ring_slots(KERN_TRANSPORT_SHM, big_ll, out);
  CHECK_EQ_INT(out[KERN_PROTO_LL], 1u << 20);
}

static void case_link(void) {
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, TOPO_PATH_NVL), TUNE_LINK_NVLINK);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, TOPO_PATH_LOC), TUNE_LINK_NVLINK);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, TOPO_PATH_NVB), TUNE_LINK_NVLINK);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, TOPO_PATH_PIX), TUNE_LINK_PCIE);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, TOPO_PATH_SYS), TUNE_LINK_PCIE);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 1, -1), TUNE_LINK_PCIE); /* no graph */
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_P2P, 2, -1), TUNE_LINK_SAME_GPU);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_SHM, 1, TOPO_PATH_NVL), TUNE_LINK_SHM);
  /* Ranks sharing a GPU but connected through host memory or the network are not the GPU. */
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_SHM, 2, -1), TUNE_LINK_SHM);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_NET, 2, -1), TUNE_LINK_NET);
  CHECK_EQ_INT(enqueue_link_of(KERN_TRANSPORT_NET, 1, TOPO_PATH_NVL), TUNE_LINK_NET);
}

static void case_nbytes(void) {
  enq_op_t op = {.count = 1000, .type = ncclFloat};
  const enq_kind_t kinds[] = {ENQ_BROADCAST, ENQ_REDUCE, ENQ_ALLGATHER, ENQ_REDUCESCATTER,
                              ENQ_ALLREDUCE, ENQ_SEND, ENQ_ALLTOALL};
  const uint64_t want[] = {4000, 4000, 32000, 32000, 4000, 4000, 32000};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    op.kind = kinds[i];
    CHECK_MSG(enqueue_plan_nbytes(&op, 8) == want[i], "kind %d: %llu bytes", (int)kinds[i],
              (unsigned long long)enqueue_plan_nbytes(&op, 8));
  }
}

#define MAX_RANKS 16

typedef struct {
  const char* name;
  int nranks, nnodes;
  tune_link_t link;
  int nch, gpu_share;
} fixture_t;

static const fixture_t fixtures[] = {
    {"8 GPUs NVLink", 8, 1, TUNE_LINK_NVLINK, 64, 1},
    {"4 GPUs PCIe", 4, 1, TUNE_LINK_PCIE, 64, 1},
    {"4 GPUs shm", 4, 1, TUNE_LINK_SHM, 8, 1},
    {"2 nodes x 8 NVLink", 16, 2, TUNE_LINK_NVLINK, 8, 1},
    {"4 ranks on one GPU", 4, 1, TUNE_LINK_SAME_GPU, 16, 4},
};

/* Every rank of the fixture builds its model and plans every collective at every size, alone and
 * in a group of 3: the plans must be equal, and each within the ring and the kernels. */
static void plan_fixture(const fixture_t* f) {
  tune_topo_t tp = topo_make(f->nranks, f->nnodes, f->link, f->nch, f->gpu_share);
  tune_t* t[MAX_RANKS] = {0};
  for (int r = 0; r < f->nranks; r++) {
    ncclResult_t res = tune_create(&tp, 0xc0ffee, r, &t[r]);
    CHECK_MSG(res == ncclSuccess, "%s: tune_create on rank %d: %d", f->name, r, (int)res);
    if (res != ncclSuccess) goto out;
  }
  uint32_t protos_seen = 0;
  int plans = 0;
  for (int kind = ENQ_BROADCAST; kind <= ENQ_ALLREDUCE; kind++) {
    for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 4) {
      for (int npipe = 1; npipe <= 3; npipe += 2) {
        enq_op_t op = {.kind = (enq_kind_t)kind, .type = ncclInt8, .op = ncclSum};
        /* AllGather and ReduceScatter take the per-rank count. */
        op.count = kind == ENQ_ALLGATHER || kind == ENQ_REDUCESCATTER
                       ? (bytes + f->nranks - 1) / f->nranks
                       : bytes;
        enq_plan_t p0;
        memset(&p0, 0, sizeof(p0));
        for (int r = 0; r < f->nranks; r++) {
          enq_plan_t p;
          memset(&p, 0, sizeof(p));
          ncclResult_t res =
              enqueue_plan_make(t[r], &op, f->nranks, npipe, tp.slot_bytes, tp.ring_nchannels,
                                tp.tree_nchannels, &p);
          CHECK_MSG(res == ncclSuccess, "%s: coll %d of %llu bytes on rank %d: %d", f->name, kind,
                    (unsigned long long)bytes, r, (int)res);
          if (res != ncclSuccess) continue;
          plans++;
          if (r == 0) {
            p0 = p;
            protos_seen |= 1u << p.proto;
            CHECK_TRUE(tp.proto_mask >> p.proto & 1u);
            CHECK_TRUE(p.algo == NCCL_ALGO_RING);
            CHECK_TRUE(p.nchannels >= 1 && p.nchannels <= tp.ring_nchannels);
            CHECK_TRUE(p.nthreads >= 64 && p.nthreads <= KERN_NTHREADS && p.nthreads % 32 == 0);
            CHECK_TRUE(p.chunk_bytes >= 16 && p.chunk_bytes % 16 == 0);
            CHECK_MSG(p.chunk_bytes <= kern_proto_step_capacity(p.proto, tp.slot_bytes[p.proto]),
                      "%s: chunk %u above the %s capacity of a %u-byte slot", f->name,
                      p.chunk_bytes, kern_proto_name(p.proto), tp.slot_bytes[p.proto]);
            CHECK_TRUE(p.time_us > 0.0f);
          } else {
            CHECK_MSG(memcmp(&p, &p0, sizeof(p)) == 0,
                      "%s: coll %d of %llu bytes (group of %d): rank %d plans %s/%d ch/%d thr/"
                      "%u, rank 0 %s/%d ch/%d thr/%u",
                      f->name, kind, (unsigned long long)bytes, npipe, r,
                      kern_proto_name(p.proto), p.nchannels, p.nthreads, p.chunk_bytes,
                      kern_proto_name(p0.proto), p0.nchannels, p0.nthreads, p0.chunk_bytes);
          }
        }
      }
    }
  }
  printf("%s: %d plans, protocols chosen 0x%x of 0x%x\n", f->name, plans, protos_seen,
         tp.proto_mask);
  /* A model with a choice of protocols uses more than one across 8 B .. 1 GB. */
  if (tp.proto_mask != 1u << NCCL_PROTO_SIMPLE)
    CHECK_MSG(protos_seen != 1u << NCCL_PROTO_SIMPLE, "%s: Simple at every size", f->name);
out:
  for (int r = 0; r < f->nranks; r++) tune_destroy(t[r]);
}

static void case_same_everywhere(void) {
  for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) plan_fixture(&fixtures[i]);
}

/* The model may choose LL or LL128, but the ring was connected with SIMPLE only (or with fewer
 * channels): a plan the connections cannot run is refused with a WARN, never launched. */
static void case_refused(void) {
  tune_topo_t tp = topo_make(8, 1, TUNE_LINK_NVLINK, 64, 1);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&tp, 0xc0ffee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const uint32_t simple_only[KERN_PROTO_NUM] = {[KERN_PROTO_SIMPLE] = 512u << 10};
  int refused = 0, fine = 0;
  for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 4) {
    enq_op_t op = {.kind = ENQ_ALLREDUCE, .type = ncclInt8, .op = ncclSum, .count = bytes};
    enq_plan_t want, p;
    CHECK_EQ_INT(enqueue_plan_make(t, &op, 8, 1, tp.slot_bytes, 64, 0, &want), ncclSuccess);
    err_clear_last();
    ncclResult_t res = enqueue_plan_make(t, &op, 8, 1, simple_only, 64, 0, &p);
    if (want.proto != NCCL_PROTO_SIMPLE) {
      CHECK_EQ_INT(res, ncclInternalError);
      CHECK_CONTAINS(err_last(), "the ring has protocols with slots LL 0 LL128 0");
      refused++;
    } else {
      CHECK_EQ_INT(res, ncclSuccess);
      fine++;
    }
    /* Fewer ring channels than the model was told of. */
    if (want.nchannels > 1) {
      err_clear_last();
      CHECK_EQ_INT(enqueue_plan_make(t, &op, 8, 1, tp.slot_bytes, want.nchannels - 1, 0, &p),
                   ncclInternalError);
      CHECK_CONTAINS(err_last(), "channels");
    }
  }
  CHECK_MSG(refused > 0 && fine > 0, "refused %d, fine %d: the sizes should cover both", refused,
            fine);
  tune_destroy(t);
}

/* The tree (AllReduce, every protocol) where tree channels were made, forced (run alone, with
 * NCCL_ALGO=allreduce:tree: meson's enqueue-plan-tree): every size gets a tree plan the kernels
 * take (LL for the smallest, Simple for the largest), its key apart from the ring's; a model that
 * chose the tree where none was connected is refused. */
static void case_tree(void) {
  const char* algo = getenv("NCCL_ALGO");
  CHECK_MSG(algo != NULL && strcmp(algo, "allreduce:tree") == 0,
            "the tree case runs with NCCL_ALGO=allreduce:tree, not %s", algo ? algo : "(unset)");
  tune_topo_t tp = topo_make(16, 4, TUNE_LINK_NVLINK, 8, 1);
  tp.algo_mask |= 1u << NCCL_ALGO_TREE;
  tp.tree_nchannels = 4;
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&tp, 0x7ee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  uint32_t protos = 0;
  for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 8) {
    enq_op_t op = {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                   .count = bytes / 4 ? bytes / 4 : 1};
    enq_plan_t p;
    CHECK_EQ_INT(enqueue_plan_make(t, &op, 16, 1, tp.slot_bytes, 8, 4, &p), ncclSuccess);
    CHECK_MSG(p.algo == NCCL_ALGO_TREE && p.proto >= 0 && p.proto < NCCL_NUM_PROTOCOLS &&
                  p.nchannels >= 1 && p.nchannels <= 4,
              "%llu bytes: algorithm %d protocol %d on %d channels", (unsigned long long)bytes,
              p.algo, p.proto, p.nchannels);
    protos |= 1u << p.proto;
    const enq_batch_key_t k = enqueue_plan_batch_key(&op, &p);
    CHECK_TRUE(k.tree == 1 && k.proto == p.proto);
    err_clear_last();
    CHECK_EQ_INT(enqueue_plan_make(t, &op, 16, 1, tp.slot_bytes, 8, 0, &p), ncclInternalError);
    CHECK_CONTAINS(err_last(), "the model chose the tree");
  }
  CHECK_MSG((protos & (1u << NCCL_PROTO_LL | 1u << NCCL_PROTO_SIMPLE)) ==
                (1u << NCCL_PROTO_LL | 1u << NCCL_PROTO_SIMPLE),
            "protocols the forced tree got over 8 B..1 GiB: mask %#x, want LL and Simple among "
            "them", protos);
  /* Broadcast keeps the ring: its key is not the tree's. */
  enq_op_t bc = {.kind = ENQ_BROADCAST, .type = ncclFloat32, .count = 1024};
  enq_plan_t p;
  CHECK_EQ_INT(enqueue_plan_make(t, &bc, 16, 1, tp.slot_bytes, 8, 4, &p), ncclSuccess);
  CHECK_TRUE(p.algo == NCCL_ALGO_RING && enqueue_plan_batch_key(&bc, &p).tree == 0);
  tune_destroy(t);
}

/* The batches (enqueue_plan_batch_end) of keys[0..n): their sizes into sizes_p, their number
 * returned; each must start where the previous ended and hold at least one. */
static int cut(const enq_batch_key_t* keys, int n, int max, int* sizes_p) {
  int nb = 0;
  for (int lo = 0; lo < n;) {
    const int hi = enqueue_plan_batch_end(keys, n, lo, max);
    CHECK_MSG(hi > lo && hi <= n && hi - lo <= max, "batch at %d ends at %d (n %d, max %d)", lo,
              hi, n, max);
    if (hi <= lo) break;
    sizes_p[nb++] = hi - lo;
    lo = hi;
  }
  return nb;
}

/* Launch batches (kernels.h: kern_coll_batch_t): consecutive collectives with one
 * kernel share a launch, at most max of them; anything else that differs cuts the batch; call
 * order is kept (a batch is a run of the list). */
static void case_batches(void) {
  CHECK_EQ_INT(enqueue_plan_batch_max(), KERN_COLL_BATCH_MAX); /* CHOIR_AGG_MAX unset */
  enum { N = 90 };
  enq_batch_key_t keys[N];
  int sizes[N];
  const enq_batch_key_t k0 = {.proto = KERN_PROTO_LL, .op = KERN_OP_SUM, .type = ncclFloat32};
  for (int i = 0; i < N; i++) keys[i] = k0;
  /* N alike: ceil(N / max) launches, all full but the last. */
  const int maxes[] = {1, 2, 7, 40, 64, 90, 200};
  for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
    const int max = maxes[m];
    const int nb = cut(keys, N, max, sizes);
    CHECK_MSG(nb == (N + max - 1) / max, "max %d: %d batches", max, nb);
    for (int b = 0; b + 1 < nb; b++) CHECK_EQ_INT(sizes[b], max);
  }
  CHECK_EQ_INT(cut(keys, 64, KERN_COLL_BATCH_MAX, sizes), 1); /* a group of 64: one launch */
  CHECK_EQ_INT(cut(keys, 65, KERN_COLL_BATCH_MAX, sizes), 2);
  /* One field that differs cuts: protocol, operator, type, reduction vs copy, the tree's kernel
   * vs the others'. (Not the stream: it is not in the key, so ranks that use streams differently
   * cut the same batches.) */
  for (int f = 1; f < 6; f++) {
    for (int i = 0; i < 6; i++) keys[i] = k0;
    enq_batch_key_t* k = &keys[3];
    switch (f) {
      case 1: k->proto = KERN_PROTO_SIMPLE; break;
      case 2: k->op = KERN_OP_MAX; break;
      case 3: k->type = ncclFloat64; break;
      case 4: k->tree = 1; break;
      default: k->op = k->type = -1; break;
    }
    CHECK_MSG(cut(keys, 6, KERN_COLL_BATCH_MAX, sizes) == 3 && sizes[0] == 3 && sizes[1] == 1 &&
                  sizes[2] == 2,
              "field %d: batches %d, %d, %d", f, sizes[0], sizes[1], sizes[2]);
  }
  /* SymTwoShot works (solo) run alone, even beside each other: 2, 1, 1, 2. */
  for (int i = 0; i < 6; i++) keys[i] = k0;
  keys[2].solo = keys[3].solo = 1;
  CHECK_MSG(cut(keys, 6, KERN_COLL_BATCH_MAX, sizes) == 4 && sizes[0] == 2 && sizes[1] == 1 &&
                sizes[2] == 1 && sizes[3] == 2,
            "solo: batches %d, %d, %d, %d", sizes[0], sizes[1], sizes[2], sizes[3]);
  /* A key equal to an earlier one but not adjacent starts a batch of its own: no reordering. */
  keys[0] = keys[2] = k0;
  keys[1] = k0;
  keys[1].type = ncclInt32;
  CHECK_EQ_INT(cut(keys, 3, KERN_COLL_BATCH_MAX, sizes), 3);

  /* The keys of operations: Broadcast and AllGather share the copy kernel whatever the type;
   * reductions by (kernel operator, type); user operators are all premulsum. */
  const enq_plan_t pl = {.algo = NCCL_ALGO_RING, .proto = KERN_PROTO_LL128, .nchannels = 2,
                         .nthreads = 256, .chunk_bytes = 4096};
  enq_op_t bc = {.kind = ENQ_BROADCAST, .type = ncclFloat32, .count = 5};
  enq_op_t ag = {.kind = ENQ_ALLGATHER, .type = ncclInt8, .count = 5};
  enq_op_t ar = {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum, .count = 5};
  enq_op_t rs = {.kind = ENQ_REDUCESCATTER, .type = ncclFloat32, .op = ncclSum, .count = 5};
  enq_op_t u1 = ar, u2 = ar;
  u1.op = (ncclRedOp_t)ncclNumOps;
  u2.op = (ncclRedOp_t)(ncclNumOps + 3);
  enq_batch_key_t kb = enqueue_plan_batch_key(&bc, &pl), kg = enqueue_plan_batch_key(&ag, &pl);
  enq_batch_key_t ka = enqueue_plan_batch_key(&ar, &pl), kr = enqueue_plan_batch_key(&rs, &pl);
  enq_batch_key_t k1 = enqueue_plan_batch_key(&u1, &pl), k2 = enqueue_plan_batch_key(&u2, &pl);
  CHECK_TRUE(kb.op == -1 && kb.type == -1 && kg.op == -1 && kg.type == -1);
  CHECK_TRUE(kb.proto == KERN_PROTO_LL128 && ka.proto == KERN_PROTO_LL128);
  CHECK_TRUE(ka.op == KERN_OP_SUM && ka.type == ncclFloat32 && kr.op == ka.op && kr.type == ka.type);
  CHECK_TRUE(k1.op == KERN_OP_PREMULSUM && k2.op == KERN_OP_PREMULSUM);
  enq_batch_key_t mix[4] = {kb, kg, ka, kr};
  CHECK_EQ_INT(cut(mix, 4, KERN_COLL_BATCH_MAX, sizes), 2);
}

/* Runs of OneShot works in a batch (enqueue_plan_spread_oneshot): spread over the CTAs of their
 * bytes together; a single OneShot work, ring works and a run cut by other operator arguments
 * keep what they have. */
static void case_spread_oneshot(void) {
  tune_topo_t tp = topo_make(4, 1, TUNE_LINK_NVLINK, 32, 1);
  tp.algo_mask |= TUNE_ALGO_DIRECT_MASK;
  tp.direct_ctas = KERN_DIRECT_MAX_CTAS;
  tp.direct_slot_bytes = 64u << 10;
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&tp, 0xc0ffee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  CHECK_EQ_INT(tune_direct_ctas(t, 8), 1);
  const int most = tune_direct_ctas(t, (uint64_t)1 << 30);
  CHECK_TRUE(most >= 2 && most <= KERN_DIRECT_MAX_CTAS);
  static kern_coll_batch_t b;
  const kern_coll_work_t one = {.coll = KERN_COLL_ALLREDUCE, .op = KERN_OP_SUM,
                                .type = ncclFloat32, .count = 1024, .nchannels = 1,
                                .algo = KERN_ALGO_ONESHOT, .proto = KERN_PROTO_LL,
                                .nthreads = 512, .divisor = 4};
  /* 40 works of 4 KB, one CTA each: one run of 160 KB. */
  b.nworks = 40;
  for (int i = 0; i < 40; i++) b.works[i] = one;
  enqueue_plan_spread_oneshot(t, &b);
  const int want = tune_direct_ctas(t, 40 * 4096);
  CHECK_TRUE(want > 1);
  for (int i = 0; i < 40; i++)
    CHECK_MSG(b.works[i].nchannels == want, "work %d: %d CTAs, want %d", i,
              b.works[i].nchannels, want);
  /* A ring work between two runs, a run of one, and a scalar that differs cut the runs; a run's
   * CTAs never drop below its largest work's. */
  b.nworks = 7;
  for (int i = 0; i < 7; i++) b.works[i] = one;
  b.works[1].nchannels = most; /* run [0, 2): most already */
  b.works[2].algo = NCCL_ALGO_RING;
  b.works[2].nchannels = 3;
  b.works[3].count = 8; /* a run of one: [3, 4), since work 4's scalar differs */
  b.works[4].scalar_ptr = &b; /* run [4, 7): 3 x 4 KB */
  b.works[5].scalar_ptr = &b;
  b.works[6].scalar_ptr = &b;
  enqueue_plan_spread_oneshot(t, &b);
  const int want3 = tune_direct_ctas(t, 3 * 4096);
  const int got[7] = {b.works[0].nchannels, b.works[1].nchannels, b.works[2].nchannels,
                      b.works[3].nchannels, b.works[4].nchannels, b.works[5].nchannels,
                      b.works[6].nchannels};
  const int exp[7] = {most, most, 3, 1, want3, want3, want3};
  for (int i = 0; i < 7; i++)
    CHECK_MSG(got[i] == exp[i], "mixed batch, work %d: %d CTAs, want %d", i, got[i], exp[i]);
  /* Without direct connections: no CTAs to give. */
  tune_topo_t plain = topo_make(4, 1, TUNE_LINK_NVLINK, 32, 1);
  tune_t* t2 = NULL;
  CHECK_EQ_INT(tune_create(&plain, 0xc0ffee, 0, &t2), ncclSuccess);
  CHECK_EQ_INT(tune_direct_ctas(t2, 4096), 0);
  tune_destroy(t2);
  tune_destroy(t);
}

/* Ring plans of a group (enqueue_plan_spread_ring): each on channels of its own, from where the
 * one before ended, wrapping to 0 rather than running past the limit; plans of every channel,
 * other algorithms, the zeroed plans of non-collectives and a limit of 0 (CHOIR_RING_SPREAD=0)
 * stay at channel 0. */
static void case_spread_ring(void) {
  enq_plan_t p[20];
  const enq_plan_t ring = {.algo = NCCL_ALGO_RING, .proto = KERN_PROTO_LL, .nchannels = 1,
                           .nthreads = 64, .chunk_bytes = 4096};
  /* 20 plans of one channel over 16: channels 0..15, then 0..3 again. */
  for (int i = 0; i < 20; i++) p[i] = ring;
  enqueue_plan_spread_ring(16, p, 20);
  for (int i = 0; i < 20; i++)
    CHECK_MSG(p[i].channel0 == i % 16, "plan %d starts at channel %d, want %d", i, p[i].channel0,
              i % 16);
  /* Mixed: 3 channels at 0, a OneShot plan (stays 0, takes no channel), 5 at 3, the whole ring
   * (0), 4 at 8, 5 (12 + 5 > 16: wraps to 0), a tree plan (0), a non-collective's zeroed plan
   * (0), 2 at 5. */
  const int nch[9] = {3, 2, 5, 16, 4, 5, 1, 0, 2};
  const int algo[9] = {NCCL_ALGO_RING, KERN_ALGO_ONESHOT, NCCL_ALGO_RING, NCCL_ALGO_RING,
                       NCCL_ALGO_RING, NCCL_ALGO_RING, NCCL_ALGO_TREE, 0, NCCL_ALGO_RING};
  const int want[9] = {0, 0, 3, 0, 8, 0, 0, 0, 5};
  for (int i = 0; i < 9; i++) {
    p[i] = ring;
    p[i].nchannels = nch[i];
    p[i].algo = algo[i];
    p[i].channel0 = 0;
  }
  memset(&p[7], 0, sizeof(p[7]));
  enqueue_plan_spread_ring(16, p, 9);
  for (int i = 0; i < 9; i++) {
    CHECK_MSG(p[i].channel0 == want[i], "mixed plan %d starts at %d, want %d", i, p[i].channel0,
              want[i]);
    CHECK_TRUE(p[i].channel0 + p[i].nchannels <= 16);
  }
  /* Spreading off: every plan back at channel 0. */
  enqueue_plan_spread_ring(0, p, 9);
  for (int i = 0; i < 9; i++) CHECK_EQ_INT(p[i].channel0, 0);
}

/* A run of m alike AllReduces on topology tp takes OneShot at 8 B, 512 B and 4 KB each, and the
 * ring at 32 KB each: the winners measured with ranks sharing one H200 (case_runs). */
static void check_run_winners(const tune_topo_t* tp, int m) {
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(tp, 0xc0ffee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const uint64_t each[4] = {8, 512, 4096, 32768};
  const int want[4] = {TUNE_ALGO_ONESHOT, TUNE_ALGO_ONESHOT, TUNE_ALGO_ONESHOT, NCCL_ALGO_RING};
  for (int i = 0; i < 4; i++) {
    tune_choice_t c;
    memset(&c, 0, sizeof(c));
    CHECK_EQ_INT(tune_choose_run(t, ncclFuncAllReduce, each[i] * (uint64_t)m, m, &c), ncclSuccess);
    CHECK_MSG(c.algo == want[i], "%d ranks, %d x %llu B: the run takes algo %d, want %d",
              tp->nranks, m, (unsigned long long)each[i], c.algo, want[i]);
  }
  tune_destroy(t);
}

/* Runs of alike collectives planned together (enqueue_plan_runs): the run's choice for its bytes
 * together, every member taking it, the ring's channels shared by bytes; what cuts a run; plans
 * outside runs untouched; the same plans on every rank. */
static void case_runs(void) {
  tune_topo_t tp = topo_make(4, 1, TUNE_LINK_SAME_GPU, 16, 4);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&tp, 0xc0ffee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const cudaStream_t s1 = (cudaStream_t)(uintptr_t)0x1000, s2 = (cudaStream_t)(uintptr_t)0x2000;
  enum { N = 12 };
  enq_op_t ops[N];
  enq_plan_t plans[N];
  const enq_plan_t mark = {.algo = 99, .proto = 99, .nchannels = 99, .nthreads = 99,
                           .chunk_bytes = 99};
  /* ops 0..3: AllReduce f32 sum of 1, 2, 4 and 3 MB on s1 (a run of 10 MB); 4: a send (skipped);
   * 5: an empty AllReduce (skipped); 6: AllReduce of 1 MB (joins: 11 MB, five members); 7: 8 MB
   * (more than 4x the run's smallest: ends the run, and alone); 8, 9: 1 MB on s2, then s1 (a
   * run of two: streams do not cut runs, since ranks may use them differently); 10: max instead
   * of sum; 11: a Broadcast. */
  const size_t mb = (1u << 20) / 4;
  const size_t counts[N] = {mb, 2 * mb, 4 * mb, 3 * mb, mb, 0, mb, 8 * mb, mb, mb, mb, mb};
  for (int i = 0; i < N; i++) {
    ops[i] = (enq_op_t){.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                        .count = counts[i], .stream = s1};
    plans[i] = mark;
  }
  ops[4].kind = ENQ_SEND;
  ops[8].stream = s2;
  ops[10].op = ncclMax;
  ops[11].kind = ENQ_BROADCAST;
  CHECK_EQ_INT(enqueue_plan_runs(t, ops, plans, N, 4, KERN_COLL_BATCH_MAX, 16), ncclSuccess);
  tune_choice_t ref;
  memset(&ref, 0, sizeof(ref));
  const uint64_t total = 11u << 20;
  CHECK_EQ_INT(tune_choose_run(t, ncclFuncAllReduce, total, 5, &ref), ncclSuccess);
  CHECK_EQ_INT(ref.algo, NCCL_ALGO_RING); /* no direct connections, no tree: the ring */
  const int members[5] = {0, 1, 2, 3, 6};
  for (int j = 0; j < 5; j++) {
    const enq_plan_t* p = &plans[members[j]];
    const uint64_t nb = counts[members[j]] * 4;
    int share = (int)(((uint64_t)ref.nchannels * nb + total / 2) / total);
    if (share < 1) share = 1;
    CHECK_MSG(p->algo == NCCL_ALGO_RING && p->proto == ref.proto && p->nthreads == ref.nthreads &&
                  p->chunk_bytes == ref.chunk_bytes && p->nchannels == share,
              "run member %d: algo %d proto %d %d ch %d thr chunk %u; want ring %d, %d ch, %d "
              "thr, chunk %u", members[j], p->algo, p->proto, p->nchannels, p->nthreads,
              p->chunk_bytes, ref.proto, share, ref.nthreads, ref.chunk_bytes);
  }
  tune_choice_t two;
  memset(&two, 0, sizeof(two));
  CHECK_EQ_INT(tune_choose_run(t, ncclFuncAllReduce, 2u << 20, 2, &two), ncclSuccess);
  CHECK_TRUE(plans[8].algo == NCCL_ALGO_RING && plans[9].algo == NCCL_ALGO_RING &&
             plans[8].proto == two.proto && plans[9].nthreads == two.nthreads);
  for (int i = 4; i < N; i++) {
    if (i == 6 || i == 8 || i == 9) continue;
    CHECK_MSG(plans[i].algo == 99 && plans[i].nchannels == 99, "op %d is in no run but its plan "
              "changed (algo %d, %d channels)", i, plans[i].algo, plans[i].nchannels);
  }
  /* max_run cuts: with runs of at most 2, ops 0-1 and 2-3 pair up (6 has no partner left) */
  for (int i = 0; i < N; i++) plans[i] = mark;
  CHECK_EQ_INT(enqueue_plan_runs(t, ops, plans, N, 4, 2, 16), ncclSuccess);
  CHECK_TRUE(plans[0].algo == NCCL_ALGO_RING && plans[1].algo == NCCL_ALGO_RING);
  CHECK_TRUE(plans[2].algo == NCCL_ALGO_RING && plans[3].algo == NCCL_ALGO_RING);
  CHECK_EQ_INT(plans[6].algo, 99);

  /* 64 small AllReduces with direct connections: whatever the model picks for the 256 KB
   * together, the members agree with it where it is the ring or OneShot, and on every rank. */
  tune_topo_t td = topo_make(4, 1, TUNE_LINK_SAME_GPU, 16, 4);
  td.algo_mask |= TUNE_ALGO_DIRECT_MASK;
  td.direct_ctas = KERN_DIRECT_MAX_CTAS;
  td.direct_slot_bytes = 64u << 10;
  enum { M = 64 };
  static enq_op_t small[M];
  static enq_plan_t sp[4][M];
  for (int i = 0; i < M; i++)
    small[i] = (enq_op_t){.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                          .count = 1024, .stream = s1};
  tune_choice_t gr;
  memset(&gr, 0, sizeof(gr));
  for (int r = 0; r < 4; r++) {
    tune_t* tr = NULL;
    CHECK_EQ_INT(tune_create(&td, 0xc0ffee, r, &tr), ncclSuccess);
    if (tr == NULL) continue;
    for (int i = 0; i < M; i++) sp[r][i] = mark;
    CHECK_EQ_INT(enqueue_plan_runs(tr, small, sp[r], M, 4, KERN_COLL_BATCH_MAX, 16), ncclSuccess);
    if (r == 0) CHECK_EQ_INT(tune_choose_run(tr, ncclFuncAllReduce, M * 4096, M, &gr), ncclSuccess);
    tune_destroy(tr);
  }
  for (int i = 0; i < M; i++) {
    const enq_plan_t* p = &sp[0][i];
    if (gr.algo == NCCL_ALGO_RING || gr.algo == TUNE_ALGO_ONESHOT)
      CHECK_MSG(p->algo == gr.algo && p->proto == gr.proto && p->nchannels >= 1,
                "small %d: algo %d proto %d, the run's choice %d/%d", i, p->algo, p->proto,
                gr.algo, gr.proto);
    else
      CHECK_EQ_INT(p->algo, 99);
    for (int r = 1; r < 4; r++)
      CHECK_MSG(memcmp(&sp[r][i], p, sizeof(*p)) == 0, "small %d: rank %d plans otherwise", i, r);
  }
  printf("  64 x 4 KB AllReduce, 4 ranks on one GPU: the run takes algo %d proto %d, %d channels"
         "\n", gr.algo, gr.proto, gr.nchannels);
  /* Where the runs' costs were measured (4 ranks sharing one H200, 64 all-reduces, CUDA graphs:
   * OneShot streamed 9.7, 12.3 and 32.0 us at 8 B, 512 B and 4 KB each, the ring side by side
   * 33.1, 48.9, 48.3; at 32 KB OneShot 160.6, the ring 59.3): the model picks the same. */
  check_run_winners(&td, M);
  /* The same with 2 ranks (33 channels and CTAs a rank), measured the same way with 8 direct
   * CTAs: OneShot streamed 8.3, 9.4, 16.7 and 83.1 us at 8 B, 512 B, 4 KB and 32 KB each, the
   * ring side by side 16.4, 19.2, 19.3 and 23.7. With CHOIR_DIRECT_CTAS' default of 16 the
   * model picks those winners (with 8 it took the ring at 4 KB). */
  tune_topo_t t2 = topo_make(2, 1, TUNE_LINK_SAME_GPU, 33, 2);
  t2.cta_cap = 33;
  t2.algo_mask |= TUNE_ALGO_DIRECT_MASK;
  t2.direct_ctas = 16;
  t2.direct_slot_bytes = 64u << 10;
  check_run_winners(&t2, M);
  tune_destroy(t);
}

/* SymTwoShot (enqueue_plan_sym): which AllReduces take it, and the plan it makes. Windows of 4
 * ranks at made-up addresses (nothing is dereferenced); rank 0's copy of w0 at flat 0x70000000000,
 * stride 1 x 4 GiB. */
static void case_sym(void) {
  char* const b0 = (char*)0x100000000ull;
  char* const b1 = (char*)0x200000000ull;
  char* const f0 = (char*)0x70000000000ull;
  char* const f1 = (char*)0x71000000000ull;
  const uint64_t mb = 1 << 20;
  const enq_win_t wins[] = {{.buff = b0, .size = mb, .flat0 = f0, .stride4g = 1, .nlsa = 4},
                            {.buff = b1, .size = 64 * mb, .flat0 = f1, .stride4g = 1, .nlsa = 4},
                            {.buff = (char*)0x300000000ull, .size = mb,
                             .flat0 = (char*)0x72000000000ull, .stride4g = 2, .nlsa = 4},
                            {.buff = (char*)0x400000000ull, .size = mb,
                             .flat0 = (char*)0x73000000000ull, .stride4g = 1, .nlsa = 2}};
  const int nw = 4;
  const enq_plan_t ring = {.algo = NCCL_ALGO_RING, .proto = NCCL_PROTO_SIMPLE, .nchannels = 8,
                           .nthreads = 256, .chunk_bytes = 65536, .time_us = 9.0f, .channel0 = 3};
  enq_op_t op = {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum, .count = 1024,
                 .sendbuff = b0 + 4096, .recvbuff = b1};
  enq_plan_t p = ring;
  /* Mode 0 (the default): never; the plan stays. */
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 0, &op, &p), 0);
  CHECK_TRUE(memcmp(&p, &ring, sizeof(p)) == 0);
  /* Mode 2: 4 KB on one CTA of 64 threads, each buffer's rank-0 copy, the stride. */
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &op, &p), 1);
  CHECK_EQ_INT(p.algo, KERN_ALGO_SYM);
  CHECK_EQ_INT(p.proto, NCCL_PROTO_LL);
  CHECK_EQ_INT(p.nchannels, 1);
  CHECK_EQ_INT(p.nthreads, 64);
  CHECK_EQ_INT(p.channel0, 0);
  CHECK_TRUE(p.chunk_bytes >= 16 && p.chunk_bytes % 16 == 0);
  CHECK_TRUE(p.sym_send0 == f0 + 4096 && p.sym_recv0 == f1 && p.sym_stride4g == 1);
  /* In place, in one window. */
  op.recvbuff = b0 + 4096;
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &op, &p), 1);
  CHECK_TRUE(p.sym_send0 == f0 + 4096 && p.sym_recv0 == f0 + 4096);
  /* Mode 1: not where the model chose OneShot; where it chose anything else. */
  p = ring;
  p.algo = TUNE_ALGO_ONESHOT;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 1, &op, &p), 0);
  CHECK_EQ_INT(p.algo, TUNE_ALGO_ONESHOT);
  p = ring;
  p.algo = TUNE_ALGO_TWOSHOT;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 1, &op, &p), 1);
  /* 64 MB: CTAs up to the direct ones, or the cap of ranks sharing a GPU; 512 threads. */
  op.sendbuff = op.recvbuff = b1;
  op.count = 16 * mb;
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &op, &p), 1);
  CHECK_EQ_INT(p.nchannels, 16);
  CHECK_EQ_INT(p.nthreads, KERN_NTHREADS);
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 4, 2, &op, &p), 1);
  CHECK_EQ_INT(p.nchannels, 4);
  /* AllGather: only its output (4 blocks) must lie in a window, its input anywhere; premulsum
   * means nothing to it. ReduceScatter: only its input (4 blocks). */
  enq_op_t ag = {.kind = ENQ_ALLGATHER, .type = ncclFloat32, .count = 1024,
                 .sendbuff = (char*)0x900000000ull, .recvbuff = b0 + 8192};
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &ag, &p), 1);
  CHECK_TRUE(p.algo == KERN_ALGO_SYM && p.sym_recv0 == f0 + 8192 && p.sym_send0 == NULL &&
             p.sym_stride4g == 1 && p.nchannels == 1);
  ag.op = (ncclRedOp_t)ncclNumOps;
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &ag, &p), 1);
  enq_op_t rsc = {.kind = ENQ_REDUCESCATTER, .type = ncclFloat32, .op = ncclMax, .count = 1024,
                  .sendbuff = b1 + 4096, .recvbuff = (char*)0x900000000ull};
  p = ring;
  CHECK_EQ_INT(enqueue_plan_sym(wins, nw, 4, 16, 0, 2, &rsc, &p), 1);
  CHECK_TRUE(p.algo == KERN_ALGO_SYM && p.sym_send0 == f1 + 4096 && p.sym_recv0 == NULL &&
             p.sym_stride4g == 1);
  /* Refused, the plan left as it was: */
  struct {
    const char* what;
    enq_op_t op;
    int nranks, direct_ctas;
  } no[] = {
      {"send past its window's end", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                      .count = 1024, .sendbuff = b0 + mb - 2048, .recvbuff = b1},
       4, 16},
      {"send outside any window", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                   .count = 1024, .sendbuff = b0 - 4096, .recvbuff = b1},
       4, 16},
      {"recv outside any window", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                   .count = 1024, .sendbuff = b0, .recvbuff = b1 + 64 * mb},
       4, 16},
      {"windows of different strides", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32,
                                        .op = ncclSum, .count = 1024, .sendbuff = b0,
                                        .recvbuff = (char*)0x300000000ull},
       4, 16},
      {"a window of a 2-rank team", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                     .count = 1024, .sendbuff = (char*)0x400000000ull,
                                     .recvbuff = (char*)0x400000000ull},
       4, 16},
      {"premulsum", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = (ncclRedOp_t)ncclNumOps,
                     .count = 1024, .sendbuff = b0, .recvbuff = b1},
       4, 16},
      {"Broadcast", {.kind = ENQ_BROADCAST, .type = ncclFloat32, .count = 1024, .sendbuff = b0,
                     .recvbuff = b1},
       4, 16},
      {"AllGather whose output (4 blocks) runs past its window",
       {.kind = ENQ_ALLGATHER, .type = ncclFloat32, .count = 65536, .sendbuff = b1,
        .recvbuff = b0 + 4096},
       4, 16},
      {"ReduceScatter whose input is outside any window",
       {.kind = ENQ_REDUCESCATTER, .type = ncclFloat32, .op = ncclSum, .count = 16,
        .sendbuff = b0 - 4096, .recvbuff = b1},
       4, 16},
      {"ReduceScatter premulsum", {.kind = ENQ_REDUCESCATTER, .type = ncclFloat32,
                                   .op = (ncclRedOp_t)ncclNumOps, .count = 16, .sendbuff = b0,
                                   .recvbuff = b1},
       4, 16},
      {"no direct connections", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                 .count = 1024, .sendbuff = b0, .recvbuff = b1},
       4, 0},
      {"count 0", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum, .count = 0,
                   .sendbuff = b0, .recvbuff = b1},
       4, 16},
      {"a team of other size", {.kind = ENQ_ALLREDUCE, .type = ncclFloat32, .op = ncclSum,
                                .count = 1024, .sendbuff = b0, .recvbuff = b1},
       8, 16},
  };
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
    p = ring;
    const int got = enqueue_plan_sym(wins, nw, no[i].nranks, no[i].direct_ctas, 0, 2, &no[i].op, &p);
    CHECK_MSG(got == 0 && memcmp(&p, &ring, sizeof(p)) == 0, "%s: taken (%d) or plan changed",
              no[i].what, got);
  }
}

int main(int argc, char** argv) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  static const struct {
    const char* name;
    void (*fn)(void);
  } cases[] = {{"link", case_link},
               {"ring-slots", case_ring_slots},
               {"nbytes", case_nbytes},
               {"same-everywhere", case_same_everywhere},
               {"refused", case_refused},
               {"batches", case_batches},
               {"tree", case_tree},
               {"spread-oneshot", case_spread_oneshot},
               {"spread-ring", case_spread_ring},
               {"runs", case_runs},
               {"sym", case_sym}};
  const char* only = argc > 1 ? argv[1] : NULL;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0) continue;
    /* The tree case forces NCCL_ALGO: only when asked for by name (enqueue-plan-tree). */
    if (only == NULL && strcmp(cases[i].name, "tree") == 0) continue;
    printf("case %s\n", cases[i].name);
    cases[i].fn();
  }
  return check_finish("enqueue-plan");
}
