// Contiguous runs of any element type to and from float32, for kernels that
// stage 16-bit or 8-bit floats in float32 buffers (Highway runs on float32).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/simd.h"
#include "kiln/scalar_types.h"

namespace kiln::cpu {

// The narrow float types simd::cast_run may convert, and their dtypes.
template <class T>
constexpr DType narrow_float_dtype() {
  if constexpr (std::is_same_v<T, Half>) return DType::Float16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BFloat16;
  else if constexpr (std::is_same_v<T, Float8_e4m3fn>) return DType::Float8_e4m3fn;
  else if constexpr (std::is_same_v<T, Float8_e5m2>) return DType::Float8_e5m2;
  else return DType::Float32;  // none: the plain loop
}

// Elements staged per float32 buffer: 8 KB, which stays in L1.
inline constexpr int64_t kStageChunk = 2048;

// 16- and 8-bit floats go through the vector casts of simd.h where the CPU has
// them (float16 as a scalar loop: ~25x slower on a Zen 5 core), the same bits.
template <class T>
void widen(const T* in, float* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(in, in + n, out);
    return;
  } else if constexpr (narrow_float_dtype<T>() != DType::Float32) {
    if (simd::cast_run(DType::Float32, out, narrow_float_dtype<T>(), in, static_cast<size_t>(n), true)) return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

// Rounds to T (round to nearest, ties to even, as every kiln conversion).
template <class T>
void narrow(const float* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(in, in + n, out);
    return;
  } else if constexpr (narrow_float_dtype<T>() != DType::Float32) {
    if (simd::cast_run(narrow_float_dtype<T>(), out, DType::Float32, in, static_cast<size_t>(n), true)) return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = T(in[i]);
}

}  // namespace kiln::cpu
