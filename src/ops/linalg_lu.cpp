// Front doors of kiln::linalg's LU family: arguments checked once (dtype,
// device, shapes, pivots), batch dims flattened (and broadcast between two
// operands), owned contiguous copies handed to the CPU kernels, results shaped
// back. Messages for singular input follow torch's.
#include "kiln/linalg.h"

#include "core/check.h"
#include "core/shape.h"
#include "cpu/lapack.h"
#include "ops/common.h"
#include "ops/linalg_common.h"

#if KILN_WITH_CUDA
#include "core/backend.h"
#include "cuda/linalg_small.h"
#endif

namespace kiln::linalg {

LuFactorExResult lu_factor_ex(const Tensor& A, bool pivot) {
  constexpr const char* op = "linalg.lu_factor_ex";
  check_matrix_args(op, A, "A", false);
  if (!pivot) KILN_NOT_IMPLEMENTED(op, ": pivot=False is not supported (torch has it on CUDA only)");
  const Shape batch = batch_shape(A, 2);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  if (A.is_cuda()) {
#if KILN_WITH_CUDA
    // CUDA: matrices up to 64 x 64, a block per matrix (cuSOLVER for larger ones is not there yet)
    if (m > 64 || n > 64)
      KILN_NOT_IMPLEMENTED(op, " on CUDA is not implemented yet for matrices larger than 64 x 64 (got ", m, " x ", n,
                           "); move A to the CPU");
    Tensor a = contiguous_batch(A, batch);
    Tensor lu = Tensor::empty(a.shape(), A.dtype(), A.device());
    Tensor pivots = Tensor::empty({a.size(0), k}, DType::Int32, A.device());
    Tensor info = zeros({a.size(0)}, DType::Int32, A.device());
    cuda_backend::DeviceGuard guard(A.device().index);
    if (lu.numel() > 0) cuda_backend::small_lu_factor(a, lu, pivots, info);
    return {lu.reshape(A.shape()), pivots.reshape(concat(batch, {k})), info.reshape(batch)};
#endif
  }
  check_matrix(op, A, "A", false);
  Tensor lu = owned_batch(A, batch);
  Tensor pivots = Tensor::empty({lu.size(0), k}, DType::Int32, A.device());
  Tensor info = zeros({lu.size(0)}, DType::Int32, A.device());
  if (lu.numel() > 0) cpu::lu_factor_batched(lu, pivots, info);
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
  check_matrix("linalg.lu", A, "A", false);
  LuFactorExResult f = lu_factor_ex(A, pivot);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Tensor P = zeros({b, m, m}, A.dtype(), A.device()), L = zeros({b, m, k}, A.dtype(), A.device());
  Tensor U = zeros({b, k, n}, A.dtype(), A.device());
  if (b > 0) cpu::lu_unpack_batched(f.LU.reshape({b, m, n}), f.pivots.reshape({b, k}), P, L, U);
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
  Tensor x = owned_batch(B, batch);
  if (x.numel() > 0) cpu::lu_solve_batched(lu, piv, x, left, adjoint);
  return x.reshape(concat(batch, {B.size(-2), B.size(-1)}));
}

}  // namespace

Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  constexpr const char* op = "linalg.lu_solve";
  check_matrix(op, LU, "LU", true);
  check_matrix(op, B, "B", false);
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
#if KILN_WITH_CUDA
  // CUDA: float32 systems up to 64 x 64 solved from the left, a warp per system
  if (A.defined() && B.defined() && A.is_cuda() && B.device() == A.device() && A.dtype() == DType::Float32 &&
      B.dtype() == DType::Float32 && left && A.dim() >= 2 && B.dim() >= 2 && A.size(-1) == A.size(-2) &&
      A.size(-1) >= 1 && A.size(-1) <= 64 && B.size(-2) == A.size(-1)) {
    const Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(B, 2));
    Tensor a = contiguous_batch(A, batch), b = contiguous_batch(B, batch);
    Tensor x = Tensor::empty(b.shape(), DType::Float32, A.device());
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::small_triangular_solve(a, b, x, upper, unitriangular);
    return x.reshape(concat(batch, {B.size(-2), B.size(-1)}));
  }
