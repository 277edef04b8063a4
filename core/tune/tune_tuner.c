/*
 * The tuner plugin in the core. The library is found through core/plugin (NCCL_TUNER_PLUGIN, or
 * the default name libnccl-tuner.so, silently absent; "none" disables) and opened once per
 * process: every communicator takes a reference, the last one closes it. Each communicator gets
 * its own context from init. Versions 2..6 are called through their own tables here, so the rest
 * of tune sees one set of calls:
 *   init         v2..v4 (nRanks, nNodes, logger, &ctx); v5/v6 also commId, the NVLink domains
 *                and the model constants (which the tuner may change)
 *   getCollInfo  v3..v6 with the cost table; v2 answers (algorithm, protocol), which becomes a
 *                0.0 in the table, the way a v3 tuner prefers an entry
 *   getChunkSize v6 when set
 *   finalize     (destroy before v5) at tune_destroy
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "tune_internal.h"

struct tune_tuner {
  int version;
  const void* table;
  const char* name;
  void* ctx;
};

/* The process's tuner library. */
enum { TUNER_UNTRIED = 0, TUNER_LOADED, TUNER_NONE };
static pthread_mutex_t tuner_lock = PTHREAD_MUTEX_INITIALIZER;
static int tuner_state = TUNER_UNTRIED;
static int tuner_refs;
static plugin_lib_t tuner_lib;

/* Under tuner_lock: open the library if nobody tried yet. A failure leaves TUNER_NONE for the life
 * of the process (the knob is read once, so every later try would fail the same way). */
static ncclResult_t tuner_load_locked(void) {
  if (tuner_state != TUNER_UNTRIED) return ncclSuccess;
  char specs[PLUGIN_MAX_SPECS][PLUGIN_SPEC_MAX];
  int nspecs = 0;
  bool named = false;
  CHECK(plugin_specs(&plugin_kind_tuner, param_str(PARAM_TUNER_PLUGIN), specs, PLUGIN_MAX_SPECS,
                     &nspecs, &named));
  for (int i = 0; i < nspecs; i++) {
    if (plugin_open(&plugin_kind_tuner, specs[i], named, &tuner_lib) == ncclSuccess) {
      tuner_state = TUNER_LOADED;
      INFO(NCCL_INIT | NCCL_TUNING, "TUNER/Plugin: using '%s' (v%d) from %s", tuner_lib.table_name,
           tuner_lib.version, tuner_lib.path);
      return ncclSuccess;
    }
  }
  tuner_state = TUNER_NONE;
  INFO(NCCL_INIT | NCCL_TUNING, "TUNER/Plugin: no tuner plugin%s; the core's model decides",
       nspecs == 0 ? " (NCCL_TUNER_PLUGIN=none)"
       : named     ? " could be loaded"
                   : " found");
  return ncclSuccess;
}

static void tuner_unref(void) {
  pthread_mutex_lock(&tuner_lock);
  if (--tuner_refs == 0 && tuner_state == TUNER_LOADED) {
    plugin_close(&tuner_lib);
    tuner_state = TUNER_UNTRIED; /* a later communicator opens it again */
  }
  pthread_mutex_unlock(&tuner_lock);
}

ncclResult_t tune_tuner_open(const tune_topo_t* topo, uint64_t comm_hash,
                             ncclTunerConstants_v5_t* c, tune_tuner_t** tuner_p) {
  *tuner_p = NULL;
  pthread_mutex_lock(&tuner_lock);
  ncclResult_t res = tuner_load_locked();
  bool loaded = res == ncclSuccess && tuner_state == TUNER_LOADED;
  if (loaded) tuner_refs++;
  int version = tuner_lib.version;
  const void* table = tuner_lib.table;
  const char* name = tuner_lib.table_name;
  pthread_mutex_unlock(&tuner_lock);
  CHECK(res);
  if (!loaded) return ncclSuccess;

  tune_tuner_t* t = NULL;
  res = MEM_CALLOC(&t, 1);
  if (res != ncclSuccess) goto err_unref;
  t->version = version;
  t->table = table;
  t->name = name;
  size_t nranks = (size_t)topo->nranks, nnodes = (size_t)(topo->nnodes > 0 ? topo->nnodes : 1);
  if (version >= 5) {
    /* NVLink domains: a node's ranks when its GPUs talk over NVLink (or share one GPU), else one
     * rank each. The smallest domain is taken as nranks / nnodes (the topology gives the
     * largest only). */
    bool nvl = topo->link_intra == TUNE_LINK_NVLINK || topo->link_intra == TUNE_LINK_SAME_GPU;
    ncclNvlDomainInfo_v5_t nvld;
    nvld.nNvlDomains = nvl ? (int)nnodes : topo->nranks;
    nvld.minRanksPerNvlDomain = nvl ? (int)(nranks / nnodes) : 1;
    nvld.maxRanksPerNvlDomain = nvl ? topo->local_ranks : 1;
    if (nvld.minRanksPerNvlDomain < 1) nvld.minRanksPerNvlDomain = 1;
    const ncclTuner_v5_t* v5 = table; /* v6 starts with v5's entries */
    res = v5->init(&t->ctx, comm_hash, nranks, nnodes, log_plugin_logger, &nvld, c);
  } else {
    /* v2, v3 and v4 share init's signature and slot. */
    const ncclTuner_v4_t* v4 = table;
    res = v4->init(nranks, nnodes, log_plugin_logger, &t->ctx);
  }
  if (res != ncclSuccess) {
    WARN(
        "TUNER/Plugin: '%s' (v%d) init failed (%s) for a communicator of %zu ranks on %zu "
        "nodes; the communicator is not created (as in NCCL): fix the tuner's configuration, or "
        "set NCCL_TUNER_PLUGIN=none to run without it",
        name, version, err_string(res), nranks, nnodes);
    goto err_free;
  }
  INFO(NCCL_INIT | NCCL_TUNING, "TUNER/Plugin: '%s' (v%d) initialized for %zu ranks on %zu nodes",
       name, version, nranks, nnodes);
  *tuner_p = t;
  return ncclSuccess;
err_free:
  free(t);
err_unref:
  tuner_unref();
  return res;
}

