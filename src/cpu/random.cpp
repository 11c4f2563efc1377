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
    parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        p[i] = kind == RandomKind::Uniform ? philox::uniform_at<T>(seed, offset, i, fa, fb)
                                           : T(philox::normal_at(seed, offset, i, fa, fb));
    });
  });
}

}  // namespace kiln::cpu
