/*
 * Choir test harness: reference arithmetic for the twelve NCCL data types.
 *
 * Header-only, C99. The same text compiles as C under gcc, and as host and device code under nvcc
 * (every function is REF_HD, that is __host__ __device__ there), so one definition of "the right
 * answer" serves the host-side unit tests, the GPU checkers of test/perf and the kernel checkers.
 *
 * Types and operators
 *   enum ref_type uses the ncclDataType_t values (REF_INT8 == ncclInt8 ... REF_FP8_E5M2 ==
 *   ncclFloat8e5m2), and enum ref_op the ncclRedOp_t values for the five built-in operators, plus
 *   REF_PREMULSUM for operators made by ncclRedOpCreatePreMulSum. This header does not include
 *   nccl.h, so it can be used where the CUDA toolkit is absent.
 *
 * Values
 *   A ref_val carries one element. Integer types: the two's complement value sign-extended (signed
 *   types, read .i) or zero-extended (unsigned types, read .u) from the type's width; this form is
 *   canonical, so two integer values are equal exactly when their .u are equal. Floating types:
 *   .f is a double holding the element's value exactly (every fp16, bf16, fp8 and float value is a
 *   double value).
 *
 * Conversions (float -> narrow type: round to nearest, ties to even)
 *   fp16, bf16: IEEE binary16 / bfloat16. Overflow rounds to +-Inf, Inf stays Inf, any NaN becomes
 *     the canonical NaN 0x7fff (sign dropped), subnormals are kept. This is what CUDA's
 *     __float2half_rn and __float2bfloat16_rn return.
 *   fp8 e4m3 and e5m2: CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...). A finite value beyond
 *     the largest finite one (448 for e4m3, 57344 for e5m2) after rounding, and +-Inf, saturate to
 *     +-max finite; any NaN becomes 0x7f (e4m3 has no Inf and a single NaN per sign, S.1111.111;
 *     e5m2 is IEEE-like with Inf 0x7c). Values of at most half the smallest subnormal become +-0.
 *   Narrow -> float is exact; NaN decodes to the float NaN 0x7fffffff, Inf to Inf.
 *
 * Arithmetic (ref_apply, ref_acc_*)
 *   Integer types: exact, wrapping like two's complement (sum, prod, premulsum); max/min compare as
 *     signed or unsigned per the type; avg is the wrapped sum divided by the rank count, truncated
 *     toward zero (NCCL divides after summing for integer types).
 *   float and double: one IEEE operation in the type, rounded to nearest even (device code uses the
 *     _rn intrinsics so that no multiply-add is contracted).
 *   fp16, bf16, fp8: each operation is computed in float and rounded to the type. For + and * this
 *     equals the correctly rounded result in the type (float carries more than 2p+2 bits).
 *   avg of floating types is sum, then division by n, rounded to the type; NCCL instead multiplies
 *     each input by (T)(1/n) and sums. Both lie within ref_tolerance of the exact average.
 *
 * Checking floating-point results (ref_tolerance)
 *   A library may reduce in any order, in the type or wider, and NCCL's fp8 kernels go through
 *   fp16.
 *   With u the type's unit roundoff (2^-p, p the significand bits including the implicit one) plus
 *   the unit roundoff of a possible intermediate format, k the number of roundings along the
 *   longest chain and S the sum of the magnitudes of the terms (for prod: the magnitude of the
 *   product), any evaluation order satisfies |result - exact| <= ((1 + u)^k - 1) * S, and each
 *   rounding in the subnormal range adds at most half the smallest subnormal eta of the type. The
 *   reference itself is computed in double, which adds ((1 + 2^-53)^k - 1) * S. Hence:
 *     tolerance = ((1 + u)^k - 1) * S + ((1 + 2^-53)^k - 1) * S + k * eta
 *   with k = n for sum and prod (n - 1 operations and one final rounding from a wider
 *   accumulator), n + 1 for premulsum (the products), n + 2 for avg (rounding of 1/n, the
 *   products, the division).
 *   Integer types and max/min have tolerance 0: any correct implementation is exact.
 *   These bounds are worst cases and grow fast with k for the narrow types: for fp8 on 4 ranks or
 *   more (e4m3; e5m2 from 3), bf16 from about 16 and fp16 from about 45, a result missing a whole
 *   rank's term of typical size can still lie within them. So a check that must be able to fail
 *   uses data whose results are exact (see ref_acc_determined; test/perf/perf_gen.h's exact
 *   pattern), where the tolerance is 0.
 *
 * Results that every evaluation order gets exactly (ref_acc_determined)
 *   sum, premulsum, avg: write each term as odd * 2^e; let q be the smallest 2^e over the nonzero
 *     terms, P the sum of the positive terms and N that of the negative ones' magnitudes. Every
 *     partial result of every order, in any precision of at least p bits, is a multiple of q
 *     between -N and P; when max(P, N) <= 2^p * q (and within the type's range) each is a value of
 *     the type, so nothing is ever rounded. This needs the terms themselves to be values of the
 *     type (premulsum: x * s is); for avg, n a power of two, so that x / n is exact too.
 *   prod: when the product of the terms' odd parts is at most 2^p and every partial product stays
 *     between the smallest normal and the largest finite value, no product is rounded.
 *   ref_acc_tolerance is then 0: the result must be the exact value, bit for bit.
 */
