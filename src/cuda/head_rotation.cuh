// One attention head of D <= 32 P dims held by a warp, lane holding dims lane + 32 r:
// the per-head RMSNorm and the half-rotated rotary embedding of qkv_rotary_cache
// (layer_ops.cu), shared with the decode attention that makes its own q and cache
// rows (attention_mma.cu), so that both round alike, bit for bit.
#pragma once

#include <cuda_runtime.h>

namespace kiln::cuda_backend {

// Dims lane + 32 r of a head (or of a norm's weight) as floats, 0 past D.
template <class T, int P>
__device__ __forceinline__ void load_head(const T* src, int D, int lane, float (&x)[P]) {
#pragma unroll
  for (int r = 0; r < P; ++r) x[r] = lane + 32 * r < D ? static_cast<float>(src[lane + 32 * r]) : 0.0f;
}

// The cos and sin of dim lane + 32 r from one position's rows of the tables (dims i
// and i + half share frequency i; dims past 2 half are not rotated: 1 and 0).
template <int P>
__device__ __forceinline__ void load_rotation(const float* c, const float* s, int half, int lane, float (&cr)[P],
                                              float (&sr)[P]) {
#pragma unroll
  for (int r = 0; r < P; ++r) {
    const int i = lane + 32 * r, f = i < half ? i : i - half;
    const bool rotated = i < 2 * half;
    cr[r] = rotated ? c[f] : 1.0f;
    sr[r] = rotated ? s[f] : 0.0f;
  }
}

// x / rms(x) * w, rounded to T as rms_norm's output (the sum of squares a warp sum).
template <class T, int P>
__device__ __forceinline__ void rms_norm_head(float (&x)[P], const float (&w)[P], int D, float eps) {
  float ss = 0.0f;
#pragma unroll
  for (int r = 0; r < P; ++r) ss += x[r] * x[r];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int r = 0; r < P; ++r) x[r] = static_cast<float>(T(x[r] * inv * w[r]));
}

// The half-rotated rotary embedding of x into y: dim i pairs with i + half, which
// another lane holds, so x passes through scratch (D floats of this warp's; a warp
// that rotates another head with the same scratch syncs first).
template <int P>
__device__ __forceinline__ void rotate_head(const float (&x)[P], const float (&cr)[P], const float (&sr)[P], int half,
                                            int D, int lane, float* scratch, float (&y)[P]) {
#pragma unroll
  for (int r = 0; r < P; ++r)
    if (lane + 32 * r < D) scratch[lane + 32 * r] = x[r];
  __syncwarp();
#pragma unroll
  for (int r = 0; r < P; ++r) {
    const int i = lane + 32 * r;
    float v = x[r];
    if (i < half) v = v * cr[r] - scratch[i + half] * sr[r];
    else if (i < 2 * half && i < D) v = v * cr[r] + scratch[i - half] * sr[r];
    y[r] = v;
  }
}

// Dims lane + 32 r of y, rounded to T, into dst.
template <class T, int P>
__device__ __forceinline__ void store_head(const float (&y)[P], int D, int lane, T* dst) {
#pragma unroll
  for (int r = 0; r < P; ++r)
    if (lane + 32 * r < D) dst[lane + 32 * r] = T(y[r]);
}

}  // namespace kiln::cuda_backend
