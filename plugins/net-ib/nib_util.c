/*
 * net-ib pure helpers (see nib_util.h). No verbs, no logging.
 */
#include "nib_util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

const nib_knob_t nib_knob_table[] = {
    {"NCCL_IB_DISABLE", 0, 0, 1, offsetof(nib_knobs_t, disable),
     "1: report no devices (the plugin loads but offers nothing)"},
    {"NCCL_IB_GID_INDEX", -1, -1, 1023, offsetof(nib_knobs_t, gid_index),
     "GID table index for RoCE ports; -1 picks one per port (version, family, range)"},
    {"NCCL_IB_ROCE_VERSION_NUM", 2, 1, 2, offsetof(nib_knobs_t, roce_version),
     "RoCE version of the GID picked when NCCL_IB_GID_INDEX is -1"},
    {"NCCL_IB_QPS_PER_CONNECTION", 1, 1, NIB_MAX_QPS, offsetof(nib_knobs_t, qps),
     "RC queue pairs per connection; messages go round-robin over them"},
    {"NCCL_IB_TIMEOUT", 20, 1, 31, offsetof(nib_knobs_t, timeout),
     "RC ack timeout exponent: 4.096 us * 2^value per retry"},
    {"NCCL_IB_RETRY_CNT", 7, 0, 7, offsetof(nib_knobs_t, retry_cnt),
     "RC transport retries before a queue pair fails"},
    {"NCCL_IB_SL", 0, 0, 15, offsetof(nib_knobs_t, sl), "InfiniBand service level"},
    {"NCCL_IB_TC", 0, 0, 255, offsetof(nib_knobs_t, tc), "traffic class of RoCE packets"},
    {"CHOIR_IB_MAX_RECVS", NIB_MAX_RECVS, 1, NIB_MAX_RECVS, offsetof(nib_knobs_t, max_recvs),
     "most buffers one irecv takes (props.maxRecvs)"},
    {"CHOIR_IB_PEER_GRACE_MS", 100, 0, 60000, offsetof(nib_knobs_t, peer_grace_ms),
     "after the peer's connection socket closes, how long pending requests keep polling for "
     "completions already on their way before they fail"},
};
const int nib_knob_count = (int)(sizeof(nib_knob_table) / sizeof(nib_knob_table[0]));

bool nib_knob_parse(const nib_knob_t* k, const char* value, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(value, &end, 0);
  if (errno != 0 || end == value) return false;
  while (*end != '\0' && isspace((unsigned char)*end)) end++;
  if (*end != '\0' || v < k->lo || v > k->hi) return false;
  *out = (int)v;
  return true;
}

void nib_knobs_read(nib_knobs_t* out, const char* (*get)(const char* name),
                    void (*bad)(const nib_knob_t* k, const char* value, void* arg), void* arg) {
  for (int i = 0; i < nib_knob_count; i++) {
    const nib_knob_t* k = &nib_knob_table[i];
    int* field = (int*)((char*)out + k->offset);
    *field = k->def;
    const char* v = get(k->name);
    if (v == NULL || v[0] == '\0') continue;
    if (!nib_knob_parse(k, v, field)) {
      *field = k->def;
      if (bad != NULL) bad(k, v, arg);
    }
  }
}

/* ---- NCCL_IB_HCA ---------------------------------------------------------------------------- */

bool nib_hca_parse(const char* spec, nib_hca_spec_t* s) {
  memset(s, 0, sizeof(*s));
  if (spec == NULL) return true;
  const char* p = spec;
  while (isspace((unsigned char)*p)) p++;
  if (*p == '^') {
    s->exclude = true;
    p++;
  }
  if (*p == '=') {
    s->exact = true;
    p++;
  }
  while (*p != '\0') {
    const char* end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    while (len > 0 && isspace((unsigned char)*p)) p++, len--;
    while (len > 0 && isspace((unsigned char)p[len - 1])) len--;
    if (len > 0) {
      if (s->n == NIB_HCA_MAX || len >= sizeof(s->name[0])) goto bad;
      char tok[64];
      memcpy(tok, p, len);
      tok[len] = '\0';
      int port = -1;
      char* colon = strchr(tok, ':');
      if (colon != NULL) {
        char* pe = NULL;
        long v = strtol(colon + 1, &pe, 10);
        if (pe == colon + 1 || *pe != '\0' || v < 1 || v > 255) goto bad;
        port = (int)v;
        *colon = '\0';
      }
      if (tok[0] == '\0') goto bad;
      memcpy(s->name[s->n], tok, strlen(tok) + 1);
      s->port[s->n] = port;
      s->n++;
    }
    if (end == NULL) break;
    p = end + 1;
  }
  return true;
bad:
  memset(s, 0, sizeof(*s));
  return false;
}

