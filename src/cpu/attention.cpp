// CPU one-query attention (decode). The query heads that share a KV head go
// together (up to 8 at a time), so each key and value row is read once for all
// of them: scores by simd::dot_keys, a stable softmax in float32, the weighted
// sum of values by simd::axpy_values, each over the whole block of cache rows.
// (batch, KV head, head chunk) tasks run in parallel.
// In a decode step the linears before it stream tens of MB through the caches, so it
// starts cold. On a 2-core Zen 4 VM (16 q / 8 kv heads, d128, bf16, from Python),
// 128 keys: 14 us warm, 33-40 us after a 64 MB linear, 27-30 us when only its code
// was warmed after that linear; 1 key, after a 64 MB sum: 5.9, 23.8 and 9.4 us. So
// its code's misses cost a few us a layer and the cache rows' the rest. Rows
// prefetched ahead changed nothing (see cpu/prefetch.h), and non-temporal prefetches
// in the linears, which leave more of it cached, halve their speed there (a 64 MB
// linear: 1.0-1.2 -> 2.0-2.3 ms).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/prefetch.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kHeadsPerTask = 8;  // dot_keys takes at most 8 rows

// Calls f32(rows, stride) or bf16(row bits, stride) with `len` cache rows of D
// values, `stride` elements apart, as the Highway kernels take them: float32 and
// bfloat16 as they are, float16 widened into `stage` first.
template <class T, class F32, class BF16>
void with_block(const T* rows, int64_t stride, int64_t len, int64_t D, std::vector<float>& stage, F32 f32, BF16 bf16) {
  if constexpr (std::is_same_v<T, float>) {
    f32(rows, static_cast<size_t>(stride));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    bf16(reinterpret_cast<const uint16_t*>(rows), static_cast<size_t>(stride));
  } else {
    stage.resize(static_cast<size_t>(len * D));
    for (int64_t s = 0; s < len; ++s) widen(rows + s * stride, stage.data() + s * D, D);
    f32(static_cast<const float*>(stage.data()), static_cast<size_t>(D));
  }
}

}  // namespace

void attention_decode(const AttentionDecodeArgs& a) {
  detail::dispatch_float(a.q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t B = a.q.size(0), Hq = a.q.size(1), D = a.q.size(2), Hkv = a.k.size(1), S = a.k.size(2);
    const int64_t G = Hq / Hkv, chunks = (G + kHeadsPerTask - 1) / kHeadsPerTask;
    const float scale = static_cast<float>(a.scale);
    const int64_t qs0 = a.q.stride(0), qs1 = a.q.stride(1), ks0 = a.k.stride(0), ks1 = a.k.stride(1),
                  ks2 = a.k.stride(2), vs0 = a.v.stride(0), vs1 = a.v.stride(1), vs2 = a.v.stride(2);
    const int32_t* seq_lens = a.seq_lens.defined() ? a.seq_lens.data<int32_t>() : nullptr;
    const T *q_base = a.q.data<T>(), *k_base = a.k.data<T>(), *v_base = a.v.data<T>();
    T* out_base = a.out.data<T>();
    const size_t ahead = line_prefetch_ahead();  // cpu/prefetch.h
#pragma omp parallel for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kvh = 0; kvh < Hkv; ++kvh)
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t h0 = kvh * G + c * kHeadsPerTask;
          const int rows = static_cast<int>(std::min(kHeadsPerTask, G - c * kHeadsPerTask));
          const T* k = k_base + b * ks0 + kvh * ks1;
          const T* v = v_base + b * vs0 + kvh * vs1;
          const int64_t len = seq_lens ? std::clamp<int64_t>(seq_lens[b], 0, S) : S;
          T* out = out_base + (b * Hq + h0) * D;
          if (len == 0) {  // no keys: 0, as a fully masked row
            std::fill(out, out + rows * D, T(0.0f));
            continue;
          }
          std::vector<float> qf(rows * D), acc(rows * D, 0.0f), p(rows * len), stage;
          for (int r = 0; r < rows; ++r)
            for (int64_t d = 0; d < D; ++d) qf[r * D + d] = static_cast<float>(q_base[b * qs0 + (h0 + r) * qs1 + d]) * scale;
          const size_t n = static_cast<size_t>(len), dim = static_cast<size_t>(D);
          with_block(  // p[r * len + s] = dot(k row s, q + r * D)
              k, ks2, len, D, stage,
              [&](const float* kr, size_t st) { simd::dot_keys_f32(kr, st, n, qf.data(), rows, dim, p.data(), n); },
              [&](const uint16_t* kr, size_t st) {
                simd::dot_keys_bf16(kr, st, n, qf.data(), rows, dim, p.data(), n, ahead);
              });
          float inv_sum[kHeadsPerTask];
          for (int r = 0; r < rows; ++r) {  // exp(score - max), in place, and 1 / its sum
            float* pr = p.data() + r * len;
            const float m = simd::extreme_f32(true, pr, n);
            simd::binary_f32(BinaryOp::Sub, pr, false, &m, true, pr, n, 1.0f);
            simd::unary_f32(UnaryOp::Exp, pr, pr, n);
            inv_sum[r] = static_cast<float>(1.0 / simd::sum_f32(pr, n));
          }
          with_block(  // acc[r * D + j] += sum_s p[r * len + s] * (v row s)[j]
              v, vs2, len, D, stage,
              [&](const float* vr, size_t st) { simd::axpy_values_f32(vr, st, n, p.data(), n, rows, dim, acc.data()); },
              [&](const uint16_t* vr, size_t st) {
                simd::axpy_values_bf16(vr, st, n, p.data(), n, rows, dim, acc.data(), ahead);
              });
          for (int r = 0; r < rows; ++r)
            for (int64_t d = 0; d < D; ++d) out[r * D + d] = T(acc[r * D + d] * inv_sum[r]);
        }
  });
}

// The front door runs prefill on the CPU through the math path (matmuls on
// OpenBLAS); there is no fused CPU prefill kernel to reach.
void attention_prefill(const AttentionPrefillArgs&) {
  KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the fused prefill kernel is CUDA only (the CPU takes the math path)");
}

}  // namespace kiln::cpu
