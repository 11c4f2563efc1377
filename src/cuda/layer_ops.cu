// CUDA rms_norm (with the fused residual add), layer_norm, silu_and_mul,
// rotary embedding and the fused q/k norm + rotary + KV cache write. Decode-sized rows: the norms are a block per row (one read for the
// sum of squares, the second from L1/L2), the others one thread per output.
#include <cuda_runtime.h>

#include <initializer_list>

#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/common.h"
#include "cuda/head_rotation.cuh"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

constexpr int kRowThreads = 256;

// The values rms_norm_kernel normalises: a row of x, or (CombinedRows) the MoE
// combine of expert outputs, sum_j w[r, j] * y[pos[r, j]], rounded to T as
// moe_combine's output would be.
template <class T>
struct PlainRows {
  const T* x;
  int64_t N;
  __device__ __forceinline__ float operator()(int64_t r, int64_t i) const { return static_cast<float>(x[r * N + i]); }
};
template <class T>
struct CombinedRows {
  const T* y;
  const float* w;
  const int32_t* pos;
  int k;
  int64_t N;
  __device__ __forceinline__ float operator()(int64_t r, int64_t i) const {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc += w[r * k + j] * static_cast<float>(y[static_cast<int64_t>(pos[r * k + j]) * N + i]);
    return static_cast<float>(T(acc));
  }
};

template <class T, class Src>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(T* __restrict__ out, Src x, const T* __restrict__ residual, T* __restrict__ residual_out,
                    const T* __restrict__ w, int64_t N, float eps) {
  __shared__ float partial[kRowThreads / 32];
  chain_wait();
  chain_release();
  const int64_t r = blockIdx.x;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {
    float v = x(r, i);
    if (residual) {
      const T s = T(v + static_cast<float>(residual[r * N + i]));  // rounded, as x + residual would be
      residual_out[r * N + i] = s;
      v = static_cast<float>(s);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_reduce(ss, SumOp{}, partial) / static_cast<float>(N) + eps);
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {  // each thread rereads what it wrote (or recomputes)
    const float v = residual ? static_cast<float>(residual_out[r * N + i]) : x(r, i);
    out[r * N + i] = T(v * inv * (w ? static_cast<float>(w[i]) : 1.0f));
  }
}

// rms_norm of rows of at most kRowThreads * V * kNormChunks elements, V = 16 bytes
// of T: each thread holds its kNormChunks vectors in registers, so every load of
// the row (x or, with COMBINE, the k expert rows of moe_combine; the residual; the
// weight, which is read before the chained wait) is in flight at once. A decode
// step runs two of these per layer on a 2048-wide row, where the scalar loop's
// serial loads took 3 us (H200).
constexpr int kNormChunks = 4;

template <class T, bool COMBINE>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_vec_kernel(T* __restrict__ out, const T* __restrict__ x, const float* __restrict__ comb_w,
                        const int32_t* __restrict__ comb_pos, int k, const T* __restrict__ residual,
                        T* __restrict__ residual_out, const T* __restrict__ w, int64_t N, float eps) {
  constexpr int V = 16 / sizeof(T);
  using P = Pack<T, V>;
  __shared__ float partial[kRowThreads / 32];
  __shared__ float row_w[32];
  __shared__ int32_t row_pos[32];
  const int64_t r = blockIdx.x;
  const auto index = [&](int c) { return (static_cast<int64_t>(c) * kRowThreads + threadIdx.x) * V; };
  P wp[kNormChunks];
#pragma unroll
  for (int c = 0; c < kNormChunks; ++c)
    if (w && index(c) < N) wp[c] = *reinterpret_cast<const P*>(w + index(c));  // a constant: before the wait
  chain_wait();
  chain_release();
  if constexpr (COMBINE) {
    if (threadIdx.x < k) {
      row_w[threadIdx.x] = comb_w[r * k + threadIdx.x];
      row_pos[threadIdx.x] = comb_pos[r * k + threadIdx.x];
    }
    __syncthreads();
  }
  float v[kNormChunks][V];
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < kNormChunks; ++c) {
    const int64_t i = index(c);
    if (i >= N) continue;
    P res;
    if (residual) res = *reinterpret_cast<const P*>(residual + r * N + i);
    if constexpr (COMBINE) {
      float acc[V] = {};
#pragma unroll 8
      for (int j = 0; j < k; ++j) {
        const P y = *reinterpret_cast<const P*>(x + static_cast<int64_t>(row_pos[j]) * N + i);
        const float wj = row_w[j];
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] = fmaf(wj, static_cast<float>(y.v[e]), acc[e]);  // as moe_combine
      }
#pragma unroll
      for (int e = 0; e < V; ++e) v[c][e] = static_cast<float>(T(acc[e]));  // rounded, as moe_combine's output
    } else {
      const P xp = *reinterpret_cast<const P*>(x + r * N + i);
#pragma unroll
      for (int e = 0; e < V; ++e) v[c][e] = static_cast<float>(xp.v[e]);
    }
    if (residual) {
      P sum;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        sum.v[e] = T(v[c][e] + static_cast<float>(res.v[e]));  // rounded, as x + residual would be
        v[c][e] = static_cast<float>(sum.v[e]);
      }
      *reinterpret_cast<P*>(residual_out + r * N + i) = sum;
    }
