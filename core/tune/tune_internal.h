/*
 * core/tune: what the module's files share (tune.h is the contract with the rest of the core).
 *   tune_model.c   the constants (one table at its top) and the time / channels / threads / chunk
 *   tune_knobs.c   NCCL_ALGO and NCCL_PROTO, tune_protocols_for_link
 *   tune_tuner.c   the tuner plugin (v2..v6 behind one set of calls)
 *   tune_choose.c  tune_create / tune_choose / tune_estimate_us / tune_destroy, the INFO line
 */
#ifndef CHOIR_TUNE_INTERNAL_H
#define CHOIR_TUNE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl_tuner.h"
#include "tune.h"

/* Collectives that have an (algorithm, protocol) to choose: ncclFuncBroadcast..AllReduce. */
#define TUNE_NUM_COLLS 5
#define TUNE_ALGO_ALL ((1u << TUNE_NUM_ALGOS) - 1)
#define TUNE_PROTO_ALL ((1u << NCCL_NUM_PROTOCOLS) - 1)

/* Names as NCCL prints them ("AllReduce", "LL128"); "?" out of range (tune_algo_name: tune.h). */
const char* tune_coll_name(int coll);
const char* tune_proto_name(int proto);

/* ---- Knobs (tune_knobs.c) ------------------------------------------------------------------ */

/* NCCL_ALGO or NCCL_PROTO, parsed: per collective, the ids it allows (bit 1 << id). */
typedef struct tune_knob {
  uint32_t allow[TUNE_NUM_COLLS];
  /* Per collective: ids named in an inclusive list ("ll128", "allreduce:ll128"), as opposed to
   * allowed by default or left by an exclusion. */
  uint32_t named[TUNE_NUM_COLLS];
  bool set;          /* the variable had a value */
  const char* value; /* the value, for messages ("(unset)" when not set) */
} tune_knob_t;

/* Which knob: its variable, what its names are ("algorithm"), the names (matched
 * case-insensitively, index = id). */
typedef struct tune_knob_kind {
  const char* env;
  const char* noun;
  const char* const* names;
  int n;
} tune_knob_kind_t;
extern const tune_knob_kind_t tune_knob_algo, tune_knob_proto;

/* Parses `value` (NULL or blank = unset: everything allowed). Errors: ncclInvalidUsage with a WARN
 * naming the knob, the value and the bad token. */
ncclResult_t tune_knob_parse(const tune_knob_kind_t* kind, const char* value, tune_knob_t* knob_p);
/* The algorithms of algo_mask that collective coll can run (OneShot: AllReduce, AllGather,
 * ReduceScatter; TwoShot: AllReduce). */
uint32_t tune_algos_for(int coll, uint32_t algo_mask);
/* The protocols algorithm algo runs (bit 1 << NCCL_PROTO_*): the tree Simple, OneShot and
 * TwoShot LL, the ring all three. */
uint32_t tune_protos_for_algo(int algo);
/* Every collective keeps at least one usable (algorithm, protocol): algorithms in algo_mask and
 * protocols in proto_mask. Else ncclInvalidUsage with a WARN naming the collective, what the knob
 * allows and what is built or connected. */
ncclResult_t tune_knobs_check(const tune_knob_t* algo, const tune_knob_t* proto, uint32_t algo_mask,
                              uint32_t proto_mask);
/* NCCL_ALGO and NCCL_PROTO from the parameter table. */
ncclResult_t tune_knobs_read(tune_knob_t* algo_p, tune_knob_t* proto_p);
/* "Ring,LL128" style list of the ids in mask, into buf. */
const char* tune_mask_names(uint32_t mask, const char* (*name)(int), int n, char* buf, size_t size);

/* ---- The model (tune_model.c) -------------------------------------------------------------- */

/* The constants one communicator's model uses, after the tuner's init may have changed them
 * (ring only: the one algorithm built). */
