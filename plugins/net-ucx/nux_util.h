/*
 * net-ucx pure helpers, without UCX or logging, so that the unit test (test/plugin/net-ucx)
 * checks them directly: the tag scheme, the knob table, UCX_NET_DEVICES / UCX_TLS matching.
 */
#ifndef NUX_UTIL_H
#define NUX_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most buffers one irecv may take (the ceiling of CHOIR_UCX_MAX_RECVS). */
#define NUX_MAX_RECVS 8

/* ---- Tags ------------------------------------------------------------------------------------
 * A UCX tag is 64 bits: the connection's comm id (high 32 bits, assigned by the receiver's worker,
 * never 0, unique among that worker's live receive comms) and NCCL's int tag (low 32 bits, which
 * picks the buffer inside a multi-receive). Receives match all 64 bits. UCX matches messages of
 * one endpoint with one tag in posting order, so sends and receives of a connection pair up in
 * order, as the ABI requires. */
#define NUX_TAG_MASK UINT64_MAX

static inline uint64_t nux_tag_make(uint32_t comm_id, int tag) {
  return (uint64_t)comm_id << 32 | (uint64_t)(uint32_t)tag;
}
static inline uint32_t nux_tag_comm(uint64_t t) { return (uint32_t)(t >> 32); }
static inline int nux_tag_nccl(uint64_t t) { return (int)(uint32_t)t; }

/* The next comm id after *counter (skipping 0, which no comm uses), advancing it. */
uint32_t nux_comm_id_next(uint32_t* counter);

/* ---- Knobs -----------------------------------------------------------------------------------
 * Every variable net-ucx reads, declared once: name, default, range, help. README.md lists the
 * same table. */
typedef struct {
  int max_recvs;        /* CHOIR_UCX_MAX_RECVS */
  int close_timeout_ms; /* CHOIR_UCX_CLOSE_TIMEOUT_MS */
  int peer_errors;      /* CHOIR_UCX_PEER_ERRORS */
  int progress;         /* CHOIR_UCX_PROGRESS */
  int reg;              /* CHOIR_UCX_REG */
} nux_knobs_t;

typedef struct {
  const char* name;
  int def, lo, hi;
  size_t offset; /* of the int in nux_knobs_t */
  const char* help;
} nux_knob_t;

extern const nux_knob_t nux_knob_table[];
extern const int nux_knob_count;

/* Parses value as an integer in [k->lo, k->hi]; false when malformed or out of range. */
bool nux_knob_parse(const nux_knob_t* k, const char* value, int* out);
/* Fills *out from get(name) for every knob: defaults for unset or empty variables; a bad value
 * gives the default and a call to bad(knob, value, arg). get is getenv in the plugin. */
void nux_knobs_read(nux_knobs_t* out, const char* (*get)(const char* name),
                    void (*bad)(const nux_knob_t* k, const char* value, void* arg), void* arg);

/* ---- UCX's own selection variables ------------------------------------------------------------
 */

/* Whether UCX_NET_DEVICES = spec selects device `dev` (NULL, "" or "all": every device; else a
 * comma list of exact names). */
bool nux_netdev_selected(const char* spec, const char* dev);
/* Whether spec names dev explicitly (not through "all"). */
bool nux_netdev_named(const char* spec, const char* dev);
/* Whether UCX_TLS = spec lets UCX use transport `tl` (NULL, "" or "all": every one; "^a,b"
 * excludes; a name selects itself and its family: "rc" rc_verbs and rc_mlx5, "ib" every rc/ud/dc,
 * the "_v" / "_x" short forms; a ":aux" suffix is ignored). A heuristic of UCX's own rules, used
 * only to list devices: UCX itself decides the transports of each connection. */
bool nux_tls_selected(const char* spec, const char* tl);

#endif
