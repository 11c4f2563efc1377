// CPU topk: per row, a partial sort of the indices (threads split the rows).
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cpu/loops.h"

namespace kiln::cpu {

void topk_rows(const Tensor& values, const Tensor& indices, const Tensor& in, bool largest) {
  const int64_t M = in.size(0), N = in.size(1), K = values.size(1);
  detail::dispatch_arith(in.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    const T* x = in.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    parallel_for(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t m0, int64_t m1) {
      std::vector<int64_t> idx(static_cast<size_t>(N));
      for (int64_t m = m0; m < m1; ++m) {
        const T* row = x + m * N;
        std::iota(idx.begin(), idx.end(), 0);
        // NaN is larger than every number; ties keep the lower index first
        auto better = [&](int64_t a, int64_t b) {
          const C va = static_cast<C>(row[a]), vb = static_cast<C>(row[b]);
          const bool na = math::is_nan(va), nb = math::is_nan(vb);
          if (na || nb) {
            if (na && nb) return a < b;
            return largest ? na : nb;
          }
          if (va != vb) return largest ? va > vb : va < vb;
          return a < b;
        };
        std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), better);
        for (int64_t j = 0; j < K; ++j) {
          vo[m * K + j] = row[idx[j]];
          io[m * K + j] = idx[j];
        }
      }
    });
  });
}

}  // namespace kiln::cpu