#endif
  check_matrix(op, A, "A", true);
  check_matrix(op, B, "B", false);
  check_pair(op, A, B);
  check_solve_fits(op, "A", A, B, left);
  const Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(B, 2));
  Tensor a = contiguous_batch(A, batch);  // trsm only reads it
  Tensor x = owned_batch(B, batch);
  if (x.numel() > 0) cpu::triangular_solve_batched(a, x, upper, left, unitriangular);
  return x.reshape(concat(batch, {B.size(-2), B.size(-1)}));
}

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  constexpr const char* op = "linalg.solve";
  check_matrix(op, A, "A", true);
  check_defined(op, B);
  check_pair(op, A, B);
  // torch's rule: B is a (batch of) vector(s) when it is 1-D or has A's shape without the last dim
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.shape() == batch_shape(A, 1));
  const Tensor b = vector ? B.unsqueeze(left ? -1 : -2) : B;
  check_matrix(op, b, "B", false);
  check_solve_fits(op, "A", A, b, left);
  LuFactorExResult f = lu_factor_ex(A);
  const int64_t failed = first_failure(f.info).first;
  KILN_CHECK(failed < 0, op, ": ", batch_prefix(f.info.shape(), failed),
             "The solver failed because the input matrix is singular.");
  const Tensor x = solve_with_lu(f.LU, f.pivots, b, left, /*adjoint=*/false);
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
// CUDA: float32 matrices up to 4 x 4 in one kernel; the singular check reads one
// flag back (torch syncs here too), the whole info only when it is set.
Tensor inv_small_cuda(const Tensor& A) {
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  Tensor a = A.contiguous().reshape({b, n, n});
  Tensor out = Tensor::empty({b, n, n}, DType::Float32, A.device());
  Tensor info = Tensor::empty({b}, DType::Int32, A.device());
  Tensor any_singular = Tensor::empty({}, DType::Int32, A.device());
  cuda_backend::DeviceGuard guard(A.device().index);
  cuda_backend::small_inverse(out, a, info, any_singular);
  if (b > 0 && any_singular.item<int64_t>() != 0) check_invertible(info.to(kCPU), batch);
  return out.reshape(A.shape());
}
#endif

}  // namespace

Tensor inv(const Tensor& A) {
  constexpr const char* op = "linalg.inv";
#if KILN_WITH_CUDA
  if (A.defined() && A.is_cuda() && A.dtype() == DType::Float32 && A.dim() >= 2 && A.size(-1) == A.size(-2) &&
      A.size(-1) >= 1 && A.size(-1) <= 4)
    return inv_small_cuda(A);
#endif
  check_matrix(op, A, "A", true);
  LuFactorExResult f = lu_factor_ex(A);
  const Tensor info = f.info.reshape({-1});
  check_invertible(info, f.info.shape());
  const int64_t n = A.size(-1), b = info.numel();
  Tensor lu = f.LU.reshape({b, n, n});  // owned by f, contiguous
  if (lu.numel() > 0) cpu::inverse_from_lu_batched(lu, f.pivots.reshape({b, n}));
  return lu.reshape(A.shape());
}

Tensor det(const Tensor& A) {
  check_matrix("linalg.det", A, "A", true);
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  if (n == 0) return ones(batch, A.dtype(), A.device());  // the empty product
  LuFactorExResult f = lu_factor_ex(A);
  Tensor out = Tensor::empty({b}, A.dtype(), A.device());
  if (b > 0) cpu::det_from_lu_batched(f.LU.reshape({b, n, n}), f.pivots.reshape({b, n}), out);
  return out.reshape(batch);
}

SlogdetResult slogdet(const Tensor& A) {
  check_matrix("linalg.slogdet", A, "A", true);
  const Shape batch = batch_shape(A, 2);
  const int64_t n = A.size(-1), b = shape_numel(batch);
  if (n == 0) return {ones(batch, A.dtype(), A.device()), zeros(batch, DType::Float32, A.device())};
  LuFactorExResult f = lu_factor_ex(A);
  Tensor sign = Tensor::empty({b}, A.dtype(), A.device()), logabs = Tensor::empty({b}, DType::Float32, A.device());
  if (b > 0) cpu::slogdet_from_lu_batched(f.LU.reshape({b, n, n}), f.pivots.reshape({b, n}), sign, logabs);
  return {sign.reshape(batch), logabs.reshape(batch)};
}

}  // namespace kiln::linalg
