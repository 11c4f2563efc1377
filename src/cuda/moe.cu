// CUDA index_select (row gather) and the mixture-of-experts router and combine.
//
// moe_route never waits for the host. A warp per token holds its E scores in
// registers (E / 32 per lane), picks the top k by k warp passes over their rank
// keys (rank_key.cuh: one integer compare a shuffle level; H200, [1,128] top-8 when
// this path took one token too: 3.7 us, where a float-and-index comparison took 9.3-9.8),
// writes weights and experts and takes a rank within its expert; a scan of the
// E counts turns (expert, rank) into a row position, the permutation, and the
// offsets grouped_mm reads. Up to 32 tokens that is one block and one kernel
// (counts in shared memory); past that two kernels after zeroing the counts
// (ranks by atomicAdd on them, then every block scans them). One token (decode)
// has a kernel of its own, an expert a thread (route_one_token_kernel).
#include <cuda_runtime.h>

#include <algorithm>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/chained_launch.cuh"
#include "cuda/common.h"
#include "cuda/rank_key.cuh"
#include "cuda/route_one_token.cuh"

namespace kiln::cuda_backend {

namespace {

constexpr int kMaxExperts = kMaxRouteExperts;

// ---- index_select ----
template <class U, class I>
__global__ void gather_rows_kernel(U* __restrict__ out, const U* __restrict__ in, const I* __restrict__ index,
                                   int64_t R, int64_t S, int64_t units) {
  chain_wait();
  chain_release();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= R * units) return;
  const int64_t r = i / units, u = i % units;
  int64_t src = index[r];
  if (src < 0) src += S;
  if (src < 0 || src >= S) __trap();  // a device-side error, as PyTorch's index assert
  out[i] = in[src * units + u];
}

template <class I>
void gather_rows(const Tensor& out, const Tensor& in, const Tensor& index) {
  const int64_t R = out.size(0), S = in.size(0);
  const int64_t bytes = out.size(1) * static_cast<int64_t>(out.itemsize());
  const uintptr_t align = reinterpret_cast<uintptr_t>(in.data_ptr()) | reinterpret_cast<uintptr_t>(out.data_ptr());
  auto go = [&](auto unit) {
    using U = decltype(unit);
    const int64_t units = bytes / static_cast<int64_t>(sizeof(U));
    launch_chained(gather_rows_kernel<U, I>, grid_all(R * units, 256), 256, 0, static_cast<U*>(out.data_ptr()), static_cast<const U*>(in.data_ptr()), index.data<I>(), R, S, units);
  };
  auto fits = [&](size_t u) { return bytes % static_cast<int64_t>(u) == 0 && align % u == 0; };
  if (fits(16)) go(uint4{});
  else if (fits(8)) go(uint2{});
  else if (fits(4)) go(uint32_t{});
  else if (fits(2)) go(uint16_t{});
  else go(uint8_t{});
  KILN_CUDA_CHECK_LAUNCH();
}

// ---- router ----
// Routes token t (one warp): scores, then the top k by k passes over rank keys. Lane i < k
// returns the i-th choice (its weight, renormalised if asked, and expert) and writes them.
template <class T, int VPL>
__device__ __forceinline__ void route_token(const T* __restrict__ logits, int64_t t, int E, int k, bool sigmoid,
                                            const float* __restrict__ bias, bool renormalize,
                                            float* __restrict__ w_out, int32_t* __restrict__ e_out, float& my_w,
                                            int& my_e) {
  const int lane = threadIdx.x % 32;
  const T* row = logits + t * E;
  const float kNegInf = -INFINITY;
  float p[VPL];
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int e = j * 32 + lane;
    p[j] = e < E ? static_cast<float>(row[e]) : kNegInf;
  }
  if (sigmoid) {
#pragma unroll
    for (int j = 0; j < VPL; ++j) p[j] = 1.0f / (1.0f + expf(-p[j]));
  } else {
    float m = kNegInf, sum = 0.0f;
#pragma unroll
    for (int j = 0; j < VPL; ++j) m = fmaxf(m, p[j]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      p[j] = j * 32 + lane < E ? expf(p[j] - m) : 0.0f;
      sum += p[j];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
#pragma unroll
    for (int j = 0; j < VPL; ++j) p[j] /= sum;
  }
  // the selection's rank keys (NaN scores are chosen last, as on the CPU; ties to the lower expert)
  RankKey key[VPL];
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int e = j * 32 + lane;
    float sel = e < E && bias ? p[j] + bias[e] : p[j];
    if (isnan(sel)) sel = kNegInf;
    key[j] = e < E ? rank_key(sel, static_cast<uint32_t>(e), true) : 0;
  }
  RankKey prev = ~0ull;
  float total = 0.0f;
  my_w = 0.0f;
  my_e = 0;
  for (int i = 0; i < k; ++i) {  // k <= E: every pass finds an expert
    prev = warp_next_key(key, prev);
    const int e = static_cast<int>(key_index(prev)), owner = e % 32, slot = e / 32;
    float pv = 0.0f;
    if (lane == owner) {
#pragma unroll
      for (int j = 0; j < VPL; ++j)
        if (j == slot) pv = p[j];
    }
    pv = __shfl_sync(0xffffffffu, pv, owner);
    total += pv;
    if (lane == i) {
      my_w = pv;
      my_e = e;
    }
  }
  if (lane < k) {
    if (renormalize && total > 0.0f) my_w /= total;
    w_out[t * k + lane] = my_w;
    e_out[t * k + lane] = my_e;
  }
}

