/*
 * Choir's default tuner: per-communicator rules from a config file (NCCL's example-tuner CSV
 * format, see README.md) applied to the core's cost table, channel count and chunk size.
 *
 * Lifecycle: init reads NCCL_TUNER_CONFIG_FILE (else ./nccl_tuner.conf) into a context owned by
 * that communicator, keeps only the rules whose nNodes/nRanks fit it, and groups them by
 * collective; getCollInfo and getChunkSize only scan that array (no allocation, no I/O except
 * the logger, once per rule at INFO); finalize frees the context. There is no global mutable
 * state, so any number of communicators may use the library from any threads.
 *
 * A file with any bad line is ignored as a whole (see tun_init for why), unless
 * CHOIR_TUNER_STRICT=1 asks for init to fail instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tun.h"

#define TUN_EXPORT __attribute__((visibility("default")))
#define TUN_DEFAULT_FILE "nccl_tuner.conf"

typedef struct tun_ctx {
  ncclDebugLogger_t log;
  uint64_t comm_id;
  char* path;        /* the config file, for messages */
  tun_rule_t* rules; /* the rules for this communicator, grouped by collective, file order */
  int nrules;
  /* Rules of collective c are rules[first[c] .. first[c + 1]). */
  int first[TUN_NUM_COLLS + 1];
} tun_ctx_t;

static bool tun_env_true(const char* name) {
  const char* v = getenv(name);
  return v != NULL && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 ||
                       strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0);
}

static bool tun_rule_fits_comm(const tun_rule_t* r, size_t n_ranks, size_t n_nodes) {
  return (r->n_nodes == TUN_ANY || (size_t)r->n_nodes == n_nodes) &&
         (r->n_ranks == TUN_ANY || (size_t)r->n_ranks == n_ranks);
}

static void tun_rule_describe(const tun_rule_t* r, char* buf, size_t size) {
  char max[32], chunk[32], pipe_ops[16], channels[16];
  snprintf(pipe_ops, sizeof(pipe_ops), "%d", r->pipe_ops);
  if (r->channels == TUN_ANY)
    snprintf(channels, sizeof(channels), "core's");
  else
    snprintf(channels, sizeof(channels), "%d", r->channels);
  if (r->max_bytes == SIZE_MAX)
    snprintf(max, sizeof(max), "max");
  else
    snprintf(max, sizeof(max), "%zu", r->max_bytes);
  if (r->chunk_size == 0)
    snprintf(chunk, sizeof(chunk), "core's");
  else
    snprintf(chunk, sizeof(chunk), "%zu", r->chunk_size);
  snprintf(buf, size, "%s %zu..%s bytes, numPipeOps %s, regBuff %s -> %s/%s, channels %s, chunk %s",
           tun_coll_name(r->coll), r->min_bytes, max, r->pipe_ops == TUN_ANY ? "any" : pipe_ops,
           r->reg_buff == TUN_ANY ? "any"
           : r->reg_buff          ? "1"
                                  : "0",
           r->algo == TUN_ANY ? "core's" : tun_algo_name(r->algo),
           r->proto == TUN_ANY ? "core's" : tun_proto_name(r->proto), channels, chunk);
}

/* Keeps the rules that can match this communicator, grouped by collective (a stable counting
 * sort, so file order holds within a collective). */
