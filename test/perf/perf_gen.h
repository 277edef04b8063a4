/*
 * Choir perf tools: input data and expected results, defined per element from (seed, rank, index)
 * so that the GPU can generate inputs and check outputs without host copies of big buffers.
 *
 * Header-only, C99, host and device (REF_HD), like ref.h. The same functions run in the CUDA
 * kernels (perf_data.cu) and on the host (failure messages, CPU unit tests).
 *
 * Patterns
 *   Integer types get one pattern: uniformly random bits over the whole type, so sums and
 *   products wrap (products use odd values so that they do not collapse to 0); avg uses values of
 *   magnitude at most max/n so that the sum does not wrap before the division.
 *   Floating types get two, and -c runs both for reductions:
 *   PERF_PAT_EXACT: values chosen so that every partial result of every evaluation order is exact,
 *     and results are compared with tolerance 0 where that is possible. Sum, avg and premulsum:
 *     nonzero integers in [-range, -1] and [1, range], positive on ceil(n/2) ranks and negative on
 *     the others (which ones turns with the element), with range * (the largest sum of premulsum
 *     factors, or count, of one sign) <= 2^p, so that every partial sum lies within +-2^p (avg
 *     needs n a power of two as well). A term is never 0, so a result missing any rank's term is
 *     wrong in every element. Prod: +-2^{-1,0,1} (on at most as many ranks as keep partial
 *     products normal, +-1 on the others). Max/min: nonzero integers. When n is too large for
 *     that (fp8 e5m2 on more than 16 ranks), the values stay the same shape and each element is
 *     judged by ref.h (exact where ref_acc_determined says so, else within ref_tolerance).
 *   PERF_PAT_RANDOM: values with full mantissas, uniform in [-1, 1) (prod: +-(1 + d) with |d| small
 *     enough that no partial product leaves the normal range), compared within ref_tolerance.
 *     Only where that bound can tell a missing rank (perf_gen_random_catches_drop); elsewhere
 *     (e5m2 from 3 ranks, e4m3 from 4, bf16 from about 16, fp16 from about 45) the tolerance
 *     exceeds a rank's typical term, a check with random data could not fail, and a request for
 *     PERF_PAT_RANDOM gets PERF_PAT_EXACT data instead (g->pattern says which).
 *   Data-movement collectives use PERF_PAT_RANDOM values and compare bits.
 *
 * Premulsum factors are 1 on even ranks and 2 on odd ranks (exact in every type).
 */
#ifndef CHOIR_PERF_GEN_H
#define CHOIR_PERF_GEN_H

#include "ref.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { PERF_PAT_EXACT = 0, PERF_PAT_RANDOM = 1 };

/* Operator of a data-movement collective (no reduction). */
#define PERF_OP_NONE (-1)

struct perf_gen {
  int type;
  int op; /* enum ref_op, or PERF_OP_NONE */
  int nranks;
  int pattern; /* PERF_PAT_* */
  uint32_t seed;
  int exact;       /* results must match exactly (tolerance 0) */
  int64_t range;   /* exact pattern: integers in [-range, range] */
  int prod_ranks;  /* exact prod: ranks below this draw +-2^{-1,0,1}, the others +-1 */
  double prod_dev; /* random prod: magnitudes 1 + d, |d| <= prod_dev */
};

/* How one rank's output element o is defined from the inputs. */
enum {
  PERF_X_COPY_FIXED = 0, /* input of rank `src` at index offset + o */
  PERF_X_COPY_BLOCK = 1, /* input of rank o / block at index offset + o % block */
  PERF_X_REDUCE = 2      /* reduction over all ranks of the inputs at index offset + o */
};

struct perf_expect {
  int kind;
  int src;
  uint64_t block;
  uint64_t offset;
};

/* lowbias32 integer hash (a bijection of 32-bit words with good avalanche). */
REF_FN uint32_t perf_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/* 32 random bits for (seed, rank, index, lane). */
REF_FN uint32_t perf_hash(uint32_t seed, int rank, uint64_t idx, uint32_t lane) {
  uint32_t h = perf_mix32(seed ^ (0x9e3779b9u * (uint32_t)(rank + 1)) ^ (lane * 0x632be5abu));
  h = perf_mix32(h ^ (uint32_t)idx);
  return perf_mix32(h + (uint32_t)(idx >> 32) * 0x85ebca6bu + 0x27d4eb2fu);
}

/* Premulsum factor of a rank, in type t. */
REF_FN ref_val perf_gen_scalar(int t, int rank) { return ref_from_i64(t, 1 + (rank & 1)); }

