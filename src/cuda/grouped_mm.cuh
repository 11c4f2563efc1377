// What the CUDA grouped_mm kernels share (grouped_mm.cu, the front door and the
// plain kernel; grouped_mm_gemv.cu, few rows a group; grouped_mm_tiles.cu, many
// rows a group): the groups' rows from the offsets on the device, the slot of a
// (group, row chunk) pair, the fp8 weights' scale and the tile epilogues; and the
// entry points of the two kernel files, which take half-precision inputs.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"
#include "cuda/common.h"
#include "cuda/mma.cuh"

namespace kiln::cuda_backend {

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Rows [start, end) of group g, offsets clamped into [0, T] and non-decreasing.
__device__ __forceinline__ void group_rows(const int32_t* offs, int g, int64_t T, int64_t& start, int64_t& end) {
  start = g == 0 ? 0 : clamp64(offs[g - 1], 0, T);
  end = clamp64(offs[g], start, T);
}

// The dequantisation scale of fp8 weights: group g's output column n has
// p[g * sg + n * sn]; 1 where there is none. Every kernel applies it to its
// finished float32 dot products (fp8 -> T is exact, so a @ (b * scale) up to
// float32 rounding).
struct ColumnScale {
  const float* p = nullptr;
  int64_t sg = 0, sn = 0;
  __device__ __forceinline__ float operator()(int g, int64_t n) const { return p ? p[g * sg + n * sn] : 1.0f; }
};

inline ColumnScale column_scale(const GroupedMmArgs& s) {
  if (!s.b_scale.defined()) return {};
  return {s.b_scale.data<float>(), s.b_scale.stride(0), s.b_scale.stride(1)};
}

struct GroupChunk {
  int g;
  int64_t row0;
  int rows;
};

// The slot-th (group, chunk of chunk_rows rows) pair in group order, found by
// every warp on its own (no shared memory, no barrier): lane l counts the chunks
// of a contiguous run of G / 32 groups (its offsets loaded together), a warp scan
// finds the lane holding the slot, and that lane walks its run again.
__device__ inline bool find_group_chunk(const int32_t* __restrict__ offs, int G, int64_t T, int chunk_rows, int64_t slot,
                                 GroupChunk& out) {
  const int lane = threadIdx.x % 32;
  const int per = (G + 31) / 32;
  const int g0 = ::min(G, lane * per), g1 = ::min(G, g0 + per);
  int64_t chunks = 0;
#pragma unroll 4
  for (int g = g0; g < g1; ++g) {
    int64_t s, e;
    group_rows(offs, g, T, s, e);
    chunks += (e - s + chunk_rows - 1) / chunk_rows;
  }
  int64_t incl = chunks;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  const bool mine = slot >= incl - chunks && slot < incl;
  const unsigned owners = __ballot_sync(0xffffffffu, mine);
  if (owners == 0) return false;
  const int src = __ffs(owners) - 1;
  int g_found = 0;
  int64_t row0 = 0, rows = 0;
  if (lane == src) {
    int64_t before = incl - chunks;
    for (int g = g0; g < g1; ++g) {
      int64_t s, e;
      group_rows(offs, g, T, s, e);
      const int64_t n = (e - s + chunk_rows - 1) / chunk_rows;
      if (slot < before + n) {
        g_found = g;
        row0 = s + (slot - before) * chunk_rows;
        rows = min64(chunk_rows, e - row0);
        break;
      }
      before += n;
    }
  }
  out.g = __shfl_sync(0xffffffffu, g_found, src);
  out.row0 = __shfl_sync(0xffffffffu, row0, src);
  out.rows = static_cast<int>(__shfl_sync(0xffffffffu, rows, src));
  return true;
}

// Stores a warp's tile (columns from col0) for the rows of its group chunk and columns below N.
template <class O, int MT, int NT>
__device__ __forceinline__ void store_tile(const float (&c)[MT][NT][4], const GroupChunk& gc, int64_t col0, int64_t N,
                                           O* __restrict__ out, int64_t ldo, ColumnScale scale) {
  for_each_tile_element<MT, NT>([&](int m, int n, int i) {
    const int row = tile_row(m, i);
    const int64_t col = col0 + tile_col(n, i);
    if (row < gc.rows && col < N) out[(gc.row0 + row) * ldo + col] = O(c[m][n][i] * scale(gc.g, col));
  });
}

// Rows past the last group are zero: done by the blocks of slot 0, each for its columns.
template <class O>
__device__ void zero_tail_rows(const int32_t* offs, int G, int64_t rows, int64_t N, int64_t n0, int cols, O* out,
                               int64_t ldo) {
  const int64_t tail = clamp64(offs[G - 1], 0, rows);
  for (int64_t i = threadIdx.x; i < (rows - tail) * cols; i += blockDim.x) {
    const int64_t n = n0 + i % cols;
    if (n < N) out[(tail + i / cols) * ldo + n] = O(0.0f);
  }
}

// Calls f(t, W, O) for the input's type tag t with the type tags of s's weights (T
// or Float8_e4m3fn) and output (T or float).
template <class Tag, class F>
void with_weights_and_output(const GroupedMmArgs& s, Tag t, F&& f) {
  const bool fp8 = s.b.dtype() == DType::Float8_e4m3fn, wide = s.out.dtype() == DType::Float32;
  if (fp8 && wide) f(t, detail::TypeTag<Float8_e4m3fn>{}, detail::TypeTag<float>{});
  else if (fp8) f(t, detail::TypeTag<Float8_e4m3fn>{}, t);
  else if (wide) f(t, t, detail::TypeTag<float>{});
  else f(t, t, t);
}

// The same for the tensor-core kernels' inputs, Half or BFloat16.
template <class F>
void dispatch_grouped_half(const GroupedMmArgs& s, F&& f) {
  if (s.a.dtype() == DType::BFloat16) return with_weights_and_output(s, detail::TypeTag<BFloat16>{}, f);
  KILN_CHECK(s.a.dtype() == DType::Float16, "grouped_mm: the tensor-core kernels take float16 or bfloat16, got ",
             dtype_name(s.a.dtype()));
  with_weights_and_output(s, detail::TypeTag<Half>{}, f);
}

// grouped_mm_gemv.cu. At most a row per group (decode), or moe_experts' fused
// decode (row_index, swiglu, combine_pos): a matrix-vector product per row.
void grouped_gemv(const GroupedMmArgs& s);
// A few rows per group (up to 8 on average), weights of the input's dtype: one
// 16-row tile and 8 columns a block, its warps splitting K.
void grouped_rows(const GroupedMmArgs& s);

// grouped_mm_tiles.cu. Many rows per group (prefill): 64-row tiles, through the
// tensor memory accelerator where grouped_tiles_fit_tma (then fp8 weights too),
// otherwise cp.async (weights of the input's dtype).
bool grouped_tiles_fit_tma(const GroupedMmArgs& s);
void grouped_tiles(const GroupedMmArgs& s);

}  // namespace kiln::cuda_backend
