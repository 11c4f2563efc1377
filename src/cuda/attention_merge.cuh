// The merge step of CUDA decode attention, shared by its two partial kernels:
// the chunks' (max, sum, output) of one query head folded into its output.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/chained_launch.cuh"
#include "cuda/common.h"

namespace kiln::cuda_backend {

inline constexpr int kMaxDim = 256;
inline constexpr float kLog2e = 1.4426950408889634f;

// internal linkage: each file that launches the kernel keeps its own copy
namespace {

// One block per query head: 32 x 8 threads, x over dims, y over chunks. Each y
// folds its chunks in one pass with a running maximum, so the (max, sum) pairs
// and the outputs of the chunks are read together, then shared memory joins the 8.
template <class T>
__global__ void __launch_bounds__(256) decode_merge_kernel(const float* __restrict__ part_acc,
                                                           const float2* __restrict__ part_ml, int splits, int D,
                                                           T* __restrict__ out) {
  constexpr int kPerLane = kMaxDim / 32;
  chain_wait();  // the partial kernel's results
  chain_release();
  __shared__ float red[8][kMaxDim + 1];
  __shared__ float red_max[8];
  const int64_t head = blockIdx.x;
  const int x = threadIdx.x, y = threadIdx.y;
  const float2* ml = part_ml + head * splits;
  float mx = -INFINITY, den = 0.0f, num[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) num[j] = 0.0f;
#pragma unroll 4
  for (int i = y; i < splits; i += 8) {
    const float2 p = ml[i];
    const float* acc = part_acc + (head * splits + i) * D;
    float a[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) a[j] = j * 32 + x < D ? acc[j * 32 + x] : 0.0f;
    if (p.x == -INFINITY) continue;  // an empty chunk (its sums are 0 too)
    if (p.x > mx) {
      const float r = exp2f(mx - p.x);
      den *= r;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) num[j] *= r;
      mx = p.x;
    }
    const float w = exp2f(p.x - mx);
    den += p.y * w;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) num[j] += a[j] * w;
  }
  if (x == 0) red_max[y] = mx;
  __syncthreads();
  float total_max = red_max[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) total_max = fmaxf(total_max, red_max[i]);
  const float w = mx == -INFINITY ? 0.0f : exp2f(mx - total_max);
  if (x == 0) red[y][kMaxDim] = den * w;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (j * 32 + x < D) red[y][j * 32 + x] = num[j] * w;
  __syncthreads();
  if (y != 0) return;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) total += red[i][kMaxDim];
  for (int d = x; d < D; d += 32) {
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) v += red[i][d];
    out[head * D + d] = T(total > 0.0f ? v / total : 0.0f);  // no keys at all: 0, as a fully masked row
  }
}

}  // namespace

// Launches the merge of `splits` chunks for each of `heads` query heads into out [heads, D], chained
// behind the partial kernel (which releases it as it starts).
template <class T>
void launch_decode_merge(const float* part_acc, const float2* part_ml, int splits, int D, int64_t heads, T* out) {
  launch_chained(decode_merge_kernel<T>, dim3(static_cast<unsigned>(heads)), dim3(32, 8), 0, part_acc, part_ml, splits,
                 D, out);
}

}  // namespace kiln::cuda_backend
