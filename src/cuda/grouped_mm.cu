// CUDA grouped_mm. The offsets stay on the GPU: the grid has one slot per
// possible (group, chunk of rows) pair, at most ceil(T / rows per chunk) +
// min(G, T) of them, and each block finds its pair with a warp scan over offs,
// so empty experts cost nothing and nothing waits for the host.
//
// 2-D x 3-D with k contiguous in a and b (weights stored [G, N, K], b their
// transpose): tensor-core tiles from mma.cuh. Few rows per group (decode) use
// one 16-row tile and 8 columns per block with the warps splitting K, for
// parallelism; many rows (prefill) use 64 x 32 tiles, so each weight column
// is read once per 64 rows. Anything else (float32, other layouts, k split by
// groups) runs a plain per-element kernel: right, not fast. fp8 e4m3fn weights:
// the matrix-vector and TMA kernels read them as they are; the others get a
// widened copy. Their scale multiplies each finished dot product.
#include "core/backend.h"
#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "core/vector_rows.h"
#include "cuda/chained_launch.cuh"
#include "cuda/common.h"
#include "cuda/cp_async.cuh"
#include "cuda/gemv.cuh"
#include "cuda/mma.cuh"
#include "cuda/tma.cuh"
#include "cuda/tma.h"

namespace kiln::cuda_backend {

namespace {

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

ColumnScale column_scale(const GroupedMmArgs& s) {
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
__device__ bool find_group_chunk(const int32_t* __restrict__ offs, int G, int64_t T, int chunk_rows, int64_t slot,
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

template <class T, class O, int MT, int NT, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32)
    grouped_rows_kernel(const T* __restrict__ a, int64_t lda, int64_t rows, const T* __restrict__ b, int64_t ldg,
                        int64_t ldb, int64_t N, int64_t K, const int32_t* __restrict__ offs, int G,
                        O* __restrict__ out, int64_t ldo, ColumnScale scale) {
  __shared__ float scratch[WARPS > 1 ? WARPS * MT * NT * 4 * 32 : 1];
  constexpr int kCols = 8 * NT;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kCols;
  if (blockIdx.x == 0) zero_tail_rows(offs, G, rows, N, n0, kCols, out, ldo);
  GroupChunk gc;
  if (!find_group_chunk(offs, G, rows, MT * 16, blockIdx.x, gc)) return;  // same answer for the whole block
  const int warp = threadIdx.x / 32;
  const MmaOperands<T> op{a + gc.row0 * lda, lda, gc.rows, b + gc.g * ldg + n0 * ldb, ldb,
                          static_cast<int>(min64(kCols, N - n0)),
                          K * static_cast<int64_t>(sizeof(T)) / 16};
  float c[MT][NT][4] = {};
  warp_mma_rows<T, MT, NT, U>(op, warp, WARPS, c);
  reduce_warp_tiles<WARPS, MT, NT>(c, scratch);
  if (warp == 0) store_tile<O, MT, NT>(c, gc, n0, N, out, ldo, scale);
}

// The group of row r (rows sorted by group): the number of groups ending at or
// before it, from one coalesced read of offs and a warp sum. G for a row past
// the last group.
__device__ __forceinline__ int group_of_row(const int32_t* offs, int G, int64_t rows, int64_t r, int lane) {
  int ended = 0;
  for (int g = lane; g < G; g += 32) ended += clamp64(offs[g], 0, rows) <= r;
  return __reduce_add_sync(0xffffffffu, ended);
}

// One warp's dot products of NPW weight rows w[j] (K long) with the row x, each
// lane streaming U 16-byte (VB-byte) vectors a row at a time; returns the full
// sums in every lane. The order of the terms depends only on K and VB, so every
// kernel here that calls it gets the same bits for the same row.
template <class T, class W, int U, int NPW, int VB>
__device__ __forceinline__ void warp_dots(const W* const (&w)[NPW], const T* x, int64_t K, int lane,
                                          float (&acc)[NPW]) {
  constexpr int V = VB / sizeof(W);
  constexpr int64_t kStep = 32 * V;
#pragma unroll
  for (int j = 0; j < NPW; ++j) acc[j] = 0.0f;
  auto step = [&](const Pack<W, V> (&p)[NPW], int64_t kk) {
    float xf[V];
    gemv::load_x<T, V>(x + kk, xf);
#pragma unroll
    for (int j = 0; j < NPW; ++j) {
      float wf[V];
      gemv::widen_pack<W>(p[j], wf);
#pragma unroll
      for (int i = 0; i < V; ++i) acc[j] = fmaf(wf[i], xf[i], acc[j]);
    }
  };
  int64_t k = static_cast<int64_t>(lane) * V;
  for (; k + (U - 1) * kStep < K; k += U * kStep) {
    Pack<W, V> p[U][NPW];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NPW; ++j) p[u][j] = *reinterpret_cast<const Pack<W, V>*>(w[j] + k + u * kStep);
#pragma unroll
    for (int u = 0; u < U; ++u) step(p[u], k + u * kStep);
  }
  for (; k < K; k += kStep) {
    Pack<W, V> p[NPW];
#pragma unroll
    for (int j = 0; j < NPW; ++j) p[j] = *reinterpret_cast<const Pack<W, V>*>(w[j] + k);
    step(p, k);
  }
#pragma unroll
  for (int j = 0; j < NPW; ++j)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);
}

// Decode with at most one row per group on average: a matrix-vector product per
// row, written for bandwidth as linear's decode kernel. Slot blockIdx.y is row r
// of the output (rows sorted by group); blockIdx.x picks kCols output columns,
// NPW weight rows per warp, each streamed with U 16-byte loads in flight per
// lane (U = 3 when K is 3 steps of 32 x 16 bytes, as a 768-wide down projection,
// so no step is left to a serial tail; NPW > 1 keeps more loads in flight when
// K is that short). Optionally the input row is gathered (row_index). SWIGLU:
// the product's columns are [gate | up] (N of them) and the output is
// silu(gate) * up, N / 2 wide (silu_and_mul fused in): a warp's weight rows
// are NPW / 2 gate rows and the up rows N / 2 past them. (Before, the down
// kernel made the activation, each block its row's, before its weight loads: on
// the H100, 1 token, top-8 of 128, 2048 -> 768 -> 2048, fp8 14.2 -> 12.3-12.8 us,
// bf16 32.1 -> 31.7-31.8; gate|up takes 768 blocks instead of 1536.) Weights W are T or
// float8_e4m3fn (with its scale); a lane loads VB bytes of a weight row at a
// time (8 for fp8 rows of 768, which then take 3 whole steps, not 1.5).
// bf16 gate|up pairs are held to 40 registers (48 free), 6 blocks an SM, so that a
// 2048 -> 2 x 768 projection of 8 rows (768 blocks) is one wave: H100, 30B-A3B
// decode, 21.7 -> 20.5 us a layer, 287-289 -> 293-297 tok/s.
template <class T, class W, class O, int U, int NPW, bool SWIGLU, int VB = 16>
__global__ void __launch_bounds__(256, SWIGLU && NPW == 2 && std::is_same_v<T, BFloat16> ? 6 : 0)
    grouped_gemv_kernel(const T* __restrict__ a, int64_t lda, int64_t rows, const int32_t* __restrict__ row_index,
                        const W* __restrict__ b, int64_t ldg, int64_t ldb, int64_t N, int64_t K,
                        const int32_t* __restrict__ offs, int G, O* __restrict__ out, int64_t ldo,
                        ColumnScale scale) {
  constexpr int kWarpsPerBlock = 8, kOutPerWarp = SWIGLU ? NPW / 2 : NPW, kCols = kWarpsPerBlock * kOutPerWarp;
  static_assert(!SWIGLU || NPW % 2 == 0, "grouped_gemv_kernel: SWIGLU pairs gate and up rows");
  const int64_t n_out = SWIGLU ? N / 2 : N;  // output columns
  // chained: the expert of a row, hence its weights, is known only from the router's offs
  chain_wait();
  chain_release();
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kCols;
  if (blockIdx.y == 0) zero_tail_rows(offs, G, rows, n_out, n0, kCols, out, ldo);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = blockIdx.y;
  const int g = group_of_row(offs, G, rows, r, lane);
  const int64_t nw = n0 + warp * kOutPerWarp;
  if (g >= G || nw >= n_out) return;  // a row past the last group (zeroed above), or past the columns
  // g < G only for rows of a group (r < rows): only then are row_index[r] and row r read
  const T* x = a + (row_index ? static_cast<int64_t>(row_index[r]) : r) * lda;
  const int ncols = static_cast<int>(min64(kOutPerWarp, n_out - nw));
  const W* w[NPW];
#pragma unroll
  for (int j = 0; j < kOutPerWarp; ++j) {
    const int64_t n = nw + ::min(j, ncols - 1);  // past the columns: read again, dropped
    w[j] = b + g * ldg + n * ldb;
    if constexpr (SWIGLU) w[kOutPerWarp + j] = b + g * ldg + (n + n_out) * ldb;
  }
  float acc[NPW];
  warp_dots<T, W, U, NPW, VB>(w, x, K, lane, acc);
  if (lane == 0)
#pragma unroll
    for (int j = 0; j < kOutPerWarp; ++j) {
      if (j >= ncols) break;
      const int64_t n = nw + j;
      if constexpr (SWIGLU)
        // gate and up rounded to T first, as the product is before silu_and_mul
        out[r * ldo + n] = T(math::silu_mul(static_cast<float>(T(acc[j] * scale(g, n))),
                                            static_cast<float>(T(acc[kOutPerWarp + j] * scale(g, n + n_out)))));
      else
        out[r * ldo + n] = O(acc[j] * scale(g, n));
    }
}

// The down projection of moe_experts with the combine fused in, for decode: out[t]
// = sum_j weights[t, j] * (product row sorted_pos[t, j]), each product rounded to
// T first, summed in slot order with one rounding a term: the bits of
// grouped_gemv_kernel and then moe_combine. Block (x, t) takes NPW columns of
// token t; warp j takes slot j (j + 8, ... when k > 8), so the combine is a sum
// over the block's warps. A slot's row, expert and weight come in one round of
// loads (the expert from the routing, not from a scan of offs that would wait
// for the row), so the weight loads start as early as grouped_gemv_kernel's.
// bf16 is held to 64 registers, as grouped_gemv_kernel takes, so that 4 blocks fit
// an SM and a 2048-wide down projection (512 blocks) is one wave (float16 would
// spill): H100, 1 token, top-8 of 128, bf16 2048 -> 768 -> 2048, moe_experts_combine
// 30.5 us, moe_experts alone 30.4 (left free, 74 registers and 3 blocks: 34.9, 31.8).
template <class T, class W, int U, int NPW, int VB = 16>
__global__ void __launch_bounds__(256, std::is_same_v<T, BFloat16> ? 4 : 0)
    grouped_gemv_combine_kernel(const T* __restrict__ a, int64_t lda, const W* __restrict__ b, int64_t ldg,
                                int64_t ldb, int64_t N, int64_t K, int G, const float* __restrict__ comb_w,
                                const int32_t* __restrict__ comb_pos, const int32_t* __restrict__ comb_expert, int k,
                                T* __restrict__ out, int64_t ldo, ColumnScale scale) {
  constexpr int kWarpsPerBlock = 8, kMaxTopK = 32;  // moe_route's bound on k
  __shared__ float part[kMaxTopK][NPW], part_w[kMaxTopK];
  chain_wait();
  chain_release();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.y, n0 = static_cast<int64_t>(blockIdx.x) * NPW;
  const int ncols = static_cast<int>(min64(NPW, N - n0));
  for (int j = warp; j < k; j += kWarpsPerBlock) {
    const int64_t r = comb_pos[t * k + j];
    const int g = comb_expert[t * k + j];
    const float wt = comb_w[t * k + j];
    float acc[NPW];
    const bool valid = g >= 0 && g < G;
    if (valid) {
      const W* w[NPW];
#pragma unroll
      for (int c = 0; c < NPW; ++c) w[c] = b + g * ldg + (n0 + ::min(c, ncols - 1)) * ldb;
      warp_dots<T, W, U, NPW, VB>(w, a + r * lda, K, lane, acc);
    }
    if (lane == 0) {
      part_w[j] = wt;
#pragma unroll
      for (int c = 0; c < NPW; ++c) part[j][c] = valid ? static_cast<float>(T(acc[c] * scale(g, n0 + c))) : 0.0f;
    }
  }
  __syncthreads();
  if (threadIdx.x >= ncols) return;
  const int c = threadIdx.x;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum = fmaf(part_w[j], part[j][c], sum);
  out[t * ldo + n0 + c] = T(sum);
}

// Launches a (group, row chunk) kernel (both kernels here take the same
// arguments): one slot per possible pair in x, blocks of `cols` columns in y.
template <class T, class O, class Kernel>
void launch_group_chunks(Kernel kernel, int threads, int chunk_rows, int cols, const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1), N = s.b.size(2);
  const int G = static_cast<int>(s.offs.size(0));
  const int64_t slots = (rows + chunk_rows - 1) / chunk_rows + std::min<int64_t>(G, rows);
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(slots, 1)), static_cast<unsigned>((N + cols - 1) / cols));
  kernel<<<grid, threads, 0, current_stream()>>>(s.a.data<T>(), s.a.stride(0), rows, s.b.data<T>(), s.b.stride(0),
                                                 s.b.stride(2), N, K, s.offs.data<int32_t>(), G, s.out.data<O>(),
                                                 s.out.stride(0), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

// What a few-rows launch computes: the product (Plain), silu(gate) * up of it
// (Swiglu, GroupedMmArgs::swiglu), or the weighted combine of its rows
// (Combine, GroupedMmArgs::combine_pos).
enum class GemvMode { Plain, Swiglu, Combine };

// NPW: weight rows a warp (Plain), gate and up pairs (Swiglu, at least one of
// each: NPW 1 becomes 2 rows), unused for Combine (4 columns a block).
template <class T, class W, class O, int U, int NPW, GemvMode M, int VB = 16>
void launch_grouped_gemv_as(const GroupedMmArgs& s) {
  const int64_t N = s.b.size(2), K = s.b.size(1);
  const int G = static_cast<int>(s.offs.size(0));
  if constexpr (M == GemvMode::Combine) {
    constexpr int kCols = 4;
    const int64_t tokens = s.out.size(0);
    const dim3 grid(static_cast<unsigned>((N + kCols - 1) / kCols), static_cast<unsigned>(std::max<int64_t>(tokens, 1)));
    launch_chained(grouped_gemv_combine_kernel<T, W, U, kCols, VB>, grid, 256, 0, s.a.data<T>(), s.a.stride(0),
                   s.b.data<W>(), s.b.stride(0), s.b.stride(2), N, K, G, s.combine_weights.data<float>(),
                   s.combine_pos.data<int32_t>(), s.combine_experts.data<int32_t>(),
                   static_cast<int>(s.combine_pos.size(1)), s.out.data<T>(), s.out.stride(0), column_scale(s));
  } else {
    constexpr bool kSwiglu = M == GemvMode::Swiglu;
    constexpr int kRowsPerWarp = kSwiglu ? 2 * (NPW == 1 ? 1 : NPW / 2) : NPW, kOutPerWarp = kSwiglu ? kRowsPerWarp / 2 : NPW;
    const int64_t rows = s.out.size(0), n_out = kSwiglu ? N / 2 : N;
    const dim3 grid(static_cast<unsigned>((n_out + 8 * kOutPerWarp - 1) / (8 * kOutPerWarp)),
                    static_cast<unsigned>(std::max<int64_t>(rows, 1)));
    launch_chained(grouped_gemv_kernel<T, W, O, U, kRowsPerWarp, kSwiglu, VB>, grid, 256, 0, s.a.data<T>(),
                   s.a.stride(0), rows, s.row_index.defined() ? s.row_index.data<int32_t>() : nullptr, s.b.data<W>(),
                   s.b.stride(0), s.b.stride(2), N, K, s.offs.data<int32_t>(), G, s.out.data<O>(), s.out.stride(0),
                   column_scale(s));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

// Measured on the H200 (bench.py, 1 token, top-8 of 128): the 768 -> 2048 down
// projection takes 8.4 us with one column per warp, 6.7 with two, 5.7 with four.
// Slower on the H100 (30B decode, branch wip/moe-fused-experts): both projections
// of moe_experts in one kernel, the down items issuing their weight loads and then
// waiting on per-row counters of finished gate/up items: 46 us a layer against
// 20 + 12 to 14 for the two kernels (100-150 registers a thread: 1-2 blocks an SM).
template <class T, class W, class O, GemvMode M, int VB>
void launch_grouped_gemv_vb(const GroupedMmArgs& s) {
  const int64_t steps = s.b.size(1) * static_cast<int64_t>(sizeof(W)) / (32 * VB);
  if (steps % 4 != 0 && steps % 3 == 0) {
    if (steps == 3) launch_grouped_gemv_as<T, W, O, 3, 4, M, VB>(s);
    else launch_grouped_gemv_as<T, W, O, 3, 1, M, VB>(s);
  } else if (M == GemvMode::Plain && steps == 8) {
    // a 4 KB row's 8 steps all in flight at once (H100, 1 token, top-8 of 128, 2048 -> 1536 bf16:
    // 18.3 us against 19.1 with 4, 91% of copy; 2 rows a warp with 4 or 2 steps, 19.8 and 20.1)
    launch_grouped_gemv_as<T, W, O, 8, 1, M, VB>(s);
  } else {
    if (steps <= 4) launch_grouped_gemv_as<T, W, O, 4, 4, M, VB>(s);
    else launch_grouped_gemv_as<T, W, O, 4, 1, M, VB>(s);
  }
}

// fp8 rows that 16-byte lane loads would leave with a half step (768: 1.5 steps)
// take 8-byte loads and whole steps (H200, 1 token, 768 -> 2048: 6.1 -> 4.7 us).
template <class T, class W, class O, GemvMode M>
void launch_grouped_gemv_k(const GroupedMmArgs& s) {
  const int64_t bytes = s.b.size(1) * static_cast<int64_t>(sizeof(W));
  if (sizeof(W) == 1 && bytes % (32 * 16) != 0 && bytes % (32 * 8) == 0)
    return launch_grouped_gemv_vb<T, W, O, M, 8>(s);
  launch_grouped_gemv_vb<T, W, O, M, 16>(s);
}

template <class T, class W, class O>
void launch_grouped_gemv(const GroupedMmArgs& s) {
  if (s.combine_pos.defined()) {
    KILN_CHECK((std::is_same_v<O, T>), "grouped_mm: the fused combine writes its input's dtype");
    if constexpr (std::is_same_v<O, T>) launch_grouped_gemv_k<T, W, O, GemvMode::Combine>(s);
  } else if (s.swiglu) {
    launch_grouped_gemv_k<T, W, O, GemvMode::Swiglu>(s);
  } else {
    launch_grouped_gemv_k<T, W, O, GemvMode::Plain>(s);
  }
}

template <class T, class O, int MT, int NT, int WARPS, int U>
void launch_grouped_rows(const GroupedMmArgs& s) {
  launch_group_chunks<T, O>(grouped_rows_kernel<T, O, MT, NT, WARPS, U>, WARPS * 32, MT * 16, 8 * NT, s);
}


// ---- prefill: a 64 x (TW * NTW * 8) tile per block; k streams through a ring
// of kTileStages stages in shared memory (cp.async), each stage SUB slices of 64
// bytes of k. A slice is 64 rows x 4 chunks of a and TW * NTW * 8 rows x 4 chunks
// of b; lane (g, t) reads chunk t of 8 consecutive rows, 512 contiguous bytes per
// warp, so the reads are free of bank conflicts. Each of the TW warps owns NTW * 8
// columns and only the 16-row tiles that hold rows of its group (an expert of a
// 512-token prefill has about 32). Rows past the group's end and columns past N
// are not loaded: they feed only outputs that are never stored. k past K is
// loaded as zeros, since it feeds every output.
constexpr int kTileRows = 64;
// The TMA kernel's boxes of a: one m-tile of rows (kernel and launcher agree on it).
constexpr int kABoxRows = 16;
static_assert(kABoxRows == 16, "a box of a is one mma m-tile of rows");

// A tile kernel's block: columns n0 .. n0 + tile_cols of the (group, 64-row chunk)
// pair of its slot (column blocks fastest in blockIdx.x); slot 0's blocks also zero
// the rows past the last group. False: the slot is past the last chunk.
template <class O>
__device__ __forceinline__ bool tile_block_chunk(const int32_t* __restrict__ offs, int G, int64_t rows, int64_t N,
                                                 int tile_cols, O* __restrict__ out, int64_t ldo, int64_t& n0,
                                                 GroupChunk& gc) {
  const unsigned col_blocks = static_cast<unsigned>((N + tile_cols - 1) / tile_cols);
  n0 = static_cast<int64_t>(blockIdx.x % col_blocks) * tile_cols;
  const int64_t slot = blockIdx.x / col_blocks;
  if (slot == 0) zero_tail_rows(offs, G, rows, N, n0, tile_cols, out, ldo);
  return find_group_chunk(offs, G, rows, kTileRows, slot, gc);
}

// Eight fp8 e4m3fn weights -> eight T (exact: every e4m3 value is a bfloat16 and
// a float16), in the order of the 16-byte chunk of T they stand in for.
template <class T>
__device__ __forceinline__ uint4 widen_fp8x8(uint2 v) {
  uint32_t w[4];
  const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pairs[i]));
    if constexpr (std::is_same_v<T, BFloat16>) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
      w[i] = pack2<T>(f.x, f.y);
    } else {
      w[i] = h2;
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One 64-byte k slice of a block's tile from shared memory, where rows of a and
// b lie densely (4 chunks a row): the warp's NTW column tiles of b against the
// first mtiles 16-row tiles of a. fp8 weights W lie 32 bytes a row (the same k),
// widened to T as they are read.
template <class T, int NTW, class W = T>
__device__ __forceinline__ void mma_tile_slice(float (&c)[4][NTW][4], const uint4* sa, const void* sb, int warp,
                                               int mtiles) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  uint4 bv[NTW];
#pragma unroll
  for (int n = 0; n < NTW; ++n) {
    const int at = (warp * NTW * 8 + n * 8 + g) * 4 + t;
    if constexpr (std::is_same_v<W, T>) bv[n] = static_cast<const uint4*>(sb)[at];
    else bv[n] = widen_fp8x8<T>(static_cast<const uint2*>(sb)[at]);
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    if (m >= mtiles) break;
    const uint4 lo = sa[(m * 16 + g) * 4 + t], hi = sa[(m * 16 + 8 + g) * 4 + t];
#pragma unroll
    for (int n = 0; n < NTW; ++n) mma_chunk<T>(c[m][n], lo, hi, bv[n]);
  }
}



template <int TW, int NTW, int SUB>
constexpr size_t tile_stage_chunks() {
  return static_cast<size_t>(SUB) * (kTileRows + TW * NTW * 8) * 4;
}

// Blocks in column-block-fastest order, so that the column blocks of a row chunk
// run together and its rows of a come from L2 after the first read.
template <class T, class O, int TW, int NTW, int SUB, int kTileStages>
__global__ void __launch_bounds__(TW * 32)
    grouped_tile_kernel(const T* __restrict__ a, int64_t lda, int64_t rows, const T* __restrict__ b, int64_t ldg,
                        int64_t ldb, int64_t N, int64_t K, const int32_t* __restrict__ offs, int G,
                        O* __restrict__ out, int64_t ldo, ColumnScale scale) {
  constexpr int kTileCols = TW * NTW * 8, kThreads = TW * 32;
  static_assert(kThreads == kTileRows * 4 && kTileCols % kTileRows == 0, "one a chunk per thread per slice");
  extern __shared__ uint4 tile_smem[];
  int64_t n0;
  GroupChunk gc;
  if (!tile_block_chunk(offs, G, rows, N, kTileCols, out, ldo, n0, gc)) return;  // same answer for the whole block
  const int64_t chunks = K * static_cast<int64_t>(sizeof(T)) / 16;
  const int64_t stages = (chunks + 4 * SUB - 1) / (4 * SUB);
  const int ncols = static_cast<int>(min64(kTileCols, N - n0));

  // This thread's copies: chunk q of a row r and of b rows r + j * 64.
  const int r = threadIdx.x / 4, q = threadIdx.x % 4;
  const uint4* a_src = reinterpret_cast<const uint4*>(a + (gc.row0 + r) * lda) + q;
  const uint4* b_src = reinterpret_cast<const uint4*>(b + gc.g * ldg + (n0 + r) * ldb) + q;
  const int64_t b_step = kTileRows * ldb * static_cast<int64_t>(sizeof(T)) / 16;
  auto stage_a = [&](int st, int u) { return tile_smem + st * tile_stage_chunks<TW, NTW, SUB>() + u * kTileRows * 4; };
  auto stage_b = [&](int st, int u) {
    return tile_smem + st * tile_stage_chunks<TW, NTW, SUB>() + SUB * kTileRows * 4 + u * kTileCols * 4;
  };
  auto load_stage = [&](int64_t s) {
    const int st = static_cast<int>(s % kTileStages);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      const int64_t chunk = (s * SUB + u) * 4 + q;
      const bool in_k = chunk < chunks;
      const int64_t at = in_k ? chunk - q : 0;  // a zero-filled copy still needs a valid address
      if (r < gc.rows) cp_async16(stage_a(st, u) + threadIdx.x, a_src + at, in_k);
#pragma unroll
      for (int j = 0; j < kTileCols / kTileRows; ++j)
        if (r + j * kTileRows < ncols) cp_async16(stage_b(st, u) + threadIdx.x + j * kThreads, b_src + j * b_step + at, in_k);
    }
  };
#pragma unroll
  for (int s0 = 0; s0 < kTileStages - 1; ++s0) {
    if (s0 < stages) load_stage(s0);
    cp_async_commit();
  }
  const int warp = threadIdx.x / 32;
  const int mtiles = (gc.rows + 15) / 16;
  float c[4][NTW][4] = {};
  for (int64_t s = 0; s < stages; ++s) {
    cp_async_wait<kTileStages - 2>();
    __syncthreads();  // stage s is in; every warp is done with the stage about to be refilled
    if (s + kTileStages - 1 < stages) load_stage(s + kTileStages - 1);
    cp_async_commit();
    const int st = static_cast<int>(s % kTileStages);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      const uint4* sa = stage_a(st, u);
      const uint4* sb = stage_b(st, u);
      mma_tile_slice<T, NTW>(c, sa, sb, warp, mtiles);
    }
  }
  store_tile<O, 4, NTW>(c, gc, n0 + warp * NTW * 8, N, out, ldo, scale);
}

