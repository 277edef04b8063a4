/*
 * tune_t: the model, the knobs and the tuner of one communicator, and the choice per operation.
 *
 * A choice: the cost table (the model's time for every usable (algorithm, protocol), -1.0 for the
 * rest: algorithms not built, protocols without buffers, entries the knobs exclude), handed to
 * the tuner, then the cheapest entry (the first one in (algorithm, protocol) order on a tie, so
 * every rank picks the same); channels and threads from the size (at most the tuner's count),
 * the chunk from the size (then the tuner's getChunkSize, clamped to the protocol's capacity).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "tune_internal.h"

/* Choices tune_choose remembers (see there). */
#define TUNE_MEMO 8

struct tune {
  tune_topo_t topo;
  uint64_t comm_hash;
  int rank;
  tune_knob_t algo, proto;
  uint32_t algo_usable;  /* built, and in topo.algo_mask */
  uint32_t proto_usable; /* in topo.proto_mask, with a slot that holds a step */
  tune_model_t model;
  tune_tuner_t* tuner;
  /* The last few choices (tune_choose's memo), newest at memo_next - 1 (mod TUNE_MEMO). */
  struct {
    ncclFunc_t coll;
    int num_pipe_ops;
    int run; /* tune_choose_run's question (1) or tune_choose's (0) */
    uint64_t nbytes;
    tune_choice_t c;
  } memo[TUNE_MEMO];
  int memo_n, memo_next;
};

/* NCCL's rows (what a tuner sees), then Choir's own algorithms' (tune.h). */
typedef float tune_table_t[TUNE_NUM_ALGOS][NCCL_NUM_PROTOCOLS];

static ncclResult_t tune_topo_check(const tune_topo_t* topo) {
  const char* bad = NULL;
  if (topo->nranks < 1)
    bad = "nranks < 1";
  else if (topo->nnodes < 1 || topo->nnodes > topo->nranks)
    bad = "nnodes outside 1..nranks";
  else if ((int)topo->link_intra < 0 || topo->link_intra >= TUNE_LINK_NUM ||
           (int)topo->link_inter < 0 || topo->link_inter >= TUNE_LINK_NUM)
    bad = "link type outside tune_link_t";
  else if (topo->ring_nchannels < 1 || topo->ring_nchannels > KERN_MAX_CHANNELS)
    bad = "ring_nchannels outside 1..KERN_MAX_CHANNELS";
  else if (!(topo->algo_mask & (1u << NCCL_ALGO_RING)))
    bad = "algo_mask without the ring";
  else if (tune_model_capacity(topo, NCCL_PROTO_SIMPLE) == 0)
    bad = "no Simple buffers (proto_mask or slot_bytes[SIMPLE])";
  if (bad == NULL) return ncclSuccess;
  WARN(
      "tune_create: the topology given is not usable: %s (nranks %d, nnodes %d, ring channels %d,"
      " proto_mask 0x%x, algo_mask 0x%x)",
      bad, topo->nranks, topo->nnodes, topo->ring_nchannels, topo->proto_mask, topo->algo_mask);
  return ncclInternalError;
}

