/*
 * core/tune on the CPU: the model's choices on fixture-like topologies (4 x H200 NVLink, DGX H100,
 * a PCIe box, ranks sharing a GPU, 2 and 16 nodes) for every collective and sizes 8 B .. 1 GB;
 * NCCL_ALGO / NCCL_PROTO (forced choices, parsing, every error, nothing left);
 * tune_protocols_for_link; identical decisions from equal inputs; the INFO line.
 * Each case runs in a child process (knobs are read once per process).
 *   test-tune            every case
 *   test-tune table      print the choice per fixture, collective and size (for tuning the table)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fork_case.h"
#include "kernels.h"
#include "log_file.h"
#include "tune.h"
#include "tune_internal.h"

/* ---- Fixtures ------------------------------------------------------------------------------ */

typedef struct fixture {
  const char* name;
  tune_topo_t topo;
} fixture_t;

/* NCCL's default buffer sizes over 8 slots: LL 512 KiB, LL128 4800 KiB, Simple 4 MiB. */
static tune_topo_t topo_make(int nranks, int nnodes, tune_link_t intra, tune_link_t inter, int nch,
                             float bw_intra, float bw_inter) {
  tune_topo_t t;
  memset(&t, 0, sizeof(t));
  t.nranks = nranks;
  t.nnodes = nnodes;
  t.local_ranks = nranks / nnodes;
  t.gpu_share = intra == TUNE_LINK_SAME_GPU ? nranks : 1;
  t.link_intra = intra;
  t.link_inter = inter;
  t.ring_nchannels = nch;
  t.bw_intra = bw_intra;
  t.bw_inter = bw_inter;
  t.cuda_arch = 90;
  uint32_t mask = 0;
  if (tune_protocols_for_link(intra, &mask) != ncclSuccess) mask = 1u << NCCL_PROTO_SIMPLE;
  if (nnodes > 1) {
    uint32_t m2 = 0;
    if (tune_protocols_for_link(inter, &m2) == ncclSuccess) mask &= m2;
  }
  t.proto_mask = mask;
  t.slot_bytes[NCCL_PROTO_LL] = mask & (1u << NCCL_PROTO_LL) ? 524288 / KERN_NSLOTS : 0;
  t.slot_bytes[NCCL_PROTO_LL128] = mask & (1u << NCCL_PROTO_LL128) ? 4915200 / KERN_NSLOTS : 0;
  t.slot_bytes[NCCL_PROTO_SIMPLE] = 4194304 / KERN_NSLOTS;
  t.algo_mask = 1u << NCCL_ALGO_RING;
  return t;
}

/* The ring channels of each of n ranks sharing one H200 (132 multiprocessors): comm_init's CTA
 * cap, 132 / (2 n), at most 64. */
static int same_gpu_channels(int n) { return 132 / (2 * n) > 64 ? 64 : 132 / (2 * n); }

#define NFIX 7
static void fixtures(fixture_t f[NFIX]) {
  /* Channel counts and per-channel bandwidths of the graph search's order on such machines. */
  /* As Choir runs on 4 and on 2 x H200: 64 ring channels; the graph's 24 channels of 15 GB/s
   * (test-graph on test/data/topo/h200x4-choir-dump.xml and h200x2-choir-dump.xml). */
  f[0] = (fixture_t){"h200x4-nvlink",
                     topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 64, 15.0f, 0)};
  f[0].topo.bw_total_intra = 24 * 15.0f;
  f[6] = (fixture_t){"h200x2-nvlink",
                     topo_make(2, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 64, 15.0f, 0)};
  f[6].topo.bw_total_intra = 24 * 15.0f;

  f[1] = (fixture_t){"dgx-h100", topo_make(8, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.6f, 0)};
  f[2] = (fixture_t){"pcie-4gpu", topo_make(4, 1, TUNE_LINK_PCIE, TUNE_LINK_PCIE, 4, 12.0f, 0)};
  f[3] =
      (fixture_t){"same-gpu-4", topo_make(4, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, 8, 0, 0)};
  f[4] =
      (fixture_t){"2-nodes", topo_make(16, 2, TUNE_LINK_NVLINK, TUNE_LINK_NET, 16, 20.6f, 12.5f)};
  f[5] = (fixture_t){"16-nodes",
                     topo_make(128, 16, TUNE_LINK_NVLINK, TUNE_LINK_NET, 16, 20.6f, 12.5f)};
}

static void env_quiet(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  setenv("NCCL_TUNER_PLUGIN", "none", 1);
}

#define NSIZES 28 /* 8 B .. 1 GiB by powers of two */
static uint64_t size_at(int i) { return (uint64_t)8 << i; }

static const ncclFunc_t colls[TUNE_NUM_COLLS] = {
    ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter, ncclFuncAllReduce};

/* Every invariant of one choice. */
static void check_choice(const char* fx, const tune_topo_t* topo, ncclFunc_t coll, uint64_t n,
                         const tune_choice_t* c) {
  CHECK_MSG(c->algo == NCCL_ALGO_RING, "%s %s %llu: algo %d", fx, tune_coll_name(coll),
            (unsigned long long)n, c->algo);
  CHECK_MSG(c->proto >= 0 && c->proto < NCCL_NUM_PROTOCOLS && (topo->proto_mask & (1u << c->proto)),
            "%s %s %llu: proto %d outside mask 0x%x", fx, tune_coll_name(coll),
            (unsigned long long)n, c->proto, topo->proto_mask);
  CHECK_MSG(c->nchannels >= 1 && c->nchannels <= topo->ring_nchannels,
            "%s %s %llu: %d channels of %d", fx, tune_coll_name(coll), (unsigned long long)n,
            c->nchannels, topo->ring_nchannels);
  CHECK_MSG(c->nthreads >= 64 && c->nthreads <= KERN_NTHREADS && c->nthreads % 32 == 0,
            "%s %s %llu: %d threads", fx, tune_coll_name(coll), (unsigned long long)n, c->nthreads);
  uint32_t cap = kern_proto_step_capacity(c->proto, topo->slot_bytes[c->proto]);
  CHECK_MSG(c->chunk_bytes >= 16 && c->chunk_bytes % 16 == 0 && c->chunk_bytes <= cap,
            "%s %s %llu: chunk %u (capacity %u)", fx, tune_coll_name(coll), (unsigned long long)n,
            c->chunk_bytes, cap);
  CHECK_MSG(c->time_us > 0 && isfinite(c->time_us), "%s %s %llu: time %f", fx, tune_coll_name(coll),
            (unsigned long long)n, (double)c->time_us);
}

/* ---- The model's shape on every fixture ---------------------------------------------------- */

/* A protocol's place in the order the model moves through as the size grows (-1: none yet). */
static int proto_rank(const tune_topo_t* topo, int proto) {
  if (proto < 0 || topo->link_intra != TUNE_LINK_SAME_GPU) return proto;
  return proto == NCCL_PROTO_LL128 ? 0 : proto == NCCL_PROTO_LL ? 1 : 2;
}

/* The model of fixture fx (comm hash 0x1234, rank 0); NULL after a failed check. */
static tune_t* fixture_tune(const fixture_t* fx) {
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&fx->topo, 0x1234, 0, &t), ncclSuccess);
  return t;
}