template <class T, class O, int TW, int NTW, int SUB, int kTileStages>
void launch_grouped_tile(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1), N = s.b.size(2);
  const int G = static_cast<int>(s.offs.size(0));
  constexpr int kTileCols = TW * NTW * 8;
  const int64_t slots = (rows + kTileRows - 1) / kTileRows + std::min<int64_t>(G, rows);
  const int64_t blocks = std::max<int64_t>(slots, 1) * ((N + kTileCols - 1) / kTileCols);
  KILN_CHECK(blocks < (int64_t{1} << 31), "grouped_mm: ", rows, " rows x ", N, " columns is more tiles than one launch takes");
  const auto kernel = grouped_tile_kernel<T, O, TW, NTW, SUB, kTileStages>;
  const size_t smem = kTileStages * tile_stage_chunks<TW, NTW, SUB>() * sizeof(uint4);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>(blocks), TW * 32, smem, current_stream()>>>(
      s.a.data<T>(), s.a.stride(0), rows, s.b.data<T>(), s.b.stride(0), s.b.stride(2), N, K, s.offs.data<int32_t>(),
      G, s.out.data<O>(), s.out.stride(0), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

// ---- prefill on Hopper: the same 64 x (TW * NTW * 8) tiles, with the k slices
// brought in by the tensor memory accelerator. One producer warp issues, per
// stage, SUB boxes of 64 bytes of k for the 64 rows of a and the tile's columns
// of b, into a ring of ST stages; the TW consumer warps wait on the stage's
// "full" barrier and, when done with it, arrive on its "empty" one. No thread
// spends instructions on addresses, and no barrier holds all warps together.
// Boxes land densely (64-byte rows), which is the layout the cp.async kernel
// reads. Rows and k outside the tensors read as zeros; rows of a that belong to
// the next group feed only outputs that are never stored. fp8 weights W come in
// as boxes of the same k (32 bytes a row, half the bytes) and are widened to T
// in registers: no dequantised copy of the experts.
template <class T, class W, class O, int TW, int NTW, int SUB, int ST>
__global__ void __launch_bounds__((TW + 1) * 32)
    grouped_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       int64_t rows, int64_t N, int64_t K, const int32_t* __restrict__ offs, int G,
                       O* __restrict__ out, int64_t ldo, ColumnScale scale) {
#if __CUDA_ARCH__ >= 900
  constexpr int kTileCols = TW * NTW * 8, kSliceElems = 64 / sizeof(T);
  constexpr uint32_t kABytes = kTileRows * 64, kABoxBytes = kABoxRows * 64,
                     kBBytes = kTileCols * kSliceElems * sizeof(W), kStageBytes = SUB * (kABytes + kBBytes);
  extern __shared__ __align__(128) unsigned char tma_smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(tma_smem + ST * kStageBytes);
  uint64_t* empty = full + ST;
  int64_t n0;
  GroupChunk gc;
  if (!tile_block_chunk(offs, G, rows, N, kTileCols, out, ldo, n0, gc)) return;  // same answer for the whole block
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int st = 0; st < ST; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], TW);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const int64_t slices = (K + kSliceElems - 1) / kSliceElems, stages = (slices + SUB - 1) / SUB;
  const int mtiles = (gc.rows + kABoxRows - 1) / kABoxRows;  // m-tiles of 16 rows, one box each
  // a's rows come in boxes of one m-tile, only those that hold rows of the group: a 64-row
  // box read about twice the rows of an expert's 32 (H200, 512 tokens, against 64-row boxes:
  // bf16 227 -> 217 us, fp8 weights 200 -> 186; H100: bf16 unchanged at 95% of copy)
  if (warp == TW) {  // the producer
    if (lane == 0) {
      tma_prefetch_map(map_a);
      tma_prefetch_map(map_b);
      for (int64_t s = 0; s < stages; ++s) {
        const int st = static_cast<int>(s % ST);
        if (s >= ST) mbar_wait(&empty[st], static_cast<uint32_t>((s / ST - 1) & 1));
        const int subs = static_cast<int>(min64(SUB, slices - s * SUB));
        mbar_arrive_expect_tx(&full[st], subs * (mtiles * kABoxBytes + kBBytes));
        unsigned char* stage = tma_smem + st * kStageBytes;
        for (int u = 0; u < subs; ++u) {
          const int k0 = static_cast<int>((s * SUB + u) * kSliceElems);
          for (int m = 0; m < mtiles; ++m)
            tma_load_2d(stage + u * kABytes + m * kABoxBytes, map_a, k0, static_cast<int>(gc.row0) + m * kABoxRows,
                        &full[st]);
          tma_load_3d(stage + SUB * kABytes + u * kBBytes, map_b, k0, static_cast<int>(n0), gc.g, &full[st]);
        }
      }
    }
    return;
  }
  float c[4][NTW][4] = {};
  for (int64_t s = 0; s < stages; ++s) {
    const int st = static_cast<int>(s % ST);
    mbar_wait(&full[st], static_cast<uint32_t>((s / ST) & 1));
    const int subs = static_cast<int>(min64(SUB, slices - s * SUB));
    const uint4* stage = reinterpret_cast<const uint4*>(tma_smem + st * kStageBytes);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      if (u >= subs) break;
      const uint4* sa = stage + u * (kABytes / 16);
      const uint4* sb = stage + SUB * (kABytes / 16) + u * (kBBytes / 16);
      mma_tile_slice<T, NTW, W>(c, sa, sb, warp, mtiles);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
  }
  store_tile<O, 4, NTW>(c, gc, n0 + warp * NTW * 8, N, out, ldo, scale);
