/*
 * net-ofi helpers without libfabric calls: the tag scheme, comm ids, registration keys and knob
 * parsing. Kept apart so that the unit test (test/plugin/net-ofi) compiles them directly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nof.h"

uint64_t nof_tag(int kind, uint32_t id, uint32_t seq) {
  return ((uint64_t)(kind & 3) << (NOF_ID_BITS + NOF_SEQ_BITS)) |
         ((uint64_t)(id & NOF_ID_MASK) << NOF_SEQ_BITS) | (uint64_t)(seq & NOF_SEQ_MASK);
}

void nof_tag_split(uint64_t tag, int* kind_p, uint32_t* id_p, uint32_t* seq_p) {
  *kind_p = (int)((tag >> (NOF_ID_BITS + NOF_SEQ_BITS)) & 3);
  *id_p = (uint32_t)(tag >> NOF_SEQ_BITS) & NOF_ID_MASK;
  *seq_p = (uint32_t)tag & NOF_SEQ_MASK;
}

uint32_t nof_next_id(void) {
  static uint32_t next;
  for (;;) {
    uint32_t id = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED) & NOF_ID_MASK;
    if (id != 0) return id; /* 0 would make an id-less tag; skipped on wrap */
  }
}

uint64_t nof_next_key(size_t key_size) {
  static uint64_t next;
  uint64_t mask = key_size >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * key_size)) - 1;
  if (mask == 0) mask = 0xff;
  for (;;) {
    uint64_t k = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED) & mask;
    if (k != 0) return k;
  }
}

bool nof_parse_int(const char* v, long lo, long hi, long* out_p) {
  if (v == NULL || v[0] == '\0') return false;
  char* end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) return false;
  *out_p = x;
  return true;
}

bool nof_list_match(const char* list, const char* name) {
  if (list == NULL || list[0] == '\0') return true;
  bool exclude = false, exact = false;
  if (*list == '^') exclude = true, list++;
  if (*list == '=') exact = true, list++;
  bool hit = false;
  for (const char* p = list; p != NULL && *p != '\0' && !hit;) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0)
      hit = exact ? strlen(name) == len && strncmp(p, name, len) == 0 : strncmp(p, name, len) == 0;
    p = comma ? comma + 1 : NULL;
  }
  return exclude ? !hit : hit;
}

bool nof_prov_match(const char* want, const char* prov) {
  if (want == NULL || want[0] == '\0') return true;
  const char* semi = strchr(prov, ';');
  size_t core = semi ? (size_t)(semi - prov) : strlen(prov);
  for (const char* p = want; p != NULL && *p != '\0';) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0 && ((strlen(prov) == len && strncmp(p, prov, len) == 0) ||
                    (core == len && strncmp(p, prov, len) == 0)))
      return true;
    p = comma ? comma + 1 : NULL;
  }
  return false;
}
