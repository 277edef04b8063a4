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
 * A UCX tag is 64 bits: a comm id (high 32 bits) and NCCL's int tag (low 32 bits, which picks the
 * buffer inside a multi-receive). Comm ids are 31-bit (1 .. NUX_COMM_ID_MAX, never 0), assigned by
 * the worker that receives on them and unique among that worker's live comms. Data goes to the
 * receive comm's id; the top bit marks a close notice (nux_tag_notice), sent by either side of a
 * connection to its peer's id when it closes, so no NCCL tag can ever match a notice. Receives
 * match all 64 bits. UCX matches messages of one endpoint with one tag in posting order, so sends
 * and receives of a connection pair up in order, as the ABI requires. */
#define NUX_TAG_MASK UINT64_MAX
#define NUX_COMM_ID_MAX 0x7fffffffu
#define NUX_TAG_NOTICE_BIT 0x8000000000000000ULL

static inline uint64_t nux_tag_make(uint32_t comm_id, int tag) {
  return (uint64_t)comm_id << 32 | (uint64_t)(uint32_t)tag;
}
static inline uint64_t nux_tag_notice(uint32_t comm_id) {
  return NUX_TAG_NOTICE_BIT | (uint64_t)comm_id << 32;
}
static inline uint32_t nux_tag_comm(uint64_t t) { return (uint32_t)(t >> 32) & NUX_COMM_ID_MAX; }
static inline int nux_tag_nccl(uint64_t t) { return (int)(uint32_t)t; }
static inline bool nux_tag_is_notice(uint64_t t) { return (t & NUX_TAG_NOTICE_BIT) != 0; }

/* The next comm id after *counter (1 .. NUX_COMM_ID_MAX, wrapping past 0), advancing it. */
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
  int max_mib;          /* CHOIR_UCX_MAX_MIB */
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
