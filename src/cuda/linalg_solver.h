// CUDA linear algebra through cuSOLVER, for the matrices linalg_small's one-kernel
// paths do not hold. Operands are kiln's row-major [b, rows, cols] contiguous
// batches of float32 or complex64; the column-major layout cuSOLVER wants is made
// here (by transposing copies, or by reading row-major memory as the transpose
// where that is what the routine needs). One library call per matrix: the batch
// loops run on the host, nothing waits for the device.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cuda_backend {

// getrf: lu [b, m, n] = the LU factors of a (L below the diagonal, U on and above),
// pivots [b, min(m, n)] int32 1-based, info [b] int32 (0, or the first zero pivot).
void solver_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info);

// X of A X = B (left) or X A = B, with A^H for adjoint, from lu [b, n, n] and pivots
// [b, n] (the permutation, then two triangular solves; getrs past 6144 rows); rhs
// [b, rows, cols] contiguous. Returns X (a new tensor of rhs's shape).
Tensor solver_lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& rhs, bool left, bool adjoint);

// From LU factors lu [b, n, n] and pivots [b, n]: det [b] (lu's dtype), or sign [b]
// (lu's dtype) and logabsdet [b] float32; the unused outputs are undefined tensors.
// A warp per matrix.
void lu_determinants(const Tensor& lu, const Tensor& pivots, const Tensor& det, const Tensor& sign,
                     const Tensor& logabsdet);

// geqrf + orgqr/ungqr: r [b, rows_r, n] (rows_r = min(m, n) or m), q [b, m, cols_q]
// (cols_q = min(m, n) or m; undefined for R alone).
void solver_qr(const Tensor& a, const Tensor& q, const Tensor& r);

// gesvdj (Jacobi; gesvd for a matrix it leaves unconverged, after one read-back of
// the infos): s [b, min(m, n)] float32 descending; u [b, m, m or k] and vh
// [b, n or k, n] (both undefined for the values alone). Each matrix is first scaled
// by a power of two that brings its largest entry into [1, 2), exactly, so inputs
// near float32's range limits factor as well as any other.
void solver_svd(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh);

// P [b, m, m], L [b, m, k] and U [b, k, n] (contiguous, zeroed) of A = P L U from
// lu [b, m, n] and pivots [b, k].
void lu_unpack(const Tensor& lu, const Tensor& pivots, const Tensor& P, const Tensor& L, const Tensor& U);

// cuBLAS trsm, in place on x: A X = B (left) or X A = B for the triangle of a
// [b, n, n] named by upper; x [b, rows, cols] holds B. One call per matrix.
void solver_triangular_solve(const Tensor& a, const Tensor& x, bool upper, bool left, bool unit);

// torch's gels on CUDA: least squares by QR (geqrf, ormqr/unmqr, trsm) for full-rank
// a [b, m, n]; x [b, max(m, n), k] holds B in its first m rows and gets X in its
// first n; residual [b, k] float32 gets the squared residuals when m > n.
void solver_lstsq(const Tensor& a, const Tensor& x, const Tensor& residual);

// pinv from a reduced SVD: out [b, n, m] = Vh^H diag(1/s, zero at or below
// max(atol, rtol * s_max)) U^H; u [b, m, k] (overwritten), s [b, k], vh [b, k, n].
void solver_pinv(const Tensor& u, const Tensor& s, const Tensor& vh, double atol, double rtol, const Tensor& out);

// z = conj(z), in place (complex64; nothing to do for float32).
void conjugate_in_place(const Tensor& z);

// Ones on the diagonal of each matrix of t [b, rows, cols] (contiguous, zeroed).
void set_identity(const Tensor& t);

}  // namespace kiln::cuda_backend
