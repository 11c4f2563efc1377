// CUDA linear algebra for batches of tiny matrices, where a library call per
// matrix (or cuBLAS's batched LU) costs far more than the arithmetic.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cuda_backend {

// out [b, n, n] = inverse of a [b, n, n], float32 contiguous, 1 <= n <= 4: a matrix
// per thread in registers, Gauss-Jordan with partial pivoting (factor and solve in
// one pass). info [b] int32: 0, or LAPACK getrf's 1-based index of the first zero
// pivot; any_singular (one int32) becomes 1 when some info is nonzero.
void small_inverse(const Tensor& out, const Tensor& a, const Tensor& info, const Tensor& any_singular);

// x [b, n, k] (holding B) replaced by the solution of A X = B for the triangle of
// a [b, n, n] (float32 contiguous, 1 <= n <= 64): a warp per system, A staged
// column-major in shared memory, X's rows in registers (eight columns at a time).
void small_triangular_solve(const Tensor& a, const Tensor& x, bool upper, bool unit);

}  // namespace kiln::cuda_backend
