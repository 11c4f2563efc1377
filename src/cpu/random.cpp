#include <math.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/random_math.h"
#include "cpu/loops.h"

namespace kiln::cpu {

void random(RandomKind kind, const Tensor& out, double a, double b, uint64_t seed, uint64_t offset) {
  detail::dispatch_float(out.dtype(), kind == RandomKind::Uniform ? "rand" : "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    // Elements that share a Philox block are drawn together: one block for four uniform
    // elements, one block, logarithm and square root for a pair of normal ones, which each
    // element recomputed before (here: randn of 16M floats 174 -> 111 ms, rand 93 -> 22;
    // bench-decode's 0.6B random init 8.5-9.3 -> 5.9 s). The values are uniform_at's and
    // normal_at's, element for element (checked bit for bit against the element loop).
    const int64_t group = kind == RandomKind::Uniform ? 4 : 2;
    const auto one = [&](int64_t i) {
      p[i] = kind == RandomKind::Uniform ? philox::uniform_at<T>(seed, offset, i, fa, fb)
                                         : T(philox::normal_at(seed, offset, i, fa, fb));
    };
    parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      int64_t i = begin;
      for (; i < end && i % group != 0; ++i) one(i);
      for (; i + group <= end; i += group) {
        if (kind == RandomKind::Uniform) {
          const philox::U4 r = philox::uniform_block(seed, offset, static_cast<uint64_t>(i) / 4);
          for (int l = 0; l < 4; ++l) p[i + l] = philox::uniform_of_bits<T>(r.x[l], fa, fb);
        } else {
          float radius, angle;
          philox::box_muller(seed, offset, static_cast<uint64_t>(i) / 2, radius, angle);
          p[i] = T(fa + fb * radius * cosf(angle));
          p[i + 1] = T(fa + fb * radius * sinf(angle));
        }
      }
      for (; i < end; ++i) one(i);
    });
  });
}

}  // namespace kiln::cpu
