/*
 * Unit test of test/harness/ref.h: conversions (against fixed values and an independent
 * brute-force nearest-value search), integer and floating arithmetic per type and operator, and
 * the tolerance used to judge floating-point reductions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"


static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

/* ---- Conversions ---- */

struct conv_case {
  float x;
  unsigned code;
};

static void test_fixed_conversions(void) {
  static const struct conv_case f16[] = {
      {0.0f, 0x0000},       {-0.0f, 0x8000},    {1.0f, 0x3c00},     {-2.0f, 0xc000},
      {65504.0f, 0x7bff},   {65519.0f, 0x7bff}, /* below the midpoint to 65536: rounds down */
      {65520.0f, 0x7c00}, /* the midpoint, 0x7bff is odd: ties to even = Inf */
      {1e6f, 0x7c00},       {-1e6f, 0xfc00},    {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
      {0x1p-24f, 0x0001},   /* smallest subnormal */
      {0x1p-25f, 0x0000},   /* half of it: tie to even zero */
      {0x1.8p-25f, 0x0001}, /* above half: rounds up */
      {0x1p-14f, 0x0400},   /* smallest normal */
      {2049.0f, 0x6800},    /* tie between 2048 (even) and 2050 */
      {2051.0f, 0x6802},    /* tie between 2050 (odd) and 2052: up */
  };
  for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++)
    CHECK_MSG(ref_f32_to_f16(f16[i].x) == f16[i].code, "fp16(%a) = 0x%04x, want 0x%04x", f16[i].x,
          ref_f32_to_f16(f16[i].x), f16[i].code);
  CHECK_MSG(ref_f32_to_f16(NAN) == 0x7fff, "fp16(NaN)");
  CHECK_MSG(ref_f32_to_f16(-NAN) == 0x7fff, "fp16(-NaN) drops the sign");

  static const struct conv_case bf16[] = {
      {1.0f, 0x3f80},        {-1.0f, 0xbf80},       {0x1.01p0f, 0x3f80}, /* tie: even */
      {0x1.03p0f, 0x3f82},                                               /* tie: odd, up */
      {0x1.fep127f, 0x7f7f}, {0x1.ffp127f, 0x7f80}, /* max, then overflow to Inf */
      {INFINITY, 0x7f80},    {0x1p-133f, 0x0001},   {0x1p-134f, 0x0000}, {-0.0f, 0x8000},
  };
  for (size_t i = 0; i < sizeof bf16 / sizeof bf16[0]; i++)
    CHECK_MSG(ref_f32_to_bf16(bf16[i].x) == bf16[i].code, "bf16(%a) = 0x%04x, want 0x%04x", bf16[i].x,
          ref_f32_to_bf16(bf16[i].x), bf16[i].code);
  CHECK_MSG(ref_f32_to_bf16(NAN) == 0x7fff, "bf16(NaN)");

  static const struct conv_case e4m3[] = {
      {0.0f, 0x00},
      {-0.0f, 0x80},
      {1.0f, 0x38},
      {448.0f, 0x7e},
      {-448.0f, 0xfe},
      {464.0f, 0x7e}, /* midpoint to the would-be 480: even 448 */
      {465.0f, 0x7e}, /* beyond: saturates (satfinite) */
      {1e30f, 0x7e},
      {INFINITY, 0x7e},
      {-INFINITY, 0xfe},
      {0x1p-9f, 0x01},         /* smallest subnormal */
      {0x1p-10f, 0x00},        /* half of it: tie to zero */
      {0x1.000002p-10f, 0x01}, /* just above half */
      {-0x1p-10f, 0x80},       /* negative underflow keeps the sign */
      {0x1p-6f, 0x08},         /* smallest normal */
      {17.0f, 0x58},           /* tie between 16 (even) and 18 */
      {19.0f, 0x5a},           /* tie between 18 (odd) and 20: up */
      {240.0f, 0x77},
  };
  for (size_t i = 0; i < sizeof e4m3 / sizeof e4m3[0]; i++)
    CHECK_MSG(ref_f32_to_e4m3(e4m3[i].x) == e4m3[i].code, "e4m3(%a) = 0x%02x, want 0x%02x", e4m3[i].x,
          ref_f32_to_e4m3(e4m3[i].x), e4m3[i].code);
  CHECK_MSG(ref_f32_to_e4m3(NAN) == 0x7f && ref_f32_to_e4m3(-NAN) == 0x7f, "e4m3(NaN)");

  static const struct conv_case e5m2[] = {
      {1.0f, 0x3c},     {57344.0f, 0x7b},   {61439.0f, 0x7b}, {61440.0f, 0x7b}, /* saturates */
      {1e9f, 0x7b},     {-1e9f, 0xfb},      {INFINITY, 0x7b}, {-INFINITY, 0xfb}, {0x1p-16f, 0x01},
      {0x1p-17f, 0x00}, {0x1.8p-17f, 0x01}, {0x1p-14f, 0x04}, {5.0f, 0x45}, /* exact */
      {4.5f, 0x44}, /* tie between 4 (even) and 5 */
      {5.5f, 0x46}, /* tie between 5 (odd) and 6: up */
      {7.5f, 0x48}, /* tie between 7 (odd) and 8: up */
  };
  for (size_t i = 0; i < sizeof e5m2 / sizeof e5m2[0]; i++)
    CHECK_MSG(ref_f32_to_e5m2(e5m2[i].x) == e5m2[i].code, "e5m2(%a) = 0x%02x, want 0x%02x", e5m2[i].x,
          ref_f32_to_e5m2(e5m2[i].x), e5m2[i].code);
  CHECK_MSG(ref_f32_to_e5m2(NAN) == 0x7f, "e5m2(NaN)");

  /* Decoding specials. */
  CHECK_MSG(isinf(ref_f16_to_f32(0x7c00)) && ref_f16_to_f32(0xfc00) < 0, "fp16 Inf");
  CHECK_MSG(isnan(ref_f16_to_f32(0x7e00)) && isnan(ref_f16_to_f32(0xfd01)), "fp16 NaN");
  CHECK_MSG(isnan(ref_e4m3_to_f32(0x7f)) && isnan(ref_e4m3_to_f32(0xff)), "e4m3 NaN");
  CHECK_MSG(ref_e4m3_to_f32(0x7e) == 448.0f && ref_e4m3_to_f32(0x01) == 0x1p-9f, "e4m3 values");
  CHECK_MSG(isinf(ref_e5m2_to_f32(0x7c)) && isnan(ref_e5m2_to_f32(0x7d)) &&
            isnan(ref_e5m2_to_f32(0xfe)),
        "e5m2 specials");
  CHECK_MSG(ref_e5m2_to_f32(0x7b) == 57344.0f && ref_e5m2_to_f32(0x01) == 0x1p-16f, "e5m2 values");
  CHECK_MSG(ref_bf16_to_f32(0x0001) == 0x1p-133f, "bf16 subnormal");
  CHECK_MSG(isnan(ref_bf16_to_f32(0x7fc1)), "bf16 NaN");
}

