// CPU softmax over contiguous rows: threads split the rows; each row is widened
// to float32 once (vector casts), then max, x - max, exp, the sum and the scaling
// or the log-sum subtraction, each a Highway pass over the row in L2, and the
// narrowing write.
#include <cmath>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

void softmax_rows(const Tensor& out, const Tensor& in, bool log) {
  const int64_t M = in.size(0), N = in.size(1);
  if (M == 0 || N == 0) return;
  detail::dispatch_float(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    parallel_for(M, std::max<int64_t>(1, 32768 / std::max<int64_t>(N, 1)), [&](int64_t m0, int64_t m1) {
      const auto n = static_cast<size_t>(N);
      // a thread's rows, kept across calls: allocated per call, rows past malloc's mmap
      // threshold cost page faults and zeroing each time (log_softmax of [64, 65536]
      // float32: 7.3 -> 1.2 ms)
      thread_local std::vector<float> row, exp_row;
      if (row.size() < n) row.resize(n);
      if (log && exp_row.size() < n) exp_row.resize(n);
      float *r = row.data(), *e = exp_row.data();
      for (int64_t m = m0; m < m1; ++m) {
        const T* xr = x + m * N;
        T* yr = y + m * N;
        widen(xr, r, N);
        // NaN anywhere makes the max NaN (and the row NaN); a row of all -inf gives
        // exp(-inf + inf) = NaN everywhere, as torch does
        const float shift = simd::extreme_f32(true, r, n);
        simd::binary_f32(BinaryOp::Sub, r, false, &shift, true, r, n, 1.0f);
        if (!log) {
          simd::unary_f32(UnaryOp::Exp, r, r, n);
          const float inv = static_cast<float>(1.0 / simd::sum_f32(r, n));
          simd::binary_f32(BinaryOp::Mul, r, false, &inv, true, r, n, 1.0f);
        } else {
          // (x - max) - log(sum), not x - (max + log(sum)): a huge max would absorb log(sum)
          simd::unary_f32(UnaryOp::Exp, r, e, n);
          const float log_sum = static_cast<float>(std::log(simd::sum_f32(e, n)));
          simd::binary_f32(BinaryOp::Sub, r, false, &log_sum, true, r, n, 1.0f);
        }
        narrow(r, yr, N);
      }
    });
  });
}

}  // namespace kiln::cpu
