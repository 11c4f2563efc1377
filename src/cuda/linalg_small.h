// CUDA linear algebra for batches of tiny matrices, where a library call per
// matrix (or cuBLAS's batched LU) costs far more than the arithmetic.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cuda_backend {

// out [b, n, n] = inverse of a [b, n, n], float32 contiguous, 1 <= n <= 4: a matrix
// per thread in registers, Gauss-Jordan with partial pivoting (factor and solve in
// one pass). info [b] int32: 0, or LAPACK getrf's 1-based index of the first zero
// pivot; the word any_singular (host_flag()'s, for one) is set to 1 when some info is
// nonzero, and left alone otherwise.
void small_inverse(const Tensor& out, const Tensor& a, const Tensor& info, int32_t* any_singular);

// x [b, n, k] = the solution of A X = B (b [b, n, k], contiguous) for the triangle of
// a [b, n, n] (float32 contiguous, 1 <= n <= 64). n of 16 and 32: a thread per
// column of B, in registers, A's rows read as float4s. Otherwise a warp per system,
// A's triangle packed in shared memory, B's rows in registers (eight columns at a
// time), rows solved four at a time with inverted 4 x 4 diagonal blocks.
void small_triangular_solve(const Tensor& a, const Tensor& b, const Tensor& x, bool upper, bool unit);

// LU with partial pivoting of a [b, m, n] (float32 or complex64 contiguous,
// 1 <= m, n <= 64) into lu (same shape, may not alias a), in linalg_small_lu.cu:
// a row a thread in registers up to 32 x 32 and for float32, complex64 past 32 a
// block per matrix in shared memory. pivots [b, min(m, n)] int32 are 1-based as
// LAPACK's; info [b] int32 is 0 or the 1-based index of the first zero pivot.
void small_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info);

}  // namespace kiln::cuda_backend
