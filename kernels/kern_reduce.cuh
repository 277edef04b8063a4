/*
 * Device reduction functors for every NCCL data type and operator.
 *
 * Layering, bottom up:
 *   kern::ty<TYPE>      per data type: storage bits, the compute type of the pre-op scalar,
 *                       and the element operations add/mul/max/min/scale/div on storage bits;
 *                       word-level (32-bit, several lanes) versions where the hardware has
 *                       packed instructions (f16x2, bf16x2, fp8x2 conversions, byte SIMD).
 *   kern::pack_*        the same operations on one element (storage bits) or on a 16-byte
 *                       vector (uint4), so that the copy loops are written once for both.
 *   kern::red<OP, TYPE> an operator bound to its run-time parameters (scalar, divisor),
 *                       exposing reduce / pre / post on either pack kind.
 *
 * Values are carried as their storage bits (unsigned integers) everywhere, so that a 16-byte
 * vector is four 32-bit words whatever the type and no type punning through unions is needed.
 * Every floating-point step is rounded to the storage type (the _rn intrinsics forbid FMA
 * contraction), so the result does not depend on which path (vector or element) ran.
 */
#ifndef CHOIR_KERN_REDUCE_CUH
#define CHOIR_KERN_REDUCE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include <type_traits>

#include "kern_internal.h" /* KERN_RC_UNROLL */
#include "kernels.h"

namespace kern {

/* Basic binary operations a kernel operator reduces with. */
enum { K_ADD, K_MUL, K_MAX, K_MIN };

template <typename To, typename From>
__device__ __forceinline__ To bitcast(From f) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between different sizes");
  To t;
  memcpy(&t, &f, sizeof(t));
  return t;
}

/*
 * Generic word-level operations: a 32-bit word holds 4/sizeof(B) lanes of B; each lane goes
 * through the element operation of D. Types with packed hardware instructions override these.
 */
template <class D, typename B>
struct ty_base {
  using bits = B;
  static constexpr int lanes = 4 / (sizeof(B) < 4 ? sizeof(B) : 4);

  template <class F>
  __device__ __forceinline__ static uint32_t map_w(uint32_t a, F f) {
    if constexpr (sizeof(B) == 4) {
      return (uint32_t)f((B)a);
    } else {
      uint32_t r = 0;
#pragma unroll
      for (int i = 0; i < lanes; i++) {
        const int sh = i * 8 * (int)sizeof(B);
        r |= (uint32_t)(B)f((B)(a >> sh)) << sh;
      }
      return r;
    }
  }
  template <class F>
  __device__ __forceinline__ static uint32_t map2_w(uint32_t a, uint32_t b, F f) {
    if constexpr (sizeof(B) == 4) {
      return (uint32_t)f((B)a, (B)b);
    } else {
      uint32_t r = 0;
#pragma unroll
      for (int i = 0; i < lanes; i++) {
        const int sh = i * 8 * (int)sizeof(B);
        r |= (uint32_t)(B)f((B)(a >> sh), (B)(b >> sh)) << sh;
      }
      return r;
    }
  }

  template <int K>
  __device__ __forceinline__ static B op(B a, B b) {
    if constexpr (K == K_ADD)
      return D::add(a, b);
    else if constexpr (K == K_MUL)
      return D::mul(a, b);
    else if constexpr (K == K_MAX)
      return D::max(a, b);
    else
      return D::min(a, b);
  }
  template <int K>
  __device__ __forceinline__ static uint32_t op_w(uint32_t a, uint32_t b) {
    return map2_w(a, b, [](B x, B y) { return D::template op<K>(x, y); });
  }
  template <typename C>
  __device__ __forceinline__ static uint32_t scale_w(uint32_t a, C s) {
    return map_w(a, [s](B x) { return D::scale(x, s); });
  }
  __device__ __forceinline__ static uint32_t div_w(uint32_t a, uint32_t n) {
    return map_w(a, [n](B x) { return D::div(x, n); });
  }
};

/* ---- integers: storage is the unsigned type of the same width; S is the signed view ---- */