static void case_model_shape(void) {
  env_quiet();
  fixture_t fx[NFIX];
  fixtures(fx);
  for (int f = 0; f < NFIX; f++) {
    tune_t* t = fixture_tune(&fx[f]);
    if (t == NULL) continue;
    for (int k = 0; k < TUNE_NUM_COLLS; k++) {
      int last_proto = -1;
      float last_time = 0;
      int seen = 0;
      for (int i = 0; i < NSIZES; i++) {
        uint64_t n = size_at(i);
        tune_choice_t c;
        CHECK_EQ_INT(tune_choose(t, colls[k], n, 1, &c), ncclSuccess);
        check_choice(fx[f].name, &fx[f].topo, colls[k], n, &c);
        /* LL -> LL128 -> Simple as the size grows (the ids are in that order), never back; on
         * one GPU LL128 -> LL -> Simple (tune_model.c: LL128 is faster there only for small
         * steps). */
        CHECK_MSG(proto_rank(&fx[f].topo, c.proto) >= proto_rank(&fx[f].topo, last_proto),
                  "%s %s %llu: %s after %s", fx[f].name,
                  tune_coll_name(colls[k]), (unsigned long long)n, tune_proto_name(c.proto),
                  tune_proto_name(last_proto));
        CHECK_MSG(c.time_us >= last_time, "%s %s %llu: time %.3f < %.3f at the size before",
                  fx[f].name, tune_coll_name(colls[k]), (unsigned long long)n, (double)c.time_us,
                  (double)last_time);
        /* The estimate without the tuner is the choice's time (no tuner here). */
        CHECK_MSG(fabsf(tune_estimate_us(t, colls[k], n) - c.time_us) <= 1e-3f * c.time_us,
                  "%s %s %llu: estimate %f, choice %f", fx[f].name, tune_coll_name(colls[k]),
                  (unsigned long long)n, (double)tune_estimate_us(t, colls[k], n),
                  (double)c.time_us);
        seen |= 1 << c.proto;
        last_proto = c.proto;
        last_time = c.time_us;
      }
      /* The ends: LL for 8 bytes, Simple for 1 GiB, on every fixture. */
      tune_choice_t small, big;
      CHECK_EQ_INT(tune_choose(t, colls[k], 8, 1, &small), ncclSuccess);
      CHECK_EQ_INT(tune_choose(t, colls[k], (uint64_t)1 << 30, 1, &big), ncclSuccess);
      /* Ranks sharing a GPU: LL128 costs what LL does per step there (measured), and moves more. */
      CHECK_MSG(small.proto == NCCL_PROTO_LL || (fx[f].topo.link_intra == TUNE_LINK_SAME_GPU &&
                                                 small.proto == NCCL_PROTO_LL128),
                "%s %s 8 B: %s", fx[f].name, tune_coll_name(colls[k]),
                tune_proto_name(small.proto));
      CHECK_MSG(big.proto == NCCL_PROTO_SIMPLE, "%s %s 1 GiB: %s", fx[f].name,
                tune_coll_name(colls[k]), tune_proto_name(big.proto));
      /* Fewer channels and threads for 8 bytes than the ring has; all of them for 1 GiB. */
      CHECK_MSG(small.nchannels == 1 && small.nthreads == 64, "%s %s 8 B: %d ch %d threads",
                fx[f].name, tune_coll_name(colls[k]), small.nchannels, small.nthreads);
      CHECK_MSG(big.nchannels == fx[f].topo.ring_nchannels && big.nthreads == KERN_NTHREADS,
                "%s %s 1 GiB: %d ch %d threads", fx[f].name, tune_coll_name(colls[k]),
                big.nchannels, big.nthreads);
      /* 1 GiB: the ring collectives take the full Simple step; Broadcast and Reduce an eighth of
       * each channel's part, at most the full step (two ranks: the full step). */
      uint64_t part = ((uint64_t)1 << 30) / (uint64_t)fx[f].topo.ring_nchannels;
      uint32_t full = fx[f].topo.slot_bytes[NCCL_PROTO_SIMPLE];
      CHECK_EQ_INT(big.chunk_bytes, colls[k] >= ncclFuncAllGather || part / 8 >= full ||
                                            fx[f].topo.nranks <= 2
                                        ? full
                                        : part / 8);
      /* Where LL128 is made over NVLink, AllReduce uses it for some middle sizes (ranks sharing
       * a GPU: see case_same_gpu). */
      if (colls[k] == ncclFuncAllReduce && fx[f].topo.link_intra == TUNE_LINK_NVLINK &&
          (fx[f].topo.proto_mask & (1u << NCCL_PROTO_LL128)))
        CHECK_MSG(seen & (1 << NCCL_PROTO_LL128), "%s AllReduce: LL128 never chosen", fx[f].name);
    }
    /* Time grows with the ring: an AllReduce of 1 MiB costs more on 16 nodes than on 2. */
    tune_destroy(t);
  }
  tune_t *t2 = NULL, *t16 = NULL;
  CHECK_EQ_INT(tune_create(&fx[4].topo, 1, 0, &t2), ncclSuccess);
  CHECK_EQ_INT(tune_create(&fx[5].topo, 1, 0, &t16), ncclSuccess);
  if (t2 != NULL && t16 != NULL)
    CHECK_TRUE(tune_estimate_us(t16, ncclFuncAllReduce, 1 << 20) >
               tune_estimate_us(t2, ncclFuncAllReduce, 1 << 20));
  tune_destroy(t2);
  tune_destroy(t16);
}

/* Ranks sharing one GPU, as measured on one H200 (the same-GPU row of tune_model.c): with 2 and
 * 4 ranks LL from 8 B to 1 MiB and Simple from 2 MiB (LL128 never: within 4% of LL at best);
 * with 8, every rank beyond two adds LL's larger share to each of 14 steps: LL128 for 8 B. */
static void case_same_gpu(void) {
  env_quiet();
  for (int n = 2; n <= 8; n *= 2) {
    tune_topo_t topo =
        topo_make(n, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(n), 0, 0);
    tune_t* t = NULL;
    CHECK_EQ_INT(tune_create(&topo, 0x1234, 0, &t), ncclSuccess);
    if (t == NULL) continue;
    for (uint64_t s = 8; s <= ((uint64_t)4 << 20); s *= 2) {
      tune_choice_t c;
      CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, s, 1, &c), ncclSuccess);
      int want = s <= ((uint64_t)1 << 20) ? NCCL_PROTO_LL : NCCL_PROTO_SIMPLE;
      if (n == 8 && s == 8) want = NCCL_PROTO_LL128;
      if (n == 8 && s > 8) continue; /* not measured: only the 8-byte end is asserted */
      CHECK_MSG(c.proto == want, "%d ranks on one GPU, AllReduce %llu B: %s, expected %s", n,
                (unsigned long long)s, tune_proto_name(c.proto), tune_proto_name(want));
    }
    tune_destroy(t);
  }
}

/* tune_create on topo refuses with ncclInvalidUsage and a message containing want. */
static void check_create_refused(const tune_topo_t* topo, const char* want) {
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(topo, 1, 0, &t), ncclInvalidUsage);
  CHECK_CONTAINS(err_last(), want);
  tune_destroy(t);
}

/* OneShot (Choir's own AllReduce over the direct connections): where it is made, the model picks
 * it for small AllReduces only, never for another collective; its choice has its own CTAs,
 * threads and step; NCCL_ALGO forces or excludes it; without the direct connections it is never
 * chosen and naming it alone fails loudly. */
static tune_topo_t topo_direct(tune_topo_t t) {
  t.algo_mask |= TUNE_ALGO_DIRECT_MASK;
  t.direct_ctas = 8;
  t.direct_slot_bytes = 65536;
  return t;
}

static void case_oneshot(void) {
  env_quiet();
  const tune_topo_t tops[2] = {
      topo_direct(
          topo_make(4, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(4), 0, 0)),
      topo_direct(topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.6f, 0))};
  const uint32_t cap = kern_proto_step_capacity(KERN_PROTO_LL, 65536);
  for (int f = 0; f < 2; f++) {
    tune_t* t = NULL;
    CHECK_EQ_INT(tune_create(&tops[f], 1, 0, &t), ncclSuccess);
    if (t == NULL) continue;
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 8, 1, &c), ncclSuccess);
    CHECK_MSG(c.algo == TUNE_ALGO_ONESHOT && c.proto == NCCL_PROTO_LL, "fixture %d 8 B: %s/%s", f,
              tune_algo_name(c.algo), tune_proto_name(c.proto));
    CHECK_TRUE(c.nchannels == 1 && c.nthreads == 64 && c.chunk_bytes == cap);
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 64 << 20, 1, &c), ncclSuccess);
    CHECK_MSG(c.algo == NCCL_ALGO_RING, "fixture %d 64 MiB: %s", f, tune_algo_name(c.algo));
    /* As the size grows: OneShot, then TwoShot (half the steps' latency, less data), then the
     * ring; never back. */
    int order = 0, seen2 = 0;
    for (uint64_t s = 8; s <= ((uint64_t)1 << 30); s *= 2) {
      CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, s, 1, &c), ncclSuccess);
      const int at = c.algo == TUNE_ALGO_ONESHOT ? 0 : c.algo == TUNE_ALGO_TWOSHOT ? 1 : 2;
      CHECK_MSG(at >= order, "fixture %d %llu B: %s after a later algorithm", f,
                (unsigned long long)s, tune_algo_name(c.algo));
      order = at;
      seen2 |= at == 1;
    }
    CHECK_MSG(seen2, "fixture %d: TwoShot never chosen", f);
    for (uint64_t s = 8; s <= ((uint64_t)1 << 30); s *= 8) {
      CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, s, 1, &c), ncclSuccess);
      if (TUNE_ALGO_DIRECT_MASK & (1u << c.algo))
        CHECK_MSG(c.nchannels >= 1 && c.nchannels <= 8 && c.nthreads % 32 == 0 &&
                      c.nthreads >= 64 && c.nthreads <= KERN_NTHREADS && c.chunk_bytes == cap,
                  "fixture %d %llu B: %d CTAs %d threads chunk %u", f, (unsigned long long)s,
                  c.nchannels, c.nthreads, c.chunk_bytes);
      for (int k = 0; k < TUNE_NUM_COLLS; k++) {
        if (k == ncclFuncAllReduce) continue;
        CHECK_EQ_INT(tune_choose(t, (ncclFunc_t)k, s, 1, &c), ncclSuccess);
        /* AllGather and ReduceScatter may take OneShot (never TwoShot); the others the ring. */
        const bool ag_rs = k == ncclFuncAllGather || k == ncclFuncReduceScatter;
        CHECK_MSG(c.algo == NCCL_ALGO_RING || (ag_rs && c.algo == TUNE_ALGO_ONESHOT),
                  "fixture %d %s %llu B: %s", f, tune_coll_name(k), (unsigned long long)s,
                  tune_algo_name(c.algo));
        if (c.algo == TUNE_ALGO_ONESHOT) {
          /* CTAs and threads from one rank's block (nbytes counts all of them). */
          int nctas, nthreads;
          tune_model_direct_ctas(&tops[f], s / 4, &nctas, &nthreads);
          CHECK_MSG(c.nchannels == nctas && c.nthreads == nthreads && c.chunk_bytes == cap,
                    "fixture %d %s %llu B: %d CTAs %d threads chunk %u, want %d, %d, %u", f,
                    tune_coll_name(k), (unsigned long long)s, c.nchannels, c.nthreads,
                    c.chunk_bytes, nctas, nthreads, cap);
        }
      }
    }
    /* AllGather and ReduceScatter: OneShot when small, the ring when large, never back. */
    for (int k = ncclFuncAllGather; k <= ncclFuncReduceScatter; k++) {
      CHECK_EQ_INT(tune_choose(t, (ncclFunc_t)k, 32, 1, &c), ncclSuccess);
      CHECK_MSG(c.algo == TUNE_ALGO_ONESHOT, "fixture %d %s 32 B: %s", f, tune_coll_name(k),
                tune_algo_name(c.algo));
      CHECK_EQ_INT(tune_choose(t, (ncclFunc_t)k, 256 << 20, 1, &c), ncclSuccess);
      CHECK_MSG(c.algo == NCCL_ALGO_RING, "fixture %d %s 256 MiB: %s", f, tune_coll_name(k),
                tune_algo_name(c.algo));
      int ring_seen = 0;
      for (uint64_t s = 32; s <= ((uint64_t)1 << 30); s *= 2) {
        CHECK_EQ_INT(tune_choose(t, (ncclFunc_t)k, s, 1, &c), ncclSuccess);
        CHECK_MSG(!(ring_seen && c.algo != NCCL_ALGO_RING), "fixture %d %s %llu B: %s after the ring",
                  f, tune_coll_name(k), (unsigned long long)s, tune_algo_name(c.algo));
        ring_seen |= c.algo == NCCL_ALGO_RING;
      }
    }
    tune_destroy(t);
  }
}

