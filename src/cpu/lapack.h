// CPU LU-family kernels over batches of contiguous row-major matrices
// ([batch, rows, cols]), float32 or complex64, checked by kiln::linalg's front
// doors. Small matrices run one per thread; a large one gets OpenBLAS's threads.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cpu {

// lu [b, m, n] factored in place (getrf); pivots [b, min(m, n)] and info [b] int32.
void lu_factor_batched(const Tensor& lu, const Tensor& pivots, const Tensor& info);
// P [b, m, m], L [b, m, k], U [b, k, n] (zeroed by the caller) from a factored lu.
void lu_unpack_batched(const Tensor& lu, const Tensor& pivots, const Tensor& P, const Tensor& L, const Tensor& U);
// x solved in place: A X = B (left, x [b, n, k]) or X A = B (x [b, k, n]), A^H for adjoint.
void lu_solve_batched(const Tensor& lu, const Tensor& pivots, const Tensor& x, bool left, bool adjoint);
// x solved in place against the triangle of a [b, n, n] (trsm).
void triangular_solve_batched(const Tensor& a, const Tensor& x, bool upper, bool left, bool unit);
// lu (factored, nonsingular) replaced by the inverse (getri).
void inverse_from_lu_batched(const Tensor& lu, const Tensor& pivots);
// From a factored square batch: det [b] (lu's dtype), or sign [b] (lu's dtype)
// and log|det| [b] (float32).
void det_from_lu_batched(const Tensor& lu, const Tensor& pivots, const Tensor& det);
void slogdet_from_lu_batched(const Tensor& lu, const Tensor& pivots, const Tensor& sign, const Tensor& logabsdet);

}  // namespace kiln::cpu