ncclResult_t tune_create(const tune_topo_t* topo, uint64_t comm_hash, int rank, tune_t** t_p) {
  CHECK(tune_topo_check(topo));
  tune_knob_t algo, proto;
  CHECK(tune_knobs_read(&algo, &proto));
  /* The ring, and OneShot and TwoShot where the direct connections were made: other bits of
   * algo_mask have no model yet. */
  uint32_t algo_usable = topo->algo_mask & (1u << NCCL_ALGO_RING);
  if (topo->direct_ctas > 0 && kern_proto_step_capacity(KERN_PROTO_LL, topo->direct_slot_bytes) > 0)
    algo_usable |= topo->algo_mask & TUNE_ALGO_DIRECT_MASK;
  for (int p = 0; p < NCCL_NUM_PROTOCOLS && topo->tree_nchannels > 0; p++)
    if ((TUNE_TREE_PROTOS & (1u << p)) && tune_model_capacity(topo, p) > 0)
      algo_usable |= topo->algo_mask & (1u << NCCL_ALGO_TREE);
  uint32_t proto_usable = 0;
  for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
    if (tune_model_capacity(topo, p) > 0) proto_usable |= 1u << p;
  CHECK(tune_knobs_check(&algo, &proto, algo_usable, proto_usable));

  tune_t* t = NULL;
  CHECK(MEM_CALLOC(&t, 1));
  t->topo = *topo;
  t->comm_hash = comm_hash;
  t->rank = rank;
  t->algo = algo;
  t->proto = proto;
  t->algo_usable = algo_usable;
  t->proto_usable = proto_usable;
  ncclTunerConstants_v5_t consts;
  tune_consts_fill(&consts);
  ncclResult_t res = tune_tuner_open(topo, comm_hash, &consts, &t->tuner);
  if (res != ncclSuccess) {
    free(t);
    return res;
  }
  tune_model_build(topo, &consts, &t->model);
  if (log_enabled(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING)) {
    char protos[64];
    INFO(NCCL_INIT | NCCL_TUNING,
         "TUNE: %d ranks on %d node(s), ring of %d channels at %.1f GB/s each, protocols %s, "
         "NCCL_ALGO %s, NCCL_PROTO %s, tuner %s",
         topo->nranks, topo->nnodes, topo->ring_nchannels, (double)t->model.bw_ch,
         tune_mask_names(proto_usable, tune_proto_name, NCCL_NUM_PROTOCOLS, protos, sizeof(protos)),
         algo.value, proto.value, tune_tuner_name(t->tuner));
  }
  *t_p = t;
  return ncclSuccess;
}

void tune_destroy(tune_t* t) {
  if (t == NULL) return;
  tune_tuner_close(t->tuner);
  free(t);
}

/* The bytes a direct algorithm's model and CTAs take: AllReduce's input; for AllGather and
 * ReduceScatter (nbytes counts every rank's block, as NCCL's nBytes) one rank's block, which
 * OneShot moves to (from) each peer as OneShot AllReduce moves its input. */
static uint64_t tune_direct_bytes(const tune_t* t, ncclFunc_t coll, uint64_t nbytes) {
  if ((coll == ncclFuncAllGather || coll == ncclFuncReduceScatter) && t->topo.nranks > 1)
    return nbytes / (uint64_t)t->topo.nranks;
  return nbytes;
}

/* What each OneShot work after the first adds to a run streamed through one launch: 64
 * all-reduces of 8 B took 9.7 us against 6.45 for one (4 ranks sharing one H200, CUDA graphs,
 * test/device-run.sh group-sweep, 2026-11-30), about 0.05 us a work. */
#define TUNE_RUN_WORK_US 0.05f

/* The time of a run (tune_choose_run) of `run` alike operations of nbytes together by an
 * algorithm that runs them one after the other in its launch (TwoShot, the tree): each pays
 * its own steps. */
static float tune_run_each(const tune_t* t, int a, int p, uint64_t nbytes, int run) {
  const uint64_t each = nbytes / (uint64_t)run;
  if (a == NCCL_ALGO_TREE)
    return (float)run *
           tune_model_tree_time(&t->model, &t->topo, p, each, t->topo.tree_nchannels, 1);
  int nctas, nthreads;
  tune_model_direct_ctas(&t->topo, each, &nctas, &nthreads);
  return (float)run * tune_model_direct_time(&t->model, &t->topo, a, each, nctas);
}

/* The ring's time for a run: its works take channels of their own, side by side
 * (enqueue_plan_spread_ring), each with its share of the ring's channels (at least one), so
 * that a channel runs ceil(run / channels) of them one after the other. */