/* Largest value of an integer type as uint64 (its magnitude bound for avg inputs). */
REF_FN uint64_t perf_int_max(int t) {
  switch (t) {
  case REF_INT8: return 0x7fu;
  case REF_UINT8: return 0xffu;
  case REF_INT32: return 0x7fffffffu;
  case REF_UINT32: return 0xffffffffu;
  case REF_INT64: return 0x7fffffffffffffffull;
  default: return 0xffffffffffffffffull;
  }
}

/* Exact pattern, sum-like operators: whether rank's term of element idx is positive. ceil(n/2)
 * consecutive ranks (cyclically, from a start that depends on the element alone) are. */
REF_FN int perf_gen_positive(const struct perf_gen* g, int rank, uint64_t idx) {
  uint32_t start = perf_hash(g->seed, -1, idx, 3) % (uint32_t)g->nranks;
  return ((uint32_t)rank + start) % (uint32_t)g->nranks < (uint32_t)(g->nranks + 1) / 2;
}

/* Input element `idx` of rank `rank`, of type t (t == g->type; passed separately so that kernels
 * templated on the type fold the switches). */
REF_FN ref_val perf_gen_value(const struct perf_gen* g, int t, int rank, uint64_t idx) {
  uint32_t h0 = perf_hash(g->seed, rank, idx, 0);
  if (!ref_type_is_float(t)) {
    uint64_t bits = ((uint64_t)perf_hash(g->seed, rank, idx, 1) << 32) | h0;
    if (g->op == REF_AVG) {
      uint64_t lim = perf_int_max(t) / (uint64_t)g->nranks;
      if (ref_type_is_signed(t)) {
        bits = bits % (2 * lim + 1) - lim;
      } else if (lim != ~0ull) {
        bits %= lim + 1;
      }
    } else if (g->op == REF_PROD) {
      bits |= 1u;
    }
    return ref_wrap(t, bits);
  }
  if (g->pattern == PERF_PAT_EXACT && g->op != PERF_OP_NONE) {
    if (g->op == REF_PROD) {
      int e = rank < g->prod_ranks ? (int)(h0 % 3u) - 1 : 0;
      double m = e < 0 ? 0.5 : (e > 0 ? 2.0 : 1.0);
      return ref_from_f64(t, (h0 >> 16) & 1u ? -m : m);
    }
    double m = (double)(1 + (int64_t)(h0 % (uint64_t)g->range));
    int negative = (h0 >> 31) & 1u; /* max/min: any sign */
    if (g->op != REF_MAX && g->op != REF_MIN) negative = !perf_gen_positive(g, rank, idx);
    return ref_from_f64(t, negative ? -m : m);
  }
  double v;
  if (t == REF_FLOAT64) {
    uint64_t bits = ((uint64_t)perf_hash(g->seed, rank, idx, 1) << 32) | h0;
    v = (double)((int64_t)(bits >> 11) - (1ll << 52)) * 0x1p-52;
  } else {
    v = (double)((int32_t)(h0 >> 8) - (1 << 23)) * 0x1p-23;
  }
  if (g->op == REF_PROD) {
    double m = 1.0 + g->prod_dev * v;
    v = perf_hash(g->seed, rank, idx, 2) & 1u ? -m : m;
  }
  return ref_from_f64(t, v);
}

/*
 * Whether random data (PERF_PAT_RANDOM) can show a rank's term missing from a reduction of type t
 * with operator op over n ranks: ref_tolerance for terms of typical size (|x| averages 1/2) must
 * stay below the size of one such term, so that at least some elements of any case reject the
 * result. For prod, a missing factor flips the sign of half the elements (an error of twice the
 * product), so the tolerance must stay below the product's magnitude. Host code.
 */
static inline int perf_gen_random_catches_drop(int t, int op, int n) {
  if (!ref_type_is_float(t) || op == PERF_OP_NONE || op == REF_MAX || op == REF_MIN) return 1;
  if (op == REF_PROD) return ref_tolerance(t, op, n, 1.0) < 1.0;
  if (op == REF_AVG) return ref_tolerance(t, op, n, 0.5) < 0.5 / n;
  double weights = 0.0, smallest = 2.0;
  for (int r = 0; r < n; r++) {
    double w = op == REF_PREMULSUM ? perf_gen_scalar(REF_FLOAT64, r).f : 1.0;
    weights += w;
    if (w < smallest) smallest = w;
  }
  return ref_tolerance(t, op, n, 0.5 * weights) < 0.5 * smallest;
}

/*
 * Describe the data for type t, operator op (or PERF_OP_NONE) over nranks ranks, with pattern
 * and seed. Host code (computes the ranges once; kernels receive the result by value).
 */