/* The same-GPU row's direct constants, fitted to OneShot and TwoShot on one H200 (tune_model.c):
 * with 2 and 4 ranks sharing the GPU, OneShot at 8 B..32 KB (1.2-2.2x the ring with LL there),
 * TwoShot at 128 KB with 4 ranks (8.7 us against OneShot's 10.8 and the ring's 11.8), the ring
 * from 512 KB (2.5x faster than either). */
static void case_same_gpu_direct(void) {
  env_quiet();
  for (int n = 2; n <= 4; n += 2) {
    const tune_topo_t topo = topo_direct(
        topo_make(n, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(n), 0, 0));
    tune_t* t = NULL;
    CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
    if (t == NULL) continue;
    const struct {
      uint64_t bytes;
      int algo;
    } want[] = {{8, TUNE_ALGO_ONESHOT},
                {2048, TUNE_ALGO_ONESHOT},
                {8192, TUNE_ALGO_ONESHOT},
                {32768, TUNE_ALGO_ONESHOT},
                {131072, n == 4 ? TUNE_ALGO_TWOSHOT : NCCL_ALGO_RING},
                {524288, NCCL_ALGO_RING}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
      tune_choice_t c;
      CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, want[i].bytes, 1, &c), ncclSuccess);
      CHECK_MSG(c.algo == want[i].algo, "%d ranks on one GPU, AllReduce %llu B: %s, expected %s", n,
                (unsigned long long)want[i].bytes, tune_algo_name(c.algo),
                tune_algo_name(want[i].algo));
    }
    tune_destroy(t);
  }
}

static const tune_topo_t* oneshot_topo(void) {
  static tune_topo_t t;
  t = topo_direct(
      topo_make(4, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(4), 0, 0));
  return &t;
}

/* Forced for AllReduce (64 MiB: several steps per CTA); the other collectives keep the ring. */
static void case_oneshot_forced(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:oneshot", 1);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(oneshot_topo(), 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 64 << 20, 1, &c), ncclSuccess);
  CHECK_TRUE(c.algo == TUNE_ALGO_ONESHOT && c.nchannels == 8 && c.nthreads == KERN_NTHREADS);
  CHECK_EQ_INT(tune_choose(t, ncclFuncBroadcast, 8, 1, &c), ncclSuccess);
  CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  tune_destroy(t);
}

/* Forced for AllGather and ReduceScatter (64 MiB over 4 ranks: a 16 MiB block, all 8 CTAs). */
static void case_oneshot_forced_ag_rs(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allgather:oneshot;reducescatter:oneshot", 1);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(oneshot_topo(), 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  for (int k = ncclFuncAllGather; k <= ncclFuncReduceScatter; k++) {
    CHECK_EQ_INT(tune_choose(t, (ncclFunc_t)k, 64 << 20, 1, &c), ncclSuccess);
    CHECK_MSG(c.algo == TUNE_ALGO_ONESHOT && c.proto == NCCL_PROTO_LL && c.nchannels == 8 &&
                  c.nthreads == KERN_NTHREADS,
              "%s: %s/%s %d CTAs %d threads", tune_coll_name(k), tune_algo_name(c.algo),
              tune_proto_name(c.proto), c.nchannels, c.nthreads);
  }
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 64 << 20, 1, &c), ncclSuccess);
  CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  tune_destroy(t);
}

/* TwoShot is AllReduce's only: named alone for AllGather, it leaves AllGather nothing. */
static void case_twoshot_allgather(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allgather:twoshot", 1);
  check_create_refused(oneshot_topo(), "leaves AllGather no algorithm to run");
}

static void case_twoshot_forced(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:twoshot", 1);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(oneshot_topo(), 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const uint32_t cap = kern_proto_step_capacity(KERN_PROTO_LL, 65536);
  for (uint64_t s = 8; s <= ((uint64_t)64 << 20); s *= 16) {
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, s, 1, &c), ncclSuccess);
    CHECK_TRUE(c.algo == TUNE_ALGO_TWOSHOT && c.proto == NCCL_PROTO_LL && c.chunk_bytes == cap);
  }
  tune_destroy(t);
}

static void case_oneshot_excluded(void) {
  env_quiet();
  setenv("NCCL_ALGO", "^oneshot,twoshot", 1);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(oneshot_topo(), 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 8, 1, &c), ncclSuccess);
  CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  tune_destroy(t);
}

/* Without the direct connections it is never chosen. */
static void case_oneshot_unmade(void) {
  env_quiet();
  tune_topo_t plain =
      topo_make(4, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(4), 0, 0);
  plain.direct_ctas = 8; /* connections without the algorithm's bit: still not usable */
  plain.direct_slot_bytes = 65536;
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&plain, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  for (uint64_t s = 8; s <= ((uint64_t)1 << 20); s *= 4) {
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, s, 1, &c), ncclSuccess);
    CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  }
  tune_destroy(t);
}

/* ---- The tree (AllReduce, every protocol) ---------------------------------------------------- */

/* n nodes of 8 H100s (NVLink inside, a 400 Gb/s NIC per GPU between), the ring over the network
 * (8 channels), and the tree channels the data path makes for several hosts. */
static tune_topo_t tree_topo(int nnodes, int tree_nch) {
  tune_topo_t t = topo_make(8 * nnodes, nnodes, TUNE_LINK_NVLINK, TUNE_LINK_NET, 8, 20.6f, 12.5f);
  if (tree_nch > 0) {
    t.algo_mask |= 1u << NCCL_ALGO_TREE;
    t.tree_nchannels = tree_nch;
  }
  return t;
}

/* When the communicator makes tree channels: several hosts unless the knobs leave AllReduce no
 * tree with a protocol; one host only when NCCL_ALGO names the tree for AllReduce. One
 * environment per case (the parameter table reads a variable once per process). */
