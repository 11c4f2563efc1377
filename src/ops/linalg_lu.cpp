// Front doors of kiln::linalg's LU family: arguments checked once (dtype,
// device, shapes, pivots), batch dims flattened (and broadcast between two
// operands), contiguous copies handed to the CPU (LAPACK) or CUDA (small-matrix
// kernels, cuSOLVER) backend, results shaped back. Messages for singular input
// follow torch's.
#include "kiln/linalg.h"
#include "kiln/stream.h"

#include "core/check.h"
#include "core/shape.h"
#include "cpu/lapack.h"
#include "ops/common.h"
#include "ops/linalg_common.h"

#if KILN_WITH_CUDA
#include "core/backend.h"
#include "cuda/linalg_small.h"
#include "cuda/linalg_solver.h"
#endif

namespace kiln::linalg {

LuFactorExResult lu_factor_ex(const Tensor& A, bool pivot) {
  constexpr const char* op = "linalg.lu_factor_ex";
  check_matrix_args(op, A, "A", false);
  if (!pivot) KILN_NOT_IMPLEMENTED(op, ": pivot=False is not supported (torch has it on CUDA only)");
  const Shape batch = batch_shape(A, 2);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Tensor pivots = Tensor::empty({shape_numel(batch), k}, DType::Int32, A.device());
  Tensor info = zeros({shape_numel(batch)}, DType::Int32, A.device());
  Tensor lu;
  if (A.is_cuda()) {
#if KILN_WITH_CUDA
    Tensor a = contiguous_batch(A, batch);
    lu = Tensor::empty(a.shape(), A.dtype(), A.device());
    cuda_backend::DeviceGuard guard(A.device().index);
    // up to 64 x 64: kiln's batched kernels (linalg_small_lu.cu); larger ones: cuSOLVER's getrf
    if (lu.numel() > 0 && m <= 64 && n <= 64)
      cuda_backend::small_lu_factor(a, lu, pivots, info);
    else if (lu.numel() > 0)
      cuda_backend::solver_lu_factor(a, lu, pivots, info);
#endif
  } else {
    lu = owned_batch(A, batch);
    if (lu.numel() > 0) cpu::lu_factor_batched(lu, pivots, info);
  }
  return {lu.reshape(A.shape()), pivots.reshape(concat(batch, {k})), info.reshape(batch)};
}

LuFactorResult lu_factor(const Tensor& A, bool pivot) {
  LuFactorExResult r = lu_factor_ex(A, pivot);
  const auto [i, v] = first_failure(r.info);
  KILN_CHECK(i < 0, "linalg.lu_factor: ", batch_prefix(r.info.shape(), i), "U[", v, ",", v,
             "] is zero and using it on lu_solve would result in a division by zero. If you still want to "
             "perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)");
  return {r.LU, r.pivots};
}

LuResult lu(const Tensor& A, bool pivot) {
  check_matrix_args("linalg.lu", A, "A", false);
  LuFactorExResult f = lu_factor_ex(A, pivot);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Tensor P = zeros({b, m, m}, A.dtype(), A.device()), L = zeros({b, m, k}, A.dtype(), A.device());
  Tensor U = zeros({b, k, n}, A.dtype(), A.device());
  if (b > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::lu_unpack(f.LU.reshape({b, m, n}), f.pivots.reshape({b, k}), P, L, U);
#endif
  } else if (b > 0) {
    cpu::lu_unpack_batched(f.LU.reshape({b, m, n}), f.pivots.reshape({b, k}), P, L, U);
  }
  return {P.reshape(concat(batch, {m, m})), L.reshape(concat(batch, {m, k})), U.reshape(concat(batch, {k, n}))};
}

namespace {

// lu_solve past its checks (solve's LU and pivots come from getrf): LU and pivots
// broadcast with B's batch, X solved in an owned copy of B.
Tensor solve_with_lu(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  const int64_t n = LU.size(-1);
  const Shape batch = broadcast_shapes(batch_shape(LU, 2), batch_shape(B, 2));
  Tensor lu = contiguous_batch(LU, batch);
  Tensor piv = pivots.unsqueeze(-1).expand(concat(batch, {n, 1})).contiguous().reshape({lu.size(0), n});
  const Shape out_shape = concat(batch, {B.size(-2), B.size(-1)});
  if (LU.is_cuda()) {
#if KILN_WITH_CUDA
    Tensor b = contiguous_batch(B, batch);
    if (b.numel() == 0 || n == 0) return b.clone().reshape(out_shape);
    cuda_backend::DeviceGuard guard(LU.device().index);
    return cuda_backend::solver_lu_solve(lu, piv, b, left, adjoint).reshape(out_shape);
#endif
  }
  Tensor x = owned_batch(B, batch);
  if (x.numel() > 0) cpu::lu_solve_batched(lu, piv, x, left, adjoint);
  return x.reshape(out_shape);
}

}  // namespace

Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  constexpr const char* op = "linalg.lu_solve";
  check_matrix_args(op, LU, "LU", true);
  check_matrix_args(op, B, "B", false);
  check_pair(op, LU, B);
  check_defined(op, pivots);
  check_same_device(op, LU, pivots);
  const int64_t n = LU.size(-1);
  KILN_CHECK(pivots.dtype() == DType::Int32, op, ": pivots must be int32, got ", dtype_name(pivots.dtype()));
  KILN_CHECK(pivots.dim() == LU.dim() - 1 && pivots.size(-1) == n && batch_shape(pivots, 1) == batch_shape(LU, 2), op,
             ": pivots must be ", concat(batch_shape(LU, 2), {n}), " for LU ", LU.shape(), ", got ", pivots.shape());
  check_solve_fits(op, "LU", LU, B, left);
  if (pivots.numel() > 0) {  // LAPACK would index rows with them
    const int64_t lo = amin(pivots).item<int64_t>(), hi = amax(pivots).item<int64_t>();
    KILN_CHECK(lo >= 1 && hi <= n, op, ": pivots must lie in [1, ", n, "], got ", lo < 1 ? lo : hi);
  }
  return solve_with_lu(LU, pivots, B, left, adjoint);
}

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  constexpr const char* op = "linalg.solve_triangular";
  check_matrix_args(op, A, "A", true);
  check_matrix_args(op, B, "B", false);
  check_pair(op, A, B);
  check_solve_fits(op, "A", A, B, left);
  const Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(B, 2));
  const Shape out_shape = concat(batch, {B.size(-2), B.size(-1)});
  const int64_t n = A.size(-1);
  Tensor a = contiguous_batch(A, batch);  // only read
  if (A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    // float32 systems up to 64 x 64 solved from the left: a warp per system; the rest: cuBLAS trsm
    if (A.dtype() == DType::Float32 && left && n >= 1 && n <= 64) {
      Tensor b = contiguous_batch(B, batch);
      Tensor x = Tensor::empty(b.shape(), DType::Float32, A.device());
      cuda_backend::small_triangular_solve(a, b, x, upper, unitriangular);
      return x.reshape(out_shape);
    }
    Tensor x = owned_batch(B, batch);
    cuda_backend::solver_triangular_solve(a, x, upper, left, unitriangular);
    return x.reshape(out_shape);
#endif
  }
  Tensor x = owned_batch(B, batch);
  if (x.numel() > 0) cpu::triangular_solve_batched(a, x, upper, left, unitriangular);
  return x.reshape(out_shape);
}

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  constexpr const char* op = "linalg.solve";
  check_matrix_args(op, A, "A", true);
  check_defined(op, B);
  check_pair(op, A, B);
  // torch's rule: B is a (batch of) vector(s) when it is 1-D or has A's shape without the last dim
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.shape() == batch_shape(A, 1));
  const Tensor b = vector ? B.unsqueeze(left ? -1 : -2) : B;
  check_matrix_args(op, b, "B", false);
  check_solve_fits(op, "A", A, b, left);
  LuFactorExResult f = lu_factor_ex(A);
  // solved before the infos are read back: on CUDA the read waits for the device, and
  // the solve is then queued already instead of starting after the round trip
  const Tensor x = solve_with_lu(f.LU, f.pivots, b, left, /*adjoint=*/false);
  const int64_t failed = first_failure(f.info).first;
  KILN_CHECK(failed < 0, op, ": ", batch_prefix(f.info.shape(), failed),
             "The solver failed because the input matrix is singular.");
  return vector ? x.squeeze(left ? -1 : -2) : x;
}