typedef struct tune_model {
  float base_us[NCCL_NUM_PROTOCOLS];      /* once per operation */
  float hop_intra_us[NCCL_NUM_PROTOCOLS]; /* per ring step inside a node */
  float hop_inter_us[NCCL_NUM_PROTOCOLS]; /* per ring step between nodes */
  float bw_ch;                            /* GB/s per channel (the ring's slowest link) */
  float cap_ch[NCCL_NUM_PROTOCOLS];       /* per-channel cap of each protocol, GB/s; 0: none */
  float ll_max_bw;                        /* LL's cap on the whole ring, GB/s */
  float bw_total[NCCL_NUM_PROTOCOLS];     /* a protocol's cap on the whole ring, GB/s; 0: none */
  float direct_bw_cta;    /* OneShot, TwoShot: GB/s written to peers per CTA; 0: LL's rate */
  float direct_cta_crowd; /* the fraction a direct CTA slows per other CTA */
  float oneshot_hop_us;   /* OneShot's step */
  float twoshot_hop_us;   /* one TwoShot step */
} tune_model_t;

/* The constants handed to a v5/v6 tuner's init, filled from the table (NCCL's shape). */
void tune_consts_fill(ncclTunerConstants_v5_t* c);
/* The model for topo from the table, then with every entry of *c that differs from the table's
 * own (what a tuner's init changed) applied to the link types that NCCL's row stands for. c NULL:
 * the table alone. */
void tune_model_build(const tune_topo_t* topo, const ncclTunerConstants_v5_t* c, tune_model_t* m);
/* Ring time in us of coll moving nbytes with proto on nchannels channels, numPipeOps ops. */
float tune_model_time(const tune_model_t* m, const tune_topo_t* topo, ncclFunc_t coll, int proto,
                      uint64_t nbytes, int nchannels, int num_pipe_ops);
/* Channels and threads for (proto, nbytes), starting from at most max_channels. */
void tune_model_channels(const tune_topo_t* topo, int proto, uint64_t nbytes, int max_channels,
                         int* nchannels_p, int* nthreads_p);
/* OneShot or TwoShot (algo; AllReduce, LL): its time for nbytes on nctas CTAs, and the CTAs and
 * threads for nbytes (at most topo->direct_ctas CTAs). */
/* The tree's time (AllReduce, Simple) for nbytes on nchannels tree channels. */
float tune_model_tree_time(const tune_model_t* m, const tune_topo_t* topo, int proto,
                           uint64_t nbytes, int nchannels, int num_pipe_ops);
float tune_model_direct_time(const tune_model_t* m, const tune_topo_t* topo, int algo,
                             uint64_t nbytes, int nctas);
void tune_model_direct_ctas(const tune_topo_t* topo, uint64_t nbytes, int* nctas_p,
                            int* nthreads_p);
/* Bytes per step for (coll, proto, nbytes, nchannels): a multiple of 16 within the protocol's
 * step capacity (0 when the slot holds nothing). */
uint32_t tune_model_chunk(const tune_topo_t* topo, ncclFunc_t coll, int proto, uint64_t nbytes,
                          int nchannels);
/* The step capacity of proto on this communicator's slots (kern_proto_step_capacity). */
uint32_t tune_model_capacity(const tune_topo_t* topo, int proto);

/* ---- The tuner plugin (tune_tuner.c) -------------------------------------------------------- */

typedef struct tune_tuner tune_tuner_t; /* one per communicator: the library and its context */

/* Loads the library (once per process) when NCCL_TUNER_PLUGIN asks for one or the default name
 * is found, and calls its init. *tuner_p NULL: no tuner. c: the constants for v5/v6 init, which
 * the tuner may change. An init that fails is returned (with a WARN). */
ncclResult_t tune_tuner_open(const tune_topo_t* topo, uint64_t comm_hash,
                             ncclTunerConstants_v5_t* c, tune_tuner_t** tuner_p);
void tune_tuner_close(tune_tuner_t* tuner);
const char* tune_tuner_name(const tune_tuner_t* tuner);
/* getCollInfo (v2's answer turned into the table form): may change table (entries that were
 * -1.0 are put back, with an INFO) and sets *nchannels_p (0: keep the core's). */
ncclResult_t tune_tuner_coll_info(tune_tuner_t* tuner, ncclFunc_t coll, uint64_t nbytes,
                                  int num_pipe_ops,
                                  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS],
                                  int* nchannels_p);
/* getChunkSize where the version has it (v6 and the entry is set); *chunk_p in and out.
 * *asked_p false when there is none (then *chunk_p is untouched). */
ncclResult_t tune_tuner_chunk(tune_tuner_t* tuner, ncclFunc_t coll, uint64_t nbytes, int algo,
                              int proto, int nchannels, uint64_t* chunk_p, bool* asked_p);

#endif