static void tree_wanted_is(const char* algo, const char* proto, int one, int two) {
  env_quiet();
  if (algo) setenv("NCCL_ALGO", algo, 1);
  if (proto) setenv("NCCL_PROTO", proto, 1);
  CHECK_MSG(tune_tree_wanted(1) == one && tune_tree_wanted(2) == two &&
                tune_tree_wanted(16) == two,
            "NCCL_ALGO=%s NCCL_PROTO=%s: wanted on 1 host %d (expected %d), on 2 %d (%d)",
            algo ? algo : "(unset)", proto ? proto : "(unset)", tune_tree_wanted(1), one,
            tune_tree_wanted(2), two);
}
static void case_tree_wanted_default(void) { tree_wanted_is(NULL, NULL, 0, 1); }
static void case_tree_wanted_named(void) { tree_wanted_is("allreduce:tree", NULL, 1, 1); }
static void case_tree_wanted_list(void) { tree_wanted_is("Tree,Ring", NULL, 1, 1); }
static void case_tree_wanted_other(void) { tree_wanted_is("broadcast:tree", NULL, 0, 1); }
static void case_tree_wanted_excluded(void) { tree_wanted_is("^tree", NULL, 0, 0); }
static void case_tree_wanted_ring(void) { tree_wanted_is("allreduce:ring", NULL, 0, 0); }
static void case_tree_wanted_ll(void) { tree_wanted_is(NULL, "allreduce:LL,LL128", 0, 1); }
static void case_tree_wanted_ll128(void) { tree_wanted_is(NULL, "allreduce:LL128", 0, 1); }
/* Malformed: tune_create reports it, not this. */
static void case_tree_wanted_bad(void) { tree_wanted_is(NULL, "allreduce:", 0, 0); }

/* The model's choice with tree channels: at 16 nodes (128 ranks) the tree's 2 x (7 NVLink + 4
 * network) hops beat the ring's 2 x 127 for small and medium AllReduces, with LL for the small
 * ones; at 2 nodes too the tree's 2 x (7 + 1) LL hops beat the ring's 2 x 15 for small
 * AllReduces. No other collective ever gets the tree. */
static void case_tree_model(void) {
  env_quiet();
  tune_topo_t big = tree_topo(16, 8), small = tree_topo(2, 8);
  tune_t *tb = NULL, *ts = NULL;
  CHECK_EQ_INT(tune_create(&big, 1, 0, &tb), ncclSuccess);
  CHECK_EQ_INT(tune_create(&small, 1, 0, &ts), ncclSuccess);
  if (tb == NULL || ts == NULL) return;
  int tree_sizes = 0;
  for (int i = 0; i < NSIZES; i++) {
    const uint64_t n = size_at(i);
    for (int k = 0; k < TUNE_NUM_COLLS; k++) {
      tune_choice_t c;
      CHECK_EQ_INT(tune_choose(tb, colls[k], n, 1, &c), ncclSuccess);
      if (c.algo != NCCL_ALGO_TREE) check_choice("16 nodes, tree", &big, colls[k], n, &c);
      if (c.algo == NCCL_ALGO_TREE) {
        CHECK_MSG(colls[k] == ncclFuncAllReduce && c.proto >= 0 && c.proto < NCCL_NUM_PROTOCOLS &&
                      c.nchannels >= 1 && c.nchannels <= big.tree_nchannels,
                  "16 nodes: %s %llu bytes: tree with protocol %d on %d channels",
                  tune_coll_name(colls[k]), (unsigned long long)n, c.proto, c.nchannels);
        tree_sizes++;
      }
      CHECK_EQ_INT(tune_choose(ts, colls[k], n, 1, &c), ncclSuccess);
      CHECK_MSG(c.algo == NCCL_ALGO_RING || colls[k] == ncclFuncAllReduce,
                "2 nodes: %s %llu bytes: algorithm %d, not the ring",
                tune_coll_name(colls[k]), (unsigned long long)n, c.algo);
    }
  }
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(tb, ncclFuncAllReduce, 8, 1, &c), ncclSuccess);
  CHECK_MSG(c.algo == NCCL_ALGO_TREE && c.proto == NCCL_PROTO_LL,
            "16 nodes, AllReduce 8 B: algorithm %d protocol %d", c.algo, c.proto);
  CHECK_EQ_INT(tune_choose(ts, ncclFuncAllReduce, 8, 1, &c), ncclSuccess);
  CHECK_MSG(c.algo == NCCL_ALGO_TREE && c.proto == NCCL_PROTO_LL,
            "2 nodes, AllReduce 8 B: algorithm %d protocol %d", c.algo, c.proto);
  CHECK_EQ_INT(tune_choose(tb, ncclFuncAllReduce, 1 << 20, 1, &c), ncclSuccess);
  CHECK_MSG(c.algo == NCCL_ALGO_TREE, "16 nodes, AllReduce 1 MB: algorithm %d", c.algo);
  CHECK_TRUE(tree_sizes > 0);
  tune_destroy(tb);
  tune_destroy(ts);
}

/* Forced for AllReduce: the tree at every size (LL for 8 B, Simple for 1 GiB),
 * its channels within the tree's, its chunk a pipeline's (whole 16 bytes within the protocol's
 * step); the other collectives keep the ring. */
static void case_tree_forced(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  tune_topo_t topo = tree_topo(2, 4);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const uint32_t cap = kern_proto_step_capacity(KERN_PROTO_SIMPLE, topo.slot_bytes[NCCL_PROTO_SIMPLE]);
  for (int i = 0; i < NSIZES; i++) {
    const uint64_t n = size_at(i);
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, n, 1, &c), ncclSuccess);
    const uint32_t pcap =
        c.proto >= 0 && c.proto < NCCL_NUM_PROTOCOLS
            ? kern_proto_step_capacity((kern_proto_t)c.proto, topo.slot_bytes[c.proto])
            : 0;
    CHECK_MSG(c.algo == NCCL_ALGO_TREE && pcap > 0 && c.nchannels >= 1 &&
                  c.nchannels <= 4 && c.chunk_bytes >= 16 && c.chunk_bytes % 16 == 0 &&
                  c.chunk_bytes <= pcap && c.time_us > 0,
              "%llu bytes: algorithm %d protocol %d, %d channels, chunk %u, %.1f us",
              (unsigned long long)n, c.algo, c.proto, c.nchannels, c.chunk_bytes,
              (double)c.time_us);
    CHECK_EQ_INT(tune_choose(t, ncclFuncBroadcast, n, 1, &c), ncclSuccess);
    CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  }
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 8, 1, &c), ncclSuccess);
  CHECK_MSG(c.proto == NCCL_PROTO_LL, "8 B: protocol %d", c.proto);
  /* Large: Simple, many steps per channel, for the pipeline (at least 64 KiB each). */
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, (uint64_t)1 << 30, 1, &c), ncclSuccess);
  CHECK_MSG(c.proto == NCCL_PROTO_SIMPLE && c.chunk_bytes >= 65536 && c.chunk_bytes <= cap,
            "1 GiB: protocol %d chunk %u", c.proto, c.chunk_bytes);
  tune_destroy(t);
}

/* Forced onto the tree with one protocol (NCCL_PROTO=allreduce:<name>) over nnodes hosts: that
 * protocol at every size, within its step. */
static void tree_forced_proto(int nnodes, const char* name, int proto) {
  env_quiet();
  char knob[32];
  snprintf(knob, sizeof(knob), "allreduce:%s", name);
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  setenv("NCCL_PROTO", knob, 1);
  tune_topo_t topo = tree_topo(nnodes, 4);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  const uint32_t cap = kern_proto_step_capacity((kern_proto_t)proto, topo.slot_bytes[proto]);
  CHECK_TRUE(cap > 0);
  for (int i = 0; i < NSIZES; i++) {
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, size_at(i), 1, &c), ncclSuccess);
    CHECK_MSG(c.algo == NCCL_ALGO_TREE && c.proto == proto && c.chunk_bytes >= 16 &&
                  c.chunk_bytes % 16 == 0 && c.chunk_bytes <= cap,
              "%llu bytes: algorithm %d protocol %d chunk %u (%s step %u)",
              (unsigned long long)size_at(i), c.algo, c.proto, c.chunk_bytes, name, cap);
  }
  tune_destroy(t);
}
static void case_tree_ll_forced(void) { tree_forced_proto(4, "LL", NCCL_PROTO_LL); }
static void case_tree_ll128_only(void) { tree_forced_proto(2, "LL128", NCCL_PROTO_LL128); }

/* Refused: the tree named where no tree channel was made. */
static void case_tree_unmade(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  tune_topo_t none = tree_topo(2, 0);
  check_create_refused(&none, "it allows Tree for AllReduce, and Choir builds Ring only");
}
/* Excluded: never chosen, even where the model prefers it. */
static void case_tree_excluded(void) {
  env_quiet();
  setenv("NCCL_ALGO", "^tree", 1);
  tune_topo_t big = tree_topo(16, 8);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&big, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  for (int i = 0; i < NSIZES; i++) {
    tune_choice_t c;
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, size_at(i), 1, &c), ncclSuccess);
    CHECK_TRUE(c.algo == NCCL_ALGO_RING);
  }
  tune_destroy(t);
}

/* Named for every collective: the others have nothing left. */
static void case_oneshot_alone(void) {
  env_quiet();
  setenv("NCCL_ALGO", "oneshot", 1);
  check_create_refused(oneshot_topo(), "leaves Broadcast no algorithm to run");
}

/* Named for AllReduce where the direct connections were not made. */
static void case_oneshot_unavailable(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:oneshot", 1);
  tune_topo_t plain =
      topo_make(4, 1, TUNE_LINK_SAME_GPU, TUNE_LINK_SAME_GPU, same_gpu_channels(4), 0, 0);
  check_create_refused(&plain, "it allows OneShot for AllReduce, and Choir builds Ring only");
}

