// kiln::linalg: torch.linalg's LU family for float32 and complex64, batched over
// any leading dims (batch dims of two operands broadcast). Pivots are int32 and
// 1-based, as LAPACK's. The CPU runs LAPACK (through LAPACKE / OpenBLAS) one
// matrix per thread; CUDA is not there yet and says so.
#pragma once

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

}  // namespace kiln::linalg
