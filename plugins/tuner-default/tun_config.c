/*
 * The config file: NCCL's example-tuner CSV format, one rule per line,
 *   collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks
 *     [,numPipeOps[,regBuff[,chunkSize]]]
 * parsed strictly: a name that is not in the lists, a number with trailing garbage, a value out
 * of range or a wrong field count is an error naming the line and the field, never a silent
 * default. Runs at communicator init only; nothing here is on the hot path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tun.h"

#define TUN_FIELDS_MIN 8
#define TUN_FIELDS_MAX 11

enum {
  TUN_F_COLL,
  TUN_F_MIN_BYTES,
  TUN_F_MAX_BYTES,
  TUN_F_ALGO,
  TUN_F_PROTO,
  TUN_F_CHANNELS,
  TUN_F_NNODES,
  TUN_F_NRANKS,
  TUN_F_PIPE_OPS,
  TUN_F_REG_BUFF,
  TUN_F_CHUNK
};

static const char* const tun_field_names[TUN_FIELDS_MAX] = {
    "collective_type", "min_bytes", "max_bytes",  "algorithm", "protocol", "channels",
    "nNodes",          "nRanks",    "numPipeOps", "regBuff",   "chunkSize"};

typedef struct {
  const char* name;
  int value;
} tun_name_t;

static const tun_name_t tun_colls[] = {{"broadcast", ncclFuncBroadcast},
                                       {"reduce", ncclFuncReduce},
                                       {"allgather", ncclFuncAllGather},
                                       {"reducescatter", ncclFuncReduceScatter},
                                       {"allreduce", ncclFuncAllReduce}};
_Static_assert(sizeof(tun_colls) / sizeof(tun_colls[0]) == TUN_NUM_COLLS, "one name per id");

/* The first spelling of each id is the canonical one; the others are NCCL_ALGO's spellings. */
static const tun_name_t tun_algos[] = {{"tree", NCCL_ALGO_TREE},
                                       {"ring", NCCL_ALGO_RING},
                                       {"collnet_direct", NCCL_ALGO_COLLNET_DIRECT},
                                       {"collnet_chain", NCCL_ALGO_COLLNET_CHAIN},
                                       {"nvls", NCCL_ALGO_NVLS},
                                       {"nvls_tree", NCCL_ALGO_NVLS_TREE},
                                       {"pat", NCCL_ALGO_PAT},
                                       {"collnetdirect", NCCL_ALGO_COLLNET_DIRECT},
                                       {"collnetchain", NCCL_ALGO_COLLNET_CHAIN},
                                       {"nvlstree", NCCL_ALGO_NVLS_TREE}};

static const tun_name_t tun_protos[] = {
    {"ll", NCCL_PROTO_LL}, {"ll128", NCCL_PROTO_LL128}, {"simple", NCCL_PROTO_SIMPLE}};

#define TUN_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Byte counts are read as unsigned long long and stored as size_t. */
_Static_assert(sizeof(size_t) == sizeof(unsigned long long), "LP64 only");

const char* tun_strerror(int err, char* buf, size_t size) {
#ifdef _GNU_SOURCE
  return strerror_r(err, buf, size); /* GNU: returns the message, in buf or static */
#else
  return strerror_r(err, buf, size) == 0 ? buf : "unknown error";
#endif
}

static const char* tun_lookup_name(const tun_name_t* names, int n, int value) {
  if (value == TUN_ANY) return "any";
  for (int i = 0; i < n; i++)
    if (names[i].value == value) return names[i].name;
  return "?";
}

const char* tun_coll_name(int coll) {
  return tun_lookup_name(tun_colls, TUN_COUNT(tun_colls), coll);
}
const char* tun_algo_name(int algo) {
  return tun_lookup_name(tun_algos, TUN_COUNT(tun_algos), algo);
}
const char* tun_proto_name(int proto) {
  return tun_lookup_name(tun_protos, TUN_COUNT(tun_protos), proto);
}

/* Case-insensitive: "AllReduce" and "RING" mean what they say (the example tuner would quietly
 * read them as allreduce and ring by default, whatever they were). */
static bool tun_parse_name(const tun_name_t* names, int n, const char* s, int* value_p) {
  for (int i = 0; i < n; i++) {
    if (strcasecmp(names[i].name, s) == 0) {
      *value_p = names[i].value;
      return true;
    }
  }
  return false;
}