template <typename S>
struct ty_int : ty_base<ty_int<S>, std::make_unsigned_t<S>> {
  using B = std::make_unsigned_t<S>;
  using comp = B; /* premulsum scalar: same type, wrapping multiply */
  static constexpr bool is_float = false;
  /* Division happens in a type at least 32 bits wide so that a divisor above the type's range
   * (256 ranks of int8) stays exact; the quotient then fits the type again. */
  using W =
      std::conditional_t<std::is_signed_v<S>, std::conditional_t<(sizeof(S) > 4), int64_t, int32_t>,
                         std::conditional_t<(sizeof(S) > 4), uint64_t, uint32_t>>;

  /* Wrapping arithmetic in the unsigned type. Operands narrower than int are promoted to int,
   * where 8-bit products cannot overflow; the cast back truncates modulo 2^bits. */
  __device__ __forceinline__ static B add(B a, B b) { return (B)(a + b); }
  __device__ __forceinline__ static B mul(B a, B b) { return (B)(a * b); }
  __device__ __forceinline__ static B max(B a, B b) { return (S)a > (S)b ? a : b; }
  __device__ __forceinline__ static B min(B a, B b) { return (S)a < (S)b ? a : b; }
  __device__ __forceinline__ static B scale(B a, comp s) { return mul(a, s); }
  /* C division: truncates toward zero. n >= 1, so no INT_MIN / -1. */
  __device__ __forceinline__ static B div(B a, uint32_t n) { return (B)(S)((W)(S)a / (W)n); }

  __device__ __forceinline__ static comp scalar_from_bits(uint64_t v) { return (B)v; }
  __device__ __forceinline__ static comp recip(int) { return 1; } /* unused: integer avg divides */
  __device__ __forceinline__ static comp one() { return 1; }
};

/* Byte SIMD for the 8-bit integers: four lanes per instruction where the ISA has one. */
template <typename S>
struct ty_i8x : ty_int<S> {
  using base = ty_int<S>;
  template <int K>
  __device__ __forceinline__ static uint32_t op_w(uint32_t a, uint32_t b) {
    constexpr bool sgn = std::is_signed_v<S>;
    if constexpr (K == K_ADD)
      return __vadd4(a, b); /* wraps per byte, for both views */
    else if constexpr (K == K_MAX)
      return sgn ? __vmaxs4(a, b) : __vmaxu4(a, b);
    else if constexpr (K == K_MIN)
      return sgn ? __vmins4(a, b) : __vminu4(a, b);
    else
      return base::template op_w<K>(a, b);
  }
  /* Byte-wise multiply by one scalar: the even and the odd bytes, each in its own 16-bit
   * field, go through one 32-bit multiply; a 16-bit field holds the full 8x8-bit product, so no
   * carry crosses into the next field, and its low byte is the product modulo 256. */
  __device__ __forceinline__ static uint32_t scale_w(uint32_t a, uint8_t s) {
    const uint32_t even = ((a & 0x00ff00ffu) * s) & 0x00ff00ffu;
    const uint32_t odd = (((a >> 8) & 0x00ff00ffu) * s) & 0x00ff00ffu;
    return even | odd << 8;
  }
  /* Integer avg's division of a byte by n >= 1 without a divide instruction per lane: for
   * n < 256, m = ceil(2^16 / n) = 2^16/n + e with 0 <= e < 1, so for 0 <= x <= 255,
   * x*m / 2^16 = x/n + x*e/2^16 with the excess below 256/2^16 = 1/256 <= 1/n: it cannot carry
   * floor(x/n) past the next integer, and (x*m) >> 16 is exact (x*m < 2^24). For n >= 256 the
   * quotient is 0. Signed lanes divide the magnitude and restore the sign (truncation toward
   * zero, as C). m depends only on n, so the compiler hoists it out of the copy loop. */
  __device__ __forceinline__ static uint32_t magic(uint32_t n) {
    return n < 256 ? (65535u + n) / n : 0u;
  }
  __device__ __forceinline__ static typename base::B div(typename base::B a, uint32_t n) {
    const uint32_t m = magic(n);
    if constexpr (std::is_signed_v<S>) {
      const int v = (int8_t)a;
      const int q = (int)(((uint32_t)(v < 0 ? -v : v) * m) >> 16);
      return (typename base::B)(v < 0 ? -q : q);
    } else {
      return (typename base::B)(((uint32_t)a * m) >> 16);
    }
  }
  __device__ __forceinline__ static uint32_t div_w(uint32_t a, uint32_t n) {
    /* Four lanes: byte-wise magnitude and sign mask, one multiply per lane, byte-wise negate. */
    const uint32_t m = magic(n);
    const uint32_t mag = std::is_signed_v<S> ? __vabs4(a) : a; /* |-128| = 0x80, as unsigned */
    uint32_t q = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) q |= ((((mag >> (8 * i)) & 0xffu) * m) >> 16) << (8 * i);
    if constexpr (std::is_signed_v<S>) {
      const uint32_t neg = __vcmplts4(a, 0u); /* 0xff in each negative lane */
      q = (q & ~neg) | (__vneg4(q) & neg);
    }
    return q;
  }
};

