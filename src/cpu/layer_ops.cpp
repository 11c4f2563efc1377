// CPU rms_norm (with the fused residual add), layer_norm, silu_and_mul and rotary embedding:
// one row per iteration (silu_and_mul: a chunk of a row), float32 inside. Threads
// through parallel_for, which leaves a single row (a decode step) on the calling
// thread with no OpenMP region at all: even an `if (false)` region costs 1.3 us
// on a 2-core VM (a real one 2.9), more than a decode row's work.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

// 1 / sqrt(mean(v^2) + eps), the squares summed in double in four running sums
// (a decode step's rows are short: one chain of double adds would be their whole cost)
inline float inv_rms(const float* v, int64_t n, float eps) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(v[i + j]) * v[i + j];
  for (; i < n; ++i) s[0] += static_cast<double>(v[i]) * v[i];
  const double mean = ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<double>(n);
  return 1.0f / std::sqrt(static_cast<float>(mean) + eps);
}

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
    parallel_for(M, 1, [&](int64_t r0, int64_t r1) {
      std::vector<float> v(static_cast<size_t>(N));
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = xs + r * N;
        if (res) {  // the sum rounded to T, as x + residual would be (loops of one type each: they vectorise)
          for (int64_t i = 0; i < N; ++i) v[i] = static_cast<float>(xr[i]) + static_cast<float>(res[r * N + i]);
          narrow(v.data(), res_out + r * N, N);
          widen(res_out + r * N, v.data(), N);
        } else {
          widen(xr, v.data(), N);
        }
        const float inv = inv_rms(v.data(), N, eps);
        T* o = os + r * N;
        for (int64_t i = 0; i < N; ++i) o[i] = T(v[i] * inv * (w ? static_cast<float>(w[i]) : 1.0f));
      }
    });
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
    const T* xs = x.data<T>();
    T* os = out.data<T>();
    parallel_for(M, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = xs + r * N;
        double sum = 0.0;
        for (int64_t i = 0; i < N; ++i) sum += static_cast<float>(xr[i]);
        const float mean = static_cast<float>(sum / static_cast<double>(N));
        double sq = 0.0;
        for (int64_t i = 0; i < N; ++i) {
          const double d = static_cast<float>(xr[i]) - mean;
          sq += d * d;
        }
        const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(N)) + eps);
        T* o = os + r * N;
        for (int64_t i = 0; i < N; ++i) {
          const float y = (static_cast<float>(xr[i]) - mean) * inv;
          o[i] = T(y * (w ? static_cast<float>(w[i]) : 1.0f) + (b ? static_cast<float>(b[i]) : 0.0f));
        }
      }
    });
  });
}