void tune_tuner_close(tune_tuner_t* t) {
  if (t == NULL) return;
  /* finalize (v5+) and destroy (v2..v4) sit in the same slot with the same signature. */
  const ncclTuner_v5_t* v5 = t->table;
  ncclResult_t res = v5->finalize(t->ctx);
  if (res != ncclSuccess)
    INFO(NCCL_TUNING, "TUNER/Plugin: '%s' %s returned %s (ignored)", t->name,
         t->version >= 5 ? "finalize" : "destroy", err_string(res));
  free(t);
  tuner_unref();
}

const char* tune_tuner_name(const tune_tuner_t* t) { return t != NULL ? t->name : "-"; }

ncclResult_t tune_tuner_coll_info(tune_tuner_t* t, ncclFunc_t coll, uint64_t nbytes,
                                  int num_pipe_ops,
                                  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS],
                                  int* nchannels_p) {
  float before[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  memcpy(before, table, sizeof(before));
  int nch = 0;
  ncclResult_t res;
  if (t->version == 2) {
    const ncclTuner_v2_t* v2 = t->table;
    int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF;
    /* Neither CollNet nor NVLS is built. */
    res = v2->getCollInfo(t->ctx, coll, (size_t)nbytes, 0, 0, num_pipe_ops, &algo, &proto, &nch);
    /* The answer becomes a 0.0 in the table, where the entry is usable; v2 answers a pair, so
     * one without the other is no answer. Unusable answers are reported here: the table stays
     * as it was, so the check for revived entries below sees nothing. */
    bool answered = algo != NCCL_ALGO_UNDEF || proto != NCCL_PROTO_UNDEF;
    bool valid =
        algo >= 0 && algo < NCCL_NUM_ALGORITHMS && proto >= 0 && proto < NCCL_NUM_PROTOCOLS;
    if (res == ncclSuccess && answered && !valid) {
      INFO(NCCL_TUNING,
           "TUNER/Plugin: '%s' answered algorithm %d protocol %d for %s: not a pair, "
           "ignored",
           t->name, algo, proto, tune_coll_name(coll));
    } else if (res == ncclSuccess && answered && table[algo][proto] < 0) {
      INFO(NCCL_TUNING, "TUNER/Plugin: '%s' chose %s/%s for %s, which is not usable here; ignored",
           t->name, tune_algo_name(algo), tune_proto_name(proto), tune_coll_name(coll));
    } else if (res == ncclSuccess && answered) {
      table[algo][proto] = 0.0f;
    }
  } else if (t->version == 3) {
    const ncclTuner_v3_t* v3 = t->table;
    res = v3->getCollInfo(t->ctx, coll, (size_t)nbytes, num_pipe_ops, (float**)table,
                          NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &nch);
  } else {
    /* v4, v5 and v6 share getCollInfo's signature and slot. */
    const ncclTuner_v4_t* v4 = t->table;
    res = v4->getCollInfo(t->ctx, coll, (size_t)nbytes, num_pipe_ops, (float**)table,
                          NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch);
  }
  if (res != ncclSuccess) {
    WARN("TUNER/Plugin: '%s' getCollInfo failed (%s) for %s of %llu bytes", t->name,
         err_string(res), tune_coll_name(coll), (unsigned long long)nbytes);
    return res;
  }
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
      float v = table[a][p];
      if (before[a][p] < 0 && v != before[a][p]) {
        INFO(NCCL_TUNING,
             "TUNER/Plugin: '%s' set %s/%s to %g for %s, which the core marked "
             "unusable; ignored",
             t->name, tune_algo_name(a), tune_proto_name(p), (double)v, tune_coll_name(coll));
        table[a][p] = (float)NCCL_ALGO_PROTO_IGNORE;
      } else if (isnan(v) || v < 0) {
        table[a][p] = (float)NCCL_ALGO_PROTO_IGNORE; /* forbidden by the tuner */
      }
    }
  }
  *nchannels_p = nch;
  return ncclSuccess;
}

ncclResult_t tune_tuner_chunk(tune_tuner_t* t, ncclFunc_t coll, uint64_t nbytes, int algo,
                              int proto, int nchannels, uint64_t* chunk_p, bool* asked_p) {
  *asked_p = false;
  if (t->version < 6) return ncclSuccess;
  const ncclTuner_v6_t* v6 = t->table;
  if (v6->getChunkSize == NULL) return ncclSuccess;
  size_t chunk = (size_t)*chunk_p;
  ncclResult_t res = v6->getChunkSize(t->ctx, coll, (size_t)nbytes, algo, proto, nchannels, &chunk);
  if (res != ncclSuccess) {
    WARN("TUNER/Plugin: '%s' getChunkSize failed (%s) for %s of %llu bytes", t->name,
         err_string(res), tune_coll_name(coll), (unsigned long long)nbytes);
    return res;
  }
  *chunk_p = chunk;
  *asked_p = true;
  return ncclSuccess;
}
