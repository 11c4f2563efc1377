// CUDA few-rows linear (decode): out[r, n] = sum_k x[r, k] * w[n, k] * scale + bias.
//
// Written for memory bandwidth, as ggml-cuda's decode kernels: WPR warps share
// one output row (more when there are few rows, so every SM has work), each
// lane streams 16-byte weight vectors with several in flight, the few
// input rows are read through L1, partial sums meet in registers (shuffles) and
// then shared memory; bias and the fp8 dequantisation scale are applied once.
#include "core/backend.h"
#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/chained_launch.cuh"
#include "cuda/cp_async.cuh"
#include "cuda/gemv.cuh"
#include "kiln/ops.h"
#include "ops/linear.h"

namespace kiln::cuda_backend {

namespace {

using gemv::dot_step;

constexpr int kWarps = 8;  // per block

// How a one-row product takes an RMSNorm: none; fused in front (rms_norm_linear); or
// pending, x already the row times the norm's weight (pending_rms_norm_linear).
enum class RowNorm { None, Fused, Pending };

// The RMSNorm of a one-row product; see LinearArgs.
template <class X>
struct NormIn {
  const X* residual;  // Fused: or null, the row is x itself
  const X* weight;    // Fused: [K]
  X* residual_out;    // Fused: x + residual, written by block 0 (null without a residual)
  X* normed_out;      // Fused: the normalised row, written by block 0 (or null)
  const float* sq_parts;  // Pending: the row's partial sums of squares
  int parts;
  float eps;
};

// V floats to x's dtype at p, as 16-byte stores.
template <class X, int V>
__device__ __forceinline__ void store_x(X* p, const float* f) {
  constexpr int XV = 16 / sizeof(X);
#pragma unroll
  for (int j = 0; j < V / XV; ++j) {
    Pack<X, XV> q;
#pragma unroll
    for (int i = 0; i < XV; ++i) q.v[i] = X(f[j * XV + i]);
    reinterpret_cast<Pack<X, XV>*>(p)[j] = q;
  }
}

// The row at k as the norm sees it: x + residual rounded to X (as the add's output),
// or x; the writer stores the sum.
template <class X, int V>
__device__ __forceinline__ void norm_row_values(const X* x, const NormIn<X>& nrm, int64_t k, bool writer, float* s) {
  gemv::load_x<X, V>(x + k, s);
  if (nrm.residual) {
    float r[V];
    gemv::load_x<X, V>(nrm.residual + k, r);
#pragma unroll
    for (int i = 0; i < V; ++i) s[i] = static_cast<float>(X(s[i] + r[i]));
    if (writer) store_x<X, V>(nrm.residual_out + k, s);
  }
}

// WPR warps split K for NPW adjacent output rows; a block covers
// kWarps / WPR * NPW output rows. SWIGLU (linear_silu_and_mul): N is H, the
// output's width, and a warp's weight rows are NPW / 2 gate rows n.. and the up
// rows H past them; it writes silu(gate) * up, each rounded to X first as the
// product is before silu_and_mul. (No [R, 2H] product, no silu kernel after it: H100,
// bench.py, 1x4096 -> 2x12288 65.4 us against torch's linear and silu * up 71.9, 1x1024
// -> 2x3072 3.2 against 7.9; Qwen3-8B decode 179.8-180.8 tok/s against 179.3-179.5 with
// the product and silu_and_mul, alternated in one run.)
// NORM (R = 1): the product is of rms_norm(x + residual) (NormIn). Each block first
// makes the row times the norm's weight, in float32, in shared memory (K floats of
// dynamic shared memory) and the row's sum of squares; the 1 / rms factor goes on the
// finished dot products. (Each warp reading x, the residual and the weight itself, as
// it reads x without the norm, tripled the loads from L2: H100, Qwen3-30B-A3B bf16
// decode with the norms before q|k|v, the router and lm_head fused, 269 against 294
// tok/s, q|k|v 18.7 us against 4.8 plus 3.6 for the norm. This way, 291 against 298:
// still slower for the wide projections, see qwen3.cpp; faster for the router.)
// PENDING (R = 1): x is already the row times the norm's weight; the block copies the
// partial sums of squares into shared memory (cp.async, no registers held) right after
// the wait, and after the products every warp sums them (each in the same order) for the
// 1 / rms that goes on its dot products as for NORM. (Summed from global memory right
// after the wait instead, their loads and adds ahead of the first products: H100, in one
// run, Qwen3-30B-A3B decode at 128 / 2048 context, bf16 296.7-298.2 / 303.5-304.7 tok/s
// against 299.0-302.2 / 305.2-307.8 this way; bench.py's experts + norm -> q|k|v pair
// 40.7 against 40.1 us.)
template <class X, class W, int R, int WPR, int NPW, bool SWIGLU, RowNorm RN>
__global__ void __launch_bounds__(kWarps * 32) linear_rows_kernel(int64_t N, int64_t K, int rows,
                                                                 const X* __restrict__ x, int64_t xs,
                                                                 const W* __restrict__ w, int64_t ws,
                                                                 const float* __restrict__ scale, bool per_row,
                                                                 const X* __restrict__ bias, X* __restrict__ out,
                                                                 int64_t os, NormIn<X> nrm) {
  constexpr bool NORM = RN == RowNorm::Fused;
  static_assert(RN == RowNorm::None || R == 1, "linear_rows_kernel: a norm takes one row");
  constexpr int V = 16 / sizeof(W);
  // k-steps in flight. 8 for one-row warps was slower: H100, in one run, Qwen3-8B decode 165.1
  // against 174.5 tok/s, Qwen3-30B-A3B bf16 289.6 against 299.1.
  constexpr int U = NPW == 1 ? 4 : 2;
  static_assert(!SWIGLU || NPW % 2 == 0, "linear_rows_kernel: SWIGLU pairs gate and up rows");
  constexpr int kOut = SWIGLU ? NPW / 2 : NPW;  // output columns of a warp
  constexpr int kRowsPerBlock = kWarps / WPR * kOut;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (warp / WPR) * kOut;
  const int part = warp % WPR;
  constexpr int64_t kStep = static_cast<int64_t>(WPR) * 32 * V;
  const W* wr[NPW];
#pragma unroll
  for (int j = 0; j < kOut; ++j) {
    wr[j] = w + ::min(n0 + j, N - 1) * ws;  // past N: a repeated row, not written
    if constexpr (SWIGLU) wr[kOut + j] = wr[j] + N * ws;
  }
  // The weights are constants: one-row kernels load the first U steps' vectors into registers and
  // send the next U steps' towards L2 (more rows: the first U steps' to L2; holding them would cost
  // blocks an SM), while the kernel before this one (a chained launch) finishes writing x. H100, in
  // one run against the same loads after the wait: Qwen3-30B-A3B decode bf16 285.5-288.4 ->
  // 299.0-303.4 tok/s, fp8 399.1-400.6 -> 411.9-415.8, Qwen3-8B 175.0-176.5 -> 179.8-179.9;
  // 1x4096 -> 4096 7.2 -> 6.6 us, 1x2048 -> 4096 4.5 -> 3.7 (bf16: 54 registers instead of 32,
  // 4 blocks an SM still fit). Whole rows asked for at once instead (one cp.async.bulk.prefetch.L2
  // a row, branch exp/prefetch-all) were slower: H100, in one run, Qwen3-8B decode 139.2 against
  // 173.9-175.0 tok/s, Qwen3-30B-A3B bf16 287-290 against 296-298.
  const int64_t k0 = (static_cast<int64_t>(part) * 32 + lane) * V;
  constexpr bool kPeel = R == 1;
  const bool first_full = kPeel && n0 < N && k0 + (U - 1) * kStep < K;  // the first U steps, all within K
  Pack<W, V> p0[U][NPW];
  const auto load_steps = [&](Pack<W, V>(&p)[U][NPW], int64_t k) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NPW; ++j) p[u][j] = *reinterpret_cast<const Pack<W, V>*>(wr[j] + k + u * kStep);
  };
  if (first_full) load_steps(p0, k0);
  if (n0 < N)
#pragma unroll
    for (int u = kPeel ? U : 0; u < (kPeel ? 2 * U : U); ++u)
#pragma unroll
      for (int j = 0; j < NPW; ++j)
        if (k0 + u * kStep < K) prefetch_l2(wr[j] + k0 + u * kStep);
  chain_wait();
  chain_release();
  float acc[R][NPW];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NPW; ++j) acc[r][j] = 0.0f;
  extern __shared__ float4 norm_smem[];
  // NORM: [K] the row times the norm's weight; PENDING: [parts] the partial sums of squares
  float* const scaled = reinterpret_cast<float*>(norm_smem);
  float inv = 1.0f;                                            // NORM, PENDING: 1 / rms of the row
  if constexpr (NORM) {
    __shared__ float ss_warp[kWarps];
    constexpr int XV = 16 / sizeof(X);
    float ss = 0.0f;
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * XV; i < K; i += kWarps * 32 * XV) {
      float v[XV], g[XV];
      norm_row_values<X, XV>(x, nrm, i, blockIdx.x == 0, v);  // block 0 writes the sum
      gemv::load_x<X, XV>(nrm.weight + i, g);
#pragma unroll
      for (int e = 0; e < XV; ++e) {
        ss = fmaf(v[e], v[e], ss);
        scaled[i + e] = v[e] * g[e];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) ss_warp[warp] = ss;
    __syncthreads();
    ss = 0.0f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) ss += ss_warp[q];
    inv = rsqrtf(ss / static_cast<float>(K) + nrm.eps);
  }
  if constexpr (RN == RowNorm::Pending) {  // the parts on their way to shared memory; summed after the products
    for (int i = threadIdx.x; i < nrm.parts; i += kWarps * 32) cp_async4(scaled + i, nrm.sq_parts + i);
    cp_async_commit();
  }
  const auto step = [&](const Pack<W, V>(&p)[NPW], int64_t k) {
    if constexpr (NORM) dot_step<float, W, R, NPW, V>(p, scaled + k, 0, rows, acc);
    else dot_step<X, W, R, NPW, V>(p, x + k, xs, rows, acc);
  };
  if (n0 < N) {
    int64_t k = k0;
    if (first_full) {
#pragma unroll
      for (int u = 0; u < U; ++u) step(p0[u], k + u * kStep);
      k += U * kStep;
    }
    for (; k + (U - 1) * kStep < K; k += U * kStep) {
      Pack<W, V> p[U][NPW];
      load_steps(p, k);
#pragma unroll
      for (int u = 0; u < U; ++u) step(p[u], k + u * kStep);
    }
    for (; k < K; k += kStep) {
      Pack<W, V> p[NPW];
#pragma unroll
      for (int j = 0; j < NPW; ++j) p[j] = *reinterpret_cast<const Pack<W, V>*>(wr[j] + k);
      step(p, k);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NPW; ++j)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[r][j] += __shfl_down_sync(0xffffffffu, acc[r][j], o);
  if constexpr (RN == RowNorm::Pending) {
    cp_async_wait<0>();
    __syncthreads();
    float ss = 0.0f;
    for (int i = lane; i < nrm.parts; i += 32) ss += scaled[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    inv = rsqrtf(ss / static_cast<float>(K) + nrm.eps);
  }
  if constexpr (NORM) {
    constexpr int XV = 16 / sizeof(X);
    // the normalised row for the ops after this one: the row times the weight (each thread's
    // own elements of `scaled`, as it wrote them) times 1 / rms, rounded to X
    if (blockIdx.x == 0 && nrm.normed_out)
      for (int64_t i = static_cast<int64_t>(threadIdx.x) * XV; i < K; i += kWarps * 32 * XV) {
        float v[XV];
#pragma unroll
        for (int e = 0; e < XV; ++e) v[e] = scaled[i + e] * inv;
        store_x<X, XV>(nrm.normed_out + i, v);
      }
  }
  if constexpr (WPR > 1) {
    __shared__ float parts[kWarps][R][NPW];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < NPW; ++j) parts[warp][r][j] = acc[r][j];
    __syncthreads();
    if (part != 0 || lane != 0) return;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NPW; ++j)
#pragma unroll
        for (int q = 1; q < WPR; ++q) acc[r][j] += parts[warp + q][r][j];
  }
  if (lane != 0) return;
