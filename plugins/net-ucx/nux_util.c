/*
 * net-ucx pure helpers (see nux_util.h): comm ids, the knob table, UCX_NET_DEVICES / UCX_TLS
 * matching. No UCX, no logging.
 */
#include "nux_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint32_t nux_comm_id_next(uint32_t* counter) {
  uint32_t id = (*counter & NUX_COMM_ID_MAX) + 1;
  if (id > NUX_COMM_ID_MAX) id = 1; /* wrapped: 0 means "no comm" */
  *counter = id;
  return id;
}

const nux_knob_t nux_knob_table[] = {
    {"CHOIR_UCX_MAX_RECVS", NUX_MAX_RECVS, 1, NUX_MAX_RECVS, offsetof(nux_knobs_t, max_recvs),
     "most buffers one irecv takes (props.maxRecvs); each buffer is one tagged UCX receive"},
    {"CHOIR_UCX_CLOSE_TIMEOUT_MS", 100, 0, 60000, offsetof(nux_knobs_t, close_timeout_ms),
     "how long a close waits for its send endpoint's flush (which needs the peer to progress) "
     "and for cancelled requests before it abandons them"},
    {"CHOIR_UCX_PEER_ERRORS", 1, 0, 1, offsetof(nux_knobs_t, peer_errors),
     "1: endpoints use UCP_ERR_HANDLING_MODE_PEER, so a dead peer fails test(); 0: mode NONE "
     "(a dead peer may hang requests)"},
    {"CHOIR_UCX_PROGRESS", 4, 1, 1024, offsetof(nux_knobs_t, progress),
     "rounds of ucp_worker_progress per isend/irecv/test/connect/accept call at most (it stops "
     "early once a round makes no progress)"},
    {"CHOIR_UCX_REG", 1, 0, 1, offsetof(nux_knobs_t, reg),
     "1: regMr maps the buffer with ucp_mem_map and transfers pass the handle to UCX; 0: regMr "
     "returns a placeholder and UCX registers on its own"},
    {"CHOIR_UCX_MAX_MIB", 16, 1, 2047, offsetof(nux_knobs_t, max_mib),
     "largest message in MiB (props.maxP2pBytes/maxCollBytes; 2047 means 2 GiB - 4 KiB). UCX moves "
     "a message in as few socket writes as it can, and one write on a fast link can run for as "
     "long as the peer drains it: over tcp a 1 GiB message kept one test() call busy for seconds"},
};
const int nux_knob_count = (int)(sizeof(nux_knob_table) / sizeof(nux_knob_table[0]));

bool nux_knob_parse(const nux_knob_t* k, const char* value, int* out) {
  if (value == NULL || value[0] == '\0') return false;
  char* end = NULL;
  errno = 0;
  long x = strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || x < k->lo || x > k->hi) return false;
  *out = (int)x;
  return true;
}

void nux_knobs_read(nux_knobs_t* out, const char* (*get)(const char* name),
                    void (*bad)(const nux_knob_t* k, const char* value, void* arg), void* arg) {
  for (int i = 0; i < nux_knob_count; i++) {
    const nux_knob_t* k = &nux_knob_table[i];
    int* slot = (int*)((char*)out + k->offset);
    *slot = k->def;
    const char* v = get(k->name);
    if (v == NULL || v[0] == '\0') continue;
    if (!nux_knob_parse(k, v, slot)) {
      *slot = k->def;
      if (bad != NULL) bad(k, v, arg);
    }
  }
}

/* Calls match(token, len, arg) for each comma-separated token (spaces trimmed) until it returns
 * true; returns whether one did. */
static bool nux_list_any(const char* list,
                         bool (*match)(const char* tok, size_t len, const void* arg),
                         const void* arg) {
  const char* p = list;
  while (p != NULL && *p != '\0') {
    const char* comma = strchr(p, ',');
    const char* end = comma != NULL ? comma : p + strlen(p);
    const char* a = p;
    while (a < end && *a == ' ') a++;
    const char* b = end;
    while (b > a && b[-1] == ' ') b--;
    if (b > a && match(a, (size_t)(b - a), arg)) return true;
    p = comma != NULL ? comma + 1 : NULL;
  }
  return false;
}

static bool nux_tok_eq(const char* tok, size_t len, const void* arg) {
  const char* s = arg;
  return strlen(s) == len && strncmp(tok, s, len) == 0;
}

static bool nux_all(const char* spec) {
  return spec == NULL || spec[0] == '\0' || nux_list_any(spec, nux_tok_eq, "all");
}

bool nux_netdev_selected(const char* spec, const char* dev) {
  if (nux_all(spec)) return true;
  return nux_list_any(spec, nux_tok_eq, dev);
}

bool nux_netdev_named(const char* spec, const char* dev) {
  if (spec == NULL || spec[0] == '\0') return false;
  return nux_list_any(spec, nux_tok_eq, dev);
}

/* Whether `tl` starts with the len characters of p followed by '_' or the end. */
static bool nux_family(const char* tl, const char* p, size_t len) {
  return strncmp(tl, p, len) == 0 && (tl[len] == '\0' || tl[len] == '_');
}

static bool nux_tl_tok(const char* tok, size_t len, const void* arg) {
  const char* tl = arg;
  const char* colon = memchr(tok, ':', len);
  if (colon != NULL) len = (size_t)(colon - tok); /* "ud:aux" */
  if (len == 0) return false;
  if (len == 3 && strncmp(tok, "all", 3) == 0) return true;
  if (len == 2 && strncmp(tok, "ib", 2) == 0)
    return nux_family(tl, "rc", 2) || nux_family(tl, "ud", 2) || nux_family(tl, "dc", 2);
  static const char* const shorts[][2] = {{"rc_v", "rc_verbs"},
                                          {"rc_x", "rc_mlx5"},
                                          {"ud_v", "ud_verbs"},
                                          {"ud_x", "ud_mlx5"},
                                          {"dc_x", "dc_mlx5"}};
  for (size_t i = 0; i < sizeof(shorts) / sizeof(shorts[0]); i++)
    if (len == strlen(shorts[i][0]) && strncmp(tok, shorts[i][0], len) == 0)
      return strcmp(tl, shorts[i][1]) == 0;
  return nux_family(tl, tok, len);
}

bool nux_tls_selected(const char* spec, const char* tl) {
  if (spec == NULL) return true;
  while (*spec == ' ') spec++;
  bool exclude = spec[0] == '^';
  if (exclude) spec++;
  if (spec[0] == '\0') return !exclude;
  bool hit = nux_list_any(spec, nux_tl_tok, tl);
  return exclude ? !hit : hit;
}