/* Decoders for every code of a format, by type. */
static float decode(int t, unsigned code) {
  switch (t) {
  case REF_FLOAT16: return ref_f16_to_f32((uint16_t)code);
  case REF_BFLOAT16: return ref_bf16_to_f32((uint16_t)code);
  case REF_FP8_E4M3: return ref_e4m3_to_f32((uint8_t)code);
  default: return ref_e5m2_to_f32((uint8_t)code);
  }
}

static unsigned encode(int t, float x) {
  switch (t) {
  case REF_FLOAT16: return ref_f32_to_f16(x);
  case REF_BFLOAT16: return ref_f32_to_bf16(x);
  case REF_FP8_E4M3: return ref_f32_to_e4m3(x);
  default: return ref_f32_to_e5m2(x);
  }
}

/* Every code decodes and encodes back to itself, except NaNs (canonical) and, for the saturating
 * fp8 formats, e5m2 Inf (which saturates to the largest finite value). */
static void test_round_trips(void) {
  static const int types[] = {REF_FLOAT16, REF_BFLOAT16, REF_FP8_E4M3, REF_FP8_E5M2};
  for (int k = 0; k < 4; k++) {
    int t = types[k];
    unsigned ncodes = ref_type_size(t) == 2 ? 65536u : 256u;
    for (unsigned c = 0; c < ncodes; c++) {
      float x = decode(t, c);
      unsigned back = encode(t, x);
      if (isnan(x)) {
        unsigned nan = ref_type_size(t) == 2 ? 0x7fffu : 0x7fu;
        CHECK_MSG(back == nan, "type %d code 0x%x: NaN encodes to 0x%x", t, c, back);
      } else if (isinf(x) && ref_type_size(t) == 1) {
        CHECK_MSG(back == (c & 0x80u) + 0x7bu, "e5m2 Inf code 0x%x saturates, got 0x%x", c, back);
      } else {
        CHECK_MSG(back == c, "type %d code 0x%x -> %a -> 0x%x", t, c, x, back);
      }
    }
  }
}

/*
 * Independent check of rounding: the encoding of x must be the code whose value is nearest to x
 * (found by scanning all finite codes), ties to the code with an even mantissa, with the overflow
 * rule of the format.
 */
static unsigned brute_nearest(int t, float x) {
  unsigned ncodes = ref_type_size(t) == 2 ? 65536u : 256u;
  unsigned best = 0;
  double bestd = INFINITY;
  for (unsigned c = 0; c < ncodes; c++) {
    float v = decode(t, c);
    if (!isfinite(v)) continue;
    if (v == 0.0f && signbit(v) != signbit(x)) continue; /* zero keeps the sign of x */
    double d = fabs((double)v - (double)x);
    if (d < bestd || (d == bestd && (c & 1u) == 0 && (best & 1u) == 1)) {
      best = c;
      bestd = d;
    }
  }
  double maxv = ref_type_max(t);
  double ulp_top = t == REF_FLOAT16    ? 32.0
                   : t == REF_BFLOAT16 ? 0x1p120
                   : t == REF_FP8_E4M3 ? 32.0
                                       : 8192.0;
  if (fabs((double)x) >= maxv + ulp_top / 2) {
    /* Beyond the rounding range of the largest finite value. */
    if (t == REF_FLOAT16) return x < 0 ? 0xfc00u : 0x7c00u;
    if (t == REF_BFLOAT16) return x < 0 ? 0xff80u : 0x7f80u;
  }
  return best;
}

