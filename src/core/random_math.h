// Element i of a uniform or normal draw from Philox. Uniform draws are the same on every
// backend; normal ones agree to a few ulps (the CPU takes the logarithm, sine and cosine
// of a batch of pairs in vectors, cpu/random.cpp; CUDA uses normal_at).
#pragma once

#include <math.h>

#include "core/philox.h"
#include "kiln/scalar_types.h"

namespace kiln::philox {

// Uniform: element i takes lane i%4 of block (offset/4 + i/4). The draw keeps only as many
// bits as T has significand digits (as PyTorch does), so every value in [0, 1) is exact in T;
// a value that rounding in low + (high - low) * u still carries up to `high` becomes `low`,
// so the result stays in [low, high).
template <class T> inline constexpr int significand_digits = 24;  // float
template <> inline constexpr int significand_digits<Half> = 11;
template <> inline constexpr int significand_digits<BFloat16> = 8;

// The uniform value of one 32-bit lane.
template <class T>
KILN_HD T uniform_of_bits(uint32_t bits, float low, float high) {
  constexpr int kDigits = significand_digits<T>;
  const float unit = static_cast<float>(bits >> (32 - kDigits)) * (1.0f / static_cast<float>(1u << kDigits));
  const T value = T(low + (high - low) * unit);
  return static_cast<float>(value) >= high ? T(low) : value;
}

// Elements 4k .. 4k + 3 share block (offset/4 + k).
KILN_HD U4 uniform_block(uint64_t seed, uint64_t offset, uint64_t k) { return philox4x32_10(offset / 4 + k, 0, seed); }

template <class T>
KILN_HD T uniform_at(uint64_t seed, uint64_t offset, int64_t i, float low, float high) {
  return uniform_of_bits<T>(uniform_block(seed, offset, static_cast<uint64_t>(i) / 4).x[i & 3], low, high);
}

// The two uniforms of normal pair j: u1 in (0, 1] (for the logarithm), u2 in [0, 1).
KILN_HD void box_muller_uniforms(uint64_t seed, uint64_t offset, uint64_t j, float& u1, float& u2) {
  const U4 r = philox4x32_10(offset / 4 + j, 1, seed);
  u1 = (static_cast<float>(r.x[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);
  u2 = to_unit_float(r.x[1]);
}

// Normal by Box-Muller: elements 2j and 2j+1 share block (offset/4 + j), its radius
// and angle, and take the cosine and the sine branch.
KILN_HD void box_muller(uint64_t seed, uint64_t offset, uint64_t j, float& radius, float& angle) {
  float u1, u2;
  box_muller_uniforms(seed, offset, j, u1, u2);
  radius = sqrtf(-2.0f * logf(u1));
  angle = 6.283185307179586f * u2;
}

KILN_HD float normal_at(uint64_t seed, uint64_t offset, int64_t i, float mean, float stddev) {
  float radius, angle;
  box_muller(seed, offset, static_cast<uint64_t>(i) / 2, radius, angle);
  return mean + stddev * radius * ((i & 1) ? sinf(angle) : cosf(angle));
}

}  // namespace kiln::philox
