/*
 * net-ib pure helpers: no verbs, no logging, so that the unit test compiles them directly.
 *   - the knob table (every variable net-ib reads, with default and range);
 *   - NCCL_IB_HCA parsing and matching (NCCL's syntax);
 *   - RoCE GID selection (NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY,
 *     NCCL_IB_ADDR_RANGE);
 *   - port speed from the verbs speed and width codes;
 *   - the imm-data encoding of a completion.
 */
#ifndef NIB_UTIL_H
#define NIB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most buffers one irecv may take (props.maxRecvs). */
#define NIB_MAX_RECVS 8
/* Most queue pairs one connection may use (NCCL_IB_QPS_PER_CONNECTION). */
#define NIB_MAX_QPS 8

/* ---- Knobs ---------------------------------------------------------------------------------- */

typedef struct {
  int disable;      /* NCCL_IB_DISABLE */
  int gid_index;    /* NCCL_IB_GID_INDEX; -1: chosen per port */
  int roce_version; /* NCCL_IB_ROCE_VERSION_NUM */
  int qps;          /* NCCL_IB_QPS_PER_CONNECTION */
  int timeout;      /* NCCL_IB_TIMEOUT */
  int retry_cnt;    /* NCCL_IB_RETRY_CNT */
  int sl;           /* NCCL_IB_SL */
  int tc;           /* NCCL_IB_TC */
  int max_recvs;    /* CHOIR_IB_MAX_RECVS */
  int peer_grace_ms; /* CHOIR_IB_PEER_GRACE_MS */
} nib_knobs_t;

typedef struct {
  const char* name;
  int def, lo, hi;
  size_t offset; /* of the int in nib_knobs_t */
  const char* help;
} nib_knob_t;

extern const nib_knob_t nib_knob_table[];
extern const int nib_knob_count;

/* Parses value as an integer in [k->lo, k->hi]; false when malformed or out of range. */
bool nib_knob_parse(const nib_knob_t* k, const char* value, int* out);
/* Fills *out from get(name) for every knob: defaults for unset or empty variables; a bad value
 * gives the default and a call to bad(knob, value, arg). */
void nib_knobs_read(nib_knobs_t* out, const char* (*get)(const char* name),
                    void (*bad)(const nib_knob_t* k, const char* value, void* arg), void* arg);

/* ---- NCCL_IB_HCA ----------------------------------------------------------------------------
 * A comma list of device names, each optionally ":port"; a leading '^' excludes the listed ones
 * instead, a leading '=' (after '^' if both) makes names exact instead of prefixes. A name
 * without a port matches every port of the device. Empty or unset: everything. */
#define NIB_HCA_MAX 32
typedef struct {
  bool exclude, exact;
  int n;
  char name[NIB_HCA_MAX][64];
  int port[NIB_HCA_MAX]; /* -1: any port */
} nib_hca_spec_t;

/* False when the value is malformed (a bad port, too many names): *s is then "everything". */
bool nib_hca_parse(const char* spec, nib_hca_spec_t* s);
bool nib_hca_match(const nib_hca_spec_t* s, const char* dev, int port);

/* ---- GIDs ----------------------------------------------------------------------------------- */

enum { NIB_GID_IB = 0, NIB_GID_ROCE_V1 = 1, NIB_GID_ROCE_V2 = 2 };

typedef struct {
  uint8_t raw[16];
  int type; /* NIB_GID_*; -1: unknown or empty slot */
} nib_gid_t;

/* An address range "a.b.c.d/len" or "x::y/len" (NCCL_IB_ADDR_RANGE). */
typedef struct {
  bool set;
  int family; /* AF_INET or AF_INET6 */
  uint8_t addr[16];
  int len;
} nib_range_t;

bool nib_range_parse(const char* s, nib_range_t* r);
/* Whether a GID is an IPv4-mapped address (::ffff:a.b.c.d). */
bool nib_gid_is_v4(const uint8_t raw[16]);
/* The GID index to use among gids[0..n): RoCE version `version` (1 or 2), address family
 * `family` (AF_INET, AF_INET6), inside `range` when set; IPv6 link-local addresses only when no
 * other one fits. Falls back to any non-empty GID of that version, then to any non-empty GID.
 * -1 when every slot is empty. */
int nib_gid_pick(const nib_gid_t* gids, int n, int version, int family, const nib_range_t* range);

/* ---- Speed ---------------------------------------------------------------------------------- */

/* Mbit/s of a port from ibv_port_attr's active_speed (or active_speed_ex when non-zero) and
 * active_width codes; 0 for codes this table does not know. */
int nib_port_speed_mbps(unsigned speed, unsigned speed_ex, unsigned width);

/* ---- Completion encoding --------------------------------------------------------------------
 * The sender's last write of every message carries imm data = slot * NIB_MAX_RECVS + index of
 * the buffer inside the receiver's multi-receive. */
static inline uint32_t nib_imm_make(int slot, int idx) {
  return (uint32_t)slot * NIB_MAX_RECVS + (uint32_t)idx;
}
static inline int nib_imm_slot(uint32_t imm) { return (int)(imm / NIB_MAX_RECVS); }
static inline int nib_imm_idx(uint32_t imm) { return (int)(imm % NIB_MAX_RECVS); }

#endif