static ncclResult_t tun_ctx_take_rules(tun_ctx_t* ctx, const tun_config_t* cfg, size_t n_ranks,
                                       size_t n_nodes) {
  int count[TUN_NUM_COLLS] = {0};
  int kept = 0;
  for (int i = 0; i < cfg->nrules; i++) {
    if (!tun_rule_fits_comm(&cfg->rules[i], n_ranks, n_nodes)) continue;
    count[cfg->rules[i].coll]++;
    kept++;
  }
  ctx->first[0] = 0;
  for (int c = 0; c < TUN_NUM_COLLS; c++) ctx->first[c + 1] = ctx->first[c] + count[c];
  ctx->nrules = kept;
  if (kept == 0) return ncclSuccess;
  ctx->rules = calloc((size_t)kept, sizeof(*ctx->rules));
  if (ctx->rules == NULL) {
    TUN_LOG(ctx->log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING, TUN_PFX "out of memory for %d rules",
            kept);
    return ncclSystemError;
  }
  int next[TUN_NUM_COLLS];
  memcpy(next, ctx->first, sizeof(next));
  for (int i = 0; i < cfg->nrules; i++) {
    const tun_rule_t* r = &cfg->rules[i];
    if (!tun_rule_fits_comm(r, n_ranks, n_nodes)) continue;
    tun_rule_t* kept_rule = &ctx->rules[next[r->coll]++];
    *kept_rule = *r;
    if (r->channels == TUN_ANY)
      snprintf(kept_rule->channels_text, sizeof(kept_rule->channels_text), "core's");
    else
      snprintf(kept_rule->channels_text, sizeof(kept_rule->channels_text), "%d", r->channels);
  }
  return ncclSuccess;
}

static void tun_ctx_free(tun_ctx_t* ctx) {
  if (ctx == NULL) return;
  free(ctx->rules);
  free(ctx->path);
  free(ctx);
}

/*
 * Error policy. A bad line is reported at WARN with file, line, field and value, and then the
 * whole file is ignored: rules are first-match, so dropping one line would silently hand its
 * collectives to the rules below it, a configuration nobody wrote. Ignoring the file leaves the
 * core's own choices, the same outcome as running without a tuner. Init still succeeds by
 * default because NVIDIA's NCCL fails communicator creation when a tuner's init fails (a tuning
 * typo would stop the job) while Choir's core drops the tuner: with CHOIR_TUNER_STRICT=1 init
 * returns ncclInvalidArgument for operators who prefer a hard stop.
 */
static ncclResult_t tun_init(int version, void** ctx_p, uint64_t comm_id, size_t n_ranks,
                             size_t n_nodes, ncclDebugLogger_t log) {
  const char* env = getenv("NCCL_TUNER_CONFIG_FILE");
  bool named = env != NULL && env[0] != '\0';
  const char* path = named ? env : TUN_DEFAULT_FILE;
  bool strict = tun_env_true("CHOIR_TUNER_STRICT");

  tun_ctx_t* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) return ncclSystemError;
  ctx->log = log;
  ctx->comm_id = comm_id;
  ctx->path = strdup(path);
  if (ctx->path == NULL) {
    tun_ctx_free(ctx);
    return ncclSystemError;
  }

  tun_config_t cfg = {NULL, 0, 0, 0};
  ncclResult_t res = tun_config_read(path, log, &cfg);
  if (res != ncclSuccess) goto fail;

  if (cfg.open_errno != 0) {
    char err[128];
    const char* why = tun_strerror(cfg.open_errno, err, sizeof(err));
    if (!named && cfg.open_errno == ENOENT) {
      /* The usual case: no file, no rules. */
      TUN_LOG(log, NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING,
              TUN_PFX
              "no config file ./%s and NCCL_TUNER_CONFIG_FILE unset: no rules, the "
              "core's choices stand",
              path);
    } else {
      TUN_LOG(log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING,
              TUN_PFX "cannot open config file %s%s: %s; no rules, the core's choices stand%s",
              path, named ? " (NCCL_TUNER_CONFIG_FILE)" : "", why,
              strict ? "; failing init (CHOIR_TUNER_STRICT)" : "");
      if (strict) {
        res = ncclInvalidArgument;
        goto fail;
      }
    }
  } else if (cfg.nbad != 0) {
    TUN_LOG(log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING, TUN_PFX "%s: %d bad line%s (above): %s",
            path, cfg.nbad, cfg.nbad == 1 ? "" : "s",
            strict ? "failing init (CHOIR_TUNER_STRICT)"
                   : "ignoring the whole file, the core's choices stand (set "
                     "CHOIR_TUNER_STRICT=1 to fail init instead)");
    if (strict) {
      res = ncclInvalidArgument;
      goto fail;
    }
  } else {
    res = tun_ctx_take_rules(ctx, &cfg, n_ranks, n_nodes);
    if (res != ncclSuccess) goto fail;
    TUN_LOG(log, NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING,
            TUN_PFX "comm 0x%llx (%zu ranks, %zu nodes, tuner v%d): %d of %d rules from %s apply",
            (unsigned long long)comm_id, n_ranks, n_nodes, version, ctx->nrules, cfg.nrules, path);
    bool chunks = false;
    for (int i = 0; i < cfg.nrules; i++) { /* in file order */
      const tun_rule_t* r = &cfg.rules[i];
      if (!tun_rule_fits_comm(r, n_ranks, n_nodes)) continue;
      char desc[256];
      tun_rule_describe(r, desc, sizeof(desc));
      TUN_LOG(log, NCCL_LOG_INFO, NCCL_TUNING, TUN_PFX "%s:%d: %s", path, r->line, desc);
      chunks = chunks || r->chunk_size != 0;
    }
    if (chunks && version < 6)
      TUN_LOG(log, NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING,
              TUN_PFX
              "chunk sizes in %s are not used: this core loaded the v%d table, which has "
              "no getChunkSize",
              path, version);
  }
  tun_config_free(&cfg);
  *ctx_p = ctx;
  return ncclSuccess;

