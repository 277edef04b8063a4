/*
 * NCCL_ALGO and NCCL_PROTO, in NCCL 2.24's syntax:
 *   value   := entry (';' entry)*
 *   entry   := [collective ':'] list
 *   list    := ['^'] name (',' name)*
 * A list allows exactly the names given, or with '^' everything but them. An entry without a
 * collective applies to every collective; entries apply in order, so "ring;allreduce:tree" is
 * ring everywhere but AllReduce. Collectives no entry names keep everything. Names and
 * collectives are case-insensitive; blanks around them are ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "tune_internal.h"

/* NCCL's names, then Choir's own algorithms (tune.h). */
static const char* const tune_algo_names[TUNE_NUM_ALGOS] = {
    "Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT", "OneShot",
    "TwoShot"};
static const char* const tune_proto_names[NCCL_NUM_PROTOCOLS] = {"LL", "LL128", "Simple"};
/* ncclFunc_t order. Only the first TUNE_NUM_COLLS choose an algorithm; the others are accepted
 * (NCCL accepts them) and change nothing. */
static const char* const tune_coll_names[ncclNumFuncs] = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
    "Send",      "Recv",   "AllToAll",  "Scatter",       "Gather"};

const tune_knob_kind_t tune_knob_algo = {"NCCL_ALGO", "algorithm", tune_algo_names,
                                         TUNE_NUM_ALGOS};
const tune_knob_kind_t tune_knob_proto = {"NCCL_PROTO", "protocol", tune_proto_names,
                                          NCCL_NUM_PROTOCOLS};

const char* tune_coll_name(int coll) {
  return coll >= 0 && coll < ncclNumFuncs ? tune_coll_names[coll] : "?";
}
const char* tune_algo_name(int algo) {
  return algo >= 0 && algo < TUNE_NUM_ALGOS ? tune_algo_names[algo] : "?";
}
const char* tune_proto_name(int proto) {
  return proto >= 0 && proto < NCCL_NUM_PROTOCOLS ? tune_proto_names[proto] : "?";
}

const char* tune_mask_names(uint32_t mask, const char* (*name)(int), int n, char* buf,
                            size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (!(mask & (1u << i))) continue;
    int w = snprintf(buf + len, size - len, "%s%s", len ? "," : "", name(i));
    if (w < 0 || (size_t)w >= size - len) break;
    len += (size_t)w;
  }
  if (len == 0) snprintf(buf, size, "none");
  return buf;
}

static char* tune_trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  char* e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = '\0';
  return s;
}

/* The one place that reports a bad value: what is wrong (and the token, when there is one), and
 * what the knob accepts. */
static ncclResult_t tune_knob_bad(const tune_knob_kind_t* kind, const char* value,
                                  const char* problem, const char* token) {
  char list[128];
  size_t len = 0;
  list[0] = '\0';
  for (int i = 0; i < kind->n && len < sizeof(list); i++) {
    int w = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", kind->names[i]);
    if (w < 0) break;
    len += (size_t)w;
  }
  WARN(
      "%s=\"%s\": %s%s%s%s; expected a list of %s names (%s), '^' before the list to exclude "
      "them, or per collective 'allreduce:<list>;broadcast:<list>'",
      kind->env, value, problem, token ? " '" : "", token ? token : "", token ? "'" : "",
      kind->noun, list);
  return ncclInvalidUsage;
}

static int tune_find(const char* const* names, int n, const char* s) {
  for (int i = 0; i < n; i++)
    if (sys_strcasecmp(names[i], s) == 0) return i;
  return -1;
}

/* One list (after the collective, if any): the ids it names into *mask_p, '^' into *exclude_p. */
static ncclResult_t tune_list_parse(const tune_knob_kind_t* kind, const char* value, char* list,
                                    const char* entry, uint32_t* mask_p, bool* exclude_p) {
  list = tune_trim(list);
  bool exclude = false;
  if (list[0] == '^') {
    exclude = true;
    list = tune_trim(list + 1);
  }
  if (list[0] == '\0') return tune_knob_bad(kind, value, "no name in the entry", entry);
  uint32_t mask = 0;
  /* strtok would merge empty tokens: walk the commas by hand so that "ll,,simple" is caught. */
  char* tok = list;
  for (;;) {
    char* comma = strchr(tok, ',');
    if (comma != NULL) *comma = '\0';
    char* name = tune_trim(tok);
    if (name[0] == '\0') return tune_knob_bad(kind, value, "empty name in the entry", entry);
    int id = tune_find(kind->names, kind->n, name);
    if (id < 0) {
      char what[48];
      snprintf(what, sizeof(what), "unknown %s", kind->noun);
      return tune_knob_bad(kind, value, what, name);
    }
    mask |= 1u << id;
    if (comma == NULL) break;
    tok = comma + 1;
  }
  *mask_p = mask;
  *exclude_p = exclude;
  return ncclSuccess;
}