static void test_rounding_brute_force(void) {
  static const int types[] = {REF_FLOAT16, REF_BFLOAT16, REF_FP8_E4M3, REF_FP8_E5M2};
  for (int k = 0; k < 4; k++) {
    int t = types[k];
    int n = ref_type_size(t) == 2 ? 3000 : 20000;
    for (int i = 0; i < n; i++) {
      float x;
      uint32_t r = rnd();
      if (i % 3 == 0) {
        /* Exactly between two neighbouring codes, or one float ulp either side. */
        /* Codes 0 .. top-1 and their upper neighbours, all finite. */
        unsigned top = t == REF_FLOAT16    ? 0x7bffu
                       : t == REF_BFLOAT16 ? 0x7f7fu
                       : t == REF_FP8_E4M3 ? 0x7eu
                                           : 0x7bu;
        unsigned ncodes = top;
        unsigned c = r % ncodes;
        float a = decode(t, c), b = decode(t, c + 1);
        float mid = (float)(((double)a + (double)b) / 2);
        x = i % 9 == 0 ? mid : i % 9 == 3 ? nextafterf(mid, INFINITY) : nextafterf(mid, -INFINITY);
        if (r & 0x80000000u) x = -x;
      } else {
        /* Random magnitudes over the format's range and a bit beyond. */
        double lo = log2(ref_type_min_subnormal(t)) - 2, hi = log2(ref_type_max(t)) + 2;
        double e = lo + (hi - lo) * (double)(r >> 8) / 16777216.0;
        x = (float)exp2(e);
        if (r & 1u) x = -x;
      }
      unsigned got = encode(t, x), want = brute_nearest(t, x);
      CHECK_MSG(got == want, "type %d: encode(%a) = 0x%x, nearest is 0x%x", t, x, got, want);
    }
  }
}

/* ---- Arithmetic ---- */

static ref_val I(int t, long long v) { return ref_from_i64(t, v); }
static ref_val F(int t, double v) { return ref_from_f64(t, v); }

static void test_integer_ops(void) {
  CHECK_MSG(ref_apply(REF_INT8, REF_SUM, I(REF_INT8, 127), I(REF_INT8, 1)).i == -128, "int8 wraps");
  CHECK_MSG(ref_apply(REF_UINT8, REF_SUM, I(REF_UINT8, 255), I(REF_UINT8, 1)).u == 0, "uint8 wraps");
  CHECK_MSG(ref_apply(REF_INT32, REF_PROD, I(REF_INT32, 65536), I(REF_INT32, 65536)).i == 0,
        "int32 product wraps");
  CHECK_MSG(ref_apply(REF_INT32, REF_PROD, I(REF_INT32, 46341), I(REF_INT32, 46341)).i == -2147479015,
        "int32 product wraps into negatives");
  CHECK_MSG(ref_apply(REF_UINT32, REF_SUM, I(REF_UINT32, 4294967295LL), I(REF_UINT32, 2)).u == 1,
        "uint32 wraps");
  CHECK_MSG(ref_apply(REF_INT64, REF_SUM, I(REF_INT64, INT64_MAX), I(REF_INT64, 1)).i == INT64_MIN,
        "int64 wraps");
  CHECK_MSG(ref_apply(REF_UINT64, REF_PROD, I(REF_UINT64, -1), I(REF_UINT64, -1)).u == 1,
        "uint64 (2^64-1)^2 = 1 mod 2^64");
  /* 200 is -56 as int8: max/min compare per signedness. */
  CHECK_MSG(ref_apply(REF_UINT8, REF_MAX, I(REF_UINT8, 200), I(REF_UINT8, 100)).u == 200, "uint8 max");
  CHECK_MSG(ref_apply(REF_INT8, REF_MAX, I(REF_INT8, 200), I(REF_INT8, 100)).i == 100, "int8 max");
  CHECK_MSG(ref_apply(REF_INT8, REF_MIN, I(REF_INT8, 200), I(REF_INT8, 100)).i == -56, "int8 min");
  CHECK_MSG(ref_apply(REF_UINT64, REF_MAX, I(REF_UINT64, -1), I(REF_UINT64, 1)).u == UINT64_MAX,
        "uint64 max");
  CHECK_MSG(ref_apply(REF_INT64, REF_MIN, I(REF_INT64, -1), I(REF_INT64, 1)).i == -1, "int64 min");

  /* avg: wrapped sum, divided, truncated toward zero. */
  ref_val x3[3] = {I(REF_INT8, -4), I(REF_INT8, -2), I(REF_INT8, -1)};
  CHECK_MSG(ref_reduce(REF_INT8, REF_AVG, 3, x3, NULL).i == -2, "int8 avg(-4,-2,-1) = -7/3 = -2");
  ref_val u2[2] = {I(REF_UINT8, 7), I(REF_UINT8, 0)};
  CHECK_MSG(ref_reduce(REF_UINT8, REF_AVG, 2, u2, NULL).u == 3, "uint8 avg(7,0) = 3");
  ref_val w2[2] = {I(REF_INT8, 100), I(REF_INT8, 100)};
  CHECK_MSG(ref_reduce(REF_INT8, REF_AVG, 2, w2, NULL).i == -28, "int8 avg wraps before dividing");

  /* premulsum: x * s wraps, then the sum wraps. */
  ref_val px[2] = {I(REF_INT8, 100), I(REF_INT8, 3)};
  ref_val ps[2] = {I(REF_INT8, 2), I(REF_INT8, 1)};
  CHECK_MSG(ref_reduce(REF_INT8, REF_PREMULSUM, 2, px, ps).i == -53,
        "int8 premulsum 100*2+3 = 203 = -53");
  ref_val qx[3] = {I(REF_UINT32, 5), I(REF_UINT32, 6), I(REF_UINT32, 7)};
  ref_val qs[3] = {I(REF_UINT32, 1), I(REF_UINT32, 2), I(REF_UINT32, 1)};
  CHECK_MSG(ref_reduce(REF_UINT32, REF_PREMULSUM, 3, qx, qs).u == 24, "uint32 premulsum");
  ref_val mx[4] = {I(REF_INT32, 3), I(REF_INT32, -9), I(REF_INT32, 7), I(REF_INT32, 0)};
  CHECK_MSG(ref_reduce(REF_INT32, REF_MAX, 4, mx, NULL).i == 7, "int32 max of 4");
  CHECK_MSG(ref_reduce(REF_INT32, REF_MIN, 4, mx, NULL).i == -9, "int32 min of 4");
  CHECK_MSG(ref_reduce(REF_INT32, REF_PROD, 4, mx, NULL).i == 0, "int32 prod of 4");
  CHECK_MSG(ref_reduce(REF_INT32, REF_SUM, 4, mx, NULL).i == 1, "int32 sum of 4");

  /* Canonical form after store/load and wrap. */
  _Alignas(8) unsigned char buf[8];
  ref_store(REF_INT8, buf, 0, I(REF_INT8, -3));
  CHECK_MSG(buf[0] == 0xfd && ref_load(REF_INT8, buf, 0).i == -3, "int8 store/load");
  ref_store(REF_INT32, buf, 0, ref_wrap(REF_INT32, 0xffffffff80000000ull));
  CHECK_MSG(ref_load(REF_INT32, buf, 0).i == INT32_MIN, "int32 store/load");
  CHECK_MSG(ref_wrap(REF_UINT8, 0x1234).u == 0x34 && ref_wrap(REF_INT32, 0x180000000ull).i == INT32_MIN,
        "wrap");
}