static inline void perf_gen_setup(struct perf_gen* g, int t, int op, int nranks, int pattern,
                                  uint32_t seed) {
  if (pattern == PERF_PAT_RANDOM && !perf_gen_random_catches_drop(t, op, nranks))
    pattern = PERF_PAT_EXACT;
  g->type = t;
  g->op = op;
  g->nranks = nranks;
  g->pattern = pattern;
  g->seed = seed;
  g->exact = 1;
  g->range = 1;
  g->prod_ranks = 0;
  g->prod_dev = 0.0;
  if (!ref_type_is_float(t) || op == PERF_OP_NONE) return;

  /* Exponent budget: how far partial products may move from 1 and stay normal. */
  int up = 0, down = 0;
  for (double x = 1.0; x * 2.0 <= ref_type_max(t); x *= 2.0) up++;
  for (double x = 1.0; x / 2.0 >= ref_type_min_normal(t); x /= 2.0) down++;
  int budget = up < down ? up : down;
  if (pattern == PERF_PAT_RANDOM) {
    g->exact = op == REF_MAX || op == REF_MIN;
    /* Largest d <= 1/4 with (1 + d)^n <= 2^(budget/2). */
    double limit = 1.0, lo = 0.0, hi = 0.25;
    for (int i = 0; i < budget / 2; i++) limit *= 2.0;
    for (int it = 0; it < 60; it++) {
      double mid = (lo + hi) / 2.0;
      if (ref_growth(mid, nranks) + 1.0 <= limit)
        lo = mid;
      else
        hi = mid;
    }
    g->prod_dev = lo;
    return;
  }
  if (op == REF_PROD) {
    g->prod_ranks = nranks < budget ? nranks : budget;
    return;
  }
  double pmax = 1.0; /* 2^p: integers up to here are exact */
  for (int i = 0; i < ref_type_precision(t); i++) pmax *= 2.0;
  /* The largest sum of factors (premulsum) or count of the terms of one sign (perf_gen_positive:
   * a cyclic block of ceil(n/2) ranks, or the rest) bounds every partial sum. */
  double weight = 0.0;
  int half = (nranks + 1) / 2;
  for (int start = 0; start < nranks; start++) {
    double pos = 0.0, neg = 0.0;
    for (int r = 0; r < nranks; r++) {
      double w = op == REF_PREMULSUM ? perf_gen_scalar(REF_FLOAT64, r).f : 1.0;
      if ((r + start) % nranks < half)
        pos += w;
      else
        neg += w;
    }
    if (pos > weight) weight = pos;
    if (neg > weight) weight = neg;
  }
  if (op == REF_MAX || op == REF_MIN) weight = 1.0;
  double range = pmax / weight;
  if (range > (double)(1 << 20)) range = (double)(1 << 20);
  g->range = (int64_t)range;
  if (g->range < 1) {
    g->range = 1;
    g->exact = 0;
  }
  if (op == REF_AVG && (nranks & (nranks - 1)) != 0) g->exact = 0;
}

/*
 * Check output element o of a rank against expectation x. Returns 1 when it is wrong. When
 * want_p / tol_p are not NULL they receive the expected value (for reductions of floating types:
 * the exact value rounded to the type) and the tolerance used.
 */
REF_FN int perf_expect_elem(const struct perf_gen* g, int t, const struct perf_expect* x,
                            uint64_t o, ref_val got, ref_val* want_p, double* tol_p) {
  if (x->kind != PERF_X_REDUCE) {
    int src = x->src;
    uint64_t idx = x->offset + o;
    if (x->kind == PERF_X_COPY_BLOCK) {
      src = (int)(o / x->block);
      idx = x->offset + o % x->block;
    }
    ref_val want = perf_gen_value(g, t, src, idx);
    if (want_p) *want_p = want;
    if (tol_p) *tol_p = 0.0;
    return !ref_same_bits(t, got, want);
  }
  struct ref_acc a;
  ref_acc_init(&a);
  for (int r = 0; r < g->nranks; r++)
    ref_acc_add(&a, t, g->op, perf_gen_value(g, t, r, x->offset + o), perf_gen_scalar(t, r));
  double tol = 0.0;
  if (ref_type_is_float(t) && !g->exact) tol = ref_acc_tolerance(&a, t, g->op);
  if (want_p) {
    if (ref_type_is_float(t) && g->op != REF_MAX && g->op != REF_MIN)
      *want_p = ref_from_f64(t, ref_acc_exact(&a, t, g->op));
    else
      *want_p = ref_acc_result(&a, t, g->op);
  }
  if (tol_p) *tol_p = tol;
  return !ref_acc_accept(&a, t, g->op, got, tol);
}

#ifdef __cplusplus
}
#endif

#endif