#pragma unroll
    for (int e = 0; e < V; ++e) ss += v[c][e] * v[c][e];
  }
  const float inv = rsqrtf(block_reduce(ss, SumOp{}, partial) / static_cast<float>(N) + eps);
#pragma unroll
  for (int c = 0; c < kNormChunks; ++c) {
    const int64_t i = index(c);
    if (i >= N) continue;
    P o;
#pragma unroll
    for (int e = 0; e < V; ++e) o.v[e] = T(v[c][e] * inv * (w ? static_cast<float>(wp[c].v[e]) : 1.0f));
    *reinterpret_cast<P*>(out + r * N + i) = o;
  }
}

// Whether rms_norm_vec_kernel takes rows of N elements of T at these pointers.
template <class T>
bool norm_vec_ok(int64_t N, std::initializer_list<const void*> ptrs) {
  constexpr int64_t V = 16 / sizeof(T);
  bool ok = N % V == 0 && N <= kRowThreads * V * kNormChunks;
  for (const void* p : ptrs) ok = ok && aligned16(p);
  return ok;
}

// A block per row, three passes (mean, variance about it, output); the second
// and third read the row from L1/L2.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    layer_norm_kernel(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                      int64_t N, float eps) {
  __shared__ float scratch[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * N;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) s += static_cast<float>(xr[i]);
  const float mean = block_reduce(s, SumOp{}, scratch) / static_cast<float>(N);
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {
    const float d = static_cast<float>(xr[i]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(block_reduce(sq, SumOp{}, scratch) / static_cast<float>(N) + eps);
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {
    const float y = (static_cast<float>(xr[i]) - mean) * inv;
    out[r * N + i] = T(y * (w ? static_cast<float>(w[i]) : 1.0f) + (b ? static_cast<float>(b[i]) : 0.0f));
  }
}

template <class T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t M, int64_t H) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= M * H) return;
  const int64_t r = e / H, i = e % H;
  const float g = static_cast<float>(x[r * 2 * H + i]), u = static_cast<float>(x[r * 2 * H + H + i]);
  out[e] = T(math::silu_mul(g, u));
}

template <class T>
__global__ void rotary_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t xs0, int64_t xs1,
                              const float* __restrict__ cosv, const float* __restrict__ sinv, int64_t Tn, int64_t H,
                              int64_t D, int64_t half, bool interleaved) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= Tn * H * D) return;
  const int64_t j = e % D, h = (e / D) % H, t = e / (D * H);
  const T* xr = x + t * xs0 + h * xs1;
  float v = static_cast<float>(xr[j]);
  if (j < 2 * half) {
    // j's pair partner p and frequency i; the first of a pair gets x*c - partner*s, the second x*c + partner*s
    const int64_t i = interleaved ? j / 2 : j % half;
    const bool first = interleaved ? j % 2 == 0 : j < half;
    const int64_t p = interleaved ? (first ? j + 1 : j - 1) : (first ? j + half : j - half);
    const float c = cosv[t * half + i], s = sinv[t * half + i], xp = static_cast<float>(xr[p]);
    v = first ? v * c - xp * s : v * c + xp * s;
  }
  out[e] = T(v);
}