/* The formula on numbers worked by hand, with the NVLink row's constants (tune_model.c: base
 * LL 0.9, Simple 3.3 us; a step LL 2.0, Simple 3.6 us): 4 ranks on NVLink, 32 channels of 20
 * GB/s, Simple, AllReduce of 32 MiB: 3.3 + 6 * 3.6 us + 32 MiB * 1.5 / (640 GB/s). */
static void case_model_formula(void) {
  env_quiet();
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.0f, 0);
  tune_model_t m;
  tune_model_build(&topo, NULL, &m);
  float t = tune_model_time(&m, &topo, ncclFuncAllReduce, NCCL_PROTO_SIMPLE, 32u << 20, 32, 1);
  double want = 3.3 + 6 * 3.6 + (32.0 * 1048576) * 1.5 / (640.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "AllReduce Simple: %f, want %f", (double)t, want);
  /* AllGather: n-1 steps and (n-1)/n of the bytes. */
  t = tune_model_time(&m, &topo, ncclFuncAllGather, NCCL_PROTO_SIMPLE, 32u << 20, 32, 1);
  want = 3.3 + 3 * 3.6 + (32.0 * 1048576) * 0.75 / (640.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "AllGather Simple: %f, want %f", (double)t, want);
  /* Broadcast: n-1 steps, all the bytes once. Two pipelined ops pay the base twice. */
  t = tune_model_time(&m, &topo, ncclFuncBroadcast, NCCL_PROTO_SIMPLE, 32u << 20, 32, 2);
  want = 2 * 3.3 + 3 * 3.6 + (32.0 * 1048576) / (640.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "Broadcast Simple x2: %f, want %f", (double)t, want);
  /* LL: half of each line is data, and the per-channel LL cap (8 GB/s on NVLink) binds. */
  t = tune_model_time(&m, &topo, ncclFuncAllReduce, NCCL_PROTO_LL, 1u << 20, 32, 1);
  want = 0.9 + 6 * 2.0 + 1048576.0 * 1.5 / (141.0 * 1000); /* 32 x 8 > llMaxBw 141 */
  CHECK_MSG(fabs(t - want) < 0.01, "AllReduce LL: %f, want %f", (double)t, want);
  /* With the graph's whole bandwidth known (360 GB/s), each protocol's share of it caps the ring:
   * Simple 0.95, LL 0.46 (which then replaces llMaxBws), LL128 0.75. */
  tune_topo_t known = topo;
  known.bw_total_intra = 360.0f;
  tune_model_build(&known, NULL, &m);
  t = tune_model_time(&m, &known, ncclFuncAllReduce, NCCL_PROTO_SIMPLE, 32u << 20, 32, 1);
  want = 3.3 + 6 * 3.6 + (32.0 * 1048576) * 1.5 / (342.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "AllReduce Simple, 360 GB/s: %f, want %f", (double)t, want);
  t = tune_model_time(&m, &known, ncclFuncAllReduce, NCCL_PROTO_LL, 1u << 20, 32, 1);
  want = 0.9 + 6 * 2.0 + 1048576.0 * 1.5 / (165.6 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "AllReduce LL, 360 GB/s: %f, want %f", (double)t, want);
  t = tune_model_time(&m, &known, ncclFuncAllReduce, NCCL_PROTO_LL128, 32u << 20, 32, 1);
  want = 1.8 + 6 * 2.3 + (32.0 * 1048576) * 1.5 / (270.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "AllReduce LL128, 360 GB/s: %f, want %f", (double)t, want);
  /* Not across nodes: the graph's figure is one node's. */
  known.nnodes = 2;
  tune_model_build(&known, NULL, &m);
  CHECK_TRUE(m.bw_total[NCCL_PROTO_SIMPLE] == 0 && m.ll_max_bw > 0);
  /* Two nodes: the ring's inter-node steps pay the network's hop, the bandwidth the NIC's. */
  tune_topo_t two = topo_make(16, 2, TUNE_LINK_NVLINK, TUNE_LINK_NET, 8, 20.0f, 12.5f);
  tune_model_build(&two, NULL, &m);
  t = tune_model_time(&m, &two, ncclFuncAllReduce, NCCL_PROTO_SIMPLE, 16u << 20, 8, 1);
  want = 3.3 + 28 * 3.6 + 2 * 14.0 + (16.0 * 1048576) * 30.0 / 16 / (100.0 * 1000);
  CHECK_MSG(fabs(t - want) < 0.01, "2 nodes AllReduce Simple: %f, want %f", (double)t, want);
  /* One rank: no steps. */
  tune_topo_t one = topo_make(1, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 1, 20.0f, 0);
  tune_model_build(&one, NULL, &m);
  t = tune_model_time(&m, &one, ncclFuncAllReduce, NCCL_PROTO_SIMPLE, 0, 1, 1);
  CHECK_MSG(fabs(t - 3.3) < 0.01, "1 rank: %f", (double)t);
}

/* Channels: the CTA cap, and the small-size reduction; chunks smaller for small messages. */
static void case_channels_chunk(void) {
  env_quiet();
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.6f, 0);
  topo.cta_cap = 5;
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 9, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, (uint64_t)1 << 30, 1, &c), ncclSuccess);
  CHECK_EQ_INT(c.nchannels, 5);
  int last_nc = 0;
  uint32_t last_chunk = 0;
  int last_proto = -1;
  for (int i = 0; i < NSIZES; i++) {
    CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, size_at(i), 1, &c), ncclSuccess);
    /* Within one protocol, channels and chunk never shrink as the size grows. */
    if (c.proto == last_proto) {
      CHECK_MSG(c.nchannels >= last_nc, "%llu: %d channels after %d",
                (unsigned long long)size_at(i), c.nchannels, last_nc);
      CHECK_MSG(c.chunk_bytes >= last_chunk, "%llu: chunk %u after %u",
                (unsigned long long)size_at(i), c.chunk_bytes, last_chunk);
    }
    last_nc = c.nchannels;
    last_chunk = c.chunk_bytes;
    last_proto = c.proto;
  }
  tune_destroy(t);
  /* 64 KiB with LL on 32 channels: 4 ranks x 8 bytes per thread: 64 KiB / (32 * 4) = 512 threads
   * x 1 channel... the loop drops channels while 64 KiB < nc * 512 * 32. */
  int nc, nt;
  topo.cta_cap = 0;
  tune_model_channels(&topo, NCCL_PROTO_LL, 65536, 32, &nc, &nt);
  CHECK_EQ_INT(nc, 4);
  CHECK_EQ_INT(nt, 512);
  tune_model_channels(&topo, NCCL_PROTO_SIMPLE, 65536, 32, &nc, &nt);
  CHECK_EQ_INT(nc, 1);
  CHECK_EQ_INT(nt, 256);
  /* Chunk: a ring collective takes a whole step's capacity, whatever the size: Simple the slot,
   * LL half its slot, LL128 120 of every 128 bytes. */
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncAllReduce, NCCL_PROTO_SIMPLE, 1 << 20, 8),
               topo.slot_bytes[NCCL_PROTO_SIMPLE]);
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncAllReduce, NCCL_PROTO_LL, 1 << 20, 8), 32768);
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncAllReduce, NCCL_PROTO_LL128, 1 << 20, 8),
               kern_proto_step_capacity(NCCL_PROTO_LL128, topo.slot_bytes[NCCL_PROTO_LL128]));
  /* Capped by the protocol's capacity: LL's 64 KiB slot carries 32 KiB of data. */
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncAllReduce, NCCL_PROTO_LL, 1u << 30, 8), 32768);
  /* Broadcast: each channel's part in 8 steps (1 MiB / 8 channels / 8), no split by ranks; and
   * never below the protocol's floor (LL128: 3840 bytes). */
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncBroadcast, NCCL_PROTO_LL128, 1 << 20, 8), 16384);
  CHECK_EQ_INT(tune_model_chunk(&topo, ncclFuncBroadcast, NCCL_PROTO_LL128, 4096, 8), 3840);
  /* Two ranks: a chain of one hop, nothing to fill: a whole step's capacity, at every size. */
  tune_topo_t two = topo_make(2, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.6f, 0);
  const ncclFunc_t chains[] = {ncclFuncBroadcast, ncclFuncReduce};
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      for (uint64_t s = 8; s <= ((uint64_t)1 << 30); s <<= 5)
        CHECK_MSG(tune_model_chunk(&two, chains[k], p, s, 1) == tune_model_capacity(&two, p),
                  "2 ranks %s %s %llu B: chunk %u, capacity %u", tune_coll_name(chains[k]),
                  tune_proto_name(p), (unsigned long long)s,
                  tune_model_chunk(&two, chains[k], p, s, 1), tune_model_capacity(&two, p));
}

/* ---- Knobs --------------------------------------------------------------------------------- */