ncclResult_t tune_knob_parse(const tune_knob_kind_t* kind, const char* value, tune_knob_t* knob_p) {
  tune_knob_t k;
  uint32_t all = (1u << kind->n) - 1;
  for (int c = 0; c < TUNE_NUM_COLLS; c++) {
    k.allow[c] = all;
    k.named[c] = 0;
  }
  k.set = false;
  k.value = "(unset)";
  char* copy = value != NULL ? strdup(value) : NULL;
  if (value != NULL && copy == NULL) {
    WARN("%s: out of memory parsing \"%s\"", kind->env, value);
    return ncclSystemError;
  }
  ncclResult_t res = ncclSuccess;
  char* rest = copy != NULL ? tune_trim(copy) : NULL;
  if (rest == NULL || rest[0] == '\0') goto out;
  k.set = true;
  k.value = value;
  for (;;) {
    char* semi = strchr(rest, ';');
    if (semi != NULL) *semi = '\0';
    char* entry = tune_trim(rest);
    char shown[128];
    snprintf(shown, sizeof(shown), "%s", entry);
    if (entry[0] == '\0') {
      res = tune_knob_bad(kind, value, "an empty entry (two ';' in a row, or one at an end)", NULL);
      goto out;
    }
    int coll = -1; /* every collective */
    char* list = entry;
    char* colon = strchr(entry, ':');
    if (colon != NULL) {
      *colon = '\0';
      char* cname = tune_trim(entry);
      coll = tune_find(tune_coll_names, ncclNumFuncs, cname);
      if (coll < 0) {
        res = cname[0] ? tune_knob_bad(kind, value, "unknown collective", cname)
                       : tune_knob_bad(kind, value, "no collective before ':' in the entry", shown);
        goto out;
      }
      list = colon + 1;
      if (strchr(list, ':') != NULL) {
        res = tune_knob_bad(kind, value, "more than one ':' in the entry", shown);
        goto out;
      }
    }
    uint32_t mask = 0;
    bool exclude = false;
    res = tune_list_parse(kind, value, list, shown, &mask, &exclude);
    if (res != ncclSuccess) goto out;
    for (int c = 0; c < TUNE_NUM_COLLS; c++) {
      if (coll >= 0 && coll != c) continue;
      k.allow[c] = exclude ? all & ~mask : mask;
      k.named[c] = exclude ? 0 : mask;
    }
    if (semi == NULL) break;
    rest = semi + 1;
  }
out:
  free(copy);
  if (res == ncclSuccess) *knob_p = k;
  return res;
}

_Static_assert(TUNE_ALGO_ONESHOT == KERN_ALGO_ONESHOT && TUNE_ALGO_TWOSHOT == KERN_ALGO_TWOSHOT &&
                   (int)ncclFuncAllGather == KERN_COLL_ALLGATHER &&
                   (int)ncclFuncReduceScatter == KERN_COLL_REDUCESCATTER &&
                   (int)ncclFuncAllReduce == KERN_COLL_ALLREDUCE,
               "kern_direct_runs takes tune's algorithms and ncclFunc_t's collectives");

uint32_t tune_algos_for(int coll, uint32_t algo_mask) {
  const uint32_t tree = 1u << NCCL_ALGO_TREE;
  uint32_t m = algo_mask & ~(TUNE_ALGO_DIRECT_MASK | tree);
  for (int a = TUNE_ALGO_ONESHOT; a <= TUNE_ALGO_TWOSHOT; a++)
    if (kern_direct_runs(a, coll)) m |= algo_mask & (1u << a);
  if (coll == ncclFuncAllReduce) m |= algo_mask & tree;
  return m;
}

uint32_t tune_protos_for_algo(int algo) {
  if (algo == NCCL_ALGO_TREE) return TUNE_TREE_PROTOS;
  if (TUNE_ALGO_DIRECT_MASK & (1u << algo)) return 1u << NCCL_PROTO_LL;
  return TUNE_PROTO_ALL;
}

int tune_tree_wanted(int nnodes) {
  tune_knob_t algo, proto;
  if (tune_knobs_read(&algo, &proto) != ncclSuccess) return 0;
  const uint32_t tree = 1u << NCCL_ALGO_TREE;
  if (!(algo.allow[ncclFuncAllReduce] & tree) ||
      !(proto.allow[ncclFuncAllReduce] & TUNE_TREE_PROTOS))
    return 0;
  return nnodes > 1 || (algo.named[ncclFuncAllReduce] & tree) != 0;
}

