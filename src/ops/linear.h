// The GEMM path of linear, shared by the front door (many rows) and the CUDA
// backend (few rows whose layout its vector loads cannot take).
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// x [R, K] @ w[N, K]^T (+ b); a float8 weight is dequantised with `scale`
// (1 or N float32 values) to x's dtype first. Arguments already checked.
Tensor linear_gemm(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& b);

}  // namespace kiln