/* For each fixture, every collective and size: the forced protocol wherever the knob says.
 * Twice: with the protocols the transport would make under this knob (tune_protocols_for_link),
 * and with all three made (connections made before, or for another communicator), where only
 * the knob's filter in the model keeps the others out. */
static void forced_run(uint32_t want_mask_per_coll[TUNE_NUM_COLLS]) {
  fixture_t fx[NFIX];
  fixtures(fx);
  for (int all = 0; all < 2; all++)
    for (int f = 0; f < NFIX; f++) {
      tune_topo_t topo = fx[f].topo;
      if (all) {
        topo.proto_mask = 7;
        topo.slot_bytes[NCCL_PROTO_LL] = 524288 / KERN_NSLOTS;
        topo.slot_bytes[NCCL_PROTO_LL128] = 4915200 / KERN_NSLOTS;
      }
      tune_t* t = NULL;
      ncclResult_t res = tune_create(&topo, 7, 0, &t);
      CHECK_MSG(res == ncclSuccess, "%s: tune_create %d (%s)", fx[f].name, res, err_last());
      if (t == NULL) continue;
      for (int k = 0; k < TUNE_NUM_COLLS; k++)
        for (int i = 0; i < NSIZES; i++) {
          tune_choice_t c;
          CHECK_EQ_INT(tune_choose(t, colls[k], size_at(i), 1, &c), ncclSuccess);
          check_choice(fx[f].name, &topo, colls[k], size_at(i), &c);
          CHECK_MSG(want_mask_per_coll[k] & (1u << c.proto), "%s%s %s %llu: %s not allowed",
                    fx[f].name, all ? " (all protocols made)" : "", tune_coll_name(colls[k]),
                    (unsigned long long)size_at(i), tune_proto_name(c.proto));
        }
      tune_destroy(t);
    }
}

static void case_force_simple(void) {
  env_quiet();
  setenv("NCCL_PROTO", "sImPlE", 1);
  uint32_t m[TUNE_NUM_COLLS] = {4, 4, 4, 4, 4};
  forced_run(m);
}

static void case_force_not_ll(void) {
  env_quiet();
  setenv("NCCL_PROTO", " ^ ll ", 1);
  setenv("NCCL_ALGO", "ring", 1);
  uint32_t m[TUNE_NUM_COLLS] = {6, 6, 6, 6, 6};
  forced_run(m);
}

static void case_force_per_coll(void) {
  env_quiet();
  /* AllReduce LL everywhere, Broadcast Simple, AllGather anything but Simple; the rest free.
   * NCCL_ALGO names algorithms that are not built next to the ring: allowed. */
  setenv("NCCL_PROTO", "allreduce:ll;broadcast:simple;AllGather:^simple", 1);
  setenv("NCCL_ALGO", "allreduce:tree,ring;^nvls", 1);
  uint32_t m[TUNE_NUM_COLLS] = {4, 7, 3, 7, 1};
  forced_run(m);
}

/* The knob's mark on the INFO line: the model's own choice, and which knob changed it. */
static void case_info_line(void) {
  env_quiet();
  snprintf(log_path, sizeof(log_path), "/tmp/choir-test-tune-%d.log", (int)getpid());
  unlink(log_path);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  setenv("NCCL_PROTO", "allreduce:simple", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 32, 20.6f, 0);
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncBroadcast, 4096, 1, &c), ncclSuccess);
  char want[256];
  snprintf(want, sizeof(want),
           "TUNE: Broadcast 4096 bytes: Ring/LL %d channels %d threads chunk %u time %.1f us "
           "(tuner: -, knob: -)",
           c.nchannels, c.nthreads, c.chunk_bytes, (double)c.time_us);
  CHECK_CONTAINS(log_text(), want);
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 4096, 3, &c), ncclSuccess);
  CHECK_CONTAINS(log_text(), "TUNE: AllReduce 4096 bytes (pipelined): Ring/Simple");
  CHECK_CONTAINS(log_text(), "(tuner: -, knob: NCCL_PROTO=allreduce:simple, model: Ring/LL)");
  /* The creation line says what the model starts from. */
  CHECK_CONTAINS(log_text(),
                 "TUNE: 4 ranks on 1 node(s), ring of 32 channels at 20.6 GB/s each, "
                 "protocols LL,LL128,Simple, NCCL_ALGO (unset), NCCL_PROTO "
                 "allreduce:simple, tuner -");
  tune_destroy(t);
  unlink(log_path);
}

/* Parsing: accepted values and what they allow; every malformed value and its message. */
static void case_knob_parse(void) {
  env_quiet();
  tune_knob_t k;
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_proto, NULL, &k), ncclSuccess);
  CHECK_TRUE(!k.set && k.allow[4] == 7 && k.named[4] == 0);
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_proto, "  ", &k), ncclSuccess);
  CHECK_TRUE(!k.set && k.allow[0] == 7);
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_proto, "LL128, simple", &k), ncclSuccess);
  for (int c = 0; c < TUNE_NUM_COLLS; c++) CHECK_TRUE(k.allow[c] == 6 && k.named[c] == 6);
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_proto, "^LL128", &k), ncclSuccess);
  for (int c = 0; c < TUNE_NUM_COLLS; c++) CHECK_TRUE(k.allow[c] == 5 && k.named[c] == 0);
  /* Entries apply in order: every collective LL, then AllReduce and ReduceScatter otherwise. */
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_proto, "ll;ALLREDUCE:^ll;reducescatter : simple", &k),
               ncclSuccess);
  CHECK_TRUE(k.allow[ncclFuncBroadcast] == 1 && k.allow[ncclFuncAllGather] == 1);
  CHECK_TRUE(k.allow[ncclFuncAllReduce] == 6 && k.allow[ncclFuncReduceScatter] == 4);
  /* A collective without an algorithm to choose is accepted (NCCL's names) and changes nothing. */
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_algo, "sendrecv:ring;allgather:pat,NVLSTree", &k),
               ncclSuccess);
  CHECK_TRUE(k.allow[ncclFuncAllReduce] == TUNE_ALGO_ALL);
  CHECK_TRUE(k.allow[ncclFuncAllGather] == ((1u << NCCL_ALGO_PAT) | (1u << NCCL_ALGO_NVLS_TREE)));
  /* Choir's own: OneShot, by name, alone or excluded. */
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_algo, "allreduce:oneshot", &k), ncclSuccess);
  CHECK_TRUE(k.allow[ncclFuncAllReduce] == 1u << TUNE_ALGO_ONESHOT);
  CHECK_TRUE(k.allow[ncclFuncBroadcast] == TUNE_ALGO_ALL);
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_algo, "^OneShot", &k), ncclSuccess);
  CHECK_TRUE(k.allow[ncclFuncAllReduce] == (TUNE_ALGO_ALL & ~(1u << TUNE_ALGO_ONESHOT)));
  CHECK_EQ_INT(tune_knob_parse(&tune_knob_algo,
                               "Tree,Ring,CollnetDirect,CollnetChain,NVLS,"
                               "NVLSTree,PAT",
                               &k),
               ncclSuccess);
  CHECK_TRUE(k.allow[0] == 0x7f);

  static const struct {
    const tune_knob_kind_t* kind;
    const char* value;
    const char* msg;
  } bad[] = {
      {&tune_knob_proto, "foo", "NCCL_PROTO=\"foo\": unknown protocol 'foo'"},
      {&tune_knob_proto, "LL128x", "unknown protocol 'LL128x'"},
      {&tune_knob_algo, "ring,trees", "NCCL_ALGO=\"ring,trees\": unknown algorithm 'trees'"},
      {&tune_knob_algo, "collnet", "unknown algorithm 'collnet'"},
      {&tune_knob_proto, "ll,,simple", "empty name in the entry 'll,,simple'"},
      {&tune_knob_proto, "ll,", "empty name in the entry 'll,'"},
      {&tune_knob_proto, "^", "no name in the entry '^'"},
      {&tune_knob_proto, "allreduce:", "no name in the entry 'allreduce:'"},
      {&tune_knob_proto, "allreduce:^", "no name in the entry 'allreduce:^'"},
      {&tune_knob_proto, ":ll", "no collective before ':' in the entry ':ll'"},
      {&tune_knob_proto, "allreduc:ll", "unknown collective 'allreduc'"},
      {&tune_knob_proto, "ll;;simple",
       "NCCL_PROTO=\"ll;;simple\": an empty entry (two ';' in a "
       "row, or one at an end); expected"},
      {&tune_knob_proto, ";ll", "an empty entry"},
      {&tune_knob_proto, "ll;", "an empty entry"},
      {&tune_knob_proto, "allreduce:ll:simple", "more than one ':' in the entry"},
      {&tune_knob_proto, "ll^simple", "unknown protocol 'll^simple'"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err_clear_last();
    tune_knob_t keep;
    memset(&keep, 0xab, sizeof(keep));
    k = keep;
    CHECK_MSG(tune_knob_parse(bad[i].kind, bad[i].value, &k) == ncclInvalidUsage, "'%s' accepted",
              bad[i].value);
    CHECK_CONTAINS(err_last(), bad[i].msg);
    /* The message says what is accepted. */
    CHECK_CONTAINS(err_last(), bad[i].kind == &tune_knob_proto ? "(LL, LL128, Simple)"
                                                               : "(Tree, Ring, CollnetDirect");
    /* The output is written only on success. */
    CHECK_TRUE(memcmp(&k, &keep, sizeof(k)) == 0);
  }
}

