// CPU rms_norm (with the fused residual add), layer_norm, silu_and_mul and rotary embedding:
// one row per iteration (silu_and_mul: a chunk of a row), float32 inside.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

void rms_norm_rows(const Tensor& out, const Tensor& x, const Tensor& residual, const Tensor& residual_out,
                   const Tensor& weight, float eps) {
  detail::dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = x.size(0), N = x.size(1);
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* xs = x.data<T>();
    const T* res = residual.defined() ? residual.data<T>() : nullptr;
    T* res_out = residual.defined() ? residual_out.data<T>() : nullptr;
    T* os = out.data<T>();
    // one row (a decode step) stays on this thread: waking the team cost more than the row
#pragma omp parallel for if (M > 1)
    for (int64_t r = 0; r < M; ++r) {
      std::vector<float> v(N);
      const T* xr = xs + r * N;
      double ss = 0.0;
      for (int64_t i = 0; i < N; ++i) {
        T s = xr[i];
        if (res) {  // rounded to T, as x + residual would be
          s = T(static_cast<float>(s) + static_cast<float>(res[r * N + i]));
          res_out[r * N + i] = s;
        }
        v[i] = static_cast<float>(s);
        ss += static_cast<double>(v[i]) * v[i];
      }
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(N)) + eps);
      T* o = os + r * N;
      for (int64_t i = 0; i < N; ++i) o[i] = T(v[i] * inv * (w ? static_cast<float>(w[i]) : 1.0f));
    }
  });
}

// The ops in sequence: the fused kernel is the GPU's (a decode step's link fewer).
void rms_norm_combine_rows(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos,
                           const Tensor& residual, const Tensor& residual_out, const Tensor& weight, float eps) {
  const Tensor combined = Tensor::empty(out.shape(), out.dtype(), out.device());
  moe_combine(combined, y, weights, sorted_pos);
  rms_norm_rows(out, combined, residual, residual_out, weight, eps);
}

// Two passes over the row in float32: the mean, then the variance about it (no
// cancellation as in E[x^2] - mean^2).
void layer_norm_rows(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  detail::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = x.size(0), N = x.size(1);
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
#pragma omp parallel for
    for (int64_t r = 0; r < M; ++r) {
      const T* xr = x.data<T>() + r * N;
      double sum = 0.0;
      for (int64_t i = 0; i < N; ++i) sum += static_cast<float>(xr[i]);
      const float mean = static_cast<float>(sum / static_cast<double>(N));
      double sq = 0.0;
      for (int64_t i = 0; i < N; ++i) {
        const double d = static_cast<float>(xr[i]) - mean;
        sq += d * d;
      }
      const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(N)) + eps);
      T* o = out.data<T>() + r * N;
      for (int64_t i = 0; i < N; ++i) {
        const float y = (static_cast<float>(xr[i]) - mean) * inv;
        o[i] = T(y * (w ? static_cast<float>(w[i]) : 1.0f) + (b ? static_cast<float>(b[i]) : 0.0f));
      }
    }
  });
}

// Chunks of kStageChunk within each row, so that the one row of a decode step
// uses every thread, staged in float32 for Highway's silu (the [1, 6144] of
// Qwen3-0.6B: 45 -> 11 us a call through Python on a 2-core machine, against a
// scalar exp per element on one thread).
void silu_and_mul_rows(const Tensor& out, const Tensor& x) {
  detail::dispatch_float(x.dtype(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = out.size(0), H = out.size(1), per_row = (H + kStageChunk - 1) / kStageChunk;
    const T* in = x.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (M * H > 1024)
    for (int64_t item = 0; item < M * per_row; ++item) {
      const int64_t r = item / per_row, c0 = item % per_row * kStageChunk, n = std::min(kStageChunk, H - c0);
      float g[kStageChunk], u[kStageChunk];
      widen(in + r * 2 * H + c0, g, n);
      widen(in + r * 2 * H + H + c0, u, n);
      if (!simd::unary_f32(UnaryOp::Silu, g, g, static_cast<size_t>(n)))
        for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i]));
      simd::binary_f32(BinaryOp::Mul, g, false, u, false, g, static_cast<size_t>(n), 1.0f);
      narrow(g, o + r * H + c0, n);
    }
  });
}

void rotary(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  detail::dispatch_float(x.dtype(), "apply_rotary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = x.size(0), H = x.size(1), D = x.size(2), half = cos.size(1);
#pragma omp parallel for collapse(2)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const T* xr = x.data<T>() + t * x.stride(0) + h * x.stride(1);
        T* o = out.data<T>() + (t * H + h) * D;
        for (int64_t i = 2 * half; i < D; ++i) o[i] = xr[i];
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
          const float c = cos.data<float>()[t * half + i], s = sin.data<float>()[t * half + i];
          const float xa = static_cast<float>(xr[a]), xb = static_cast<float>(xr[b]);
          o[a] = T(xa * c - xb * s);
          o[b] = T(xb * c + xa * s);
        }
      }
  });
}

// One (token, head) at a time: q and k heads normalised (rounded to T), rotated
// and written (q to q_out, k into the cache at the token's position); v heads copied.
void qkv_rotary_cache(const QkvRotaryCacheArgs& a) {
  detail::dispatch_float(a.qkv.dtype(), "qkv_rotary_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = a.qkv.size(0), H = a.hq + 2 * a.hkv, D = a.qkv.size(1) / H, half = a.cos.size(1);
#pragma omp parallel for collapse(2)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t j = 0; j < H; ++j) {
        const T* src = a.qkv.data<T>() + t * a.qkv.stride(0) + j * D;
        const int64_t pos = a.positions.data<int32_t>()[t];
        T* dst;
        const Tensor* norm = nullptr;
        if (j < a.hq) {
          dst = a.q_out.data<T>() + (t * a.hq + j) * D;
          norm = &a.q_norm;
        } else if (j < a.hq + a.hkv) {
          dst = a.k_cache.data<T>() + (j - a.hq) * a.k_cache.stride(0) + pos * a.k_cache.stride(1);
          norm = &a.k_norm;
        } else {
          T* v = a.v_cache.data<T>() + (j - a.hq - a.hkv) * a.v_cache.stride(0) + pos * a.v_cache.stride(1);
          for (int64_t i = 0; i < D; ++i) v[i] = src[i];
          continue;
        }
        std::vector<float> x(D);
        double ss = 0.0;
        for (int64_t i = 0; i < D; ++i) {
          x[i] = static_cast<float>(src[i]);
          ss += static_cast<double>(x[i]) * x[i];
        }
        if (norm->defined()) {
          const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(D)) + a.eps);
          for (int64_t i = 0; i < D; ++i)
            x[i] = static_cast<float>(T(x[i] * inv * static_cast<float>(norm->data<T>()[i])));
        }
        const float* c = a.cos.data<float>() + pos * half;
        const float* sn = a.sin.data<float>() + pos * half;
        for (int64_t i = 0; i < half; ++i) {
          dst[i] = T(x[i] * c[i] - x[i + half] * sn[i]);
          dst[i + half] = T(x[i + half] * c[i] + x[i] * sn[i]);
        }
        for (int64_t i = 2 * half; i < D; ++i) dst[i] = T(x[i]);
      }
  });
}

}  // namespace kiln::cpu
