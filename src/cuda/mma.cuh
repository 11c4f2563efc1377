// Warp-level tensor-core tiles for the few-rows kernels (fp8 scaled_mm decode,
// grouped_mm): C[m, n] += sum_k A[m, k] * B[n, k] with k contiguous in both (the
// x @ w^T layout of linear), through mma.sync.
//
// A warp computes a [16*MT, 8*NT] tile. Lane (g = lane / 4, t = lane % 4) loads
// one 16-byte chunk per row per step: rows g and g + 8 of every A m-tile and row
// g of every B n-tile, at chunk 4 * step + t, so a warp's step covers 64
// contiguous bytes of k and every load is a full 16-byte vector. The mma
// fragments want 4-byte words of k in a fixed order; since a dot product does not
// care about the order of its terms, words 0 and 1 of each chunk feed one mma and
// words 2 and 3 the next, in A and B alike.
//
// Layouts (PTX ISA, mma.m16n8k16 for 16-bit types and mma.m16n8k32 for 8-bit):
// A regs {row g part 1, row g+8 part 1, row g part 2, row g+8 part 2}, B regs
// {part 1, part 2} of column g, C regs {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kiln/scalar_types.h"

namespace kiln::cuda_backend {

// True where the device code has tensor-core mma for element type T (fp8 needs sm_89).
template <class T>
constexpr int mma_min_arch() {
  return std::is_same_v<T, Float8_e4m3fn> ? 89 : 80;
}

template <class T>
__device__ __forceinline__ void mma_16x8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else if constexpr (std::is_same_v<T, Half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, Float8_e4m3fn>, "mma_16x8: bfloat16, float16 or float8_e4m3fn");
#if __CUDA_ARCH__ >= 890
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();  // launchers check the architecture first
#endif
  }
}

// The 16 x 8 x 8 mma of 16-bit types: A regs {row g, row g+8}, B reg {column g}.
template <class T>
__device__ __forceinline__ void mma_16x8x8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
  } else {
    static_assert(std::is_same_v<T, Half>, "mma_16x8x8: bfloat16 or float16");
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
  }
}

// Two floats rounded to T and packed into one 4-byte word (lo in the low half).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// Both mmas of one 16-byte chunk: lo and hi are A rows g and g + 8, b is B row g.
// Hopper's fp8 mma adds into its accumulator with fewer than fp32's bits, so fp8
// chunks sum into a fresh tile that is then added in fp32 (what cuBLASLt's
// promotion does without fast accumulation: one rounding per 64 products).
template <class T>
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& lo, const uint4& hi, const uint4& b) {
  if constexpr (std::is_same_v<T, Float8_e4m3fn>) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_16x8<T>(t, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
    mma_16x8<T>(t, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
#pragma unroll
    for (int i = 0; i < 4; ++i) c[i] += t[i];
  } else {
    mma_16x8<T>(c, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
    mma_16x8<T>(c, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
  }
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ __forceinline__ uint4 load_chunk(const void* row, int64_t chunk, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(row) + chunk) : make_uint4(0, 0, 0, 0);
}

// The operands of one warp's tile. Rows at or past m_valid (A) or n_valid (B) read as zero.
template <class T>
struct MmaOperands {
  const T* a;
  int64_t lda;  // elements
  int m_valid;
  const T* b;
  int64_t ldb;
  int n_valid;
  int64_t chunks;  // 16-byte chunks per row of k (k * sizeof(T) / 16)
};

// Accumulates the warp's tile over steps first, first + stride, ... (a step is
// 4 chunks, one per t: 64 bytes of k), U steps' loads in flight at a time. With
// the block's warps at first = 0..W-1 and stride W, a block reads W * 64
// contiguous bytes of every row at once (measured faster on the H200 than
// giving each warp a contiguous range: 20 vs 28 us for an MoE decode step).
template <class T, int MT, int NT, int U>
__device__ __forceinline__ void warp_mma_rows(const MmaOperands<T>& op, int64_t first, int64_t stride,
                                              float (&c)[MT][NT][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const T* arow[MT][2];
  bool avalid[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m * 16 + h * 8 + g;
      avalid[m][h] = r < op.m_valid;
      arow[m][h] = op.a + (avalid[m][h] ? r : 0) * op.lda;
    }
  const T* brow[NT];
  bool bvalid[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int r = n * 8 + g;
    bvalid[n] = r < op.n_valid;
    brow[n] = op.b + (bvalid[n] ? r : 0) * op.ldb;
  }
  const int64_t steps = (op.chunks + 3) / 4;
  for (int64_t s0 = first; s0 < steps; s0 += stride * U) {
    uint4 av[U][MT][2], bv[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t chunk = (s0 + u * stride) * 4 + t;
      const bool in_k = s0 + u * stride < steps && chunk < op.chunks;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) av[u][m][h] = load_chunk(arow[m][h], chunk, in_k && avalid[m][h]);
#pragma unroll
      for (int n = 0; n < NT; ++n) bv[u][n] = load_chunk(brow[n], chunk, in_k && bvalid[n]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n) mma_chunk<T>(c[m][n], av[u][m][0], av[u][m][1], bv[u][n]);
  }
}

// Calls f(m, n, i) for each accumulator c[m][n][i] of a warp's MT x NT mma tiles,
// fully unrolled (so that f's offsets are immediates).
template <int MT, int NT, class F>
__device__ __forceinline__ void for_each_tile_element(F&& f) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) f(m, n, i);
}

// Sums the tiles of a block's WARPS warps (each took a share of k) into warp 0's
// registers. `scratch` holds WARPS * MT * NT * 4 * 32 floats.
template <int WARPS, int MT, int NT>
__device__ __forceinline__ void reduce_warp_tiles(float (&c)[MT][NT][4], float* scratch) {
  if constexpr (WARPS > 1) {
    constexpr int kPer = MT * NT * 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp > 0) {
      for_each_tile_element<MT, NT>(
          [&](int m, int n, int i) { scratch[((warp * kPer) + (m * NT + n) * 4 + i) * 32 + lane] = c[m][n][i]; });
    }
    __syncthreads();
    if (warp == 0) {
      for (int w = 1; w < WARPS; ++w)
        for_each_tile_element<MT, NT>(
            [&](int m, int n, int i) { c[m][n][i] += scratch[((w * kPer) + (m * NT + n) * 4 + i) * 32 + lane]; });
    }
  }
}

// Row and column (within the warp's tile) of accumulator c[m][n][i] for this lane.
__device__ __forceinline__ int tile_row(int m, int i) { return m * 16 + (threadIdx.x % 32) / 4 + (i >= 2 ? 8 : 0); }
__device__ __forceinline__ int tile_col(int n, int i) { return n * 8 + (threadIdx.x % 4) * 2 + (i & 1); }

}  // namespace kiln::cuda_backend
