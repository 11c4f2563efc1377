// CPU softmax over contiguous rows: threads split the rows; each row is widened
// to float32 once, then max, sum of exp (Highway), and the scaled write.
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace kiln::cpu {

void softmax_rows(const Tensor& out, const Tensor& in, bool log) {
  const int64_t M = in.size(0), N = in.size(1);
  detail::dispatch_float(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    parallel_for(M, std::max<int64_t>(1, 32768 / std::max<int64_t>(N, 1)), [&](int64_t m0, int64_t m1) {
      std::vector<float> row(static_cast<size_t>(N));
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = x + m * N;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < N; ++i) {
          row[i] = static_cast<float>(xr[i]);
          mx = std::isnan(row[i]) || row[i] > mx ? row[i] : mx;
        }
        // a row of all -inf gives exp(-inf + inf) = NaN everywhere, as torch does
        const float shift = mx;
        for (int64_t i = 0; i < N; ++i) row[i] -= shift;
        if (!simd::unary_f32(UnaryOp::Exp, row.data(), row.data(), static_cast<size_t>(N)))
          for (int64_t i = 0; i < N; ++i) row[i] = std::exp(row[i]);
        const double sum = simd::sum_f32(row.data(), static_cast<size_t>(N));
        T* yr = y + m * N;
        if (log) {
          // (x - max) - log(sum), not x - (max + log(sum)): a huge max would absorb log(sum)
          const float log_sum = static_cast<float>(std::log(sum));
          for (int64_t i = 0; i < N; ++i) yr[i] = T((static_cast<float>(xr[i]) - shift) - log_sum);
        } else {
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t i = 0; i < N; ++i) yr[i] = T(row[i] * inv);
        }
      }
    });
  });
}

}  // namespace kiln::cpu