namespace {

// inv's singular-matrix error from a batch of getrf infos (host, any shape).
void check_invertible(const Tensor& info, const Shape& batch) {
  const auto [i, v] = first_failure(info);
  KILN_CHECK(i < 0, "linalg.inv: ", batch_prefix(batch, i), "The diagonal element ", v,
             " is zero, the inversion could not be completed because the input matrix is singular.");
}

#if KILN_WITH_CUDA
// CUDA: float32 matrices up to 4 x 4 in one kernel; the singular check waits for
// the stream (torch syncs here too) and reads a word of mapped host memory that the
// kernel sets (no memset and copy queued around the kernel, as a device word took),
// the whole info only when it is set.
Tensor inv_small_cuda(const Tensor& A) {
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  Tensor a = A.contiguous().reshape({b, n, n});
  Tensor out = Tensor::empty({b, n, n}, DType::Float32, A.device());
  Tensor info = Tensor::empty({b}, DType::Int32, A.device());
  cuda_backend::DeviceGuard guard(A.device().index);
  int32_t* any_singular = cuda_backend::host_flag();
  *any_singular = 0;  // the last call that used it has synchronised
  cuda_backend::small_inverse(out, a, info, any_singular);
  if (b == 0) return out.reshape(A.shape());
  Stream::current(A.device()).synchronize();
  if (*static_cast<volatile int32_t*>(any_singular) != 0) check_invertible(info.to(kCPU), batch);  // the kernel's store
  return out.reshape(A.shape());
}
#endif

}  // namespace