// The first row of each expert (start[e], e < E) and, where offs is given, the
// end of each (offs[e]), from c = the count of expert threadIdx.x. A block of at
// least E threads, a whole number of warps; all of them call it.
__device__ __forceinline__ void expert_starts(int32_t c, int E, int32_t* start, int32_t* __restrict__ offs) {
  __shared__ int32_t warp_total[kMaxExperts / 32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int32_t incl = c;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < static_cast<int>(blockDim.x / 32) ? warp_total[lane] : 0, wi = w;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += v;
    }
    warp_total[lane] = wi - w;  // exclusive prefix of the warps
  }
  __syncthreads();
  incl += warp_total[warp];
  if (tid < E) {
    start[tid] = incl - c;
    if (offs) offs[tid] = incl;
  }
  __syncthreads();
}

// Many tokens: a warp per token; the rank within its expert from atomicAdd on counts.
template <class T, int VPL>
__global__ void route_kernel(const T* __restrict__ logits, int64_t tokens, int E, int k, bool sigmoid,
                             const float* __restrict__ bias, bool renormalize, float* __restrict__ w_out,
                             int32_t* __restrict__ e_out, int32_t* __restrict__ rank_out,
                             int32_t* __restrict__ counts) {
  chain_wait();
  chain_release();
  const int64_t t = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (t >= tokens) return;  // the whole warp
  float my_w;
  int my_e;
  route_token<T, VPL>(logits, t, E, k, sigmoid, bias, renormalize, w_out, e_out, my_w, my_e);
  if (lane < k) rank_out[t * k + lane] = atomicAdd(&counts[my_e], 1);
}

// rank (in sorted_pos) -> row position; token_of; block 0 writes offs.
__global__ void __launch_bounds__(kMaxExperts)
    place_kernel(const int32_t* __restrict__ counts, int E, const int32_t* __restrict__ experts, int64_t n, int k,
                 int32_t* __restrict__ offs, int32_t* __restrict__ sorted_pos, int32_t* __restrict__ token_of) {
  __shared__ int32_t start[kMaxExperts];
  chain_wait();
  chain_release();
  const int tid = threadIdx.x;
  expert_starts(tid < E ? counts[tid] : 0, E, start, blockIdx.x == 0 ? offs : nullptr);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + tid;
  if (i < n) {
    const int32_t pos = start[experts[i]] + sorted_pos[i];
    sorted_pos[i] = pos;
    token_of[pos] = static_cast<int32_t>(i / k);
  }
}

// Up to kMaxExperts / 32 tokens: the whole routing in one block. A warp
// per token, the counts in shared memory, then the scan and the placement, so a
// decode step has one link here instead of three (zeroing, routing, placing).
// The block has as many threads as the experts or the tokens' warps need, not
// kMaxExperts: fewer warps at each barrier.
template <class T, int VPL>
__global__ void __launch_bounds__(kMaxExperts)
    route_place_kernel(const T* __restrict__ logits, int tokens, int E, int k, bool sigmoid,
                       const float* __restrict__ bias, bool renormalize, float* __restrict__ w_out,
                       int32_t* __restrict__ e_out, int32_t* __restrict__ offs, int32_t* __restrict__ sorted_pos,
                       int32_t* __restrict__ token_of) {
  __shared__ int32_t counts[kMaxExperts], start[kMaxExperts];
  chain_wait();
  chain_release();
  const int tid = threadIdx.x, lane = tid % 32, t = tid / 32;
  counts[tid] = 0;
  __syncthreads();
  float my_w;
  int my_e = 0, rank = 0;
  if (t < tokens) {
    route_token<T, VPL>(logits, t, E, k, sigmoid, bias, renormalize, w_out, e_out, my_w, my_e);
    if (lane < k) rank = atomicAdd(&counts[my_e], 1);
  }
  __syncthreads();
  expert_starts(counts[tid], E, start, offs);
  if (t < tokens && lane < k) {
    const int32_t pos = start[my_e] + rank;
    sorted_pos[t * k + lane] = pos;
    token_of[pos] = t;
  }
}