#else
  __trap();  // launchers check the architecture first
#endif
}

// Whether a and b can be described by tensor maps (Hopper, 16-byte aligned rows).
bool fits_tma(const GroupedMmArgs& s) {
  const uint64_t isz = s.a.itemsize(), bsz = s.b.itemsize();
  const uint64_t sa[1] = {static_cast<uint64_t>(s.a.stride(0)) * isz};
  const uint64_t sb[2] = {static_cast<uint64_t>(s.b.stride(2)) * bsz, static_cast<uint64_t>(s.b.stride(0)) * bsz};
  // == 90: only the sm_90a build has the kernel; other cards run the compute_80 PTX
  return device_arch() == 90 && s.a.size(0) < (int64_t{1} << 31) && s.b.size(0) < (int64_t{1} << 31) &&
         tensor_map_fits(s.a.data_ptr(), 2, sa) && tensor_map_fits(s.b.data_ptr(), 3, sb);
}

template <class T, class W, class O, int TW, int NTW, int SUB, int ST>
void launch_grouped_tma(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1), N = s.b.size(2);
  const int G = static_cast<int>(s.offs.size(0));
  constexpr int kTileCols = TW * NTW * 8;
  const uint64_t isz = sizeof(T), bsz = sizeof(W);
  const uint64_t a_dims[2] = {static_cast<uint64_t>(K), static_cast<uint64_t>(rows)};
  const uint64_t a_strides[1] = {static_cast<uint64_t>(s.a.stride(0)) * isz};
  const uint32_t a_box[2] = {64 / sizeof(T), kABoxRows};
  const uint64_t b_dims[3] = {static_cast<uint64_t>(K), static_cast<uint64_t>(N), static_cast<uint64_t>(G)};
  const uint64_t b_strides[2] = {static_cast<uint64_t>(s.b.stride(2)) * bsz, static_cast<uint64_t>(s.b.stride(0)) * bsz};
  const uint32_t b_box[3] = {64 / sizeof(T), kTileCols, 1};  // the same k as a's box
  const CUtensorMap map_a = tensor_map(s.a.dtype(), 2, s.a.data_ptr(), a_dims, a_strides, a_box);
  const CUtensorMap map_b = tensor_map(s.b.dtype(), 3, s.b.data_ptr(), b_dims, b_strides, b_box);
  const int64_t slots = (rows + kTileRows - 1) / kTileRows + std::min<int64_t>(G, rows);
  const int64_t blocks = std::max<int64_t>(slots, 1) * ((N + kTileCols - 1) / kTileCols);
  KILN_CHECK(blocks < (int64_t{1} << 31), "grouped_mm: ", rows, " rows x ", N, " columns is more tiles than one launch takes");
  const auto kernel = grouped_tma_kernel<T, W, O, TW, NTW, SUB, ST>;
  const size_t smem = static_cast<size_t>(ST) * SUB * (kTileRows * 64 + kTileCols * 64 / sizeof(T) * sizeof(W)) +
                      2 * ST * sizeof(uint64_t);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>(blocks), (TW + 1) * 32, smem, current_stream()>>>(
      map_a, map_b, rows, N, K, s.offs.data<int32_t>(), G, s.out.data<O>(), s.out.stride(0), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

// Measured on the H200 (bench.py, 128 experts, 2048 -> 1536): decode (1 token,
// top-8) 20 us with 4 warps x 4 steps in flight. Prefill (512 tokens): 227 us
// (217 with a's boxes of one m-tile) for the TMA kernel with 4 consumer warps x
// 4 column groups, 2 k-steps of 64 B per stage and 4 stages (8 x 2 x 2 x 4: 235
// us; 8 x 4 x 1 x 4: 233 us); 251 us for the cp.async tile kernel, which serves
// where TMA cannot (no sm_90, odd strides); PyTorch's CUTLASS grouped GEMM 260 us.
// Also tried on the TMA kernel: 4 x 4 x 2 x 3 (228 us), x 2 x 6 (255), x 4 x 2
// (226), x 1 x 8 (229), 8 x 4 x 1 x 4 (234). fp8 weights, the same tiles: 200 us.
template <class T, class O>
void grouped_rows_mma(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1);
  const int64_t G = s.offs.size(0);
  if (rows > 8 * G) {  // prefill: about a tile of rows per expert
    if (fits_tma(s)) launch_grouped_tma<T, T, O, 4, 4, 2, 4>(s);
    else launch_grouped_tile<T, O, 8, 2, 2, 3>(s);
  }
  else if (rows <= G) launch_grouped_gemv<T, T, O>(s);    // decode: a row or none per expert
  else if (K * static_cast<int64_t>(sizeof(T)) >= 8 * 4 * 64 * 4) launch_grouped_rows<T, O, 1, 1, 8, 4>(s);
  else launch_grouped_rows<T, O, 1, 1, 4, 4>(s);
}