ncclResult_t tune_knobs_read(tune_knob_t* algo_p, tune_knob_t* proto_p) {
  CHECK(tune_knob_parse(&tune_knob_algo, param_str(PARAM_ALGO), algo_p));
  CHECK(tune_knob_parse(&tune_knob_proto, param_str(PARAM_PROTO), proto_p));
  return ncclSuccess;
}

ncclResult_t tune_knobs_check(const tune_knob_t* algo, const tune_knob_t* proto, uint32_t algo_mask,
                              uint32_t proto_mask) {
  char allowed[96], have[96];
  for (int c = 0; c < TUNE_NUM_COLLS; c++) {
    const uint32_t usable = tune_algos_for(c, algo_mask);
    if ((algo->allow[c] & usable) == 0) {
      WARN(
          "NCCL_ALGO=\"%s\" leaves %s no algorithm to run: it allows %s for %s, and Choir builds "
          "%s only; name one of those for %s, or unset NCCL_ALGO",
          algo->value, tune_coll_name(c),
          tune_mask_names(tune_algos_for(c, algo->allow[c]) |
                              (algo->allow[c] & (1u << NCCL_ALGO_TREE)),
                          tune_algo_name, TUNE_NUM_ALGOS, allowed, sizeof(allowed)),
          tune_coll_name(c),
          tune_mask_names(usable, tune_algo_name, TUNE_NUM_ALGOS, have, sizeof(have)),
          tune_coll_name(c));
      return ncclInvalidUsage;
    }
    if ((proto->allow[c] & proto_mask) == 0) {
      WARN(
          "NCCL_PROTO=\"%s\" leaves %s no protocol to run: it allows %s for %s, and this "
          "communicator's connections have buffers for %s only (LL128 needs links that keep "
          "128-byte stores whole, or NCCL_PROTO naming it); name one of those for %s, or unset "
          "NCCL_PROTO",
          proto->value, tune_coll_name(c),
          tune_mask_names(proto->allow[c], tune_proto_name, NCCL_NUM_PROTOCOLS, allowed,
                          sizeof(allowed)),
          tune_coll_name(c),
          tune_mask_names(proto_mask, tune_proto_name, NCCL_NUM_PROTOCOLS, have, sizeof(have)),
          tune_coll_name(c));
      return ncclInvalidUsage;
    }
    /* The tree runs Simple, LL and LL128, OneShot and TwoShot LL only: a pair must be left. */
    bool pair = false;
    for (int a = 0; a < TUNE_NUM_ALGOS && !pair; a++)
      pair = (algo->allow[c] & usable & (1u << a)) &&
             (proto->allow[c] & proto_mask & tune_protos_for_algo(a));
    if (!pair) {
      WARN("NCCL_ALGO=\"%s\" and NCCL_PROTO=\"%s\" together leave %s nothing to run: %s "
           "allowed by the first, %s by the second, and OneShot and TwoShot run LL only; allow "
           "the ring, or a protocol of the algorithm you name",
           algo->value, proto->value, tune_coll_name(c),
           tune_mask_names(algo->allow[c] & usable, tune_algo_name, TUNE_NUM_ALGOS, allowed,
                           sizeof(allowed)),
           tune_mask_names(proto->allow[c] & proto_mask, tune_proto_name, NCCL_NUM_PROTOCOLS,
                           have, sizeof(have)));
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

ncclResult_t tune_protocols_for_link(tune_link_t link, uint32_t* mask_p) {
  if ((int)link < 0 || link >= TUNE_LINK_NUM) {
    WARN("tune_protocols_for_link: link type %d is not a tune_link_t", (int)link);
    return ncclInternalError;
  }
  tune_knob_t proto;
  CHECK(tune_knob_parse(&tune_knob_proto, param_str(PARAM_PROTO), &proto));
  uint32_t allowed = 0, named = 0;
  for (int c = 0; c < TUNE_NUM_COLLS; c++) {
    allowed |= proto.allow[c];
    named |= proto.named[c];
  }
  uint32_t mask = 1u << NCCL_PROTO_SIMPLE;
  if (allowed & (1u << NCCL_PROTO_LL)) mask |= 1u << NCCL_PROTO_LL;
  bool whole128 = link == TUNE_LINK_NVLINK || link == TUNE_LINK_SAME_GPU;
  if ((whole128 && (allowed & (1u << NCCL_PROTO_LL128))) || (named & (1u << NCCL_PROTO_LL128)))
    mask |= 1u << NCCL_PROTO_LL128;
  *mask_p = mask;
  return ncclSuccess;
}