// One token (a decode step): route_one_token.cuh, an expert a thread.
// H100: bench.py [1,128] top-8 2.5 us against 3.6 for route_place_kernel (a warp's
// 8 passes); Qwen3-30B-A3B decode at 128 context, A/B in one run, bf16 296.8-300.7
// against 293.9-296.3 tok/s, fp8 416.0-417.8 against 405.6-413.3.
template <class T>
__global__ void __launch_bounds__(kMaxExperts)
    route_one_token_kernel(const T* __restrict__ logits, int E, int k, bool sigmoid, const float* __restrict__ bias,
                           bool renormalize, float* __restrict__ w_out, int32_t* __restrict__ e_out,
                           int32_t* __restrict__ offs, int32_t* __restrict__ sorted_pos,
                           int32_t* __restrict__ token_of) {
  __shared__ __align__(16) RouteOneTokenSmem smem;
  chain_wait();
  chain_release();
  const int e = threadIdx.x;
  route_one_token(e < E ? static_cast<float>(logits[e]) : 0.0f, E, k, sigmoid, bias, renormalize, w_out, e_out,
                  offs, sorted_pos, token_of, smem);
}

template <class T>
void route_typed(const MoeRouteArgs& a) {
  const int64_t tokens = a.logits.size(0);
  const int E = static_cast<int>(a.logits.size(1)), k = static_cast<int>(a.k);
  const bool one_block = tokens <= kMaxExperts / 32;
  Tensor counts;
  if (!one_block) {
    counts = Tensor::empty({E}, DType::Int32, a.logits.device());
    counts.zero_();
  }
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  if (tokens == 1) {
    const int threads = (E + 31) / 32 * 32;  // <= kMaxExperts
    launch_chained(route_one_token_kernel<T>, 1, threads, 0, a.logits.data<T>(), E, k, a.sigmoid,
                   bias, a.renormalize, a.r.weights.data<float>(), a.r.experts.data<int32_t>(),
                   a.r.offs.data<int32_t>(), a.r.sorted_pos.data<int32_t>(), a.r.token_of.data<int32_t>());
    return;
  }
  auto go = [&](auto vpl) {
    constexpr int V = decltype(vpl)::value;
    if (one_block) {
      const int threads = static_cast<int>(std::max<int64_t>((E + 31) / 32, tokens) * 32);  // <= kMaxExperts
      launch_chained(route_place_kernel<T, V>, 1, threads, 0, a.logits.data<T>(), static_cast<int>(tokens), E, k,
                     a.sigmoid, bias, a.renormalize, a.r.weights.data<float>(), a.r.experts.data<int32_t>(),
                     a.r.offs.data<int32_t>(), a.r.sorted_pos.data<int32_t>(), a.r.token_of.data<int32_t>());
    } else {
      launch_chained(route_kernel<T, V>, static_cast<unsigned>((tokens + 3) / 4), 128, 0, a.logits.data<T>(), tokens,
                     E, k, a.sigmoid, bias, a.renormalize, a.r.weights.data<float>(), a.r.experts.data<int32_t>(),
                     a.r.sorted_pos.data<int32_t>(), counts.data<int32_t>());
    }
  };
  const int vpl = (E + 31) / 32;
  if (vpl <= 1) go(std::integral_constant<int, 1>{});
  else if (vpl <= 2) go(std::integral_constant<int, 2>{});
  else if (vpl <= 4) go(std::integral_constant<int, 4>{});
  else if (vpl <= 8) go(std::integral_constant<int, 8>{});
  else if (vpl <= 16) go(std::integral_constant<int, 16>{});
  else go(std::integral_constant<int, 32>{});
  if (one_block) return;
  const int64_t n = tokens * k;
  launch_chained(place_kernel, static_cast<unsigned>((n + kMaxExperts - 1) / kMaxExperts), kMaxExperts, 0,
                 counts.data<int32_t>(), E, a.r.experts.data<int32_t>(), n, k, a.r.offs.data<int32_t>(),
                 a.r.sorted_pos.data<int32_t>(), a.r.token_of.data<int32_t>());
}

// ---- combine ----
template <class T>
__global__ void combine_kernel(T* __restrict__ out, const T* __restrict__ y, const float* __restrict__ w,
                               const int32_t* __restrict__ pos, int64_t tokens, int64_t N, int k) {
  chain_wait();
  chain_release();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * N) return;
  const int64_t t = i / N, n = i % N;
  float acc = 0.0f;
  // one rounding a term (fmaf), as the combine fused into the down projection (grouped_mm_gemv.cu)
  for (int j = 0; j < k; ++j) acc = fmaf(w[t * k + j], static_cast<float>(y[static_cast<int64_t>(pos[t * k + j]) * N + n]), acc);
  out[i] = T(acc);
}

}  // namespace

void index_select_rows(const Tensor& out, const Tensor& in, const Tensor& index) {
  if (index.dtype() == DType::Int32) gather_rows<int32_t>(out, in, index);
  else gather_rows<int64_t>(out, in, index);
}

void moe_route(const MoeRouteArgs& args) {
  detail::dispatch_float(args.logits.dtype(), "moe_route", [&](auto tag) { route_typed<typename decltype(tag)::type>(args); });
}

void moe_combine(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos) {
  detail::dispatch_float(y.dtype(), "moe_combine", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t tokens = out.size(0), N = out.size(1);
    launch_chained(combine_kernel<T>, grid_all(tokens * N, 256), 256, 0, out.data<T>(), y.data<T>(), weights.data<float>(), sorted_pos.data<int32_t>(), tokens, N,
        static_cast<int>(weights.size(1)));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda_backend
