// Device pieces of the bandwidth-bound matrix-vector kernels (linear's decode
// path, grouped_mm's few-rows-per-expert path): 16-byte weight vectors widened
// to float (fp8 through the hardware pair conversion), input rows read as
// vectors, and the dot step that shares each load across rows.
#pragma once

#include <type_traits>

#include "cuda/map.cuh"

namespace kiln::cuda_backend::gemv {

// Weight element -> float. Float8 on Hopper/Ada: the hardware pair conversion.
template <class W, int V>
__device__ __forceinline__ void widen_pack(const Pack<W, V>& p, float* f) {
  if constexpr (std::is_same_v<W, Float8_e4m3fn>) {
#if __CUDA_ARCH__ >= 890
    const auto* u = reinterpret_cast<const uint16_t*>(p.v);
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      uint32_t h2;
      asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(u[i]));
      const uint16_t lo = static_cast<uint16_t>(h2 & 0xffffu), hi = static_cast<uint16_t>(h2 >> 16);
      asm("cvt.f32.f16 %0, %1;" : "=f"(f[2 * i]) : "h"(lo));
      asm("cvt.f32.f16 %0, %1;" : "=f"(f[2 * i + 1]) : "h"(hi));
    }
#else
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = static_cast<float>(p.v[i]);
#endif
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = static_cast<float>(p.v[i]);
  }
}

// V input elements at x + k as floats (V = weight elements per 16 bytes).
template <class X, int V>
__device__ __forceinline__ void load_x(const X* x, float* f) {
  constexpr int XV = 16 / sizeof(X);  // x elements per 16-byte load
  if constexpr (V % XV == 0) {
#pragma unroll
    for (int j = 0; j < V / XV; ++j) {
      const Pack<X, XV> p = reinterpret_cast<const Pack<X, XV>*>(x)[j];
#pragma unroll
      for (int i = 0; i < XV; ++i) f[j * XV + i] = static_cast<float>(p.v[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = static_cast<float>(x[i]);
  }
}

// One k-step of one lane: V weights of each of the NPW rows, dotted with V
// inputs of each of the R input rows. Every input vector is loaded once and
// used NPW times, every weight vector used R times.
template <class X, class W, int R, int NPW, int V>
__device__ __forceinline__ void dot_step(const Pack<W, V> (&p)[NPW], const X* x, int64_t xs, int rows,
                                         float (&acc)[R][NPW]) {
  float wf[NPW][V];
#pragma unroll
  for (int j = 0; j < NPW; ++j) widen_pack<W>(p[j], wf[j]);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows) {
      float xf[V];
      load_x<X, V>(x + r * xs, xf);
#pragma unroll
      for (int j = 0; j < NPW; ++j)
#pragma unroll
        for (int i = 0; i < V; ++i) acc[r][j] = fmaf(wf[j][i], xf[i], acc[r][j]);
    }
  }
}

}  // namespace kiln::cuda_backend::gemv