#pragma unroll
  for (int j = 0; j < kOut; ++j) {
    const int64_t n = n0 + j;
    if (n >= N) break;
    // weight row m's product, rounded to X as linear's output
    const auto product = [&](int r, int i, int64_t m) {
      return X(acc[r][i] * inv * (scale ? scale[per_row ? m : 0] : 1.0f) + (bias ? static_cast<float>(bias[m]) : 0.0f));
    };
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= rows) continue;
      if constexpr (SWIGLU)
        out[r * os + n] =
            X(math::silu_mul(static_cast<float>(product(r, j, n)), static_cast<float>(product(r, kOut + j, n + N))));
      else
        out[r * os + n] = product(r, j, n);
    }
  }
}

template <class X, class W, int R, bool SWIGLU, RowNorm RN>
void launch_rows(const LinearArgs& a) {
  constexpr bool NORM = RN == RowNorm::Fused;
  const int64_t N = a.out.size(1), K = a.weight.size(1);  // N: output columns (SWIGLU: half the weight's rows)
  constexpr int V = 16 / sizeof(W);
  // several input rows: share each input load across 4 weight rows; SWIGLU: a gate and an up row at least
  constexpr int NPW = R == 1 ? (SWIGLU ? 2 : 1) : 4, kOut = SWIGLU ? NPW / 2 : NPW;
  // Enough warps per row that about two blocks per SM run; no more than the row can feed.
  const int64_t target_warps = static_cast<int64_t>(sm_count()) * 2 * kWarps;
  const int64_t units = (N + kOut - 1) / kOut;
  int wpr = 1;
  while (wpr < kWarps && units * wpr < target_warps && K >= static_cast<int64_t>(wpr) * 2 * 32 * V * 2) wpr *= 2;
  const float* scale = a.scale.defined() ? a.scale.data<float>() : nullptr;
  const bool per_row = a.per_row_scale();
  const X* bias = a.bias.defined() ? a.bias.data<X>() : nullptr;
  const int rows = static_cast<int>(a.x.size(0));
  NormIn<X> nrm{nullptr, nullptr, nullptr, nullptr, nullptr, 0, a.eps};
  if constexpr (RN == RowNorm::Pending) {
    KILN_CHECK(a.sq_parts.numel() <= LinearArgs::kMaxNormFloats, "linear_rows: at most ", LinearArgs::kMaxNormFloats,
               " partial sums of squares (48 KB of shared memory), got ", a.sq_parts.numel());
    nrm.sq_parts = a.sq_parts.data<float>();
    nrm.parts = static_cast<int>(a.sq_parts.numel());
  }
  if constexpr (NORM) {
    nrm.weight = a.norm_weight.data<X>();
    if (a.residual.defined()) nrm.residual = a.residual.data<X>(), nrm.residual_out = a.residual_out.data<X>();
    if (a.normed_out.defined()) nrm.normed_out = a.normed_out.data<X>();
  }
  auto go = [&](auto wpr_c) {
    constexpr int P = decltype(wpr_c)::value;
    constexpr int per_block = kWarps / P * kOut;
    const unsigned blocks = static_cast<unsigned>((N + per_block - 1) / per_block);
    launch_chained(linear_rows_kernel<X, W, R, P, NPW, SWIGLU, RN>, blocks, kWarps * 32,
                   NORM ? static_cast<size_t>(K) * sizeof(float)
                   : RN == RowNorm::Pending ? static_cast<size_t>(nrm.parts) * sizeof(float) : 0, N, K, rows,
                   a.x.data<X>(), a.x.stride(0), a.weight.data<W>(), a.weight.stride(0), scale, per_row, bias,
                   a.out.data<X>(), a.out.stride(0), nrm);
  };
  switch (wpr) {
    case 1: go(std::integral_constant<int, 1>{}); break;
    case 2: go(std::integral_constant<int, 2>{}); break;
    case 4: go(std::integral_constant<int, 4>{}); break;
    default: go(std::integral_constant<int, 8>{}); break;
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <class X, class W, bool SWIGLU>
void linear_typed(const LinearArgs& a) {
  const int64_t rows = a.x.size(0);
  if (a.norm() || a.pending_norm()) {
    KILN_CHECK(rows == 1, "linear_rows: an RMSNorm takes one row, got ", rows);
    if (a.norm()) launch_rows<X, W, 1, SWIGLU, RowNorm::Fused>(a);
    else launch_rows<X, W, 1, SWIGLU, RowNorm::Pending>(a);
  } else if (rows == 1) {
    launch_rows<X, W, 1, SWIGLU, RowNorm::None>(a);
  } else if (rows == 2) {
    launch_rows<X, W, 2, SWIGLU, RowNorm::None>(a);
  } else if (rows <= 4) {
    launch_rows<X, W, 4, SWIGLU, RowNorm::None>(a);
  } else {
    launch_rows<X, W, 8, SWIGLU, RowNorm::None>(a);
  }
}

template <class X, class W>
void linear_typed(const LinearArgs& a) {
  if (a.swiglu) linear_typed<X, W, true>(a);
  else linear_typed<X, W, false>(a);
}

}  // namespace

void linear_rows(const LinearArgs& args) {
  const bool aligned = vector_rows(args);
  KILN_CHECK(args.x.size(0) <= 8, "linear_rows: at most 8 rows, got ", args.x.size(0));
  KILN_CHECK(aligned || !(args.norm() || args.pending_norm()),
             "linear_rows: an RMSNorm needs 16-byte rows (rms_norm_linear and pending_rms_norm_linear check)");
  if (!aligned) {
    // Vector loads need 16-byte rows: an odd K or offset view goes the GEMM way.
    const Tensor product = linear_gemm(args.x, args.weight, args.scale, args.bias);
    args.out.copy_(args.swiglu ? silu_and_mul(product) : product);
    return;
  }
  detail::dispatch_float(args.x.dtype(), "linear", [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    if (args.weight.dtype() == DType::Float8_e4m3fn) linear_typed<X, Float8_e4m3fn>(args);
    else linear_typed<X, X>(args);
  });
}

}  // namespace kiln::cuda_backend
