// Front door of token sampling: temperature, top-k and top-p (nucleus) over a
// row of logits, one uniform draw per row from a seeded generator.
#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "ops/common.h"

namespace kiln {

Tensor sample(const Tensor& logits, double temperature, int64_t top_k, double top_p, Generator* gen) {
  constexpr const char* op = "sample";
  check_defined(op, logits);
  check_compute_float(op, logits);
  KILN_CHECK(logits.dim() == 1 || logits.dim() == 2, op, ": logits must be [vocab] or [batch, vocab], got shape ",
             logits.shape());
  KILN_CHECK(logits.size(-1) > 0, op, ": the vocabulary is empty (shape ", logits.shape(), ")");
  KILN_CHECK(std::isfinite(temperature) && temperature >= 0, op, ": temperature must be finite and >= 0, got ",
             temperature);
  KILN_CHECK(top_k >= 0, op, ": top_k must be >= 0 (0 keeps every token), got ", top_k);
  KILN_CHECK(top_p > 0 && top_p <= 1, op, ": top_p must be in (0, 1], got ", top_p);
  const Tensor rows = logits.dim() == 1 ? logits.unsqueeze(0) : logits;
  const int64_t B = rows.size(0), V = rows.size(1);
  Tensor out;
  if (temperature == 0 || top_k == 1) {
    out = argmax(rows, 1);  // greedy: no draw, the generator does not move
  } else {
    const Tensor probs = softmax(mul(rows.to(DType::Float32), Scalar(1.0 / temperature)), 1).contiguous();
    const Tensor u = rand({B}, DType::Float32, logits.device(), gen);
    out = Tensor::empty({B}, DType::Int64, logits.device());
    if (B > 0)
      KILN_ON_DEVICE(logits.device(), sample_rows, out, probs, u, top_k == 0 || top_k > V ? V : top_k,
                     static_cast<float>(top_p));
  }
  return logits.dim() == 1 ? out.view({}) : out;
}

}  // namespace kiln
