#include <algorithm>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/random_math.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace kiln::cpu {

void random(RandomKind kind, const Tensor& out, double a, double b, uint64_t seed, uint64_t offset) {
  detail::dispatch_float(out.dtype(), kind == RandomKind::Uniform ? "rand" : "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    // Elements that share a Philox block are drawn together: one block for four uniform
    // elements (each element recomputed it before: rand of 16M floats 93 -> 22 ms here),
    // and for a normal pair one block, then the logarithm, square root, cosine and sine
    // of a batch of pairs in Highway vectors (randn of 16M floats 174 -> 39 ms; bench-decode's
    // 0.6B random init 8.5-9.3 -> 1.6-4.6 s). Uniform values are uniform_at's exactly;
    // normal ones differ from normal_at's (libm, and CUDA's) in the last bits. Every pair
    // takes the same vector path wherever it falls, so the thread count changes nothing.
    if (kind == RandomKind::Uniform) {
      parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin / 4; 4 * k < end; ++k) {  // blocks, the first and last maybe partly ours
          const philox::U4 r = philox::uniform_block(seed, offset, static_cast<uint64_t>(k));
          for (int64_t i = std::max(begin, 4 * k); i < std::min(end, 4 * k + 4); ++i)
            p[i] = philox::uniform_of_bits<T>(r.x[i & 3], fa, fb);
        }
      });
      return;
    }
    constexpr int64_t kPairs = 256;
    parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      float u1[kPairs], u2[kPairs], c[kPairs], s[kPairs];
      for (int64_t j0 = begin / 2; j0 < (end + 1) / 2; j0 += kPairs) {  // pairs, the first and last maybe halved
        const int64_t n = std::min(kPairs, (end + 1) / 2 - j0);
        for (int64_t q = 0; q < n; ++q) philox::box_muller_uniforms(seed, offset, j0 + q, u1[q], u2[q]);
        simd::box_muller_f32(u1, u2, c, s, static_cast<size_t>(n));
        for (int64_t q = 0; q < n; ++q) {
          const int64_t i = 2 * (j0 + q);
          if (i >= begin) p[i] = T(fa + fb * c[q]);
          if (i + 1 < end) p[i + 1] = T(fa + fb * s[q]);
        }
      }
    });
  });
}

}  // namespace kiln::cpu