/* ---- floating point ---- */

struct ty_f32 : ty_base<ty_f32, uint32_t> {
  using B = uint32_t;
  using comp = float;
  static constexpr bool is_float = true;
  __device__ __forceinline__ static float f(B b) { return __uint_as_float(b); }
  __device__ __forceinline__ static B u(float x) { return __float_as_uint(x); }
  __device__ __forceinline__ static B add(B a, B b) { return u(__fadd_rn(f(a), f(b))); }
  __device__ __forceinline__ static B mul(B a, B b) { return u(__fmul_rn(f(a), f(b))); }
  __device__ __forceinline__ static B max(B a, B b) { return u(fmaxf(f(a), f(b))); }
  __device__ __forceinline__ static B min(B a, B b) { return u(fminf(f(a), f(b))); }
  __device__ __forceinline__ static B scale(B a, comp s) { return u(__fmul_rn(f(a), s)); }
  __device__ __forceinline__ static B div(B a, uint32_t) { return a; }
  __device__ __forceinline__ static comp scalar_from_bits(uint64_t v) { return f((B)v); }
  __device__ __forceinline__ static comp recip(int n) { return __frcp_rn((float)n); }
  __device__ __forceinline__ static comp one() { return 1.0f; }
};

struct ty_f64 : ty_base<ty_f64, uint64_t> {
  using B = uint64_t;
  using comp = double;
  static constexpr bool is_float = true;
  __device__ __forceinline__ static double f(B b) { return __longlong_as_double((long long)b); }
  __device__ __forceinline__ static B u(double x) { return (B)__double_as_longlong(x); }
  __device__ __forceinline__ static B add(B a, B b) { return u(__dadd_rn(f(a), f(b))); }
  __device__ __forceinline__ static B mul(B a, B b) { return u(__dmul_rn(f(a), f(b))); }
  __device__ __forceinline__ static B max(B a, B b) { return u(fmax(f(a), f(b))); }
  __device__ __forceinline__ static B min(B a, B b) { return u(fmin(f(a), f(b))); }
  __device__ __forceinline__ static B scale(B a, comp s) { return u(__dmul_rn(f(a), s)); }
  __device__ __forceinline__ static B div(B a, uint32_t) { return a; }
  __device__ __forceinline__ static comp scalar_from_bits(uint64_t v) { return f(v); }
  __device__ __forceinline__ static comp recip(int n) { return __drcp_rn((double)n); }
  __device__ __forceinline__ static comp one() { return 1.0; }
};

/* fp16 and bf16 share everything but the intrinsics' types. H is __half or __nv_bfloat16,
 * H2 its pair; the packed path runs two lanes per instruction. */
template <class D, typename H, typename H2>
struct ty_half_like : ty_base<D, uint16_t> {
  using B = uint16_t;
  using comp = H;
  static constexpr bool is_float = true;
  __device__ __forceinline__ static H h(B b) { return bitcast<H>(b); }
  __device__ __forceinline__ static B u(H x) { return bitcast<B>(x); }
  __device__ __forceinline__ static H2 h2(uint32_t w) { return bitcast<H2>(w); }
  __device__ __forceinline__ static uint32_t u2(H2 x) { return bitcast<uint32_t>(x); }

