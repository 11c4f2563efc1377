// What the two CUDA prefill kernels share (attention_prefill.cu: mma.sync, sm_80 on;
// attention_prefill_wgmma.cu: wgmma, sm_90a): their parameters, and the online
// softmax of a lane's share of a step's scores.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/backend.h"
#include "core/check.h"
#include "cuda/attention_merge.cuh"  // kLog2e
#include "cuda/cp_async.cuh"
#include "cuda/mma.cuh"

namespace kiln::cuda_backend {

struct PrefillParams {
  const void *q, *k, *v;
  void* out;                  // [B, Hq, L, D] contiguous
  int64_t qs[3], ks[3], vs[3];  // strides of batch, head and row
  int64_t L, S;
  int hq, group, q_tiles;     // group: query heads per kv head
  float scale_log2;
  bool causal;
  int64_t causal_offset;      // causal: row i sees keys up to i + causal_offset
};

// The warp-specialised wgmma kernel (attention_prefill_wgmma.cu), where it applies: sm_90a,
// a head dim it has, K and V rows TMA can read; false where it does not (the mma.sync kernel runs).
bool attention_prefill_wgmma(const AttentionPrefillArgs& a);

// The kernels' parameters for blocks of kRows query rows.
inline PrefillParams prefill_params(const AttentionPrefillArgs& a, int kRows) {
  PrefillParams p{};
  p.q = a.q.data_ptr();
  p.k = a.k.data_ptr();
  p.v = a.v.data_ptr();
  p.out = a.out.data_ptr();
  for (int i = 0; i < 3; ++i) {
    p.qs[i] = a.q.stride(i);
    p.ks[i] = a.k.stride(i);
    p.vs[i] = a.v.stride(i);
  }
  p.L = a.q.size(2);
  p.S = a.k.size(2);
  p.hq = static_cast<int>(a.q.size(1));
  p.group = static_cast<int>(a.q.size(1) / a.k.size(1));
  const int64_t q_tiles = (p.L + kRows - 1) / kRows, heads = a.q.size(0) * a.q.size(1);
  KILN_CHECK(q_tiles <= 65535 && heads < (int64_t{1} << 31), "scaled_dot_product_attention: ", p.L, " queries x ",
             heads, " heads is more blocks than one launch of the prefill kernel takes");
  p.q_tiles = static_cast<int>(q_tiles);
  p.scale_log2 = static_cast<float>(a.scale) * kLog2e;
  p.causal = a.causal;
  p.causal_offset = a.causal_offset;
  return p;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One row's share of a step's scores in a lane: s[n][2 hr] and s[n][2 hr + 1] of
// each 8-key tile n. Updates the row's running max (base-2 units) and sum, packs
// 2^(scaled score - max) pairs into pk[n][hr], returns the factor 2^(old max - new
// max) for what was summed before. Exponentials in float32 (ex2.approx.f16x2 on
// pairs measured slower: 125.8 against 118.9 us at d40), reductions as trees.
template <class T, int NK>
__device__ __forceinline__ float softmax_row(const float (&s)[NK][4], int hr, float& row_max, float& row_sum,
                                             float scale_log2, uint32_t (&pk)[NK][2]) {
  float mx[NK];
#pragma unroll
  for (int n = 0; n < NK; ++n) mx[n] = fmaxf(s[n][2 * hr], s[n][2 * hr + 1]);
#pragma unroll
  for (int w = NK / 2; w >= 1; w /= 2)
#pragma unroll
    for (int n = 0; n < w; ++n) mx[n] = fmaxf(mx[n], mx[n + w]);
  const float new_max = fmaxf(row_max, quad_max(mx[0]) * scale_log2);
  const float base = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet
  const float alpha = fast_exp2(row_max - base);
  row_max = new_max;
  float e[NK];
#pragma unroll
  for (int n = 0; n < NK; ++n) {
    const float e0 = fast_exp2(fmaf(s[n][2 * hr], scale_log2, -base));
    const float e1 = fast_exp2(fmaf(s[n][2 * hr + 1], scale_log2, -base));
    pk[n][hr] = pack2<T>(e0, e1);
    e[n] = e0 + e1;
  }
#pragma unroll
  for (int w = NK / 2; w >= 1; w /= 2)
#pragma unroll
    for (int n = 0; n < w; ++n) e[n] += e[n + w];
  row_sum = row_sum * alpha + e[0];
  return alpha;
}

// Keys past S, and past the row under causal, score -inf: a warp's MT m-tiles of 16
// rows (from warp_row0) by a step's NK 8-key tiles (from key k0), in the mma C layout.
// In 32-bit offsets from the lane's first key and row, so that each score costs a compare.
template <int MT, int NK>
__device__ __forceinline__ void mask_step(float (&s)[MT][NK][4], const PrefillParams& p, int64_t k0,
                                          int64_t warp_row0) {
  constexpr int kKeys = NK * 8;
  if (!(k0 + kKeys > p.S || (p.causal && k0 + kKeys - 1 > warp_row0 + p.causal_offset))) return;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t first_key = k0 + 2 * t, first_row = warp_row0 + g;
  const int keys_left = static_cast<int>(min64(p.S - first_key, kKeys));  // key offsets below it exist
  // key offset - row offset above it is past the diagonal (never, without causal)
  const int diagonal = p.causal ? static_cast<int>(first_row + p.causal_offset - first_key) : kKeys + 16 * MT;
  for_each_tile_element<MT, NK>([&](int m, int n, int i) {
    const int key = n * 8 + (i & 1), row = m * 16 + (i >= 2 ? 8 : 0);
    if (key >= keys_left || key - row > diagonal) s[m][n][i] = -INFINITY;
  });
}

// Elements per shared-memory row of a D-wide head: an odd number of 16-byte chunks.
template <int D>
constexpr int smem_row() {
  return ((D / 8) % 2 == 1 ? D / 8 : D / 8 + 1) * 8;
}

// Copies `rows` rows of D elements (row stride ld) starting at row r0 into smem
// rows of smem_row<D>(); rows at or past `valid` are zero-filled.
template <class T, int D, int kThreads>
__device__ __forceinline__ void stage_rows(T* smem, const T* src, int64_t ld, int64_t r0, int rows, int64_t valid) {
  constexpr int C = D / 8, LD = smem_row<D>();
  for (int c = threadIdx.x; c < rows * C; c += kThreads) {
    const int r = c / C, cc = c % C;
    const bool in = r0 + r < valid;
    cp_async16(smem + r * LD + cc * 8, in ? src + (r0 + r) * ld + cc * 8 : src, in);
  }
}


}  // namespace kiln::cuda_backend