static float tune_run_ring(const tune_t* t, ncclFunc_t coll, int p, uint64_t nbytes, int run) {
  const int nch = t->topo.ring_nchannels;
  const int per = nch / run > 1 ? nch / run : 1;
  const int seq = (run + nch - 1) / nch;
  return (float)seq * tune_model_time(&t->model, &t->topo, coll, p, nbytes / (uint64_t)run, per, 1);
}

/* The model's table for coll: every entry that is built and has buffers. run > 1: nbytes is
 * what a run of `run` alike operations moves together (tune_choose_run), which OneShot streams
 * as one, the ring spreads over its channels, and TwoShot and the tree run one by one. */
static void tune_table(const tune_t* t, ncclFunc_t coll, uint64_t nbytes, int num_pipe_ops,
                       int run, tune_table_t table) {
  const uint32_t algos = tune_algos_for(coll, t->algo_usable);
  for (int a = 0; a < TUNE_NUM_ALGOS; a++) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
      table[a][p] = (float)NCCL_ALGO_PROTO_IGNORE;
      if (!(algos & (1u << a)) || !(t->proto_usable & (1u << p))) continue;
      /* The tree runs every protocol, OneShot and TwoShot LL only (tune_protos_for_algo). */
      if (!(tune_protos_for_algo(a) & (1u << p))) continue;
      if (run > 1 && (a == TUNE_ALGO_TWOSHOT || a == NCCL_ALGO_TREE)) {
        table[a][p] = tune_run_each(
            t, a, p, a == NCCL_ALGO_TREE ? nbytes : tune_direct_bytes(t, coll, nbytes), run);
        continue;
      }
      if (run > 1 && a == NCCL_ALGO_RING) {
        table[a][p] = tune_run_ring(t, coll, p, nbytes, run);
        continue;
      }
      if (TUNE_ALGO_DIRECT_MASK & (1u << a)) {
        /* LL lines over the direct connections, whatever the ring's buffers. */
        const uint64_t db = tune_direct_bytes(t, coll, nbytes);
        int nctas, nthreads;
        tune_model_direct_ctas(&t->topo, db, &nctas, &nthreads);
        /* A run streams through one launch: each work after the first adds only the reading
         * of its fields (TUNE_RUN_WORK_US), not a launch of its own. */
        const float more = run > 1 ? TUNE_RUN_WORK_US * (float)(run - 1)
                           : num_pipe_ops > 1 ? t->model.base_us[p] * (float)(num_pipe_ops - 1)
                                              : 0.0f;
        table[a][p] = tune_model_direct_time(&t->model, &t->topo, a, db, nctas) + more;
        continue;
      }
      if (a == NCCL_ALGO_TREE) { /* AllReduce only (tune_algos_for) */
        table[a][p] = tune_model_tree_time(&t->model, &t->topo, p, nbytes,
                                           t->topo.tree_nchannels, num_pipe_ops);
        continue;
      }
      table[a][p] = tune_model_time(&t->model, &t->topo, coll, p, nbytes, t->topo.ring_nchannels,
                                    num_pipe_ops);
    }
  }
}