  __device__ __forceinline__ static B add(B a, B b) { return u(__hadd_rn(h(a), h(b))); }
  __device__ __forceinline__ static B mul(B a, B b) { return u(__hmul_rn(h(a), h(b))); }
  __device__ __forceinline__ static B max(B a, B b) { return u(__hmax(h(a), h(b))); }
  __device__ __forceinline__ static B min(B a, B b) { return u(__hmin(h(a), h(b))); }
  __device__ __forceinline__ static B scale(B a, comp s) { return u(__hmul_rn(h(a), s)); }
  __device__ __forceinline__ static B div(B a, uint32_t) { return a; }
  __device__ __forceinline__ static comp scalar_from_bits(uint64_t v) { return h((B)v); }
  __device__ __forceinline__ static comp one() { return H(1.0f); }

  template <int K>
  __device__ __forceinline__ static uint32_t op_w(uint32_t a, uint32_t b) {
    if constexpr (K == K_ADD)
      return u2(__hadd2_rn(h2(a), h2(b)));
    else if constexpr (K == K_MUL)
      return u2(__hmul2_rn(h2(a), h2(b)));
    else if constexpr (K == K_MAX)
      return u2(__hmax2(h2(a), h2(b)));
    else
      return u2(__hmin2(h2(a), h2(b)));
  }
  __device__ __forceinline__ static uint32_t scale_w(uint32_t a, comp s) {
    return u2(__hmul2_rn(h2(a), H2(s, s)));
  }
  __device__ __forceinline__ static uint32_t div_w(uint32_t a, uint32_t) { return a; }
};

struct ty_f16 : ty_half_like<ty_f16, __half, __half2> {
  __device__ __forceinline__ static comp recip(int n) {
    return __float2half_rn(__frcp_rn((float)n));
  }
};
struct ty_bf16 : ty_half_like<ty_bf16, __nv_bfloat16, __nv_bfloat162> {
  __device__ __forceinline__ static comp recip(int n) {
    return __float2bfloat16_rn(__frcp_rn((float)n));
  }
};

/* fp8: no arithmetic of its own. Each step widens to fp16 (exact: fp16 holds every e4m3 and
 * e5m2 value), computes in fp16, and narrows back with round-to-nearest-even, saturating to the
 * largest finite value (e4m3 has no infinity; for e5m2 saturation keeps sums finite as NCCL
 * does). Two roundings (fp16 then fp8) per step; the test's error bound counts both. On sm_89+
 * the conversions are single cvt instructions, two lanes at a time. */
template <__nv_fp8_interpretation_t I>
struct ty_fp8 : ty_base<ty_fp8<I>, uint8_t> {
  using B = uint8_t;
  using comp = __half; /* the pre-op scalar lives in fp16, like the arithmetic */
  static constexpr bool is_float = true;
  __device__ __forceinline__ static __half h(B b) { return __half(__nv_cvt_fp8_to_halfraw(b, I)); }
  __device__ __forceinline__ static B u(__half x) {
    return (B)__nv_cvt_halfraw_to_fp8(__half_raw(x), __NV_SATFINITE, I);
  }
  __device__ __forceinline__ static __half2 h2(uint16_t p) {
    return __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)p, I));
  }
  __device__ __forceinline__ static uint16_t u2(__half2 x) {
    return (uint16_t)__nv_cvt_halfraw2_to_fp8x2(__half2_raw(x), __NV_SATFINITE, I);
  }

  __device__ __forceinline__ static B add(B a, B b) { return u(__hadd_rn(h(a), h(b))); }
  __device__ __forceinline__ static B mul(B a, B b) { return u(__hmul_rn(h(a), h(b))); }
  /* max/min return one of their inputs, which fp8 represents exactly: no rounding. */
  __device__ __forceinline__ static B max(B a, B b) { return u(__hmax(h(a), h(b))); }
  __device__ __forceinline__ static B min(B a, B b) { return u(__hmin(h(a), h(b))); }
  __device__ __forceinline__ static B scale(B a, comp s) { return u(__hmul_rn(h(a), s)); }
  __device__ __forceinline__ static B div(B a, uint32_t) { return a; }
  __device__ __forceinline__ static comp scalar_from_bits(uint64_t v) { return h((B)v); }
  __device__ __forceinline__ static comp recip(int n) {
    return __float2half_rn(__frcp_rn((float)n));
  }
  __device__ __forceinline__ static comp one() { return __half(1.0f); }

  /* A word is two fp8x2 halves; each half widens to one __half2. */
  template <class F>
  __device__ __forceinline__ static uint32_t via_h2(uint32_t a, uint32_t b, F f) {
    uint32_t lo = u2(f(h2((uint16_t)a), h2((uint16_t)b)));
    uint32_t hi = u2(f(h2((uint16_t)(a >> 16)), h2((uint16_t)(b >> 16))));
    return lo | hi << 16;
  }
  template <int K>
  __device__ __forceinline__ static uint32_t op_w(uint32_t a, uint32_t b) {
    return via_h2(a, b, [](__half2 x, __half2 y) {
      if constexpr (K == K_ADD)
        return __hadd2_rn(x, y);
      else if constexpr (K == K_MUL)
        return __hmul2_rn(x, y);
      else if constexpr (K == K_MAX)
        return __hmax2(x, y);
      else
        return __hmin2(x, y);
    });
  }
  __device__ __forceinline__ static uint32_t scale_w(uint32_t a, comp s) {
    const __half2 s2(s, s);
    return via_h2(a, a, [s2](__half2 x, __half2) { return __hmul2_rn(x, s2); });
  }
  __device__ __forceinline__ static uint32_t div_w(uint32_t a, uint32_t) { return a; }
};

