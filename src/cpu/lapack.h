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

// a [b, m, n] (destroyed) -> R [b, rows_r, n] (upper triangle of the factored a)
// and, when q is defined, Q [b, m, cols_q] (geqrf, then orgqr / ungqr).
void qr_batched(const Tensor& a, const Tensor& q, const Tensor& r);
// a [b, m, n] (destroyed) -> s [b, min(m, n)] float32 and, when u is defined,
// u [b, m, m or k] and vh [b, n or k, n] by their shapes (gesdd).
void svd_batched(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh);
// out [b, n, m] = V diag(1/s) U^H over the s_j > max(atol, rtol * s_0) of u [b, m, k],
// s [b, k], vh [b, k, n] (an SVD).
void pinv_from_svd(const Tensor& u, const Tensor& s, const Tensor& vh, double atol, double rtol, const Tensor& out);
// Least squares: a [b, m, n] (destroyed), x [b, max(m, n), k] holding B in its first
// m rows, replaced by the solution in its first n; driver 'l' (gels), 'y' (gelsy),
// 'd' (gelsd), 's' (gelss); rank [b] int64 and sv [b, min(m, n)] float32 when
// defined; residual [b, k] float32: |rows n..m of x|^2 per column when m > n.
void lstsq_batched(const Tensor& a, const Tensor& x, char driver, float rcond, const Tensor& rank, const Tensor& sv,
                   const Tensor& residual);
// out [b, m, n] = alpha * op(a) @ op(b), op the conjugate transpose where asked (gemm).
void matmul_adjoint_batched(const Tensor& out, const Tensor& a, bool adjoint_a, const Tensor& b, bool adjoint_b,
                            float alpha);
// t [b, m, n] zeroed -> ones on the diagonal.
void set_identity_batched(const Tensor& t);

}  // namespace kiln::cpu