// A warp per (token, head) of qkv: lanes stride over the head's dims, the sum of
// squares is a warp shuffle sum; q and k heads are normalised (rounded to T as
// rms_norm's output), rotated and stored (k into the cache row of the token's
// position, read on the device); v heads are copied into their cache row. Its
// global loads go in three rounds, not one after another (H100, in one run against
// the kernel that read the position first and cos and sin last: Qwen3-30B-A3B bf16
// decode 302.2-304.1 against 299.2-301.5 tok/s, fp8 416-425 against 417.5-420.6,
// Qwen3-8B 178.0 against 176.6). Reading the position, cos and sin before the
// chained wait (the position read again after it) was no faster: bf16 300.1-300.2
// against 298.9-299.4 tok/s, fp8 403.7-404.7 against 405.1-405.5 (branch
// exp/early-down-rotary, H100, 128 context).
template <class T>
__global__ void __launch_bounds__(128)
    qkv_rotary_cache_kernel(T* __restrict__ q_out, const T* __restrict__ qkv, int64_t qkv_row, int Tn, int hq,
                            int hkv, int D, const T* __restrict__ q_norm, const T* __restrict__ k_norm,
                            const float* __restrict__ cosv, const float* __restrict__ sinv, int half,
                            const int32_t* __restrict__ positions, int capacity, T* __restrict__ kc, int64_t kcs0,
                            int64_t kcs1, T* __restrict__ vc, int64_t vcs0, int64_t vcs1, float eps) {
  constexpr int kMaxPerLane = 8;  // D <= 256
  const int H = hq + 2 * hkv;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32, t = static_cast<int>(item / H), j = static_cast<int>(item % H);
  const bool is_q = j < hq, is_v = j >= hq + hkv;
  const T* w = is_v ? nullptr : is_q ? q_norm : k_norm;
  // The loads go out in as few rounds as they can: the norm's weights (constants)
  // before the wait, the head and the position together after it, the rotation's
  // cos and sin (they need the position) next.
  float wv[kMaxPerLane];
  if (w && item < static_cast<int64_t>(Tn) * H) load_head(w, D, lane, wv);
  chain_wait();
  chain_release();
  if (item >= static_cast<int64_t>(Tn) * H) return;
  float x[kMaxPerLane];
  load_head(qkv + t * qkv_row + static_cast<int64_t>(j) * D, D, lane, x);
  const int pos = positions[t];
  if (pos < 0 || pos >= capacity) __trap();  // a position past the cache: stop, as a bad index would
  if (is_v) {
    store_head<T>(x, D, lane, vc + (j - hq - hkv) * vcs0 + pos * vcs1);
    return;
  }
  float cr[kMaxPerLane], sr[kMaxPerLane];
  load_rotation(cosv + static_cast<int64_t>(pos) * half, sinv + static_cast<int64_t>(pos) * half, half, lane, cr, sr);
  if (w) rms_norm_head<T>(x, wv, D, eps);
  __shared__ float row[4][256];
  float y[kMaxPerLane];
  rotate_head(x, cr, sr, half, D, lane, row[threadIdx.x / 32], y);
  store_head<T>(y, D, lane, is_q ? q_out + (static_cast<int64_t>(t) * hq + j) * D : kc + (j - hq) * kcs0 + pos * kcs1);
}

}  // namespace

