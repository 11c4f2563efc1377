// CPU one-query attention (decode): per query head, scores over the cache in
// float32, a stable softmax, the weighted sum of values. Heads run in parallel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"

namespace kiln::cpu {

void attention_decode(const AttentionDecodeArgs& a) {
  detail::dispatch_float(a.q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t B = a.q.size(0), Hq = a.q.size(1), D = a.q.size(2), Hkv = a.k.size(1), S = a.k.size(2);
    const int64_t G = Hq / Hkv;
    const float scale = static_cast<float>(a.scale);
#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const T* q = a.q.data<T>() + b * a.q.stride(0) + h * a.q.stride(1);
        const T* k = a.k.data<T>() + b * a.k.stride(0) + (h / G) * a.k.stride(1);
        const T* v = a.v.data<T>() + b * a.v.stride(0) + (h / G) * a.v.stride(1);
        const int64_t len = a.seq_lens.defined() ? std::clamp<int64_t>(a.seq_lens.data<int32_t>()[b], 0, S) : S;
        T* out = a.out.data<T>() + (b * Hq + h) * D;
        if (len == 0) {  // no keys: 0, as a fully masked row
          for (int64_t d = 0; d < D; ++d) out[d] = T(0.0f);
          continue;
        }
        std::vector<float> qf(D), acc(D, 0.0f), p(len);
        for (int64_t d = 0; d < D; ++d) qf[d] = static_cast<float>(q[d]) * scale;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t s = 0; s < len; ++s) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot += qf[d] * static_cast<float>(k[s * a.k.stride(2) + d]);
          p[s] = dot;
          m = std::max(m, dot);
        }
        float l = 0.0f;
        for (int64_t s = 0; s < len; ++s) {
          p[s] = std::exp(p[s] - m);
          l += p[s];
          for (int64_t d = 0; d < D; ++d) acc[d] += p[s] * static_cast<float>(v[s * a.v.stride(2) + d]);
        }
        for (int64_t d = 0; d < D; ++d) out[d] = T(acc[d] / l);
      }
  });
}

}  // namespace kiln::cpu