fail:
  tun_config_free(&cfg);
  tun_ctx_free(ctx);
  return res;
}

static ncclResult_t tun_init_v6(void** ctx_p, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                                ncclDebugLogger_t log, ncclNvlDomainInfo_v6_t* nvl_domains,
                                ncclTunerConstants_v6_t* constants) {
  (void)nvl_domains;
  (void)constants; /* the core's model constants are left as they are */
  return tun_init(6, ctx_p, comm_id, n_ranks, n_nodes, log);
}

static ncclResult_t tun_init_v5(void** ctx_p, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                                ncclDebugLogger_t log, ncclNvlDomainInfo_v5_t* nvl_domains,
                                ncclTunerConstants_v5_t* constants) {
  (void)nvl_domains;
  (void)constants;
  return tun_init(5, ctx_p, comm_id, n_ranks, n_nodes, log);
}

/* The cost-table entry a rule prefers, if it is usable (>= 0: -1.0 marks an entry the core or
 * NCCL_ALGO/NCCL_PROTO ruled out, and it is never revived). With TUN_ANY in one dimension, the
 * cheapest usable entry along it, which keeps the core's preference there. */
static bool tun_rule_pick(const tun_rule_t* r, const float* table, int nalgo, int nproto,
                          int* algo_p, int* proto_p) {
  if (r->algo == TUN_ANY && r->proto == TUN_ANY) {
    *algo_p = *proto_p = TUN_ANY; /* channels or chunk only: the table is left alone */
    return true;
  }
  if (r->algo >= nalgo || r->proto >= nproto) return false;
  int best_a = TUN_ANY, best_p = TUN_ANY;
  int a_lo = r->algo == TUN_ANY ? 0 : r->algo, a_hi = r->algo == TUN_ANY ? nalgo : r->algo + 1;
  int p_lo = r->proto == TUN_ANY ? 0 : r->proto, p_hi = r->proto == TUN_ANY ? nproto : r->proto + 1;
  for (int a = a_lo; a < a_hi; a++) {
    for (int p = p_lo; p < p_hi; p++) {
      float t = table[a * nproto + p];
      if (!(t >= 0.0f)) continue; /* also skips NaN */
      if (best_a == TUN_ANY || t < table[best_a * nproto + best_p]) {
        best_a = a;
        best_p = p;
      }
    }
  }
  if (best_a == TUN_ANY) return false;
  *algo_p = best_a;
  *proto_p = best_p;
  return true;
}