void qkv_rotary_cache(const QkvRotaryCacheArgs& a) {
  detail::dispatch_float(a.qkv.dtype(), "qkv_rotary_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = a.qkv.size(0), H = a.hq + 2 * a.hkv, D = a.qkv.size(1) / H;
    KILN_CHECK(D <= 256, "qkv_rotary_cache: head_dim ", D, " exceeds the CUDA kernel's 256");
    const int64_t items = Tn * H;
    launch_chained(
        qkv_rotary_cache_kernel<T>, static_cast<unsigned>((items + 3) / 4), 128, 0, a.q_out.data<T>(), a.qkv.data<T>(), a.qkv.stride(0), static_cast<int>(Tn), static_cast<int>(a.hq),
        static_cast<int>(a.hkv), static_cast<int>(D), a.q_norm.defined() ? a.q_norm.data<T>() : nullptr,
        a.k_norm.defined() ? a.k_norm.data<T>() : nullptr, a.cos.data<float>(), a.sin.data<float>(),
        static_cast<int>(a.cos.size(1)), a.positions.data<int32_t>(), static_cast<int>(a.k_cache.size(1)),
        a.k_cache.data<T>(), a.k_cache.stride(0), a.k_cache.stride(1), a.v_cache.data<T>(), a.v_cache.stride(0),
        a.v_cache.stride(1), a.eps);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void rms_norm_rows(const Tensor& out, const Tensor& x, const Tensor& residual, const Tensor& residual_out,
                   const Tensor& weight, float eps) {
  detail::dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t N = x.size(1);
    const unsigned rows = static_cast<unsigned>(x.size(0));
    const T* res = residual.defined() ? residual.data<T>() : nullptr;
    T* res_out = residual_out.defined() ? residual_out.data<T>() : nullptr;
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    if (norm_vec_ok<T>(N, {out.data_ptr(), x.data_ptr(), res, res_out, w})) {
      launch_chained(rms_norm_vec_kernel<T, false>, rows, kRowThreads, 0, out.data<T>(), x.data<T>(), nullptr, nullptr,
                     0, res, res_out, w, N, eps);
    } else {
      launch_chained(rms_norm_kernel<T, PlainRows<T>>, rows, kRowThreads, 0, out.data<T>(), PlainRows<T>{x.data<T>(), N},
                     res, res_out, w, N, eps);
    }
  });
}

void rms_norm_combine_rows(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos,
                           const Tensor& residual, const Tensor& residual_out, const Tensor& weight, float eps) {
  detail::dispatch_float(y.dtype(), "moe_combine_rms_norm_residual", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t N = y.size(1);
    const int k = static_cast<int>(weights.size(1));
    const unsigned rows = static_cast<unsigned>(out.size(0));
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    if (k <= 32 && norm_vec_ok<T>(N, {out.data_ptr(), y.data_ptr(), residual.data_ptr(), residual_out.data_ptr(), w})) {
      launch_chained(rms_norm_vec_kernel<T, true>, rows, kRowThreads, 0, out.data<T>(), y.data<T>(),
                     weights.data<float>(), sorted_pos.data<int32_t>(), k, residual.data<T>(), residual_out.data<T>(),
                     w, N, eps);
    } else {
      const CombinedRows<T> src{y.data<T>(), weights.data<float>(), sorted_pos.data<int32_t>(), k, N};
      launch_chained(rms_norm_kernel<T, CombinedRows<T>>, rows, kRowThreads, 0, out.data<T>(), src, residual.data<T>(),
                     residual_out.data<T>(), w, N, eps);
    }
  });
}

void layer_norm_rows(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  detail::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_kernel<T><<<static_cast<unsigned>(x.size(0)), kRowThreads, 0, current_stream()>>>(
        out.data<T>(), x.data<T>(), weight.defined() ? weight.data<T>() : nullptr,
        bias.defined() ? bias.data<T>() : nullptr, x.size(1), eps);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void silu_and_mul_rows(const Tensor& out, const Tensor& x) {
  detail::dispatch_float(x.dtype(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = out.size(0), H = out.size(1);
    silu_and_mul_kernel<T><<<grid_all(M * H, 256), 256, 0, current_stream()>>>(out.data<T>(), x.data<T>(), M, H);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void rotary(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  detail::dispatch_float(x.dtype(), "apply_rotary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = x.size(0), H = x.size(1), D = x.size(2);
    rotary_kernel<T><<<grid_all(Tn * H * D, 256), 256, 0, current_stream()>>>(
        out.data<T>(), x.data<T>(), x.stride(0), x.stride(1), cos.data<float>(), sin.data<float>(), Tn, H, D,
        cos.size(1), interleaved);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda_backend