// The plain kernel: one thread per output element.
template <class T, class W, class O>
__global__ void grouped_generic_kernel(bool k_by_group, int64_t total, int64_t M, int64_t N, int64_t K,
                                       const T* __restrict__ a, int64_t as0, int64_t as1, const W* __restrict__ b,
                                       int64_t bsg, int64_t bsk, int64_t bsn, const int32_t* __restrict__ offs, int G,
                                       O* __restrict__ out, ColumnScale scale) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int64_t n = e % N;
  float acc = 0.0f;
  if (k_by_group) {  // out [G, M, N]; a [M, Ktot], b [Ktot, N]
    const int64_t m = (e / N) % M;
    const int g = static_cast<int>(e / (N * M));
    int64_t k0, k1;
    group_rows(offs, g, K, k0, k1);
    for (int64_t k = k0; k < k1; ++k) acc += static_cast<float>(a[m * as0 + k * as1]) * static_cast<float>(b[k * bsk + n * bsn]);
  } else {  // out [M, N]; a [M, K], b [G, K, N]
    const int64_t r = e / N;
    int lo = 0, hi = G;  // first group whose end passes r
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (offs[mid] > r) hi = mid;
      else lo = mid + 1;
    }
    if (lo < G && (lo == 0 || offs[lo - 1] <= r)) {
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<float>(a[r * as0 + k * as1]) * static_cast<float>(b[lo * bsg + k * bsk + n * bsn]);
      acc *= scale(lo, n);
    }
  }
  out[e] = O(acc);
}