static void test_float_ops(void) {
  /* The narrow types are computed in float, then rounded to the type. */
  CHECK_MSG(ref_apply(REF_FLOAT16, REF_SUM, F(REF_FLOAT16, 2048), F(REF_FLOAT16, 1)).f == 2048.0,
        "half 2048+1 = 2048 (tie to even)");
  CHECK_MSG(ref_apply(REF_FLOAT16, REF_SUM, F(REF_FLOAT16, 2048), F(REF_FLOAT16, 3)).f == 2052.0,
        "half 2048+3 = 2052 (tie, odd neighbour)");
  CHECK_MSG(ref_apply(REF_FLOAT16, REF_PROD, F(REF_FLOAT16, 256), F(REF_FLOAT16, 256)).f == INFINITY,
        "half overflow to Inf");
  CHECK_MSG(ref_apply(REF_BFLOAT16, REF_SUM, F(REF_BFLOAT16, 1), F(REF_BFLOAT16, 0x1p-8)).f == 1.0,
        "bf16 1 + 2^-8 = 1");
  CHECK_MSG(ref_apply(REF_FP8_E4M3, REF_SUM, F(REF_FP8_E4M3, 16), F(REF_FP8_E4M3, 1)).f == 16.0,
        "e4m3 16+1 = 16");
  CHECK_MSG(ref_apply(REF_FP8_E4M3, REF_SUM, F(REF_FP8_E4M3, 448), F(REF_FP8_E4M3, 448)).f == 448.0,
        "e4m3 saturates");
  CHECK_MSG(ref_apply(REF_FP8_E5M2, REF_PROD, F(REF_FP8_E5M2, 57344), F(REF_FP8_E5M2, -2)).f ==
            -57344.0,
        "e5m2 saturates");
  CHECK_MSG(ref_apply(REF_FP8_E5M2, REF_SUM, F(REF_FP8_E5M2, 0x1p-16), F(REF_FP8_E5M2, 0x1p-16)).f ==
            0x1p-15,
        "e5m2 subnormals add");
  /* float: one rounding per operation (1 + 2^-24 + 2^-24 in this order stays 1). */
  ref_val one = F(REF_FLOAT32, 1), tiny = F(REF_FLOAT32, 0x1p-24);
  CHECK_MSG(ref_apply(REF_FLOAT32, REF_SUM, ref_apply(REF_FLOAT32, REF_SUM, one, tiny), tiny).f == 1.0,
        "float rounds each step");
  CHECK_MSG(ref_apply(REF_FLOAT64, REF_SUM, F(REF_FLOAT64, 1), F(REF_FLOAT64, 0x1p-53)).f == 1.0,
        "double rounds to even");
  CHECK_MSG(ref_apply(REF_FLOAT32, REF_MAX, F(REF_FLOAT32, -1), F(REF_FLOAT32, 2)).f == 2.0 &&
            ref_apply(REF_FP8_E4M3, REF_MIN, F(REF_FP8_E4M3, -1), F(REF_FP8_E4M3, 2)).f == -1.0,
        "max/min");

  /* Serial reductions and averages. */
  ref_val h[3] = {F(REF_FLOAT16, 1), F(REF_FLOAT16, 2), F(REF_FLOAT16, 4)};
  CHECK_MSG(ref_reduce(REF_FLOAT16, REF_AVG, 3, h, NULL).f ==
            (double)ref_f16_to_f32(ref_f32_to_f16(7.0f / 3.0f)),
        "half avg = round(7/3)");
  ref_val s[3] = {F(REF_FLOAT16, 1), F(REF_FLOAT16, 2), F(REF_FLOAT16, 1)};
  CHECK_MSG(ref_reduce(REF_FLOAT16, REF_PREMULSUM, 3, h, s).f == 9.0, "half premulsum 1+4+4");
  CHECK_MSG(ref_reduce(REF_FP8_E4M3, REF_PROD, 3, h, NULL).f == 8.0, "e4m3 prod");

  /* ref_from_f64 rounds; store/load of a float type keeps the value. */
  _Alignas(8) unsigned char buf[8];
  ref_store(REF_BFLOAT16, buf, 0, F(REF_FLOAT64, 3.14159));
  CHECK_MSG(ref_load(REF_BFLOAT16, buf, 0).f == (double)ref_bf16_to_f32(ref_f32_to_bf16(3.14159f)),
        "bf16 store rounds");
  CHECK_MSG(ref_same_bits(REF_FLOAT32, F(REF_FLOAT32, 0.0), F(REF_FLOAT32, -0.0)) == 0,
        "+0 and -0 differ in bits");
}

