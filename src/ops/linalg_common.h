// What kiln::linalg's front doors share: argument checks (float32 / complex64
// matrices on the CPU), batch shapes, owned contiguous batches, torch's
// "(batch element i)" prefix.
#pragma once

#include <string>
#include <utility>

#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln::linalg {

// dtype and shape, on any device.
inline void check_matrix_args(const char* op, const Tensor& A, const char* name, bool square) {
  check_defined(op, A);
  KILN_CHECK(A.dtype() == DType::Float32 || A.dtype() == DType::Complex64, op, ": ", name, " dtype ",
             dtype_name(A.dtype()), " is not supported (float32, complex64 are)");
  KILN_CHECK(A.dim() >= 2, op, ": ", name, " must have at least 2 dimensions, got ", A.shape());
  KILN_CHECK(!square || A.size(-1) == A.size(-2), op, ": ", name, " must be batches of square matrices, but they are ",
             A.size(-2), " by ", A.size(-1), " matrices");
}

inline void check_pair(const char* op, const Tensor& A, const Tensor& B) {
  check_same_device(op, A, B);
  KILN_CHECK(A.dtype() == B.dtype(), op, ": expected A and B to have the same dtype, but got ", dtype_name(A.dtype()),
             " and ", dtype_name(B.dtype()));
}

inline Shape batch_shape(const Tensor& t, int64_t core) { return Shape(t.shape().begin(), t.shape().end() - core); }

inline Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// An owned contiguous [b, rows, cols] copy of t broadcast to batch + [rows, cols].
inline Tensor owned_batch(const Tensor& t, const Shape& batch) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  return t.expand(concat(batch, {rows, cols})).clone().reshape({shape_numel(batch), rows, cols});
}

// The same for operands the kernels only read: a copy only where t is not
// already contiguous or is broadcast.
inline Tensor contiguous_batch(const Tensor& t, const Shape& batch) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  return t.expand(concat(batch, {rows, cols})).contiguous().reshape({shape_numel(batch), rows, cols});
}

// The (batch element i) prefix torch puts on errors of batched input.
inline std::string batch_prefix(const Shape& batch, int64_t i) {
  return batch.empty() ? "" : detail::format("(batch element ", i, ") ");
}

// The first matrix whose LAPACK info (an int32 tensor, any shape, on any device)
// is nonzero: its flat index and the info; -1 and 0 when there is none.
inline std::pair<int64_t, int32_t> first_failure(const Tensor& info) {
  const Tensor flat = info.reshape({-1}).to(kCPU);
  const int32_t* v = flat.data<int32_t>();
  for (int64_t i = 0; i < flat.numel(); ++i)
    if (v[i] != 0) return {i, v[i]};
  return {-1, 0};
}

// B fits the square A (or LU, named `a`) of a solve from the left (A X = B) or the right (X A = B).
inline void check_solve_fits(const char* op, const char* a, const Tensor& A, const Tensor& B, bool left) {
  KILN_CHECK((left ? B.size(-2) : B.size(-1)) == A.size(-1), op, ": B ", B.shape(), " does not fit ", a, " ", A.shape(),
             left ? " (A X = B needs B's rows to equal n)" : " (X A = B needs B's columns to equal n)");
}

}  // namespace kiln::linalg
