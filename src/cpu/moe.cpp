// CPU index_select (row gather) and the mixture-of-experts router and combine.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {
template <class I>
void gather_rows(const Tensor& out, const Tensor& in, const I* idx) {
  const int64_t R = out.size(0), S = in.size(0), bytes = out.size(1) * static_cast<int64_t>(out.itemsize());
  for (int64_t r = 0; r < R; ++r)
    KILN_CHECK(idx[r] >= -S && idx[r] < S, "index_select: index ", static_cast<int64_t>(idx[r]), " at position ", r,
               " is out of range for a dimension of size ", S);
  const auto* src = static_cast<const char*>(in.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < R; ++r) {
    const int64_t i = idx[r] < 0 ? idx[r] + S : idx[r];
    std::memcpy(dst + r * bytes, src + i * bytes, bytes);
  }
}
}  // namespace

void index_select_rows(const Tensor& out, const Tensor& in, const Tensor& index) {
  if (index.dtype() == DType::Int32) gather_rows(out, in, index.data<int32_t>());
  else gather_rows(out, in, index.data<int64_t>());
}

void moe_route(const MoeRouteArgs& a) {
  const Tensor logits = a.logits.to(DType::Float32);
  const int64_t T = logits.size(0), E = logits.size(1), k = a.k;
  const float* x = logits.data<float>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  float* w = a.r.weights.data<float>();
  int32_t* ex = a.r.experts.data<int32_t>();
  std::vector<float> p(E), sel(E);
  std::vector<bool> taken(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * E;
    if (a.sigmoid) {
      for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-row[e]));
    } else {
      float m = -std::numeric_limits<float>::infinity(), sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) m = std::max(m, row[e]);
      for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(row[e] - m);
      for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    }
    // Selection: NaN counts as -inf; best first, among equals the lower expert.
    for (int64_t e = 0; e < E; ++e) {
      sel[e] = bias ? p[e] + bias[e] : p[e];
      if (std::isnan(sel[e])) sel[e] = -std::numeric_limits<float>::infinity();
    }
    std::fill(taken.begin(), taken.end(), false);
    float total = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (!taken[e] && (best < 0 || sel[e] > sel[best])) best = e;
      taken[best] = true;
      ex[t * k + j] = static_cast<int32_t>(best);
      total += w[t * k + j] = p[best];
    }
    if (a.renormalize && total > 0.0f)
      for (int64_t j = 0; j < k; ++j) w[t * k + j] /= total;
  }
  // Counting sort by expert, token order kept within an expert.
  std::vector<int32_t> start(E + 1, 0);
  for (int64_t i = 0; i < T * k; ++i) ++start[ex[i] + 1];
  for (int64_t e = 0; e < E; ++e) {
    start[e + 1] += start[e];
    a.r.offs.data<int32_t>()[e] = start[e + 1];
  }
  int32_t* pos = a.r.sorted_pos.data<int32_t>();
  int32_t* tok = a.r.token_of.data<int32_t>();
  for (int64_t i = 0; i < T * k; ++i) {
    const int32_t at = start[ex[i]]++;
    pos[i] = at;
    tok[at] = static_cast<int32_t>(i / k);
  }
}

void moe_combine(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos) {
  detail::dispatch_float(y.dtype(), "moe_combine", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t tokens = out.size(0), N = out.size(1), k = weights.size(1);
    const T* src = y.data<T>();
    const float* w = weights.data<float>();
    const int32_t* pos = sorted_pos.data<int32_t>();
    T* dst = out.data<T>();
    std::vector<float> acc(N);
    for (int64_t t = 0; t < tokens; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = pos[t * k + j];
        KILN_CHECK(p >= 0 && p < y.size(0), "moe_combine: sorted_pos ", p, " is out of range for ", y.size(0),
                   " rows");
        const T* row = src + p * N;
        for (int64_t n = 0; n < N; ++n) acc[n] += w[t * k + j] * static_cast<float>(row[n]);
      }
      for (int64_t n = 0; n < N; ++n) dst[t * N + n] = T(acc[n]);
    }
  });
}

}  // namespace kiln::cpu