/* The bound of ref.h's header comment, from its ingredients: the unit roundoff 2^-p of the type,
 * plus that of the intermediate format (float for fp16 and bf16; fp16 for fp8, whose rounding
 * compounds with the type's), the roundings along the chain k, the smallest subnormal eta. */
static double expected_tolerance(int t, int op, int n, double sum_abs) {
  static const struct {
    int t, p, inter_p;
    double eta;
  } types[] = {{REF_FLOAT16, 11, 24, 0x1p-24},  {REF_FLOAT32, 24, 0, 0x1p-149},
               {REF_FLOAT64, 53, 0, 0x1p-1074}, {REF_BFLOAT16, 8, 24, 0x1p-133},
               {REF_FP8_E4M3, 4, 11, 0x1p-9},   {REF_FP8_E5M2, 3, 11, 0x1p-16}};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    if (types[i].t != t) continue;
    double u = ldexp(1.0, -types[i].p), w = types[i].inter_p ? ldexp(1.0, -types[i].inter_p) : 0;
    u = types[i].inter_p == 11 ? u + w + u * w : u + w; /* (1 + u)(1 + w) - 1 for fp8 */
    int k = op == REF_AVG ? n + 2 : op == REF_PREMULSUM ? n + 1 : n;
    return expm1(k * log1p(u)) * sum_abs + expm1(k * log1p(0x1p-53)) * sum_abs + k * types[i].eta;
  }
  return 0.0;
}