bool nib_hca_match(const nib_hca_spec_t* s, const char* dev, int port) {
  if (s->n == 0) return true; /* nothing listed: everything (a bare "^" too) */
  bool listed = false;
  for (int i = 0; i < s->n && !listed; i++) {
    bool name_ok = s->exact ? strcmp(s->name[i], dev) == 0
                            : strncmp(s->name[i], dev, strlen(s->name[i])) == 0;
    listed = name_ok && (s->port[i] < 0 || s->port[i] == port);
  }
  return s->exclude ? !listed : listed;
}

/* ---- GIDs ----------------------------------------------------------------------------------- */

bool nib_range_parse(const char* s, nib_range_t* r) {
  memset(r, 0, sizeof(*r));
  if (s == NULL || s[0] == '\0') return true;
  const char* slash = strchr(s, '/');
  char host[64];
  size_t hlen = slash != NULL ? (size_t)(slash - s) : strlen(s);
  if (slash == NULL || hlen == 0 || hlen >= sizeof(host)) return false;
  memcpy(host, s, hlen);
  host[hlen] = '\0';
  char* pe = NULL;
  long len = strtol(slash + 1, &pe, 10);
  if (pe == slash + 1 || *pe != '\0') return false;
  if (inet_pton(AF_INET, host, r->addr) == 1) {
    if (len < 0 || len > 32) return false;
    r->family = AF_INET;
  } else if (inet_pton(AF_INET6, host, r->addr) == 1) {
    if (len < 0 || len > 128) return false;
    r->family = AF_INET6;
  } else {
    return false;
  }
  r->len = (int)len;
  r->set = true;
  return true;
}

bool nib_gid_is_v4(const uint8_t raw[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(raw, prefix, sizeof(prefix)) == 0;
}

static bool nib_gid_empty(const uint8_t raw[16]) {
  for (int i = 0; i < 16; i++)
    if (raw[i] != 0) return false;
  return true;
}

static bool nib_prefix_eq(const uint8_t* a, const uint8_t* b, int bits) {
  int bytes = bits / 8, rest = bits % 8;
  if (memcmp(a, b, (size_t)bytes) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool nib_gid_in_range(const uint8_t raw[16], const nib_range_t* r) {
  if (r == NULL || !r->set) return true;
  if (r->family == AF_INET) return nib_gid_is_v4(raw) && nib_prefix_eq(raw + 12, r->addr, r->len);
  return !nib_gid_is_v4(raw) && nib_prefix_eq(raw, r->addr, r->len);
}

int nib_gid_pick(const nib_gid_t* gids, int n, int version, int family, const nib_range_t* range) {
  int want = version == 1 ? NIB_GID_ROCE_V1 : NIB_GID_ROCE_V2;
  int best = -1, best_score = 0;
  for (int i = 0; i < n; i++) {
    const uint8_t* g = gids[i].raw;
    if (gids[i].type < 0 || nib_gid_empty(g)) continue;
    bool v4 = nib_gid_is_v4(g);
    bool link_local = !v4 && g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
    /* Scores: anything 1; right version 2; and family 3; and range 4; and not link-local 5. */
    int score = 1;
    if (gids[i].type == want) {
      score = 2;
      if ((family == AF_INET) == v4) {
        score = 3;
        if (nib_gid_in_range(g, range)) score = link_local ? 4 : 5;
      }
    }
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

/* ---- Speed ---------------------------------------------------------------------------------- */

int nib_port_speed_mbps(unsigned speed, unsigned speed_ex, unsigned width) {
  int lane; /* Mbit/s per lane */
  unsigned s = speed_ex != 0 ? speed_ex : speed;
  switch (s) {
    case 1: lane = 2500; break;     /* SDR */
    case 2: lane = 5000; break;     /* DDR */
    case 4: lane = 10000; break;    /* QDR */
    case 8: lane = 10000; break;    /* FDR10 */
    case 16: lane = 14000; break;   /* FDR */
    case 32: lane = 25000; break;   /* EDR */
    case 64: lane = 50000; break;   /* HDR */
    case 128: lane = 100000; break; /* NDR */
    case 256: lane = 200000; break; /* XDR */
    default: return 0;
  }
  int lanes;
  switch (width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return lane * lanes;
}