template <class T, class W, class O>
void grouped_generic(const GroupedMmArgs& s) {
  const bool by_k = s.k_by_group();
  const int64_t M = s.a.size(0), K = s.a.size(1), N = by_k ? s.b.size(1) : s.b.size(2);
  const int64_t bsg = by_k ? 0 : s.b.stride(0), bsk = s.b.stride(by_k ? 0 : 1), bsn = s.b.stride(by_k ? 1 : 2);
  const int64_t total = s.out.numel();
  grouped_generic_kernel<T, W, O><<<grid_all(total, 256), 256, 0, current_stream()>>>(
      by_k, total, M, N, K, s.a.data<T>(), s.a.stride(0), s.a.stride(1), s.b.data<W>(), bsg, bsk, bsn,
      s.offs.data<int32_t>(), static_cast<int>(s.offs.size(0)), s.out.data<O>(), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

bool fits_mma(const GroupedMmArgs& s) {
  if (s.k_by_group() || s.a.dtype() == DType::Float32 || device_arch() < 80) return false;
  // a [T, K] and b [G, K, N] both with k contiguous, whole 16-byte chunks of k
  return (s.a.size(1) * static_cast<int64_t>(s.a.itemsize())) % 16 == 0 && rows_vector_aligned(s.a, 1) &&
         rows_vector_aligned(s.b, 1);
}

// fp8 weights [G, K, N] (k contiguous, whole 16-byte chunks) -> T, exactly (every
// e4m3 value is a bfloat16 and a float16): a thread per 16 weights.
template <class T>
__global__ void widen_experts_kernel(const Float8_e4m3fn* __restrict__ b, int64_t bsg, int64_t bsn, int64_t N,
                                     int64_t K, T* __restrict__ out, int64_t vectors) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const int64_t k = v % (K / 16) * 16, n = v / (K / 16) % N, g = v / (K / 16 * N);
  float f[16];
  gemv::widen_pack<Float8_e4m3fn>(*reinterpret_cast<const Pack<Float8_e4m3fn, 16>*>(b + g * bsg + n * bsn + k), f);
  Pack<T, 8> p[2];
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i / 8].v[i % 8] = T(f[i]);
  Pack<T, 8>* dst = reinterpret_cast<Pack<T, 8>*>(out + (g * N + n) * K + k);
  dst[0] = p[0];
  dst[1] = p[1];
}