static void test_tolerance(void) {
  /* Exactly what the derivation gives, for 4 terms of magnitude sum 10 (and other shapes): no
   * slack beyond the last bits of the arithmetic. */
  for (int t = 0; t < REF_NTYPES; t++) {
    for (int op = 0; op < REF_NOPS; op++) {
      for (int n = 1; n <= 64; n *= 4) {
        double tol = ref_tolerance(t, op, n, 10.0);
        if (!ref_type_is_float(t) || op == REF_MAX || op == REF_MIN) {
          CHECK_MSG(tol == 0.0, "type %d op %d: tolerance %g, want 0", t, op, tol);
          continue;
        }
        double want = expected_tolerance(t, op, n, 10.0);
        CHECK_MSG(fabs(tol - want) <= 1e-12 * want,
                  "type %s op %s n %d sum 10: tolerance %.17g, the derivation gives %.17g",
                  ref_type_name(t), ref_op_name(op), n, tol, want);
      }
    }
  }
  /* Anchors, by hand: float, 4 terms summing magnitudes to 10: 4 roundings of 2^-24 relative,
   * so 10 * ((1 + 2^-24)^4 - 1) + (the reference's own 4 roundings in double); fp8 e5m2 on 4
   * ranks: (1 + 2^-3 + 2^-11 + 2^-14)^4 - 1 = 0.6049... of the sum, and e4m3 0.2769... of it
   * plus 4 x 2^-9 (its smallest subnormal, once per rounding). */
  CHECK_MSG(fabs(ref_tolerance(REF_FLOAT32, REF_SUM, 4, 10.0) - 2.384186004e-6) < 1e-14,
            "float sum of 4, magnitudes 10: %.9g", ref_tolerance(REF_FLOAT32, REF_SUM, 4, 10.0));
  CHECK_MSG(fabs(ref_tolerance(REF_FP8_E5M2, REF_SUM, 4, 10.0) - 6.04937) < 1e-4,
            "e5m2 sum of 4, magnitudes 10: %.6g", ref_tolerance(REF_FP8_E5M2, REF_SUM, 4, 10.0));
  CHECK_MSG(fabs(ref_tolerance(REF_FP8_E4M3, REF_SUM, 4, 10.0) - 2.77702) < 1e-4,
            "e4m3 sum of 4, magnitudes 10: %.6g", ref_tolerance(REF_FP8_E4M3, REF_SUM, 4, 10.0));
  /* Coarser types and more ranks get more room. */
  CHECK_MSG(
      ref_tolerance(REF_FP8_E5M2, REF_SUM, 4, 1) > ref_tolerance(REF_FP8_E4M3, REF_SUM, 4, 1) &&
          ref_tolerance(REF_FP8_E4M3, REF_SUM, 4, 1) > ref_tolerance(REF_BFLOAT16, REF_SUM, 4, 1) &&
          ref_tolerance(REF_BFLOAT16, REF_SUM, 4, 1) > ref_tolerance(REF_FLOAT16, REF_SUM, 4, 1) &&
          ref_tolerance(REF_FLOAT16, REF_SUM, 4, 1) > ref_tolerance(REF_FLOAT32, REF_SUM, 4, 1) &&
          ref_tolerance(REF_FLOAT32, REF_SUM, 4, 1) > ref_tolerance(REF_FLOAT64, REF_SUM, 4, 1),
      "tolerance ordered by precision");
  CHECK_MSG(ref_tolerance(REF_FLOAT32, REF_SUM, 8, 1) > ref_tolerance(REF_FLOAT32, REF_SUM, 2, 1),
        "tolerance grows with n");
  /* Float sum of 4 terms: at least 4 roundings' worth, and not absurdly more. */
  double t4 = ref_tolerance(REF_FLOAT32, REF_SUM, 4, 1.0);
  CHECK_MSG(t4 >= 4 * 0x1p-24 && t4 < 5 * 0x1p-24, "float tolerance %a", t4);

  /* Accept within tolerance, reject beyond, reject NaN. */
  struct ref_acc a;
  ref_acc_init(&a);
  ref_val one = F(REF_FLOAT32, 1.0);
  ref_acc_add(&a, REF_FLOAT32, REF_SUM, F(REF_FLOAT32, 0.1), one);
  ref_acc_add(&a, REF_FLOAT32, REF_SUM, F(REF_FLOAT32, 0.2), one);
  ref_acc_add(&a, REF_FLOAT32, REF_SUM, F(REF_FLOAT32, 0.3), one);
  double tol = ref_acc_tolerance(&a, REF_FLOAT32, REF_SUM);
  double exact = ref_acc_exact(&a, REF_FLOAT32, REF_SUM);
  ref_val serial = ref_acc_result(&a, REF_FLOAT32, REF_SUM);
  ref_val g;
  CHECK_MSG(ref_acc_accept(&a, REF_FLOAT32, REF_SUM, serial, tol), "serial result accepted");
  g.f = nextafterf((float)exact, 1.0f);
  CHECK_MSG(ref_acc_accept(&a, REF_FLOAT32, REF_SUM, g, tol), "one ulp away accepted");
  g.f = (float)exact + 1e-5f;
  CHECK_MSG(!ref_acc_accept(&a, REF_FLOAT32, REF_SUM, g, tol), "1e-5 away rejected (tol %g)", tol);
  g.f = NAN;
  CHECK_MSG(!ref_acc_accept(&a, REF_FLOAT32, REF_SUM, g, tol), "NaN rejected");
  CHECK_MSG(!ref_acc_accept(&a, REF_FLOAT32, REF_SUM, serial, 0.0) || serial.f == exact,
        "tolerance 0 demands the exact value");

  /* Integer results must be exact. */
  ref_acc_init(&a);
  ref_acc_add(&a, REF_INT32, REF_AVG, I(REF_INT32, 7), I(REF_INT32, 1));
  ref_acc_add(&a, REF_INT32, REF_AVG, I(REF_INT32, 2), I(REF_INT32, 1));
  CHECK_MSG(ref_acc_accept(&a, REF_INT32, REF_AVG, I(REF_INT32, 4), 0) &&
            !ref_acc_accept(&a, REF_INT32, REF_AVG, I(REF_INT32, 5), 1e9),
        "integer avg accepted only exactly");
}

/*
 * Every evaluation order stays within the tolerance: random inputs reduced serially in rank
 * order, in reverse, and as a pairwise tree, for every floating type and operator.
 */
static ref_val tree(int t, int op, const ref_val* x, int n) {
  if (n == 1) return x[0];
  return ref_apply(t, op, tree(t, op, x, n / 2), tree(t, op, x + n / 2, n - n / 2));
}

