// How a BLAS call can read a row-major [rows, cols] matrix view without a copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

struct GemmOperand {
  bool transposed;  // stored column-major (the transpose of a row-major matrix)
  int64_t ld;       // leading dimension
};

// Rows contiguous (cs == 1) or columns contiguous (rs == 1), with a legal
// leading dimension; anything else needs a copy first.
inline std::optional<GemmOperand> gemm_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) return GemmOperand{false, rs};
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) return GemmOperand{true, cs};
  return std::nullopt;
}

// For a [B, rows, cols] batch operand: copies `t` to contiguous when BLAS cannot
// read it as it is, then returns how BLAS reads it.
inline GemmOperand gemm_ready(Tensor& t) {
  if (!gemm_operand(t.size(1), t.size(2), t.stride(1), t.stride(2))) t = t.contiguous();
  return *gemm_operand(t.size(1), t.size(2), t.stride(1), t.stride(2));
}

}  // namespace kiln
