// Contiguous runs of any element type to and from float32, for kernels that
// stage 16-bit or 8-bit floats in float32 buffers (Highway runs on float32).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// Elements staged per float32 buffer: 8 KB, which stays in L1.
inline constexpr int64_t kStageChunk = 2048;

template <class T>
void widen(const T* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

// Rounds to T (round to nearest, ties to even, as every kiln conversion).
template <class T>
void narrow(const float* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = T(in[i]);
}

}  // namespace kiln::cpu