/* "-1" or a plain decimal number: no sign other than that, no spaces, no suffix, no overflow. */
static bool tun_parse_u64(const char* s, bool* any_p, unsigned long long* value_p) {
  if (strcmp(s, "-1") == 0) {
    *any_p = true;
    *value_p = 0;
    return true;
  }
  if (s[0] == '\0') return false;
  for (const char* c = s; *c != '\0'; c++)
    if (*c < '0' || *c > '9') return false;
  errno = 0;
  unsigned long long v = strtoull(s, NULL, 10);
  if (errno == ERANGE) return false;
  *any_p = false;
  *value_p = v;
  return true;
}

/* -1, or an integer in [lo, hi]. */
static bool tun_parse_int(const char* s, int lo, int hi, int* value_p) {
  bool any;
  unsigned long long v;
  if (!tun_parse_u64(s, &any, &v)) return false;
  if (any) {
    *value_p = TUN_ANY;
    return true;
  }
  if (v < (unsigned long long)lo || v > (unsigned long long)hi) return false;
  *value_p = (int)v;
  return true;
}

static char* tun_trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
    s[--n] = '\0';
  return s;
}

#define TUN_BAD(field, ...)                                                                       \
  do {                                                                                            \
    int off_ = snprintf(why, why_size, "field %d (%s): ", (field) + 1, tun_field_names[(field)]); \
    if (off_ > 0 && (size_t)off_ < why_size)                                                      \
      snprintf(why + off_, why_size - (size_t)off_, __VA_ARGS__);                                 \
    return false;                                                                                 \
  } while (0)

/* Parses one non-blank, comment-free line (modified in place). On failure, writes what is wrong
 * and with which field into `why`. */
static bool tun_parse_rule(char* line, tun_rule_t* r, char* why, size_t why_size) {
  char* f[TUN_FIELDS_MAX];
  int nf = 0;
  for (char* s = line;;) {
    char* comma = strchr(s, ',');
    if (comma != NULL) *comma = '\0';
    if (nf < TUN_FIELDS_MAX) f[nf] = tun_trim(s);
    nf++;
    if (comma == NULL) break;
    s = comma + 1;
  }
  if (nf < TUN_FIELDS_MIN || nf > TUN_FIELDS_MAX) {
    snprintf(why, why_size,
             "%d fields, expected 8 to 11: collective_type,min_bytes,max_bytes,algorithm,"
             "protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff[,chunkSize]]]",
             nf);
    return false;
  }
  for (int i = 0; i < nf; i++)
    if (f[i][0] == '\0') TUN_BAD(i, "empty (use -1 for any / keep the default)");

  memset(r, 0, sizeof(*r));
  if (!tun_parse_name(tun_colls, TUN_COUNT(tun_colls), f[TUN_F_COLL], &r->coll))
    TUN_BAD(TUN_F_COLL, "'%s' is not one of broadcast, reduce, allgather, reducescatter, allreduce",
            f[TUN_F_COLL]);

  bool any;
  unsigned long long v;
  if (!tun_parse_u64(f[TUN_F_MIN_BYTES], &any, &v))
    TUN_BAD(TUN_F_MIN_BYTES, "'%s' is not a byte count (decimal, or -1 for 0)", f[TUN_F_MIN_BYTES]);
  r->min_bytes = any ? 0 : (size_t)v;
  if (!tun_parse_u64(f[TUN_F_MAX_BYTES], &any, &v))
    TUN_BAD(TUN_F_MAX_BYTES, "'%s' is not a byte count (decimal, or -1 for no limit)",
            f[TUN_F_MAX_BYTES]);
  r->max_bytes = any ? SIZE_MAX : (size_t)v;
  if (r->min_bytes > r->max_bytes)
    TUN_BAD(TUN_F_MAX_BYTES, "%s is smaller than min_bytes %s", f[TUN_F_MAX_BYTES],
            f[TUN_F_MIN_BYTES]);

  if (strcmp(f[TUN_F_ALGO], "-1") == 0)
    r->algo = TUN_ANY;
  else if (!tun_parse_name(tun_algos, TUN_COUNT(tun_algos), f[TUN_F_ALGO], &r->algo))
    TUN_BAD(TUN_F_ALGO,
            "'%s' is not one of tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, "
            "or -1 (the core's choice)",
            f[TUN_F_ALGO]);
  if (strcmp(f[TUN_F_PROTO], "-1") == 0)
    r->proto = TUN_ANY;
  else if (!tun_parse_name(tun_protos, TUN_COUNT(tun_protos), f[TUN_F_PROTO], &r->proto))
    TUN_BAD(TUN_F_PROTO, "'%s' is not one of ll, ll128, simple, or -1 (the core's choice)",
            f[TUN_F_PROTO]);

  if (!tun_parse_int(f[TUN_F_CHANNELS], 1, 0x7fffffff, &r->channels))
    TUN_BAD(TUN_F_CHANNELS, "'%s' is not a channel count (1 or more, or -1 to keep the core's)",
            f[TUN_F_CHANNELS]);
  if (!tun_parse_int(f[TUN_F_NNODES], 1, 0x7fffffff, &r->n_nodes))
    TUN_BAD(TUN_F_NNODES, "'%s' is not a node count (1 or more, or -1 for any)", f[TUN_F_NNODES]);
  if (!tun_parse_int(f[TUN_F_NRANKS], 1, 0x7fffffff, &r->n_ranks))
    TUN_BAD(TUN_F_NRANKS, "'%s' is not a rank count (1 or more, or -1 for any)", f[TUN_F_NRANKS]);

  r->pipe_ops = TUN_ANY;
  if (nf > TUN_F_PIPE_OPS && !tun_parse_int(f[TUN_F_PIPE_OPS], 1, 0x7fffffff, &r->pipe_ops))
    TUN_BAD(TUN_F_PIPE_OPS, "'%s' is not an operation count (1 or more, or -1 for any)",
            f[TUN_F_PIPE_OPS]);
  r->reg_buff = TUN_ANY;
  if (nf > TUN_F_REG_BUFF && !tun_parse_int(f[TUN_F_REG_BUFF], 0, 1, &r->reg_buff))
    TUN_BAD(TUN_F_REG_BUFF, "'%s' is not 0, 1, or -1 (any)", f[TUN_F_REG_BUFF]);

  r->chunk_size = 0;
  if (nf > TUN_F_CHUNK) {
    if (!tun_parse_u64(f[TUN_F_CHUNK], &any, &v) || (!any && v == 0))
      TUN_BAD(TUN_F_CHUNK, "'%s' is not a chunk size (bytes, 1 or more, or -1 to keep the core's)",
              f[TUN_F_CHUNK]);
    r->chunk_size = any ? 0 : (size_t)v;
    /* getChunkSize is not told numPipeOps or regBuff, so a chunk size cannot depend on them. */
    if (r->chunk_size != 0 && (r->pipe_ops != TUN_ANY || r->reg_buff != TUN_ANY))
      TUN_BAD(TUN_F_CHUNK,
              "a rule that sets a chunk size needs numPipeOps and regBuff -1 (getChunkSize does "
              "not see them); put the chunk size on a rule of its own");
  }
  return true;
}