template <int TYPE>
struct ty_of;
template <>
struct ty_of<ncclInt8> {
  using type = ty_i8x<int8_t>;
};
template <>
struct ty_of<ncclUint8> {
  using type = ty_i8x<uint8_t>;
};
template <>
struct ty_of<ncclInt32> {
  using type = ty_int<int32_t>;
};
template <>
struct ty_of<ncclUint32> {
  using type = ty_int<uint32_t>;
};
template <>
struct ty_of<ncclInt64> {
  using type = ty_int<int64_t>;
};
template <>
struct ty_of<ncclUint64> {
  using type = ty_int<uint64_t>;
};
template <>
struct ty_of<ncclFloat16> {
  using type = ty_f16;
};
template <>
struct ty_of<ncclFloat32> {
  using type = ty_f32;
};
template <>
struct ty_of<ncclFloat64> {
  using type = ty_f64;
};
template <>
struct ty_of<ncclBfloat16> {
  using type = ty_bf16;
};
template <>
struct ty_of<ncclFloat8e4m3> {
  using type = ty_fp8<__NV_E4M3>;
};
template <>
struct ty_of<ncclFloat8e5m2> {
  using type = ty_fp8<__NV_E5M2>;
};

/*
 * Packs: P is the type's storage bits (one element), uint2 (8 bytes: an LL line's data) or uint4
 * (16 bytes). These apply a type's operation to every lane of a pack.
 */
template <class T, int K, typename P>
__device__ __forceinline__ P pack_op(P a, P b) {
  using B = typename T::bits;
  if constexpr (std::is_same_v<P, uint2>) {
    if constexpr (sizeof(B) == 8) {
      const uint64_t v =
          T::template op<K>(((uint64_t)a.y << 32) | a.x, ((uint64_t)b.y << 32) | b.x);
      return make_uint2((uint32_t)v, (uint32_t)(v >> 32));
    } else {
      return make_uint2(T::template op_w<K>(a.x, b.x), T::template op_w<K>(a.y, b.y));
    }
  } else if constexpr (std::is_same_v<P, uint4>) {
    if constexpr (sizeof(B) == 8) {
      const uint64_t lo =
          T::template op<K>(((uint64_t)a.y << 32) | a.x, ((uint64_t)b.y << 32) | b.x);
      const uint64_t hi =
          T::template op<K>(((uint64_t)a.w << 32) | a.z, ((uint64_t)b.w << 32) | b.z);
      return make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
    } else {
      return make_uint4(T::template op_w<K>(a.x, b.x), T::template op_w<K>(a.y, b.y),
                        T::template op_w<K>(a.z, b.z), T::template op_w<K>(a.w, b.w));
    }
  } else {
    static_assert(std::is_same_v<P, B>, "a pack is a vector or one element");
    return T::template op<K>(a, b);
  }
}

