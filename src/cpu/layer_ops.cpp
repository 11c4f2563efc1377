// CPU rms_norm (with the fused residual add), layer_norm, silu_and_mul and rotary embedding:
// one row per iteration, float32 inside.
#include <cmath>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"

namespace kiln::cpu {

void rms_norm_rows(const Tensor& out, const Tensor& x, const Tensor& residual, const Tensor& residual_out,
                   const Tensor& weight, float eps) {
  detail::dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = x.size(0), N = x.size(1);
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
#pragma omp parallel for
    for (int64_t r = 0; r < M; ++r) {
      std::vector<float> v(N);
      const T* xr = x.data<T>() + r * N;
      double ss = 0.0;
      for (int64_t i = 0; i < N; ++i) {
        T s = xr[i];
        if (residual.defined()) {  // rounded to T, as x + residual would be
          s = T(static_cast<float>(s) + static_cast<float>(residual.data<T>()[r * N + i]));
          residual_out.data<T>()[r * N + i] = s;
        }
        v[i] = static_cast<float>(s);
        ss += static_cast<double>(v[i]) * v[i];
      }
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(N)) + eps);
      T* o = out.data<T>() + r * N;
      for (int64_t i = 0; i < N; ++i) o[i] = T(v[i] * inv * (w ? static_cast<float>(w[i]) : 1.0f));
    }
  });
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

void silu_and_mul_rows(const Tensor& out, const Tensor& x) {
  detail::dispatch_float(x.dtype(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = out.size(0), H = out.size(1);
#pragma omp parallel for
    for (int64_t r = 0; r < M; ++r)
      for (int64_t i = 0; i < H; ++i) {
        const float g = static_cast<float>(x.data<T>()[r * 2 * H + i]);
        const float u = static_cast<float>(x.data<T>()[r * 2 * H + H + i]);
        out.data<T>()[r * H + i] = T(g / (1.0f + std::exp(-g)) * u);
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

}  // namespace kiln::cpu