// Chunks of kStageChunk within each row, staged in float32 for Highway's silu
// (the [1, 6144] of Qwen3-0.6B: 45 -> 11 us a call through Python on a 2-core
// machine, against a scalar exp per element on one thread). Up to kSiluSerial
// outputs stay on one thread: that [1, 6144] 6.6 -> 2.6 us with both threads'
// start-up saved.
constexpr int64_t kSiluSerial = 8192;
void silu_and_mul_rows(const Tensor& out, const Tensor& x) {
  detail::dispatch_float(x.dtype(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t M = out.size(0), H = out.size(1), per_row = (H + kStageChunk - 1) / kStageChunk;
    const T* in = x.data<T>();
    T* o = out.data<T>();
    parallel_for(M * per_row, M * H > kSiluSerial ? 1 : M * per_row, [&](int64_t b, int64_t e) {
      for (int64_t item = b; item < e; ++item) {
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
  });
}

void rotary(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  detail::dispatch_float(x.dtype(), "apply_rotary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = x.size(0), H = x.size(1), D = x.size(2), half = cos.size(1);
    const T* xs = x.data<T>();
    T* os = out.data<T>();
    const float *cs = cos.data<float>(), *sn = sin.data<float>();
    const int64_t xs0 = x.stride(0), xs1 = x.stride(1);
    parallel_for(Tn * H, H, [&](int64_t b0, int64_t e0) {  // one token's heads: no threads
      for (int64_t item = b0; item < e0; ++item) {
        const int64_t t = item / H, h = item % H;
        const T* xr = xs + t * xs0 + h * xs1;
        T* o = os + (t * H + h) * D;
        for (int64_t i = 2 * half; i < D; ++i) o[i] = xr[i];
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
          const float c = cs[t * half + i], s = sn[t * half + i];
          const float xa = static_cast<float>(xr[a]), xb = static_cast<float>(xr[b]);
          o[a] = T(xa * c - xb * s);
          o[b] = T(xb * c + xa * s);
        }
      }
    });
  });
}

// One (token, head) at a time: q and k heads normalised (rounded to T), rotated
// and written (q to q_out, k into the cache at the token's position); v heads
// copied. A decode step's one token stays on this thread: its 32 heads of Qwen3
// take less than waking the team (2-core Zen 5 VM, Qwen3-0.6B's 16 q / 8 kv heads:
// 16.6 -> 4.3 us a call, with the front door's range check of the positions).
void qkv_rotary_cache(const QkvRotaryCacheArgs& a) {
  detail::dispatch_float(a.qkv.dtype(), "qkv_rotary_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t Tn = a.qkv.size(0), H = a.hq + 2 * a.hkv, D = a.qkv.size(1) / H, half = a.cos.size(1);
    const T* qkv = a.qkv.data<T>();
    const int64_t qkv_row = a.qkv.stride(0);
    const int32_t* positions = a.positions.data<int32_t>();
    const T* q_norm = a.q_norm.defined() ? a.q_norm.data<T>() : nullptr;
    const T* k_norm = a.k_norm.defined() ? a.k_norm.data<T>() : nullptr;
    const float *cos = a.cos.data<float>(), *sin = a.sin.data<float>();
    T *q_out = a.q_out.data<T>(), *kc = a.k_cache.data<T>(), *vc = a.v_cache.data<T>();
    const int64_t kcs0 = a.k_cache.stride(0), kcs1 = a.k_cache.stride(1), vcs0 = a.v_cache.stride(0),
                  vcs1 = a.v_cache.stride(1);
    parallel_for(Tn * H, H, [&](int64_t b, int64_t e) {  // one token's heads: no threads
      std::vector<float> x(static_cast<size_t>(D));
      for (int64_t item = b; item < e; ++item) {
        const int64_t t = item / H, j = item % H;
        const T* src = qkv + t * qkv_row + j * D;
        const int64_t pos = positions[t];
        if (j >= a.hq + a.hkv) {
          std::copy(src, src + D, vc + (j - a.hq - a.hkv) * vcs0 + pos * vcs1);
          continue;
        }
        const bool is_q = j < a.hq;
        const T* norm = is_q ? q_norm : k_norm;
        T* dst = is_q ? q_out + (t * a.hq + j) * D : kc + (j - a.hq) * kcs0 + pos * kcs1;
        for (int64_t i = 0; i < D; ++i) x[i] = static_cast<float>(src[i]);
        if (norm) {
          const float inv = inv_rms(x.data(), D, a.eps);
          for (int64_t i = 0; i < D; ++i) x[i] = static_cast<float>(T(x[i] * inv * static_cast<float>(norm[i])));
        }
        const float* c = cos + pos * half;
        const float* sn = sin + pos * half;
        for (int64_t i = 0; i < half; ++i) {
          dst[i] = T(x[i] * c[i] - x[i + half] * sn[i]);
          dst[i + half] = T(x[i + half] * c[i] + x[i] * sn[i]);
        }
        for (int64_t i = 2 * half; i < D; ++i) dst[i] = T(x[i]);
      }
    });
  });
}

}  // namespace kiln::cpu
