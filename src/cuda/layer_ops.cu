// CUDA rms_norm (with the fused residual add), layer_norm, silu_and_mul and
// rotary embedding. Decode-sized rows: the norms are a block per row (one read for the
// sum of squares, the second from L1/L2), the others one thread per output.
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

constexpr int kRowThreads = 256;

// The sum of v over the block, in every thread.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call's readers are done
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowThreads / 32; ++i) total += scratch[i];
  return total;
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ residual,
                    T* __restrict__ residual_out, const T* __restrict__ w, int64_t N, float eps) {
  __shared__ float partial[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * N;
  const T* src = residual ? residual_out + r * N : xr;  // the values to normalise
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {
    float v = static_cast<float>(xr[i]);
    if (residual) {
      const T s = T(v + static_cast<float>(residual[r * N + i]));  // rounded, as x + residual would be
      residual_out[r * N + i] = s;
      v = static_cast<float>(s);
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss, partial) / static_cast<float>(N) + eps);
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads)  // each thread rereads what it wrote
    out[r * N + i] = T(static_cast<float>(src[i]) * inv * (w ? static_cast<float>(w[i]) : 1.0f));
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
  const float mean = block_sum(s, scratch) / static_cast<float>(N);
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += kRowThreads) {
    const float d = static_cast<float>(xr[i]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(N) + eps);
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
  out[e] = T(g / (1.0f + expf(-g)) * u);
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

}  // namespace

void rms_norm_rows(const Tensor& out, const Tensor& x, const Tensor& residual, const Tensor& residual_out,
                   const Tensor& weight, float eps) {
  detail::dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_kernel<T><<<static_cast<unsigned>(x.size(0)), kRowThreads, 0, current_stream()>>>(
        out.data<T>(), x.data<T>(), residual.defined() ? residual.data<T>() : nullptr,
        residual_out.defined() ? residual_out.data<T>() : nullptr, weight.defined() ? weight.data<T>() : nullptr,
        x.size(1), eps);
    KILN_CUDA_CHECK_LAUNCH();
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
