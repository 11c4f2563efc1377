// kiln::linalg: torch.linalg's LU family for float32 and complex64, batched over
// any leading dims (batch dims of two operands broadcast). Pivots are int32 and
// 1-based, as LAPACK's. The CPU runs LAPACK (through LAPACKE / OpenBLAS) one
// matrix per thread; CUDA runs kiln's own kernels for batches of small matrices
// (inverses up to 4 x 4, LU and float32 triangular solves up to 64 x 64) and
// cuSOLVER / cuBLAS beyond them. Not on CUDA yet (it says so): pinv of complex64.
#pragma once

#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln::linalg {

struct LuFactorResult {
  Tensor LU, pivots;  // LU [*, m, n]: L below the diagonal (unit diagonal implied), U on and above
};
struct LuFactorExResult {
  Tensor LU, pivots, info;  // info [*] int32: 0, or i > 0 when U[i-1, i-1] is exactly zero
};
struct LuResult {
  Tensor P, L, U;  // A = P @ L @ U; P [*, m, m], L [*, m, k], U [*, k, n], k = min(m, n)
};
struct QrResult {
  Tensor Q, R;
};
struct SvdResult {
  Tensor U, S, Vh;  // A = U diag(S) Vh; S float32, descending
};
struct LstsqResult {
  // solution [*, n, k]; residuals [*, k] (float32) when m > n, the driver is not gelsy and
  // every matrix has full rank, else empty; rank [*] int64 (not gels); singular_values
  // [*, min(m, n)] float32 (gelsd, gelss); what a driver does not give is empty, as torch's
  Tensor solution, residuals, rank, singular_values;
};
struct SlogdetResult {
  Tensor sign, logabsdet;  // det = sign * exp(logabsdet); singular: sign 0, logabsdet -inf
};

// torch.linalg.lu_factor_ex: never raises for a singular matrix (info says so).
LuFactorExResult lu_factor_ex(const Tensor& A, bool pivot = true);
// torch.linalg.lu_factor: raises when some U[i, i] is zero, as torch does.
LuFactorResult lu_factor(const Tensor& A, bool pivot = true);
// torch.linalg.lu: P, L, U of any [*, m, n].
LuResult lu(const Tensor& A, bool pivot = true);
// torch.linalg.lu_solve: A X = B (left) or X A = B, with A^H for adjoint.
Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left = true, bool adjoint = false);
// torch.linalg.solve_triangular: the triangle of A named by upper (the rest is not read).
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false);
// torch.linalg.solve: B may be a batch of vectors [*, n]; raises for a singular A.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
// torch.linalg.inv: raises for a singular A.
Tensor inv(const Tensor& A);
// torch.linalg.det and slogdet (logabsdet is float32 for complex64 input).
Tensor det(const Tensor& A);
SlogdetResult slogdet(const Tensor& A);

// torch.linalg.qr: mode "reduced" (Q [*, m, k], R [*, k, n]), "complete" (Q [*, m, m],
// R [*, m, n]) or "r" (R only; Q empty). Householder (geqrf) with blocked updates.
QrResult qr(const Tensor& A, const std::string& mode = "reduced");
// torch.linalg.svd (divide and conquer, gesdd) and svdvals. full_matrices completes
// U and Vh to orthonormal (unitary) bases.
SvdResult svd(const Tensor& A, bool full_matrices = true);
Tensor svdvals(const Tensor& A);
// torch.linalg.pinv through the SVD: singular values at or below max(atol, rtol * s_max)
// count as zero; rtol defaults to eps * max(m, n) unless atol > 0 is given. hermitian
// only names the algorithm torch would use; the result is the same.
Tensor pinv(const Tensor& A, std::optional<double> atol = {}, std::optional<double> rtol = {}, bool hermitian = false);
// torch.linalg.lstsq: CPU drivers gels, gelsy (the default), gelsd, gelss; CUDA has
// gels (QR, for full-rank A) alone, as torch's. rcond defaults to eps * max(m, n);
// B may be a batch of vectors.
LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond = {},
                  const std::optional<std::string>& driver = {});

// ---- backward formulas (vector-Jacobian products), for the autograd to come ----
// Given the gradient of a real loss with respect to an op's output, its gradient with
// respect to the inputs, in torch's convention (for complex tensors dL/dRe + i dL/dIm).
// Operands share their batch shape (no broadcast reduction); CPU and CUDA.
struct SolveGrads {
  Tensor A, B;
};
// A nonsingular; det = det(A).
Tensor det_backward(const Tensor& grad, const Tensor& A, const Tensor& det);
// inverse = inv(A).
Tensor inv_backward(const Tensor& grad, const Tensor& inverse);
// X = solve(A, B, left) (X a matrix [*, n, k] or [*, k, n]).
SolveGrads solve_backward(const Tensor& grad, const Tensor& A, const Tensor& X, bool left = true);
// X = lu_solve(LU, pivots, B, left, adjoint); .A is the gradient with respect to LU
// (the packed factors, as torch's), .B with respect to B.
SolveGrads lu_solve_backward(const Tensor& grad, const Tensor& LU, const Tensor& pivots, const Tensor& X,
                             bool left = true, bool adjoint = false);
// X = solve_triangular(A, B, upper, left, unitriangular); grad A lies in A's read triangle.
SolveGrads solve_triangular_backward(const Tensor& grad, const Tensor& A, const Tensor& X, bool upper, bool left = true,
                                     bool unitriangular = false);

}  // namespace kiln::linalg
