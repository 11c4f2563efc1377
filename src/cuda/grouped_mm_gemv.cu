// CUDA grouped_mm for few rows a group (decode): a matrix-vector product per row
// (grouped_gemv_kernel, with moe_experts' gather, SwiGLU and combine fused in
// where asked), and for up to 8 rows a group one 16-row tensor-core tile a block
// (grouped_rows_kernel). Both read the offsets on the device.
#include "core/elementwise_math.h"
#include "cuda/chained_launch.cuh"
#include "cuda/gemv.cuh"
#include "cuda/grouped_mm.cuh"

namespace kiln::cuda_backend {

namespace {

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
// Not faster: the first slot's weights fetched before the chained wait, as an L2
// prefetch or into registers (branch exp/early-down-rotary; H100, Qwen3-30B-A3B
// decode at 128 and 2048 context, two rounds: bf16 296.3-297.8 and 272.2-272.8
// tok/s against 298.9-299.4 without, fp8 407.2-407.6 and 402.0-402.3 against 405.1-405.5).
// NORM (moe_experts_combine_rms_norm): out is the combine plus residual, rounded to T as
// the add's output, and the block also writes that times the norm's weight (scaled)
// and the sum of squares of its columns (sq_parts[t, block]): the 1 / rms that needs
// the whole row is left to the kernel that reads it (pending_rms_norm_linear), so no
// norm kernel has to wait for this one.
template <class T>
struct CombineNorm {
  const T* residual;  // [tokens, N], row stride ldr
  int64_t ldr;
  const T* weight;  // [N]
  T* scaled;        // [tokens, N], out's row stride
  float* sq_parts;  // [tokens, gridDim.x]
};

template <class T, class W, int U, int NPW, bool NORM, int VB = 16>
__global__ void __launch_bounds__(256, std::is_same_v<T, BFloat16> ? 4 : 0)
    grouped_gemv_combine_kernel(const T* __restrict__ a, int64_t lda, const W* __restrict__ b, int64_t ldg,
                                int64_t ldb, int64_t N, int64_t K, int G, const float* __restrict__ comb_w,
                                const int32_t* __restrict__ comb_pos, const int32_t* __restrict__ comb_expert, int k,
                                T* __restrict__ out, int64_t ldo, ColumnScale scale, CombineNorm<T> nrm) {
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
  if (threadIdx.x >= (NORM ? NPW : ncols)) return;  // NORM: all NPW lanes take part in the sum of squares
  const int c = threadIdx.x;
  float sum = 0.0f;
  if (c < ncols)
    for (int j = 0; j < k; ++j) sum = fmaf(part_w[j], part[j][c], sum);
  if constexpr (!NORM) {
    out[t * ldo + n0 + c] = T(sum);
  } else {
    float sq = 0.0f;
    if (c < ncols) {
      const int64_t n = n0 + c;
      const float s = static_cast<float>(T(static_cast<float>(T(sum)) + static_cast<float>(nrm.residual[t * nrm.ldr + n])));
      out[t * ldo + n] = T(s);
      nrm.scaled[t * ldo + n] = T(s * static_cast<float>(nrm.weight[n]));
      sq = s * s;
    }
#pragma unroll
    for (int o = 1; o < NPW; o <<= 1) sq += __shfl_xor_sync((1u << NPW) - 1, sq, o);
    if (c == 0) nrm.sq_parts[t * gridDim.x + blockIdx.x] = sq;
  }
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

// The fused combine's blocks: kCombineCols columns of one token each (so with the
// norm, GroupedMmArgs::kNormPartColumns columns to a part of the sum of squares).
constexpr int kCombineCols = GroupedMmArgs::kNormPartColumns;
constexpr int64_t combine_blocks(int64_t N) { return (N + kCombineCols - 1) / kCombineCols; }

// What a few-rows launch computes: the product (Plain), silu(gate) * up of it
// (Swiglu, GroupedMmArgs::swiglu), or the weighted combine of its rows
// (Combine, GroupedMmArgs::combine_pos).
enum class GemvMode { Plain, Swiglu, Combine };

// NPW: weight rows a warp (Plain), gate and up pairs (Swiglu, at least one of
// each: NPW 1 becomes 2 rows), unused for Combine (kCombineCols columns a block).
template <class T, class W, class O, int U, int NPW, GemvMode M, int VB = 16>
void launch_grouped_gemv_as(const GroupedMmArgs& s) {
  const int64_t N = s.b.size(2), K = s.b.size(1);
  const int G = static_cast<int>(s.offs.size(0));
  if constexpr (M == GemvMode::Combine) {
    const int64_t tokens = s.out.size(0);
    const dim3 grid(static_cast<unsigned>(combine_blocks(N)), static_cast<unsigned>(std::max<int64_t>(tokens, 1)));
    const auto launch = [&](auto kernel, CombineNorm<T> nrm) {
      launch_chained(kernel, grid, 256, 0, s.a.data<T>(), s.a.stride(0), s.b.data<W>(), s.b.stride(0), s.b.stride(2),
                     N, K, G, s.combine_weights.data<float>(), s.combine_pos.data<int32_t>(),
                     s.combine_experts.data<int32_t>(), static_cast<int>(s.combine_pos.size(1)), s.out.data<T>(),
                     s.out.stride(0), column_scale(s), nrm);
    };
    if (s.norm_weight.defined()) {
      KILN_CHECK(s.norm_sq_parts.numel() == tokens * combine_blocks(N),
                 "grouped_gemv: sq_parts holds ", s.norm_sq_parts.numel(), " values for ", tokens, " rows of ",
                 combine_blocks(N), " parts");
      launch(grouped_gemv_combine_kernel<T, W, U, kCombineCols, true, VB>,
             CombineNorm<T>{s.norm_residual.data<T>(), s.norm_residual.stride(0), s.norm_weight.data<T>(),
                            s.norm_scaled.data<T>(), s.norm_sq_parts.data<float>()});
    } else {
      launch(grouped_gemv_combine_kernel<T, W, U, kCombineCols, false, VB>, CombineNorm<T>{});
    }
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

}  // namespace

void grouped_gemv(const GroupedMmArgs& s) {
  dispatch_grouped_half(s, [&](auto t, auto w, auto o) {
    launch_grouped_gemv<typename decltype(t)::type, typename decltype(w)::type, typename decltype(o)::type>(s);
  });
}

void grouped_rows(const GroupedMmArgs& s) {
  dispatch_grouped_half(s, [&](auto t, auto w, auto o) {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    constexpr bool plain_weights = std::is_same_v<typename decltype(w)::type, T>;
    KILN_CHECK(plain_weights, "grouped_rows: fp8 weights go through grouped_gemv or a widened copy");
    if constexpr (plain_weights) {
      if (s.a.size(1) * static_cast<int64_t>(sizeof(T)) >= 8 * 4 * 64 * 4) launch_grouped_rows<T, O, 1, 1, 8, 4>(s);
      else launch_grouped_rows<T, O, 1, 1, 4, 4>(s);
    }
  });
}

}  // namespace kiln::cuda_backend
