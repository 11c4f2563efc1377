// CPU sampling: per row, the tokens by decreasing probability (ties: lower id
// first), the top-k / top-p prefix, then the inverse CDF at u times its mass.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/backend.h"
#include "cpu/loops.h"

namespace kiln::cpu {

void sample_rows(const Tensor& out, const Tensor& probs, const Tensor& u, int64_t top_k, float top_p) {
  const int64_t B = probs.size(0), V = probs.size(1);
  const float* P = probs.data<float>();
  int64_t* o = out.data<int64_t>();
  parallel_for(B, 1, [&](int64_t b0, int64_t b1) {  // one row (a decode step): no threads
    for (int64_t b = b0; b < b1; ++b) {
      const float* p = P + b * V;
      std::vector<int32_t> order(static_cast<size_t>(V));
      std::iota(order.begin(), order.end(), 0);
      const auto before = [p](int32_t i, int32_t j) { return p[i] > p[j] || (p[i] == p[j] && i < j); };
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(), before);
      // the kept prefix: while the mass before a token is below top_p
      int64_t n = 0;
      float mass = 0.0f;
      while (n < top_k && (top_p >= 1.0f || mass < top_p)) mass += p[order[n++]];
      const float r = u.data<float>()[b] * mass;
      float c = 0.0f;
      int64_t pick = n - 1;
      for (int64_t j = 0; j < n; ++j) {
        c += p[order[j]];
        if (c > r) {
          pick = j;
          break;
        }
      }
      o[b] = order[pick];
    }
  });
}

}  // namespace kiln::cpu