template <class T, class O>
void grouped_mma_fp8(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), G = s.offs.size(0);
  if (rows <= G) return launch_grouped_gemv<T, Float8_e4m3fn, O>(s);  // decode: reads fp8
  // Prefill on Hopper: the TMA tiles read fp8 and widen it in registers.
  if (rows > 8 * G && fits_tma(s)) return launch_grouped_tma<T, Float8_e4m3fn, O, 4, 4, 2, 4>(s);
  // Elsewhere: the experts widened to T once, then the tensor-core tiles with the scale in their epilogue.
  const int64_t K = s.b.size(1), N = s.b.size(2);
  Tensor wide = Tensor::empty({G, N, K}, s.a.dtype(), s.a.device());
  const int64_t vectors = G * N * K / 16;
  widen_experts_kernel<T><<<grid_all(vectors, 256), 256, 0, current_stream()>>>(
      s.b.data<Float8_e4m3fn>(), s.b.stride(0), s.b.stride(2), N, K, wide.data<T>(), vectors);
  KILN_CUDA_CHECK_LAUNCH();
  GroupedMmArgs widened = s;
  widened.b = wide.transpose(1, 2);
  grouped_rows_mma<T, O>(widened);
}

// Weights W: T, or float8_e4m3fn with s.b_scale.
template <class T, class W, class O>
void grouped_mm_typed(const GroupedMmArgs& s) {
  constexpr bool fp8 = std::is_same_v<W, Float8_e4m3fn>;
  if constexpr (!std::is_same_v<T, float>) {
    if (s.row_index.defined() || s.swiglu || s.combine_pos.defined())
      return launch_grouped_gemv<T, W, O>(s);  // moe_experts' fused decode
    if (fits_mma(s)) {
      if constexpr (fp8) return grouped_mma_fp8<T, O>(s);
      else return grouped_rows_mma<T, O>(s);
    }
  }
  grouped_generic<T, W, O>(s);
}

}  // namespace

void grouped_mm(const GroupedMmArgs& args) {
  detail::dispatch_float(args.a.dtype(), "grouped_mm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool wide = args.out.dtype() == DType::Float32, fp8 = args.b.dtype() == DType::Float8_e4m3fn;
    if (fp8 && wide) grouped_mm_typed<T, Float8_e4m3fn, float>(args);
    else if (fp8) grouped_mm_typed<T, Float8_e4m3fn, T>(args);
    else if (wide) grouped_mm_typed<T, T, float>(args);
    else grouped_mm_typed<T, T, T>(args);
  });
}

}  // namespace kiln::cuda_backend