/* A malformed knob fails tune_create and tune_protocols_for_link. */
static void case_knob_malformed_env(void) {
  env_quiet();
  setenv("NCCL_PROTO", "LL,SIMPEL", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 4, 20.6f, 0);
  topo.proto_mask = 7;
  topo.slot_bytes[0] = 65536;
  topo.slot_bytes[1] = 614400;
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclInvalidUsage);
  CHECK_TRUE(t == NULL);
  CHECK_CONTAINS(err_last(), "NCCL_PROTO=\"LL,SIMPEL\": unknown protocol 'SIMPEL'");
  uint32_t mask = 0xdead;
  CHECK_EQ_INT(tune_protocols_for_link(TUNE_LINK_NVLINK, &mask), ncclInvalidUsage);
  CHECK_EQ_INT(mask, 0xdead);
}

static void case_knob_algo_env_bad(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allreduce:ring;allgather:", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 4, 20.6f, 0);
  check_create_refused(&topo, "NCCL_ALGO=\"allreduce:ring;allgather:\": no name in the entry");
}

/* Nothing left: a knob that allows only what is not built, or protocols without buffers. */
static void case_nothing_left_algo(void) {
  env_quiet();
  setenv("NCCL_ALGO", "Tree", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 4, 20.6f, 0);
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclInvalidUsage);
  CHECK_TRUE(t == NULL);
  CHECK_CONTAINS(err_last(),
                 "NCCL_ALGO=\"Tree\" leaves Broadcast no algorithm to run: it "
                 "allows Tree for Broadcast, and Choir builds Ring only");
  CHECK_CONTAINS(err_last(), "or unset NCCL_ALGO");
}

static void case_nothing_left_algo_per_coll(void) {
  env_quiet();
  setenv("NCCL_ALGO", "allgather:^ring", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 4, 20.6f, 0);
  check_create_refused(&topo,
                       "leaves AllGather no algorithm to run: it allows Tree,"
                       "CollnetDirect,CollnetChain,NVLS,NVLSTree,PAT,OneShot for AllGather");
}

static void case_nothing_left_proto(void) {
  env_quiet();
  /* LL128 named for AllReduce: the transport would make LL128 buffers (named explicitly), but
   * this topology was connected without them (a PCIe ring that connected before the knob). */
  setenv("NCCL_PROTO", "allreduce:LL128", 1);
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_PCIE, TUNE_LINK_PCIE, 4, 12.0f, 0);
  uint32_t mask = 0;
  CHECK_EQ_INT(tune_protocols_for_link(TUNE_LINK_PCIE, &mask), ncclSuccess);
  CHECK_EQ_INT(mask, 7);
  topo.proto_mask = 5;
  topo.slot_bytes[NCCL_PROTO_LL128] = 0;
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclInvalidUsage);
  CHECK_CONTAINS(err_last(),
                 "NCCL_PROTO=\"allreduce:LL128\" leaves AllReduce no protocol to "
                 "run: it allows LL128 for AllReduce, and this communicator's "
                 "connections have buffers for LL,Simple only");
  /* A protocol in the mask whose slot holds no step counts as absent too. */
  topo.proto_mask = 7;
  topo.slot_bytes[NCCL_PROTO_LL128] = 64; /* less than one line */
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclInvalidUsage);
  CHECK_CONTAINS(err_last(), "leaves AllReduce no protocol to run");
}

/* The protocols the transport makes per link. */
static void links_case(const char* proto_env, const uint32_t want[TUNE_LINK_NUM]) {
  env_quiet();
  if (proto_env != NULL) setenv("NCCL_PROTO", proto_env, 1);
  for (int l = 0; l < TUNE_LINK_NUM; l++) {
    uint32_t mask = 0;
    CHECK_EQ_INT(tune_protocols_for_link((tune_link_t)l, &mask), ncclSuccess);
    CHECK_MSG(mask == want[l], "NCCL_PROTO=%s link %d: 0x%x, want 0x%x",
              proto_env ? proto_env : "(unset)", l, mask, want[l]);
  }
}
/* Order: NVLINK, PCIE, SHM, NET, SAME_GPU; bits LL=1, LL128=2, SIMPLE=4. */
static void case_links_default(void) {
  static const uint32_t w[] = {7, 5, 5, 5, 7};
  links_case(NULL, w);
  uint32_t mask = 0;
  err_clear_last();
  CHECK_EQ_INT(tune_protocols_for_link((tune_link_t)9, &mask), ncclInternalError);
  CHECK_CONTAINS(err_last(), "link type 9");
}
static void case_links_no_ll128(void) {
  static const uint32_t w[] = {5, 5, 5, 5, 5};
  links_case("^LL128", w);
}
static void case_links_ll128_named(void) {
  /* Named explicitly: made everywhere, the user's risk (as in NCCL); LL not made at all. */
  static const uint32_t w[] = {6, 6, 6, 6, 6};
  links_case("LL128", w);
}
static void case_links_no_ll(void) {
  static const uint32_t w[] = {6, 4, 4, 4, 6};
  links_case("^ll", w);
}
static void case_links_simple(void) {
  /* Simple is always made, even where the knob excludes it for every collective. */
  static const uint32_t w[] = {7, 5, 5, 5, 7};
  links_case("^simple", w);
}

/* tune_choose remembers its last answers: asked again (in any order, more distinct questions
 * than it keeps), each answer equals a fresh model's for the same question. */
static void case_memo(void) {
  fixture_t fx[NFIX];
  fixtures(fx);
  for (int f = 0; f < NFIX; f++) {
    tune_t* t = fixture_tune(&fx[f]);
    if (t == NULL) continue;
    uint32_t x = 12345;
    for (int q = 0; q < 400; q++) {
      x = x * 1103515245u + 12345u;
      const ncclFunc_t coll = colls[(x >> 8) % TUNE_NUM_COLLS];
      const uint64_t n = size_at((int)((x >> 16) % 6u) * 4);
      const int pipe = (x >> 28) % 3u == 2u ? 64 : 1 + (int)((x >> 28) % 3u);
      /* A run's question (tune_choose_run) and a lone operation's with the same numbers differ:
       * the memo must never answer one with the other. */
      const int run = (int)((x >> 6) % 2u);
      tune_choice_t c, ref;
      for (int rep = 0; rep <= (int)((x >> 4) % 2u); rep++) /* asked once or twice in a row */
        CHECK_EQ_INT(run ? tune_choose_run(t, coll, n, pipe, &c)
                         : tune_choose(t, coll, n, pipe, &c),
                     ncclSuccess);
      tune_t* fresh = fixture_tune(&fx[f]);
      if (fresh == NULL) break;
      CHECK_EQ_INT(run ? tune_choose_run(fresh, coll, n, pipe, &ref)
                       : tune_choose(fresh, coll, n, pipe, &ref),
                   ncclSuccess);
      tune_destroy(fresh);
      CHECK_MSG(c.algo == ref.algo && c.proto == ref.proto && c.nchannels == ref.nchannels &&
                    c.nthreads == ref.nthreads && c.chunk_bytes == ref.chunk_bytes &&
                    c.time_us == ref.time_us,
                "%s %s %llu pipe %d run %d, question %d: %d/%d %d ch %d thr chunk %u %.3f us, "
                "fresh model %d/%d %d ch %d thr chunk %u %.3f us", fx[f].name, tune_coll_name(coll),
                (unsigned long long)n, pipe, run, q, c.algo, c.proto, c.nchannels, c.nthreads,
                c.chunk_bytes, (double)c.time_us, ref.algo, ref.proto, ref.nchannels,
                ref.nthreads, ref.chunk_bytes, (double)ref.time_us);
    }
    tune_destroy(t);
  }
}