template <class T, typename P, class F, class FW>
__device__ __forceinline__ P pack_map(P a, F f, FW fw) {
  using B = typename T::bits;
  if constexpr (std::is_same_v<P, uint2>) {
    if constexpr (sizeof(B) == 8) {
      const uint64_t v = f(((uint64_t)a.y << 32) | a.x);
      return make_uint2((uint32_t)v, (uint32_t)(v >> 32));
    } else {
      return make_uint2(fw(a.x), fw(a.y));
    }
  } else if constexpr (std::is_same_v<P, uint4>) {
    if constexpr (sizeof(B) == 8) {
      const uint64_t lo = f(((uint64_t)a.y << 32) | a.x);
      const uint64_t hi = f(((uint64_t)a.w << 32) | a.z);
      return make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
    } else {
      return make_uint4(fw(a.x), fw(a.y), fw(a.z), fw(a.w));
    }
  } else {
    return f(a);
  }
}

/*
 * An operator for one data type, with its run-time parameters. Built once per thread at kernel
 * start (the scalar may come from device memory) and passed by reference into the copy loops.
 *   reduce(a, b): the operator's binary step
 *   pre(x):       premulsum's multiply, or float avg's multiply by 1/divisor (has_pre)
 *   post(x):      integer avg's division by divisor (has_post)
 */
template <int OP, int TYPE>
struct red {
  using T = typename ty_of<TYPE>::type;
  using B = typename T::bits;
  using comp = typename T::comp;
  static constexpr int K = OP == KERN_OP_PROD  ? K_MUL
                           : OP == KERN_OP_MAX ? K_MAX
                           : OP == KERN_OP_MIN ? K_MIN
                                               : K_ADD;
  static constexpr bool has_pre = OP == KERN_OP_PREMULSUM || (OP == KERN_OP_AVG && T::is_float);
  static constexpr bool has_post = OP == KERN_OP_AVG && !T::is_float;
  /* The copy loops' unroll factors are lowered where the operator's own work needs registers
   * (a pre/post-op scalar and its lane-wise arithmetic; fp8 widens every lane to fp16), so that
   * no kernel spills at KERN_NTHREADS threads (the build fails on a spill). */
  static constexpr bool heavy = has_pre || has_post;
  static constexpr bool fp8 = TYPE == ncclFloat8e4m3 || TYPE == ncclFloat8e5m2;
  static constexpr int rc_unroll = fp8 && heavy ? 2 : KERN_RC_UNROLL;

  comp scalar;
  comp one;
  uint32_t divisor;

  __device__ __forceinline__ red(uint64_t scalar_bits, const void* scalar_ptr, int div) {
    divisor = (uint32_t)div;
    one = T::one();
    if constexpr (OP == KERN_OP_PREMULSUM) {
      /* Read once per thread; every thread hits the same cached line. */
      uint64_t v = scalar_bits;
      if (scalar_ptr) v = (uint64_t)__ldg((const B*)scalar_ptr);
      scalar = T::scalar_from_bits(v);
    } else if constexpr (has_pre) {
      scalar = T::recip(div);
    } else {
      scalar = T::scalar_from_bits(0);
    }
  }

  template <typename P>
  __device__ __forceinline__ P reduce(P a, P b) const {
    return pack_op<T, K>(a, b);
  }
  template <typename P>
  __device__ __forceinline__ P pre(P a, bool on) const {
    if constexpr (!has_pre) return a;
    const comp s = on ? scalar : one;
    return pack_map<T>(
        a, [s](B x) { return T::scale(x, s); }, [s](uint32_t w) { return T::scale_w(w, s); });
  }
  template <typename P>
  __device__ __forceinline__ P post(P a) const {
    if constexpr (!has_post) return a;
    const uint32_t n = divisor;
    return pack_map<T>(
        a, [n](B x) { return T::div(x, n); }, [n](uint32_t w) { return T::div_w(w, n); });
  }
};

} /* namespace kern */

#endif