ncclResult_t tun_config_read(const char* path, ncclDebugLogger_t log, tun_config_t* cfg_p) {
  tun_config_t cfg = {NULL, 0, 0, 0};
  FILE* file = fopen(path, "r");
  if (file == NULL) {
    cfg.open_errno = errno != 0 ? errno : EIO;
    *cfg_p = cfg;
    return ncclSuccess;
  }

  ncclResult_t res = ncclSuccess;
  int cap = 0;
  char* line = NULL;
  size_t line_cap = 0;
  int lineno = 0;
  while (getline(&line, &line_cap, file) != -1) {
    lineno++;
    char* hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char* text = tun_trim(line);
    if (text[0] == '\0') continue;

    char shown[160]; /* the line as written, for the message */
    snprintf(shown, sizeof(shown), "%s", text);
    tun_rule_t rule;
    char why[512];
    if (!tun_parse_rule(text, &rule, why, sizeof(why))) {
      TUN_LOG(log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING, TUN_PFX "%s:%d: %s (in '%s')", path,
              lineno, why, shown);
      cfg.nbad++;
      continue;
    }
    rule.line = lineno;
    if (cfg.nrules == cap) {
      int ncap = cap == 0 ? 16 : 2 * cap;
      tun_rule_t* grown = realloc(cfg.rules, (size_t)ncap * sizeof(*grown));
      if (grown == NULL) {
        TUN_LOG(log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING,
                TUN_PFX "out of memory reading %s (%d rules)", path, ncap);
        res = ncclSystemError;
        goto out_free;
      }
      cfg.rules = grown;
      cap = ncap;
    }
    cfg.rules[cfg.nrules++] = rule;
  }
  if (ferror(file)) {
    /* A read error half way is a file we cannot trust: same treatment as a bad line. */
    char err[128];
    TUN_LOG(log, NCCL_LOG_WARN, NCCL_INIT | NCCL_TUNING, TUN_PFX "%s:%d: read error: %s", path,
            lineno + 1, tun_strerror(errno, err, sizeof(err)));
    cfg.nbad++;
  }
  free(line);
  fclose(file);
  *cfg_p = cfg;
  return ncclSuccess;

out_free:
  free(line);
  fclose(file);
  free(cfg.rules);
  return res;
}

void tun_config_free(tun_config_t* cfg) {
  free(cfg->rules);
  cfg->rules = NULL;
  cfg->nrules = 0;
}