/* Equal inputs, equal decisions: two communicators' ranks built separately. */
static void case_same_on_every_rank(void) {
  env_quiet();
  fixture_t fx[NFIX];
  fixtures(fx);
  for (int f = 0; f < NFIX; f++) {
    tune_t *a = NULL, *b = NULL;
    tune_topo_t copy = fx[f].topo;
    CHECK_EQ_INT(tune_create(&fx[f].topo, 42, 0, &a), ncclSuccess);
    CHECK_EQ_INT(tune_create(&copy, 42, fx[f].topo.nranks - 1, &b), ncclSuccess);
    if (a == NULL || b == NULL) continue;
    for (int k = 0; k < TUNE_NUM_COLLS; k++)
      for (int i = 0; i < NSIZES; i++)
        for (int ops = 1; ops <= 4; ops += 3) {
          tune_choice_t ca, cb;
          memset(&ca, 0, sizeof(ca));
          memset(&cb, 0, sizeof(cb));
          CHECK_EQ_INT(tune_choose(a, colls[k], size_at(i) + (uint64_t)i * 3, ops, &ca),
                       ncclSuccess);
          CHECK_EQ_INT(tune_choose(b, colls[k], size_at(i) + (uint64_t)i * 3, ops, &cb),
                       ncclSuccess);
          CHECK_MSG(memcmp(&ca, &cb, sizeof(ca)) == 0, "%s %s %llu: ranks differ", fx[f].name,
                    tune_coll_name(colls[k]), (unsigned long long)size_at(i));
        }
    tune_destroy(a);
    tune_destroy(b);
  }
}

/* Programming errors of the caller: a topology that cannot be modelled, a non-collective. */
static void case_bad_inputs(void) {
  env_quiet();
  tune_topo_t topo = topo_make(4, 1, TUNE_LINK_NVLINK, TUNE_LINK_NVLINK, 4, 20.6f, 0);
  tune_t* t = NULL;
  tune_topo_t b = topo;
  b.ring_nchannels = 0;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&b, 1, 0, &t), ncclInternalError);
  CHECK_CONTAINS(err_last(), "ring_nchannels outside 1..KERN_MAX_CHANNELS");
  b = topo;
  b.nnodes = 5;
  CHECK_EQ_INT(tune_create(&b, 1, 0, &t), ncclInternalError);
  CHECK_CONTAINS(err_last(), "nnodes outside 1..nranks");
  b = topo;
  b.link_inter = (tune_link_t)7;
  CHECK_EQ_INT(tune_create(&b, 1, 0, &t), ncclInternalError);
  CHECK_CONTAINS(err_last(), "link type outside tune_link_t");
  b = topo;
  b.algo_mask = 1u << NCCL_ALGO_TREE;
  CHECK_EQ_INT(tune_create(&b, 1, 0, &t), ncclInternalError);
  CHECK_CONTAINS(err_last(), "algo_mask without the ring");
  b = topo;
  b.slot_bytes[NCCL_PROTO_SIMPLE] = 0;
  CHECK_EQ_INT(tune_create(&b, 1, 0, &t), ncclInternalError);
  CHECK_CONTAINS(err_last(), "no Simple buffers");
  CHECK_TRUE(t == NULL);
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  CHECK_EQ_INT(tune_choose(t, ncclFuncSend, 64, 1, &c), ncclInternalError);
  CHECK_CONTAINS(err_last(), "tune_choose: Send (6) is not a collective");
  /* Estimates for every ncclFunc_t, growing with the bytes. */
  for (int f = 0; f < ncclNumFuncs; f++) {
    float s = tune_estimate_us(t, (ncclFunc_t)f, 64),
          l = tune_estimate_us(t, (ncclFunc_t)f, 1 << 28);
    CHECK_MSG(s > 0 && l > s && isfinite(l), "%s: %f then %f", tune_coll_name(f), (double)s,
              (double)l);
  }
  tune_destroy(t);
  tune_destroy(NULL);
}

/* ---- The choice table, for people ----------------------------------------------------------- */

/* Every fixture's choices as the size grows; NVLink and same-GPU fixtures also with the direct
 * connections that such communicators make (OneShot, TwoShot: "+direct"). */
static int print_table(void) {
  env_quiet();
  fixture_t fx[NFIX];
  fixtures(fx);
  for (int f = 0; f < NFIX; f++) {
    for (int direct = 0; direct < 2; direct++) {
      tune_topo_t topo = fx[f].topo;
      if (direct) {
        if (topo.link_intra != TUNE_LINK_NVLINK && topo.link_intra != TUNE_LINK_SAME_GPU) continue;
        if (topo.nnodes > 1 || topo.nranks > KERN_DIRECT_MAX_RANKS) continue;
        topo = topo_direct(topo);
      }
      tune_t* t = NULL;
      if (tune_create(&topo, 1, 0, &t) != ncclSuccess) return 1;
      for (int k = 0; k < TUNE_NUM_COLLS; k++) {
        printf("%s%s %s:", fx[f].name, direct ? "+direct" : "", tune_coll_name(colls[k]));
        int last = -1;
        for (int i = 0; i < NSIZES; i++) {
          tune_choice_t c;
          if (tune_choose(t, colls[k], size_at(i), 1, &c) != ncclSuccess) return 1;
          const int key = c.algo * NCCL_NUM_PROTOCOLS + c.proto;
          if (key != last)
            printf(" %s%s%s from %llu B (%.1f us)",
                   c.algo == NCCL_ALGO_RING ? "" : tune_algo_name(c.algo),
                   c.algo == NCCL_ALGO_RING ? "" : "/", tune_proto_name(c.proto),
                   (unsigned long long)size_at(i), (double)c.time_us);
          last = key;
        }
        printf("\n");
      }
      tune_destroy(t);
    }
  }
  /* AllReduce with tree channels: hosts of 8 NVLink GPUs, the network between. */
  const int hosts[] = {2, 4, 16};
  for (size_t h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++) {
    tune_topo_t topo = tree_topo(hosts[h], 8);
    tune_t* t = NULL;
    if (tune_create(&topo, 1, 0, &t) != ncclSuccess) return 1;
    printf("%d hosts x 8, tree AllReduce:", hosts[h]);
    int last = -1;
    for (int i = 0; i < NSIZES; i++) {
      tune_choice_t c;
      if (tune_choose(t, ncclFuncAllReduce, size_at(i), 1, &c) != ncclSuccess) return 1;
      const int key = c.algo * NCCL_NUM_PROTOCOLS + c.proto;
      if (key != last)
        printf(" %s/%s from %llu B (%.1f us)", tune_algo_name(c.algo), tune_proto_name(c.proto),
               (unsigned long long)size_at(i), (double)c.time_us);
      last = key;
    }
    printf("\n");
    tune_destroy(t);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "table") == 0) return print_table();
  fork_case("model_shape", case_model_shape);
  fork_case("same_gpu", case_same_gpu);
  fork_case("oneshot", case_oneshot);
  fork_case("same_gpu_direct", case_same_gpu_direct);
  fork_case("oneshot_forced", case_oneshot_forced);
  fork_case("oneshot_excluded", case_oneshot_excluded);
  fork_case("twoshot_forced", case_twoshot_forced);
  fork_case("oneshot_forced_ag_rs", case_oneshot_forced_ag_rs);
  fork_case("twoshot_allgather", case_twoshot_allgather);
  fork_case("oneshot_unmade", case_oneshot_unmade);
  fork_case("oneshot_alone", case_oneshot_alone);
  fork_case("tree_wanted_default", case_tree_wanted_default);
  fork_case("tree_wanted_named", case_tree_wanted_named);
  fork_case("tree_wanted_list", case_tree_wanted_list);
  fork_case("tree_wanted_other", case_tree_wanted_other);
  fork_case("tree_wanted_excluded", case_tree_wanted_excluded);
  fork_case("tree_wanted_ring", case_tree_wanted_ring);
  fork_case("tree_wanted_ll", case_tree_wanted_ll);
  fork_case("tree_wanted_ll128", case_tree_wanted_ll128);
  fork_case("tree_wanted_bad", case_tree_wanted_bad);
  fork_case("tree_model", case_tree_model);
  fork_case("tree_forced", case_tree_forced);
  fork_case("tree_unmade", case_tree_unmade);
  fork_case("tree_ll_forced", case_tree_ll_forced);
  fork_case("tree_ll128_only", case_tree_ll128_only);
  fork_case("tree_excluded", case_tree_excluded);
  fork_case("oneshot_unavailable", case_oneshot_unavailable);
  fork_case("model_formula", case_model_formula);
  fork_case("channels_chunk", case_channels_chunk);
  fork_case("force_simple", case_force_simple);
  fork_case("force_not_ll", case_force_not_ll);
  fork_case("force_per_coll", case_force_per_coll);
  fork_case("info_line", case_info_line);
  fork_case("knob_parse", case_knob_parse);
  fork_case("knob_malformed_env", case_knob_malformed_env);
  fork_case("knob_algo_env_bad", case_knob_algo_env_bad);
  fork_case("nothing_left_algo", case_nothing_left_algo);
  fork_case("nothing_left_algo_per_coll", case_nothing_left_algo_per_coll);
  fork_case("nothing_left_proto", case_nothing_left_proto);
  fork_case("links_default", case_links_default);
  fork_case("links_no_ll128", case_links_no_ll128);
  fork_case("links_ll128_named", case_links_ll128_named);
  fork_case("links_no_ll", case_links_no_ll);
  fork_case("links_simple", case_links_simple);
  fork_case("same_on_every_rank", case_same_on_every_rank);
  fork_case("memo", case_memo);
  fork_case("bad_inputs", case_bad_inputs);
  return check_finish("test-tune");
}
