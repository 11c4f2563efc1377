// What the front door of linear and the CUDA backend share: the GEMM path (many
// rows, or few rows whose layout the few-rows kernel's vector loads cannot take) and
// the test of that layout.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

struct LinearArgs;

// Whether the few-rows kernel's 16-byte loads take args' weight and x rows: the CUDA
// backend sends the others to the GEMM, and the norm modes, which have no GEMM way,
// are sent only rows that pass (their front doors check first).
bool vector_rows(const LinearArgs& args);

// x [R, K] @ w[N, K]^T (+ b); a float8 weight is dequantised with `scale`
// (1 or N float32 values) to x's dtype first. Arguments already checked.
Tensor linear_gemm(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& b);

}  // namespace kiln