static void test_orders_within_tolerance(void) {
  static const int ops[] = {REF_SUM, REF_PROD, REF_PREMULSUM, REF_AVG};
  for (int t = 0; t < REF_NTYPES; t++) {
    if (!ref_type_is_float(t)) continue;
    for (int k = 0; k < 4; k++) {
      int op = ops[k];
      for (int n = 1; n <= 16; n *= 2) {
        for (int it = 0; it < 2000; it++) {
          ref_val x[16], s[16], term[16], rev[16];
          struct ref_acc a;
          ref_acc_init(&a);
          for (int r = 0; r < n; r++) {
            double v = ((double)(rnd() >> 8) / 8388608.0) - 1.0; /* [-1, 1) */
            if (op == REF_PROD) v = (v < 0 ? -1 : 1) * (1.0 + 0.2 * fabs(v));
            x[r] = F(t, v);
            s[r] = F(t, 1 + (r & 1));
            ref_acc_add(&a, t, op, x[r], s[r]);
            term[r] = op == REF_PREMULSUM ? ref_apply(t, REF_PROD, x[r], s[r]) : x[r];
          }
          for (int r = 0; r < n; r++) rev[r] = term[n - 1 - r];
          int bop = op == REF_PROD ? REF_PROD : REF_SUM;
          ref_val results[3] = {ref_acc_result(&a, t, op), tree(t, bop, term, n),
                                tree(t, bop, rev, n)};
          if (op == REF_AVG) {
            results[1] = ref_avg_finish(t, results[1], n);
            results[2] = ref_avg_finish(t, results[2], n);
          }
          double tol = ref_acc_tolerance(&a, t, op);
          for (int m = 0; m < 3; m++)
            CHECK_MSG(ref_acc_accept(&a, t, op, results[m], tol),
                  "type %s op %s n %d order %d: %a vs exact %a, tolerance %a", ref_type_name(t),
                  ref_op_name(op), n, m, results[m].f, ref_acc_exact(&a, t, op), tol);
        }
      }
    }
  }
}

/* ref_acc over terms x[0..n) (scalars s, NULL: 1). */
static void acc_of(struct ref_acc* a, int t, int op, const double* x, const double* s, int n) {
  ref_acc_init(a);
  for (int r = 0; r < n; r++) ref_acc_add(a, t, op, F(t, x[r]), F(t, s ? s[r] : 1.0));
}

static int determined(int t, int op, const double* x, const double* s, int n) {
  struct ref_acc a;
  acc_of(&a, t, op, x, s, n);
  return ref_acc_determined(&a, t, op);
}

/*
 * ref_acc_determined: hand-picked elements on both sides of the line, then random small-integer
 * data in every order (serial, reversed, pairwise): whenever it claims exactness, every order
 * gives the exact value; and there a result that misses the last term is rejected.
 */