#ifndef CHOIR_TEST_REF_H
#define CHOIR_TEST_REF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define REF_HD __host__ __device__
#else
#define REF_HD
#endif
#define REF_FN static inline REF_HD

#ifdef __cplusplus
extern "C" {
#endif

enum ref_type {
  REF_INT8 = 0,
  REF_UINT8 = 1,
  REF_INT32 = 2,
  REF_UINT32 = 3,
  REF_INT64 = 4,
  REF_UINT64 = 5,
  REF_FLOAT16 = 6,
  REF_FLOAT32 = 7,
  REF_FLOAT64 = 8,
  REF_BFLOAT16 = 9,
  REF_FP8_E4M3 = 10,
  REF_FP8_E5M2 = 11,
  REF_NTYPES = 12
};

enum ref_op {
  REF_SUM = 0,
  REF_PROD = 1,
  REF_MAX = 2,
  REF_MIN = 3,
  REF_AVG = 4,
  REF_PREMULSUM = 5,
  REF_NOPS = 6
};

typedef union ref_val {
  int64_t i;
  uint64_t u;
  double f;
} ref_val;

/* ---- Type properties ---- */

REF_FN size_t ref_type_size(int t) {
  switch (t) {
  case REF_INT8:
  case REF_UINT8:
  case REF_FP8_E4M3:
  case REF_FP8_E5M2: return 1;
  case REF_FLOAT16:
  case REF_BFLOAT16: return 2;
  case REF_INT32:
  case REF_UINT32:
  case REF_FLOAT32: return 4;
  case REF_INT64:
  case REF_UINT64:
  case REF_FLOAT64: return 8;
  default: return 0;
  }
}

REF_FN int ref_type_is_float(int t) {
  return t == REF_FLOAT16 || t == REF_FLOAT32 || t == REF_FLOAT64 || t == REF_BFLOAT16 ||
         t == REF_FP8_E4M3 || t == REF_FP8_E5M2;
}

REF_FN int ref_type_is_signed(int t) {
  return t == REF_INT8 || t == REF_INT32 || t == REF_INT64 || ref_type_is_float(t);
}

/* Significand bits including the implicit one (0 for integer types). */
REF_FN int ref_type_precision(int t) {
  switch (t) {
  case REF_FLOAT16: return 11;
  case REF_FLOAT32: return 24;
  case REF_FLOAT64: return 53;
  case REF_BFLOAT16: return 8;
  case REF_FP8_E4M3: return 4;
  case REF_FP8_E5M2: return 3;
  default: return 0;
  }
}

/* Unit roundoff 2^-p of the type (0 for integer types). */
REF_FN double ref_type_epsilon(int t) {
  switch (t) {
  case REF_FLOAT16: return 0x1p-11;
  case REF_FLOAT32: return 0x1p-24;
  case REF_FLOAT64: return 0x1p-53;
  case REF_BFLOAT16: return 0x1p-8;
  case REF_FP8_E4M3: return 0x1p-4;
  case REF_FP8_E5M2: return 0x1p-3;
  default: return 0.0;
  }
}

/* Smallest positive subnormal of the type (0 for integer types). */
REF_FN double ref_type_min_subnormal(int t) {
  switch (t) {
  case REF_FLOAT16: return 0x1p-24;
  case REF_FLOAT32: return 0x1p-149;
  case REF_FLOAT64: return 0x1p-1074;
  case REF_BFLOAT16: return 0x1p-133;
  case REF_FP8_E4M3: return 0x1p-9;
  case REF_FP8_E5M2: return 0x1p-16;
  default: return 0.0;
  }
}

/* Smallest positive normal value of the type (0 for integer types). */
REF_FN double ref_type_min_normal(int t) {
  switch (t) {
  case REF_FLOAT16: return 0x1p-14;
  case REF_FLOAT32: return 0x1p-126;
  case REF_FLOAT64: return 0x1p-1022;
  case REF_BFLOAT16: return 0x1p-126;
  case REF_FP8_E4M3: return 0x1p-6;
  case REF_FP8_E5M2: return 0x1p-14;
  default: return 0.0;
  }
}

/* Largest finite value of the type (for integer types, the largest value, as a double). */
REF_FN double ref_type_max(int t) {
  switch (t) {
  case REF_INT8: return 127.0;
  case REF_UINT8: return 255.0;
  case REF_INT32: return 2147483647.0;
  case REF_UINT32: return 4294967295.0;
  case REF_INT64: return 0x1p63 - 1024.0; /* nearest double below 2^63 - 1 */
  case REF_UINT64: return 0x1p64 - 2048.0;
  case REF_FLOAT16: return 65504.0;
  case REF_FLOAT32: return 0x1.fffffep127;
  case REF_FLOAT64: return 0x1.fffffffffffffp1023;
  case REF_BFLOAT16: return 0x1.fep127;
  case REF_FP8_E4M3: return 448.0;
  case REF_FP8_E5M2: return 57344.0;
  default: return 0.0;
  }
}

/* Names as nccl-tests spells them on its command line and in its output. */
REF_FN const char* ref_type_name(int t) {
  switch (t) {
  case REF_INT8: return "int8";
  case REF_UINT8: return "uint8";
  case REF_INT32: return "int32";
  case REF_UINT32: return "uint32";
  case REF_INT64: return "int64";
  case REF_UINT64: return "uint64";
  case REF_FLOAT16: return "half";
  case REF_FLOAT32: return "float";
  case REF_FLOAT64: return "double";
  case REF_BFLOAT16: return "bfloat16";
  case REF_FP8_E4M3: return "f8e4m3";
  case REF_FP8_E5M2: return "f8e5m2";
  default: return "?";
  }
}

REF_FN const char* ref_op_name(int op) {
  switch (op) {
  case REF_SUM: return "sum";
  case REF_PROD: return "prod";
  case REF_MAX: return "max";
  case REF_MIN: return "min";
  case REF_AVG: return "avg";
  case REF_PREMULSUM: return "premulsum";
  default: return "?";
  }
}

/* ---- Bit access ---- */

REF_FN uint32_t ref_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

REF_FN float ref_bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

REF_FN uint64_t ref_f64_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

REF_FN int ref_isnan(double x) { return x != x; }

REF_FN double ref_fabs(double x) { return x < 0 ? -x : x; }

/*
 * Round the finite non-negative float whose bits are `a` to a binary format with `mbits` stored
 * mantissa bits and exponent bias `bias` (IEEE layout, with subnormals), to nearest, ties to even.
 * Returns the magnitude code (biased exponent << mbits | mantissa). A code above the format's
 * largest finite one means the value overflowed; the caller decides what that becomes. A carry out
 * of the mantissa moves into the exponent field, which is the correct rounding.
 */
REF_FN uint32_t ref_round_magnitude(uint32_t a, int mbits, int bias) {
  uint32_t sig = a & 0x7fffffu;
  int fexp = (int)(a >> 23);
  int e; /* exponent of bit 23 of sig */
  if (fexp == 0) {
    e = -126;
  } else {
    e = fexp - 127;
    sig |= 0x800000u;
  }
  int emin = 1 - bias;
  int shift = 23 - mbits;
  uint32_t base;
  if (e >= emin) {
    /* sig carries the implicit bit at position mbits after the shift, adding one to (e - emin). */
    base = (uint32_t)(e - emin) << mbits;
  } else {
    shift += emin - e;
    base = 0;
  }
  if (shift >= 25) return 0; /* below half the smallest subnormal (sig < 2^24 <= half) */
  uint32_t q = sig >> shift;
  uint32_t rem = sig & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return base + q;
}

/* Decode a finite magnitude code of a small format (exponent range within float's normals). */
REF_FN float ref_decode_magnitude(uint32_t mag, int mbits, int bias) {
  uint32_t e = mag >> mbits;
  uint32_t m = mag & ((1u << mbits) - 1u);
  int exp;
  if (e == 0) {
    if (m == 0) return 0.0f;
    exp = 1 - bias;
    while (!(m & (1u << mbits))) {
      m <<= 1;
      exp--;
    }
    m &= (1u << mbits) - 1u;
  } else {
    exp = (int)e - bias;
  }
  return ref_bits_f32(((uint32_t)(exp + 127) << 23) | (m << (23 - mbits)));
}

/* ---- fp16 (IEEE binary16) ---- */

REF_FN uint16_t ref_f32_to_f16(float x) {
  uint32_t u = ref_f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;
  if (a == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
  uint32_t m = ref_round_magnitude(a, 10, 15);
  if (m >= 0x7c00u) m = 0x7c00u; /* overflow rounds to Inf */
  return (uint16_t)(sign | m);
}

REF_FN float ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t mag = h & 0x7fffu;
  if (mag >= 0x7c00u) return ref_bits_f32(mag == 0x7c00u ? (sign | 0x7f800000u) : 0x7fffffffu);
  return ref_bits_f32(sign | ref_f32_bits(ref_decode_magnitude(mag, 10, 15)));
}

/* ---- bfloat16 ---- */

REF_FN uint16_t ref_f32_to_bf16(float x) {
  uint32_t u = ref_f32_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;
  if (a == 0x7f800000u) return (uint16_t)(sign | 0x7f80u);
  uint32_t m = ref_round_magnitude(a, 7, 127);
  if (m >= 0x7f80u) m = 0x7f80u;
  return (uint16_t)(sign | m);
}

REF_FN float ref_bf16_to_f32(uint16_t h) {
  uint32_t mag = h & 0x7fffu;
  if (mag > 0x7f80u) return ref_bits_f32(0x7fffffffu);
  return ref_bits_f32((uint32_t)h << 16);
}

/* ---- fp8 e4m3 (no Inf; 0x7f/0xff are NaN; saturating conversion) ---- */

REF_FN uint8_t ref_f32_to_e4m3(float x) {
  uint32_t u = ref_f32_bits(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;
  if (a == 0x7f800000u) return (uint8_t)(sign | 0x7eu);
  uint32_t m = ref_round_magnitude(a, 3, 7);
  if (m > 0x7eu) m = 0x7eu;
  return (uint8_t)(sign | m);
}

REF_FN float ref_e4m3_to_f32(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80u) << 24;
  uint32_t mag = b & 0x7fu;
  if (mag == 0x7fu) return ref_bits_f32(0x7fffffffu);
  return ref_bits_f32(sign | ref_f32_bits(ref_decode_magnitude(mag, 3, 7)));
}

/* ---- fp8 e5m2 (IEEE-like: 0x7c Inf, 0x7d..0x7f NaN; saturating conversion) ---- */

REF_FN uint8_t ref_f32_to_e5m2(float x) {
  uint32_t u = ref_f32_bits(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;
  if (a == 0x7f800000u) return (uint8_t)(sign | 0x7bu);
  uint32_t m = ref_round_magnitude(a, 2, 15);
  if (m > 0x7bu) m = 0x7bu;
  return (uint8_t)(sign | m);
}

REF_FN float ref_e5m2_to_f32(uint8_t b) {
  uint32_t sign = (uint32_t)(b & 0x80u) << 24;
  uint32_t mag = b & 0x7fu;
  if (mag >= 0x7cu) return ref_bits_f32(mag == 0x7cu ? (sign | 0x7f800000u) : 0x7fffffffu);
  return ref_bits_f32(sign | ref_f32_bits(ref_decode_magnitude(mag, 2, 15)));
}

/* ---- ref_val construction ---- */

/* Canonical integer value of type t from the low bits of `bits` (wrapping). */
REF_FN ref_val ref_wrap(int t, uint64_t bits) {
  ref_val v;
  switch (t) {
  case REF_INT8: v.i = (int64_t)((bits & 0xffu) ^ 0x80u) - 0x80; break;
  case REF_UINT8: v.u = bits & 0xffu; break;
  case REF_INT32: v.i = (int64_t)((bits & 0xffffffffu) ^ 0x80000000u) - 0x80000000LL; break;
  case REF_UINT32: v.u = bits & 0xffffffffu; break;
  default: v.u = bits; break;
  }
  return v;
}

/* The float x rounded to floating type t (x itself for float; for double, x widened). */
REF_FN ref_val ref_round_f32(int t, float x) {
  ref_val v;
  switch (t) {
  case REF_FLOAT16: v.f = ref_f16_to_f32(ref_f32_to_f16(x)); break;
  case REF_BFLOAT16: v.f = ref_bf16_to_f32(ref_f32_to_bf16(x)); break;
  case REF_FP8_E4M3: v.f = ref_e4m3_to_f32(ref_f32_to_e4m3(x)); break;
  case REF_FP8_E5M2: v.f = ref_e5m2_to_f32(ref_f32_to_e5m2(x)); break;
  default: v.f = x; break;
  }
  return v;
}

/*
 * x converted to type t. Floating types: rounded to nearest even (the narrow types by way of float,
 * which is exact for any x representable in float). Integer types: x truncated toward zero, then
 * wrapped to the type; x must lie within the int64 range (uint64 range for REF_UINT64).
 */
REF_FN ref_val ref_from_f64(int t, double x) {
  ref_val v;
  if (t == REF_FLOAT64) {
    v.f = x;
  } else if (ref_type_is_float(t)) {
    v = ref_round_f32(t, (float)x);
  } else if (t == REF_UINT64 && x >= 0x1p63) {
    v.u = (uint64_t)x;
  } else {
    v = ref_wrap(t, (uint64_t)(int64_t)x);
  }
  return v;
}

/* Integer x converted to type t (wrapped for integer types, rounded for floating types). */
REF_FN ref_val ref_from_i64(int t, int64_t x) {
  if (ref_type_is_float(t)) return ref_from_f64(t, (double)x);
  return ref_wrap(t, (uint64_t)x);
}

/* The value as a double (integers above 2^53 in magnitude are rounded). */
REF_FN double ref_to_f64(int t, ref_val v) {
  if (ref_type_is_float(t)) return v.f;
  if (ref_type_is_signed(t)) return (double)v.i;
  return (double)v.u;
}

/* ---- Typed element access (base must be aligned to the element size) ---- */

REF_FN ref_val ref_load(int t, const void* base, size_t i) {
  ref_val v;
  switch (t) {
  case REF_INT8: v.i = ((const int8_t*)base)[i]; break;
  case REF_UINT8: v.u = ((const uint8_t*)base)[i]; break;
  case REF_INT32: v.i = ((const int32_t*)base)[i]; break;
  case REF_UINT32: v.u = ((const uint32_t*)base)[i]; break;
  case REF_INT64: v.i = ((const int64_t*)base)[i]; break;
  case REF_UINT64: v.u = ((const uint64_t*)base)[i]; break;
  case REF_FLOAT16: v.f = ref_f16_to_f32(((const uint16_t*)base)[i]); break;
  case REF_FLOAT32: v.f = ((const float*)base)[i]; break;
  case REF_FLOAT64: v.f = ((const double*)base)[i]; break;
  case REF_BFLOAT16: v.f = ref_bf16_to_f32(((const uint16_t*)base)[i]); break;
  case REF_FP8_E4M3: v.f = ref_e4m3_to_f32(((const uint8_t*)base)[i]); break;
  case REF_FP8_E5M2: v.f = ref_e5m2_to_f32(((const uint8_t*)base)[i]); break;
  default: v.u = 0; break;
  }
  return v;
}

/* Store v (a value of type t, or any double for floating types, which is then rounded). */
REF_FN void ref_store(int t, void* base, size_t i, ref_val v) {
  switch (t) {
  case REF_INT8: ((int8_t*)base)[i] = (int8_t)ref_wrap(t, v.u).i; break;
  case REF_UINT8: ((uint8_t*)base)[i] = (uint8_t)(v.u & 0xffu); break;
  case REF_INT32: ((int32_t*)base)[i] = (int32_t)ref_wrap(t, v.u).i; break;
  case REF_UINT32: ((uint32_t*)base)[i] = (uint32_t)(v.u & 0xffffffffu); break;
  case REF_INT64: ((int64_t*)base)[i] = v.i; break;
  case REF_UINT64: ((uint64_t*)base)[i] = v.u; break;
  case REF_FLOAT16: ((uint16_t*)base)[i] = ref_f32_to_f16((float)v.f); break;
  case REF_FLOAT32: ((float*)base)[i] = (float)v.f; break;
  case REF_FLOAT64: ((double*)base)[i] = v.f; break;
  case REF_BFLOAT16: ((uint16_t*)base)[i] = ref_f32_to_bf16((float)v.f); break;
  case REF_FP8_E4M3: ((uint8_t*)base)[i] = ref_f32_to_e4m3((float)v.f); break;
  case REF_FP8_E5M2: ((uint8_t*)base)[i] = ref_f32_to_e5m2((float)v.f); break;
  default: break;
  }
}

/* Whether a and b are the same element of type t, bit for bit (+0 and -0 differ). */
REF_FN int ref_same_bits(int t, ref_val a, ref_val b) {
  if (ref_type_is_float(t)) return ref_f64_bits(a.f) == ref_f64_bits(b.f);
  return a.u == b.u;
}

/* ---- Arithmetic in the type ---- */

#if defined(__CUDA_ARCH__)
#define REF_FADD(a, b) __fadd_rn((a), (b))
#define REF_FMUL(a, b) __fmul_rn((a), (b))
#define REF_FDIV(a, b) __fdiv_rn((a), (b))
#define REF_DADD(a, b) __dadd_rn((a), (b))
#define REF_DMUL(a, b) __dmul_rn((a), (b))
#define REF_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define REF_FADD(a, b) ((a) + (b))
#define REF_FMUL(a, b) ((a) * (b))
#define REF_FDIV(a, b) ((a) / (b))
#define REF_DADD(a, b) ((a) + (b))
#define REF_DMUL(a, b) ((a) * (b))
#define REF_DDIV(a, b) ((a) / (b))
#endif

/*
 * a op b in type t, for op = REF_SUM, REF_PROD, REF_MAX or REF_MIN (REF_AVG and REF_PREMULSUM
 * combine partial results with a sum, see ref_acc_add). a and b are values of type t; so is the
 * result. max/min of floating types return a when a and b compare equal.
 */
REF_FN ref_val ref_apply(int t, int op, ref_val a, ref_val b) {
  ref_val r;
  if (op == REF_AVG || op == REF_PREMULSUM) op = REF_SUM;
  if (!ref_type_is_float(t)) {
    int sgn = ref_type_is_signed(t);
    switch (op) {
    case REF_SUM: return ref_wrap(t, a.u + b.u);
    case REF_PROD: return ref_wrap(t, a.u * b.u);
    case REF_MAX: return (sgn ? a.i >= b.i : a.u >= b.u) ? a : b;
    default: return (sgn ? a.i <= b.i : a.u <= b.u) ? a : b;
    }
  }
  if (op == REF_MAX) return (a.f >= b.f || ref_isnan(a.f)) ? a : b;
  if (op == REF_MIN) return (a.f <= b.f || ref_isnan(a.f)) ? a : b;
  if (t == REF_FLOAT64) {
    r.f = op == REF_SUM ? REF_DADD(a.f, b.f) : REF_DMUL(a.f, b.f);
    return r;
  }
  float x = (float)a.f, y = (float)b.f;
  return ref_round_f32(t, op == REF_SUM ? REF_FADD(x, y) : REF_FMUL(x, y));
}

/* The average from a sum of n terms of type t: integers divide with truncation toward zero. */
REF_FN ref_val ref_avg_finish(int t, ref_val sum, int n) {
  ref_val r;
  if (!ref_type_is_float(t)) {
    if (ref_type_is_signed(t)) return ref_wrap(t, (uint64_t)(sum.i / (int64_t)n));
    return ref_wrap(t, sum.u / (uint64_t)n);
  }
  if (t == REF_FLOAT64) {
    r.f = REF_DDIV(sum.f, (double)n);
    return r;
  }
  return ref_round_f32(t, REF_FDIV((float)sum.f, (float)n));
}

/* (1 + u)^k - 1, for the error bounds, as the binomial series sum_j C(k, j) u^j: computing
 * (1 + u)^k directly loses u when 1 + u rounds to 1 (u = 2^-53 in double). */
REF_FN double ref_growth(double u, int k) {
  double term = 1.0, sum = 0.0;
  for (int j = 1; j <= k; j++) {
    term *= u * (double)(k - j + 1) / (double)j;
    sum += term;
    if (term <= sum * 0x1p-60) break;
  }
  return sum;
}

/*
 * Largest acceptable |result - exact| for a floating-type reduction of n terms with operator op,
 * where sum_abs is the sum of the magnitudes of the terms (x_r, s_r * x_r, x_r / n for avg) or, for
 * prod, the magnitude of the exact product. 0 for integer types and for max/min. See the header
 * comment for the derivation.
 */
REF_FN double ref_tolerance(int t, int op, int n, double sum_abs) {
  if (!ref_type_is_float(t) || op == REF_MAX || op == REF_MIN) return 0.0;
  double u = ref_type_epsilon(t);
  if (t == REF_FLOAT16 || t == REF_BFLOAT16) u += 0x1p-24;                /* float intermediate */
  if (t == REF_FP8_E4M3 || t == REF_FP8_E5M2) u += 0x1p-11 + u * 0x1p-11; /* fp16 intermediate */
  int k = n;
  if (op == REF_PREMULSUM) k = n + 1;
  if (op == REF_AVG) k = n + 2;
  if (k < 1) k = 1;
  return ref_growth(u, k) * sum_abs + ref_growth(0x1p-53, k) * sum_abs +
         (double)k * ref_type_min_subnormal(t);
}

/* ---- Reducing one element over ranks ---- */

/*
 * Accumulator for one output element: feed the ranks' inputs in rank order with ref_acc_add, then
 * ref_acc_result gives the serial result in the type's arithmetic and ref_acc_accept judges a
 * library's result. For floating types it also keeps the exact value in double (exact for sums of
 * narrow-type or float terms of moderate range) and the magnitude sum the tolerance needs.
 */
struct ref_acc {
  ref_val v;      /* serial result so far, in the type's arithmetic */
  double exact;   /* floating types: exact sum (or product) of the terms */
  double sum_abs; /* floating types: sum of |term| */
  int n;          /* terms so far */
  /* What ref_acc_determined needs (floating types, not max/min). */
  int odd_terms;   /* 0 once a term was not a finite value of the type */
  int qexp;        /* smallest e of the nonzero terms odd * 2^e (INT32_MAX: none yet) */
  double pos;      /* sum of the positive terms */
  double neg;      /* sum of the magnitudes of the negative terms */
  double odd_prod; /* prod: product of the odd parts (capped) */
  double hi, lo;   /* prod: products of the factors above 1 and of the nonzero ones below 1 */
};

REF_FN void ref_acc_init(struct ref_acc* a) {
  a->v.u = 0;
  a->exact = 0.0;
  a->sum_abs = 0.0;
  a->n = 0;
  a->odd_terms = 1;
  a->qexp = INT32_MAX;
  a->pos = a->neg = 0.0;
  a->odd_prod = a->hi = a->lo = 1.0;
}

/* Count of trailing zero bits of a nonzero 64-bit word. */
REF_FN int ref_ctz64(uint64_t m) {
#if defined(__CUDA_ARCH__)
  return __ffsll((long long)m) - 1;
#else
  return __builtin_ctzll(m);
#endif
}

/* A finite nonzero double as odd * 2^e: returns e, and the odd integer (as a double) in *odd. */
REF_FN int ref_split_odd(double d, double* odd) {
  uint64_t b = ref_f64_bits(d);
  int field = (int)((b >> 52) & 0x7ffu);
  uint64_t m = b & 0xfffffffffffffull;
  int e = field == 0 ? -1074 : field - 1075;
  if (field != 0) m |= 1ull << 52;
  int tz = ref_ctz64(m);
  *odd = (double)(m >> tz);
  return e + tz;
}

/* Add rank's input x (type t). scalar is that rank's premulsum factor (ignored for other ops). */
REF_FN void ref_acc_add(struct ref_acc* a, int t, int op, ref_val x, ref_val scalar) {
  ref_val term = op == REF_PREMULSUM ? ref_apply(t, REF_PROD, x, scalar) : x;
  a->v = a->n == 0 ? term : ref_apply(t, op, a->v, term);
  if (ref_type_is_float(t)) {
    double d = op == REF_PREMULSUM ? x.f * scalar.f : x.f;
    if (op == REF_PROD) {
      a->exact = a->n == 0 ? d : a->exact * d;
      a->sum_abs = ref_fabs(a->exact);
    } else if (op != REF_MAX && op != REF_MIN) {
      a->exact += d;
      a->sum_abs += ref_fabs(d);
    }
    if (op != REF_MAX && op != REF_MIN) {
      /* A term that is not a value of the type (a premulsum product that needed rounding, NaN,
       * Inf) takes away any claim of exactness. */
      if (ref_isnan(d) || ref_fabs(d) > ref_type_max(t) ||
          (op == REF_PREMULSUM && ref_from_f64(t, d).f != d))
        a->odd_terms = 0;
      if (a->odd_terms && d != 0.0) {
        double odd;
        int e = ref_split_odd(d, &odd);
        if (e < a->qexp) a->qexp = e;
        if (d > 0)
          a->pos += d;
        else
          a->neg -= d;
        a->odd_prod = a->odd_prod > 0x1p60 ? a->odd_prod : a->odd_prod * odd;
        if (ref_fabs(d) > 1.0) a->hi *= ref_fabs(d);
        if (ref_fabs(d) < 1.0) a->lo *= ref_fabs(d);
      }
    }
  }
  a->n++;
}

/*
 * Whether every evaluation order, in the type or wider, gets the exact value of this element
 * (see the header comment): then the only acceptable floating-point result is the exact one.
 * Always true for integer types and max/min, which are exact anyway.
 */
REF_FN int ref_acc_determined(const struct ref_acc* a, int t, int op) {
  if (!ref_type_is_float(t) || op == REF_MAX || op == REF_MIN) return 1;
  if (!a->odd_terms) return 0;
  double pmax = 1.0;
  for (int i = 0; i < ref_type_precision(t); i++) pmax *= 2.0;
  if (op == REF_PROD)
    return a->odd_prod <= pmax && a->hi <= ref_type_max(t) && a->lo >= ref_type_min_normal(t);
  if (a->qexp == INT32_MAX) return 1; /* every term is 0 */
  /* q = 2^qexp (a double: qexp >= -1074, and at most double's largest exponent). */
  uint64_t qbits = a->qexp >= -1022 ? (uint64_t)(a->qexp + 1023) << 52 : 1ull << (a->qexp + 1074);
  double q;
  memcpy(&q, &qbits, sizeof q);
  double big = a->pos > a->neg ? a->pos : a->neg;
  if (big > pmax * q || big > ref_type_max(t)) return 0;
  if (op == REF_AVG) /* x / n exact: n a power of two, and q / n no finer than the type */
    return (a->n & (a->n - 1)) == 0 && q / (double)a->n >= ref_type_min_subnormal(t);
  return 1;
}

/* The serial result in the type's arithmetic (avg finished by the division). */
REF_FN ref_val ref_acc_result(const struct ref_acc* a, int t, int op) {
  return op == REF_AVG ? ref_avg_finish(t, a->v, a->n) : a->v;
}

/* Exact value of the element as a double (floating types; the serial result for max/min). */
REF_FN double ref_acc_exact(const struct ref_acc* a, int t, int op) {
  if (op == REF_MAX || op == REF_MIN || !ref_type_is_float(t)) return ref_to_f64(t, a->v);
  return op == REF_AVG ? a->exact / (double)a->n : a->exact;
}

/* ref_tolerance for this element; 0 where every order is exact (ref_acc_determined). */
REF_FN double ref_acc_tolerance(const struct ref_acc* a, int t, int op) {
  if (ref_acc_determined(a, t, op)) return 0.0;
  double s = op == REF_AVG ? a->sum_abs / (double)a->n : a->sum_abs;
  return ref_tolerance(t, op, a->n, s);
}

/*
 * Whether `got` is an acceptable result: integer types and max/min must equal the serial result
 * (value equality for floats, so -0 == +0); other floating-type results must not be NaN and must
 * lie within tol of the exact value (pass ref_acc_tolerance, or 0 where the inputs make every
 * partial result exact).
 */
REF_FN int ref_acc_accept(const struct ref_acc* a, int t, int op, ref_val got, double tol) {
  if (!ref_type_is_float(t)) return got.u == ref_acc_result(a, t, op).u;
  if (ref_isnan(got.f)) return 0;
  if (op == REF_MAX || op == REF_MIN) return got.f == a->v.f;
  double exact = ref_acc_exact(a, t, op);
  double err = ref_fabs(got.f - exact);
  return err <= tol;
}

/* Serial reduction of x[0..n) in rank order; s holds the premulsum factors (NULL: all 1). */
REF_FN ref_val ref_reduce(int t, int op, int n, const ref_val* x, const ref_val* s) {
  struct ref_acc a;
  ref_val one = ref_from_i64(t, 1);
  ref_acc_init(&a);
  for (int r = 0; r < n; r++) ref_acc_add(&a, t, op, x[r], s ? s[r] : one);
  return ref_acc_result(&a, t, op);
}

#ifdef __cplusplus
}
#endif

#endif
