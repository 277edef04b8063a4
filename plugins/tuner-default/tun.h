/*
 * plugins/tuner-default: declarations shared by the config parser (tun_config.c) and the ABI
 * entries (tun_tuner.c). Nothing here is exported: the library's only public symbols are the
 * ncclTunerPlugin_v6 and ncclTunerPlugin_v5 tables (see tun_exports.map).
 */
#ifndef CHOIR_TUN_H
#define CHOIR_TUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_tuner.h"

#define TUN_NAME "Choir-default"
/* Every log line starts with this, as NCCL's own tuner messages start with "TUNER/". */
#define TUN_PFX "TUNER/" TUN_NAME ": "

/* The collective ids the core asks a tuner about: ncclFuncBroadcast .. ncclFuncAllReduce. */
#define TUN_NUM_COLLS 5

/* "Any" in a match field, "keep the core's value" in an action field. */
#define TUN_ANY (-1)

/* One config line, parsed. Match fields: coll, byte range, n_nodes, n_ranks, pipe_ops, reg_buff.
 * Action fields: algo/proto (cost-table preference), channels, chunk_size. */
typedef struct tun_rule {
  size_t min_bytes, max_bytes; /* inclusive range of nBytes */
  size_t chunk_size;           /* 0: keep the core's chunk size */
  int coll;                    /* ncclFunc_t, < TUN_NUM_COLLS */
  int algo, proto;             /* NCCL_ALGO_* and NCCL_PROTO_*, or TUN_ANY */
  int channels;                /* channel cap, or TUN_ANY */
  int n_nodes, n_ranks;        /* communicator shape, or TUN_ANY */
  int pipe_ops;                /* numPipeOps, or TUN_ANY */
  int reg_buff;                /* 0, 1, or TUN_ANY */
  int line;                    /* line in the config file, for messages */
  char channels_text[12];      /* channels as logged: the number, or "core's" */
  /* Set once the rule was reported at INFO for this communicator: later uses go to TRACE.
   * Only the thread that plans for the owning communicator touches it. */
  bool reported, chunk_reported;
} tun_rule_t;

/* A rule that only sets a chunk size: it takes no part in the cost-table lookup. */
static inline bool tun_rule_chunk_only(const tun_rule_t* r) {
  return r->chunk_size != 0 && r->algo == TUN_ANY && r->proto == TUN_ANY && r->channels == TUN_ANY;
}

/* Everything read from one config file. */
typedef struct tun_config {
  tun_rule_t* rules; /* in file order */
  int nrules;
  int nbad;       /* lines rejected, each already reported at WARN */
  int open_errno; /* nonzero: the file could not be opened, and there are no rules */
} tun_config_t;

/*
 * Reads the rules of the file at `path`. Blank lines and '#' comments (whole-line or trailing)
 * are skipped; each line that does not parse is reported through `log` at WARN as
 * "<path>:<line>: field N (<name>): ..." and counted in nbad. A file that cannot be opened is not
 * an error here: open_errno says why. Returns ncclSystemError only when memory runs out.
 */
ncclResult_t tun_config_read(const char* path, ncclDebugLogger_t log, tun_config_t* cfg_p);
void tun_config_free(tun_config_t* cfg);

/* Thread-safe strerror. */
const char* tun_strerror(int err, char* buf, size_t size);

/* Names as the config file spells them ("ring", "ll128", "allreduce"); "any" for TUN_ANY. */
const char* tun_coll_name(int coll);
const char* tun_algo_name(int algo);
const char* tun_proto_name(int proto);

/* Calls the core's logger, if there is one. */
#define TUN_LOG(log, level, flags, ...)                                          \
  do {                                                                           \
    if ((log) != NULL) (log)((level), (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