/* Marks the entries NCCL_ALGO / NCCL_PROTO exclude for coll unusable. */
static void tune_table_knobs(const tune_t* t, ncclFunc_t coll, tune_table_t table) {
  for (int a = 0; a < TUNE_NUM_ALGOS; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      if (!(t->algo.allow[coll] & (1u << a)) || !(t->proto.allow[coll] & (1u << p)))
        table[a][p] = (float)NCCL_ALGO_PROTO_IGNORE;
}

/* The cheapest usable entry (first in order on a tie); false when none is. */
static bool tune_pick(tune_table_t table, int* algo_p, int* proto_p) {
  int ba = -1, bp = -1;
  for (int a = 0; a < TUNE_NUM_ALGOS; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      if (table[a][p] >= 0 && (ba < 0 || table[a][p] < table[ba][bp])) {
        ba = a;
        bp = p;
      }
  *algo_p = ba;
  *proto_p = bp;
  return ba >= 0;
}

/* What the knobs and the tuner did to the choice, for the INFO line. */
typedef struct tune_why {
  int model_algo, model_proto; /* the model alone, no knobs */
  int knob_algo, knob_proto;   /* with the knobs, before the tuner */
  int tuner_nch;               /* the tuner's channel count (0: none) */
  bool tuner_asked, tuner_fallback;
  bool chunk_changed; /* getChunkSize answered another chunk than the model's */
  uint64_t tuner_chunk;
} tune_why_t;

static void tune_log(const tune_t* t, ncclFunc_t coll, uint64_t nbytes, int num_pipe_ops,
                     const tune_choice_t* c, const tune_why_t* w) {
  char tuner[160] = "-", knob[96] = "-";
  if (w->tuner_asked) {
    int n;
    if (w->tuner_fallback)
      n = snprintf(tuner, sizeof(tuner), "'%s' left nothing usable, ignored",
                   tune_tuner_name(t->tuner));
    else if (c->algo != w->knob_algo || c->proto != w->knob_proto)
      n = snprintf(tuner, sizeof(tuner), "'%s' chose %s/%s", tune_tuner_name(t->tuner),
                   tune_algo_name(c->algo), tune_proto_name(c->proto));
    else
      n = snprintf(tuner, sizeof(tuner), "'%s' kept %s/%s", tune_tuner_name(t->tuner),
                   tune_algo_name(c->algo), tune_proto_name(c->proto));
    if (n > 0 && (size_t)n < sizeof(tuner) && w->tuner_nch > 0)
      n += snprintf(tuner + n, sizeof(tuner) - (size_t)n, ", channels %d", w->tuner_nch);
    if (n > 0 && (size_t)n < sizeof(tuner) && w->chunk_changed)
      snprintf(tuner + n, sizeof(tuner) - (size_t)n, ", chunk %llu",
               (unsigned long long)w->tuner_chunk);
  }
  if (w->knob_algo != w->model_algo || w->knob_proto != w->model_proto) {
    bool by_algo = !(t->algo.allow[coll] & (1u << w->model_algo));
    snprintf(knob, sizeof(knob), "%s=%s, model: %s/%s", by_algo ? "NCCL_ALGO" : "NCCL_PROTO",
             by_algo ? t->algo.value : t->proto.value, tune_algo_name(w->model_algo),
             tune_proto_name(w->model_proto));
  }
  INFO(NCCL_TUNING,
       "TUNE: %s %llu bytes%s: %s/%s %d channels %d threads chunk %u time %.1f us (tuner: %s, "
       "knob: %s)",
       tune_coll_name(coll), (unsigned long long)nbytes, num_pipe_ops > 1 ? " (pipelined)" : "",
       tune_algo_name(c->algo), tune_proto_name(c->proto), c->nchannels, c->nthreads,
       c->chunk_bytes, (double)c->time_us, tuner, knob);
}

static ncclResult_t tune_choose_now(tune_t* t, ncclFunc_t coll, uint64_t nbytes,
                                    int num_pipe_ops, int run, tune_choice_t* out);

static ncclResult_t tune_choose_memo(tune_t* t, ncclFunc_t coll, uint64_t nbytes,
                                     int num_pipe_ops, int run, tune_choice_t* out);

ncclResult_t tune_choose(tune_t* t, ncclFunc_t coll, uint64_t nbytes, int num_pipe_ops,
                         tune_choice_t* out) {
  return tune_choose_memo(t, coll, nbytes, num_pipe_ops, 0, out);
}

ncclResult_t tune_choose_run(tune_t* t, ncclFunc_t coll, uint64_t nbytes, int nops,
                             tune_choice_t* out) {
  return tune_choose_memo(t, coll, nbytes, nops, nops > 1, out);
}

/* The model answers equal inputs alike, so a repeated question (a training step's same sizes
 * call after call) takes the remembered answer: the table, the knobs and the channel and chunk
 * sizing cost more than a launch's host time with ranks sharing a GPU. Not with a tuner plugin
 * (it is asked every time, as NCCL asks it) nor while TUNING lines are on (one per call). */
static ncclResult_t tune_choose_memo(tune_t* t, ncclFunc_t coll, uint64_t nbytes,
                                     int num_pipe_ops, int run, tune_choice_t* out) {
  if (num_pipe_ops < 1) num_pipe_ops = 1;
  const bool memo = t->tuner == NULL && !log_enabled(NCCL_LOG_INFO, NCCL_TUNING);
  if (memo) {
    for (int i = 0; i < t->memo_n; i++) {
      if (t->memo[i].coll == coll && t->memo[i].nbytes == nbytes &&
          t->memo[i].num_pipe_ops == num_pipe_ops && t->memo[i].run == run) {
        *out = t->memo[i].c;
        return ncclSuccess;
      }
    }
  }
  CHECK(tune_choose_now(t, coll, nbytes, num_pipe_ops, run, out));
  if (memo) {
    const int i = t->memo_next;
    t->memo[i].coll = coll;
    t->memo[i].run = run;
    t->memo[i].nbytes = nbytes;
    t->memo[i].num_pipe_ops = num_pipe_ops;
    t->memo[i].c = *out;
    t->memo_next = (i + 1) % TUNE_MEMO;
    if (t->memo_n < TUNE_MEMO) t->memo_n++;
  }
  return ncclSuccess;
}

static ncclResult_t tune_choose_now(tune_t* t, ncclFunc_t coll, uint64_t nbytes,
                                    int num_pipe_ops, int run, tune_choice_t* out) {
  if ((int)coll < 0 || coll >= TUNE_NUM_COLLS) {
    WARN("tune_choose: %s (%d) is not a collective with an algorithm to choose",
         tune_coll_name(coll), (int)coll);
    return ncclInternalError;
  }
  tune_why_t w;
  memset(&w, 0, sizeof(w));
  tune_table_t table;
  tune_table(t, coll, nbytes, num_pipe_ops, run ? num_pipe_ops : 0, table);
  tune_pick(table, &w.model_algo, &w.model_proto);
  tune_table_knobs(t, coll, table);
  if (!tune_pick(table, &w.knob_algo, &w.knob_proto)) {
    WARN("tune_choose: nothing usable for %s (NCCL_ALGO %s, NCCL_PROTO %s)", tune_coll_name(coll),
         t->algo.value, t->proto.value);
    return ncclInvalidUsage;
  }
  int algo = w.knob_algo, proto = w.knob_proto;
  if (t->tuner != NULL) {
    /* The tuner sees NCCL's rows; Choir's own keep the model's costs. */
    tune_table_t asked;
    memcpy(asked, table, sizeof(asked));
    CHECK(tune_tuner_coll_info(t->tuner, coll, nbytes, num_pipe_ops, asked, &w.tuner_nch));
    w.tuner_asked = true;
    if (!tune_pick(asked, &algo, &proto)) {
      /* The tuner forbade every usable entry: NCCL would fail the operation; the model's
       * choice is as good a fallback as any, and the operation still runs. */
      w.tuner_fallback = true;
      algo = w.knob_algo;
      proto = w.knob_proto;
    }
  }
  int max_ch = algo == NCCL_ALGO_TREE ? t->topo.tree_nchannels : t->topo.ring_nchannels;
  if (w.tuner_nch > 0) max_ch = w.tuner_nch < max_ch ? w.tuner_nch : max_ch;
  tune_choice_t c;
  c.algo = algo;
  c.proto = proto;
  if (TUNE_ALGO_DIRECT_MASK & (1u << algo)) {
    /* Its own CTAs and steps (the direct connections' LL slots); no tuner chunk. */
    const uint64_t db = tune_direct_bytes(t, coll, nbytes);
    tune_model_direct_ctas(&t->topo, db, &c.nchannels, &c.nthreads);
    c.chunk_bytes = kern_proto_step_capacity(KERN_PROTO_LL, t->topo.direct_slot_bytes);
    c.time_us = table[algo][proto] >= 0 ? table[algo][proto]
                                        : tune_model_direct_time(&t->model, &t->topo, algo,
                                                                 db, c.nchannels);
    if (log_enabled(NCCL_LOG_INFO, NCCL_TUNING)) tune_log(t, coll, nbytes, num_pipe_ops, &c, &w);
    *out = c;
    return ncclSuccess;
  }
  tune_model_channels(&t->topo, proto, nbytes, max_ch, &c.nchannels, &c.nthreads);
  /* The tree is a pipeline through its levels, as Broadcast and Reduce are through the chain:
   * their chunk rule (about TUNE_PIPE_STEPS steps per channel). */
  c.chunk_bytes = tune_model_chunk(&t->topo, algo == NCCL_ALGO_TREE ? ncclFuncReduce : coll, proto,
                                   nbytes, c.nchannels);
  if (t->tuner != NULL) {
    uint64_t chunk = c.chunk_bytes;
    bool asked = false;
    CHECK(tune_tuner_chunk(t->tuner, coll, nbytes, algo, proto, c.nchannels, &chunk, &asked));
    if (asked && chunk != c.chunk_bytes) {
      w.chunk_changed = true;
      w.tuner_chunk = chunk;
      uint32_t cap = tune_model_capacity(&t->topo, proto);
      if (chunk > cap) chunk = cap;
      chunk &= ~(uint64_t)15;
      if (chunk < 16) chunk = 16;
      c.chunk_bytes = (uint32_t)chunk;
    }
  }
  c.time_us = run && table[algo][proto] >= 0 ? table[algo][proto]
              : algo == NCCL_ALGO_TREE
                  ? tune_model_tree_time(&t->model, &t->topo, proto, nbytes, max_ch, num_pipe_ops)
                  : tune_model_time(&t->model, &t->topo, coll, proto, nbytes, max_ch,
                                    num_pipe_ops);
  if (log_enabled(NCCL_LOG_INFO, NCCL_TUNING)) tune_log(t, coll, nbytes, num_pipe_ops, &c, &w);
  *out = c;
  return ncclSuccess;
}

int tune_direct_ctas(const tune_t* t, uint64_t nbytes) {
  if (t == NULL || t->topo.direct_ctas < 1) return 0;
  int nctas, nthreads;
  tune_model_direct_ctas(&t->topo, nbytes, &nctas, &nthreads);
  return nctas;
}

float tune_estimate_us(const tune_t* t, ncclFunc_t coll, uint64_t nbytes) {
  if ((int)coll >= 0 && coll < TUNE_NUM_COLLS) {
    tune_table_t table;
    tune_table(t, coll, nbytes, 1, 0, table);
    tune_table_knobs(t, coll, table);
    int a, p;
    if (tune_pick(table, &a, &p)) return table[a][p];
    return tune_model_time(&t->model, &t->topo, coll, NCCL_PROTO_SIMPLE, nbytes,
                           t->topo.ring_nchannels, 1);
  }
  /* Point-to-point (send, recv, and AlltoAll, Gather, Scatter as sends to every peer at once):
   * one Simple hop over the slowest link, the bytes this rank sends spread over the channels. */
  const tune_model_t* m = &t->model;
  float hop = t->topo.nranks <= 1  ? 0.0f
              : t->topo.nnodes > 1 ? m->hop_inter_us[NCCL_PROTO_SIMPLE]
                                   : m->hop_intra_us[NCCL_PROTO_SIMPLE];
  double bw = (double)m->bw_ch * t->topo.ring_nchannels;
  return (float)(m->base_us[NCCL_PROTO_SIMPLE] + hop + (double)nbytes / (bw * 1000.0));
}
