// Storage types for the reduced-precision floats, and their conversions.
//
// One definition serves the CPU and CUDA backends, so both round the same way:
// round to nearest, ties to even, bit-exact with PyTorch. Arithmetic is done in
// float32; these types only store.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif

namespace kiln {
namespace bits {

KILN_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

KILN_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- bfloat16 ----
// On the GPU the conversions below use the hardware instructions (same rounding)
// and only fix up NaN, so that the CPU and CUDA backends give the same bits.
KILN_HD uint16_t bf16_from_f32(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return f != f ? uint16_t(0x7fc0) : r;
#endif
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN, as PyTorch
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
KILN_HD float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// ---- float16 (IEEE binary16) ----
KILN_HD uint16_t f16_from_f32(float f) {
  uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
#if defined(__CUDA_ARCH__)
  uint16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return f != f ? uint16_t(sign | 0x7e00) : r;
#endif
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (x >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to inf
  if (x < 0x38800000u) {                        // below 2^-14: subnormal
    // Adding 0.5 puts the half subnormal unit (2^-24) at float's last bit, so
    // the FPU's own round-to-nearest-even does the rounding.
    const float v = f32_from_bits(x) + 0.5f;
    return sign | static_cast<uint16_t>(f32_bits(v) - 0x3f000000u);
  }
  const uint32_t mant_odd = (x >> 13) & 1u;
  x += ((15u - 127u) << 23) + 0xfffu + mant_odd;
  return sign | static_cast<uint16_t>(x >> 13);
}
KILN_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  // inf, or a NaN made quiet (as F16C's VCVTPH2PS and PyTorch's conversion give)
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  if (exp == 0) {
    // subnormal or zero: mant * 2^-24, exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// ---- float8_e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no inf,
// 0x7f/0xff NaN, max 448. ----
// saturate=true: |x| > 448 after rounding, and +-inf, give +-448 (the satfinite
// rule of cvt.satfinite and PyTorch >= 2.12). saturate=false: they give NaN
// (PyTorch <= 2.11). NaN stays NaN either way.
KILN_HD uint8_t e4m3fn_from_f32(float f, bool saturate = true) {
  uint32_t x = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  x &= 0x7fffffffu;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // Hopper/Ada: cvt.satfinite does the rounding and the saturation.
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(r) : "f"(f));
  if (x > 0x7f800000u || (!saturate && x > 0x43e80000u)) return sign | 0x7f;
  return static_cast<uint8_t>(r & 0xffu);
#endif
  if (x > 0x7f800000u) return sign | 0x7f;
  // 464 is the midpoint between 448 and the (NaN) code above it; a tie rounds
  // to even, which is 448.
  if (x > 0x43e80000u) return saturate ? (sign | 0x7e) : (sign | 0x7f);
  if (x < (121u << 23)) {  // below 2^-6: subnormal, unit 2^-9
    const float v = f32_from_bits(x) + f32_from_bits(141u << 23);  // + 2^14
    return sign | static_cast<uint8_t>(f32_bits(v) - (141u << 23));
  }
  const uint32_t mant_odd = (x >> 20) & 1u;
  x += ((7u - 127u) << 23) + 0x7ffffu + mant_odd;
  return sign | static_cast<uint8_t>(x >> 20);
}
KILN_HD float e4m3fn_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  if (exp == 0xf && mant == 0x7) return f32_from_bits(sign | 0x7fc00000u);
  if (exp == 0) {
    const float m = static_cast<float>(mant) * 0.001953125f;  // 2^-9
    return sign ? -m : m;
  }
  return f32_from_bits(sign | ((exp + 120u) << 23) | (mant << 20));
}

// ---- float8_e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like with
// infinities; overflow rounds to inf. ----
KILN_HD uint8_t e5m2_from_f32(float f) {
  uint32_t x = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7f;
  if (x >= (143u << 23)) return sign | 0x7c;  // >= 65536: inf
  if (x < (113u << 23)) {                     // below 2^-14: subnormal, unit 2^-16
    const float v = f32_from_bits(x) + f32_from_bits(134u << 23);  // + 2^7
    return sign | static_cast<uint8_t>(f32_bits(v) - (134u << 23));
  }
  const uint32_t mant_odd = (x >> 21) & 1u;
  x += ((15u - 127u) << 23) + 0xfffffu + mant_odd;
  return sign | static_cast<uint8_t>(x >> 21);
}
KILN_HD float e5m2_to_f32(uint8_t v) { return f16_to_f32(static_cast<uint16_t>(v) << 8); }

}  // namespace bits

struct Half {
  uint16_t x;
  Half() = default;
  KILN_HD Half(float f) : x(bits::f16_from_f32(f)) {}
  KILN_HD operator float() const { return bits::f16_to_f32(x); }
  static KILN_HD Half from_bits(uint16_t b) { Half h; h.x = b; return h; }
};

struct BFloat16 {
  uint16_t x;
  BFloat16() = default;
  KILN_HD BFloat16(float f) : x(bits::bf16_from_f32(f)) {}
  KILN_HD operator float() const { return bits::bf16_to_f32(x); }
  static KILN_HD BFloat16 from_bits(uint16_t b) { BFloat16 h; h.x = b; return h; }
};

// Converting a float with the constructor saturates (the default rule).
struct Float8_e4m3fn {
  uint8_t x;
  Float8_e4m3fn() = default;
  KILN_HD Float8_e4m3fn(float f) : x(bits::e4m3fn_from_f32(f, true)) {}
  KILN_HD operator float() const { return bits::e4m3fn_to_f32(x); }
  static KILN_HD Float8_e4m3fn from_bits(uint8_t b) { Float8_e4m3fn h; h.x = b; return h; }
};

struct Float8_e5m2 {
  uint8_t x;
  Float8_e5m2() = default;
  KILN_HD Float8_e5m2(float f) : x(bits::e5m2_from_f32(f)) {}
  KILN_HD operator float() const { return bits::e5m2_to_f32(x); }
  static KILN_HD Float8_e5m2 from_bits(uint8_t b) { Float8_e5m2 h; h.x = b; return h; }
};

// complex64 storage; host code uses std::complex<float> arithmetic on it.
struct alignas(8) Complex64 {
  float re, im;
};

}  // namespace kiln