Tensor inv(const Tensor& A) {
  constexpr const char* op = "linalg.inv";
  check_matrix_args(op, A, "A", true);
  const int64_t n = A.size(-1);
#if KILN_WITH_CUDA
  if (A.is_cuda() && A.dtype() == DType::Float32 && n >= 1 && n <= 4) return inv_small_cuda(A);
#endif
  LuFactorExResult f = lu_factor_ex(A);
  const Tensor info = f.info.reshape({-1});
  const int64_t b = info.numel();
  if (A.is_cuda()) {
#if KILN_WITH_CUDA
    Tensor eye = zeros({b, n, n}, A.dtype(), A.device());
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::set_identity(eye);
    const Tensor x = solve_with_lu(f.LU, f.pivots, eye.reshape(A.shape()), /*left=*/true, /*adjoint=*/false);
    check_invertible(info, f.info.shape());  // after the solve is queued, as in solve
    return x;
#endif
  }
  check_invertible(info, f.info.shape());
  Tensor lu = f.LU.reshape({b, n, n});  // owned by f, contiguous
  if (lu.numel() > 0) cpu::inverse_from_lu_batched(lu, f.pivots.reshape({b, n}));
  return lu.reshape(A.shape());
}

Tensor det(const Tensor& A) {
  check_matrix_args("linalg.det", A, "A", true);
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  if (n == 0) return ones(batch, A.dtype(), A.device());  // the empty product
  LuFactorExResult f = lu_factor_ex(A);
  Tensor out = Tensor::empty({b}, A.dtype(), A.device());
  const Tensor lu = f.LU.reshape({b, n, n}), piv = f.pivots.reshape({b, n});
  if (b > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::lu_determinants(lu, piv, out, Tensor(), Tensor());
#endif
  } else if (b > 0) {
    cpu::det_from_lu_batched(lu, piv, out);
  }
  return out.reshape(batch);
}

SlogdetResult slogdet(const Tensor& A) {
  check_matrix_args("linalg.slogdet", A, "A", true);
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  if (n == 0) return {ones(batch, A.dtype(), A.device()), zeros(batch, DType::Float32, A.device())};
  LuFactorExResult f = lu_factor_ex(A);
  Tensor sign = Tensor::empty({b}, A.dtype(), A.device()), logabs = Tensor::empty({b}, DType::Float32, A.device());
  const Tensor lu = f.LU.reshape({b, n, n}), piv = f.pivots.reshape({b, n});
  if (b > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::lu_determinants(lu, piv, Tensor(), sign, logabs);
#endif
  } else if (b > 0) {
    cpu::slogdet_from_lu_batched(lu, piv, sign, logabs);
  }
  return {sign.reshape(batch), logabs.reshape(batch)};
}

}  // namespace kiln::linalg