/* Hot path: called for every collective the core plans. Scans this collective's rules only. */
static ncclResult_t tun_get_coll_info(void* context, ncclFunc_t coll, size_t n_bytes, int pipe_ops,
                                      float** cost_table, int nalgo, int nproto, int reg_buff,
                                      int* n_channels) {
  tun_ctx_t* ctx = context;
  if (ctx == NULL || cost_table == NULL || (unsigned)coll >= TUN_NUM_COLLS) return ncclSuccess;
  /* A contiguous float[nalgo][nproto], passed as float** by the ABI. */
  float* table = (float*)cost_table;
  for (int i = ctx->first[coll]; i < ctx->first[coll + 1]; i++) {
    tun_rule_t* r = &ctx->rules[i];
    if (tun_rule_chunk_only(r)) continue;
    if (n_bytes < r->min_bytes || n_bytes > r->max_bytes) continue;
    if (r->pipe_ops != TUN_ANY && r->pipe_ops != pipe_ops) continue;
    if (r->reg_buff != TUN_ANY && r->reg_buff != reg_buff) continue;
    int a, p;
    /* Its entry is unusable for this call: the next rule may name a fallback. */
    if (!tun_rule_pick(r, table, nalgo, nproto, &a, &p)) continue;
    if (a != TUN_ANY) table[a * nproto + p] = 0.0f;
    if (r->channels != TUN_ANY) *n_channels = r->channels;
    TUN_LOG(ctx->log, r->reported ? NCCL_LOG_TRACE : NCCL_LOG_INFO, NCCL_TUNING,
            TUN_PFX
            "%s:%d applied to %s of %zu bytes (numPipeOps %d, regBuff %d): %s/%s, "
            "channels %s%s",
            ctx->path, r->line, tun_coll_name(coll), n_bytes, pipe_ops, reg_buff,
            a == TUN_ANY ? "core's" : tun_algo_name(a), p == TUN_ANY ? "core's" : tun_proto_name(p),
            r->channels_text, r->reported ? "" : " (further uses of this rule at TRACE)");
    r->reported = true;
    return ncclSuccess;
  }
  return ncclSuccess;
}

/* v6 only. The chunk size of the first rule that sets one and matches the collective, the size,
 * and the algorithm and protocol the core settled on (-1 in the rule matches any). */
static ncclResult_t tun_get_chunk_size(void* context, ncclFunc_t coll, size_t n_bytes, int algo,
                                       int proto, int n_channels, size_t* chunk_size) {
  (void)n_channels;
  tun_ctx_t* ctx = context;
  if (ctx == NULL || (unsigned)coll >= TUN_NUM_COLLS) return ncclSuccess;
  for (int i = ctx->first[coll]; i < ctx->first[coll + 1]; i++) {
    tun_rule_t* r = &ctx->rules[i];
    if (r->chunk_size == 0) continue;
    if (n_bytes < r->min_bytes || n_bytes > r->max_bytes) continue;
    if ((r->algo != TUN_ANY && r->algo != algo) || (r->proto != TUN_ANY && r->proto != proto))
      continue;
    TUN_LOG(ctx->log, r->chunk_reported ? NCCL_LOG_TRACE : NCCL_LOG_INFO, NCCL_TUNING,
            TUN_PFX "%s:%d: chunk size %zu -> %zu for %s of %zu bytes (%s/%s)%s", ctx->path,
            r->line, *chunk_size, r->chunk_size, tun_coll_name(coll), n_bytes, tun_algo_name(algo),
            tun_proto_name(proto), r->chunk_reported ? "" : " (further uses at TRACE)");
    r->chunk_reported = true;
    *chunk_size = r->chunk_size;
    return ncclSuccess;
  }
  return ncclSuccess;
}

static ncclResult_t tun_finalize(void* context) {
  tun_ctx_free(context);
  return ncclSuccess;
}

/* NCCL 2.30 and Choir take v6; NCCL 2.28 and 2.29 stop at v5. Same behaviour, less chunk size. */
TUN_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = TUN_NAME,
    .init = tun_init_v6,
    .getCollInfo = tun_get_coll_info,
    .finalize = tun_finalize,
    .getChunkSize = tun_get_chunk_size,
};

TUN_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = TUN_NAME,
    .init = tun_init_v5,
    .getCollInfo = tun_get_coll_info,
    .finalize = tun_finalize,
};