static void test_determined(void) {
  const double ints[] = {1, 2, 3}, fracs[] = {0.1, 0.2, 0.3};
  CHECK_MSG(determined(REF_FLOAT32, REF_SUM, ints, NULL, 3), "float 1 + 2 + 3 is exact");
  CHECK_MSG(!determined(REF_FLOAT32, REF_SUM, fracs, NULL, 3), "float 0.1 + 0.2 + 0.3 is not");
  double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, signs[8] = {1, -1, 1, -1, 1, -1, 1, -1};
  CHECK_MSG(determined(REF_FP8_E5M2, REF_SUM, ones, NULL, 8), "e5m2: 8 ones sum to 8 exactly");
  CHECK_MSG(!determined(REF_FP8_E5M2, REF_SUM, ones, NULL, 9), "e5m2: 9 is not a value");
  CHECK_MSG(determined(REF_FP8_E5M2, REF_SUM, signs, NULL, 8), "e5m2: +-1 alternating");
  const double big[2] = {5, 6}, halves[2] = {0.5, 0.25};
  CHECK_MSG(!determined(REF_FP8_E5M2, REF_SUM, big, NULL, 2), "e5m2: 5 + 6 = 11 needs 4 bits");
  CHECK_MSG(determined(REF_FP8_E5M2, REF_SUM, halves, NULL, 2), "e5m2: 0.5 + 0.25");
  CHECK_MSG(determined(REF_BFLOAT16, REF_AVG, ones, NULL, 4), "avg over 4");
  CHECK_MSG(!determined(REF_BFLOAT16, REF_AVG, ones, NULL, 3), "avg over 3 divides by 3");
  const double p2[4] = {2, 2, 0.5, -1}, p3[3] = {3, 3, 3};
  CHECK_MSG(determined(REF_FP8_E4M3, REF_PROD, p2, NULL, 4), "e4m3 prod of powers of two");
  CHECK_MSG(determined(REF_FP8_E4M3, REF_PROD, p3, NULL, 2), "e4m3: 3 * 3 = 9 has 4 bits");
  CHECK_MSG(!determined(REF_FP8_E4M3, REF_PROD, p3, NULL, 3), "e4m3: 27 needs 5 bits");
  const double big_p[2] = {256, 4};
  CHECK_MSG(!determined(REF_FP8_E4M3, REF_PROD, big_p, NULL, 2), "e4m3: 1024 overflows");
  const double sc2[2] = {2, 2}, sc_odd[2] = {1.5, 1.5}, xs[2] = {3, 5};
  CHECK_MSG(determined(REF_FLOAT16, REF_PREMULSUM, xs, sc2, 2), "half premulsum by 2");
  CHECK_MSG(!determined(REF_FP8_E5M2, REF_PREMULSUM, xs, sc_odd, 2),
            "e5m2: 5 * 1.5 = 7.5 is not a value");
  /* Integer types and max/min are exact whatever the data. */
  CHECK_TRUE(determined(REF_INT8, REF_SUM, fracs, NULL, 3));
  CHECK_TRUE(determined(REF_FP8_E5M2, REF_MAX, fracs, NULL, 3));

  static const int ops[] = {REF_SUM, REF_PROD, REF_PREMULSUM, REF_AVG};
  long claimed = 0, caught = 0;
  for (int t = 0; t < REF_NTYPES; t++) {
    if (!ref_type_is_float(t)) continue;
    for (int k = 0; k < 4; k++) {
      const int op = ops[k];
      for (int n = 2; n <= 16; n++) {
        for (int it = 0; it < 400; it++) {
          double x[16], sc[16];
          ref_val term[16], rev[16];
          int shift = (int)(rnd() % 9) - 4; /* the same scale for the whole element */
          for (int r = 0; r < n; r++) {
            int m = (int)(rnd() % 9) - 4;
            if (op == REF_PROD) m = 1 << (rnd() % 3); /* 1, 2, 4, sometimes times 3 */
            if (op == REF_PROD && rnd() % 4 == 0) m *= 3;
            x[r] = ldexp((rnd() & 1) && op == REF_PROD ? -m : m, op == REF_PROD ? -1 : shift);
            sc[r] = (rnd() % 3 == 0) ? 1.5 : 1 + (r & 1);
          }
          struct ref_acc a;
          acc_of(&a, t, op, x, sc, n);
          if (!ref_acc_determined(&a, t, op)) continue;
          claimed++;
          for (int r = 0; r < n; r++)
            term[r] =
                op == REF_PREMULSUM ? ref_apply(t, REF_PROD, F(t, x[r]), F(t, sc[r])) : F(t, x[r]);
          for (int r = 0; r < n; r++) rev[r] = term[n - 1 - r];
          int bop = op == REF_PROD ? REF_PROD : REF_SUM;
          ref_val results[3] = {ref_acc_result(&a, t, op), tree(t, bop, term, n),
                                tree(t, bop, rev, n)};
          if (op == REF_AVG) {
            results[1] = ref_avg_finish(t, results[1], n);
            results[2] = ref_avg_finish(t, results[2], n);
          }
          const double exact = ref_acc_exact(&a, t, op);
          for (int m = 0; m < 3; m++)
            CHECK_MSG(results[m].f == exact && ref_acc_tolerance(&a, t, op) == 0.0,
                      "type %s op %s n %d order %d: %a, exact %a, claimed exact", ref_type_name(t),
                      ref_op_name(op), n, m, results[m].f, exact);
          /* The last rank's term missing (for prod: a term other than +1 missing). */
          struct ref_acc d;
          acc_of(&d, t, op, x, sc, n - 1);
          ref_val dropped = ref_acc_result(&d, t, op == REF_AVG ? REF_SUM : op);
          if (op == REF_AVG) dropped = ref_avg_finish(t, dropped, n);
          if (ref_acc_exact(&d, t, op == REF_AVG ? REF_SUM : op) ==
              ref_acc_exact(&a, t, op == REF_AVG ? REF_SUM : op))
            continue; /* the last term changes nothing (0, or 1 in a product) */
          caught++;
          CHECK_MSG(!ref_acc_accept(&a, t, op, dropped, ref_acc_tolerance(&a, t, op)),
                    "type %s op %s n %d: the result without the last term (%a) accepted",
                    ref_type_name(t), ref_op_name(op), n, dropped.f);
        }
      }
    }
  }
  CHECK_MSG(claimed > 20000 && caught > 10000, "determined elements seen: %ld, drops: %ld", claimed,
            caught);
}

static void test_names(void) {
  CHECK_MSG(!strcmp(ref_type_name(REF_FP8_E4M3), "f8e4m3") &&
            !strcmp(ref_type_name(REF_FLOAT16), "half"),
        "type names");
  CHECK_MSG(!strcmp(ref_op_name(REF_PREMULSUM), "premulsum"), "op names");
  for (int t = 0; t < REF_NTYPES; t++) CHECK_MSG(ref_type_size(t) > 0, "size of %d", t);
  CHECK_MSG(ref_type_size(REF_NTYPES) == 0, "unknown type");
}

int main(void) {
  test_fixed_conversions();
  test_round_trips();
  test_rounding_brute_force();
  test_integer_ops();
  test_float_ops();
  test_tolerance();
  test_orders_within_tolerance();
  test_determined();
  test_names();
  return check_finish("perf-ref");
}
