/*
 * Unit test: ref.h's conversions agree bit for bit with the CUDA toolkit's own (host-side
 * implementations of __float2half_rn, __float2bfloat16_rn, __nv_cvt_float_to_fp8 with
 * __NV_SATFINITE, and the matching decoders), over every code, every rounding tie and its
 * neighbours, and a sweep of float bit patterns. Host code only: needs the toolkit, not a GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "ref.h"

static long failures;

static unsigned short bits16(__half h) {
  __half_raw r = h;
  return r.x;
}

static unsigned short bits16(__nv_bfloat16 h) {
  __nv_bfloat16_raw r = h;
  return r.x;
}

static float cuda_decode(int t, unsigned code) {
  switch (t) {
  case REF_FLOAT16: {
    __half_raw r;
    r.x = (unsigned short)code;
    return __half2float(__half(r));
  }
  case REF_BFLOAT16: {
    __nv_bfloat16_raw r;
    r.x = (unsigned short)code;
    return __bfloat162float(__nv_bfloat16(r));
  }
  default: {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code,
                                           t == REF_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2);
    return __half2float(__half(h));
  }
  }
}

static unsigned cuda_encode(int t, float x) {
  switch (t) {
  case REF_FLOAT16: return bits16(__float2half_rn(x));
  case REF_BFLOAT16: return bits16(__float2bfloat16_rn(x));
  case REF_FP8_E4M3: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  default: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  }
}

static unsigned ref_encode(int t, float x) {
  switch (t) {
  case REF_FLOAT16: return ref_f32_to_f16(x);
  case REF_BFLOAT16: return ref_f32_to_bf16(x);
  case REF_FP8_E4M3: return ref_f32_to_e4m3(x);
  default: return ref_f32_to_e5m2(x);
  }
}

static float ref_decode(int t, unsigned c) {
  switch (t) {
  case REF_FLOAT16: return ref_f16_to_f32((uint16_t)c);
  case REF_BFLOAT16: return ref_bf16_to_f32((uint16_t)c);
  case REF_FP8_E4M3: return ref_e4m3_to_f32((uint8_t)c);
  default: return ref_e5m2_to_f32((uint8_t)c);
  }
}

static void compare_encode(int t, float x) {
  unsigned a = ref_encode(t, x), b = cuda_encode(t, x);
  if (a != b && failures++ < 20)
    fprintf(stderr, "%s: encode(%a): ref.h 0x%x, CUDA 0x%x\n", ref_type_name(t), x, a, b);
}

int main() {
  static const int types[] = {REF_FLOAT16, REF_BFLOAT16, REF_FP8_E4M3, REF_FP8_E5M2};
  for (int t : types) {
    unsigned ncodes = ref_type_size(t) == 2 ? 65536u : 256u;
    /* Every code decodes to the same value (NaNs: both NaN). */
    for (unsigned c = 0; c < ncodes; c++) {
      float a = ref_decode(t, c), b = cuda_decode(t, c);
      bool same = std::isnan(a) ? std::isnan(b) : (a == b && std::signbit(a) == std::signbit(b));
      if (!same && failures++ < 20)
        fprintf(stderr, "%s: decode(0x%x): ref.h %a, CUDA %a\n", ref_type_name(t), c, a, b);
    }
    /* Every value, every midpoint between neighbours and the floats next to it, both signs. */
    for (unsigned c = 0; c + 1 < ncodes / 2; c++) {
      float a = cuda_decode(t, c), b = cuda_decode(t, c + 1);
      if (std::isnan(a) || std::isnan(b)) continue;
      float mid = (float)(((double)a + (double)b) / 2.0);
      const float xs[] = {a, mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)};
      for (float x : xs) {
        compare_encode(t, x);
        compare_encode(t, -x);
      }
    }
  }
  /* A sweep of float bit patterns (all exponents, NaNs and infinities included). */
  for (uint64_t u = 0; u <= 0xffffffffull; u += 509) {
    float x;
    uint32_t b = (uint32_t)u;
    std::memcpy(&x, &b, sizeof x);
    for (int t : types) compare_encode(t, x);
  }
  const float specials[] = {0.0f,     -0.0f,    INFINITY, -INFINITY, NAN,
                            65504.0f, 65520.0f, 448.0f,   464.0f,    465.0f,
                            57344.0f, 61440.0f, 0x1p-24f, 0x1p-25f,  0x1p-133f};
  for (float x : specials)
    for (int t : types) compare_encode(t, x);
  if (failures) {
    fprintf(stderr, "%ld mismatch(es)\n", failures);
    return 1;
  }
  printf("ref.h conversions match the CUDA toolkit's\n");
  return 0;
}
