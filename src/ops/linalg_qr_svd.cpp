// Front doors of kiln::linalg.qr / svd / svdvals: checks, batch flattening,
// the empty cases (bases of zero-size matrices are identities, as torch's).
#include <algorithm>
#include <limits>

#include "cpu/lapack.h"
#include "kiln/linalg.h"
#include "kiln/ops.h"
#include "ops/linalg_common.h"

#if KILN_WITH_CUDA
#include "core/backend.h"
#include "cuda/linalg_solver.h"
#endif

namespace kiln::linalg {

namespace {

Tensor identity_batch(int64_t b, int64_t m, int64_t n, DType dtype, Device device) {
  Tensor t = zeros({b, m, n}, dtype, device);
  if (t.numel() == 0) return t;
  if (device.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(device.index);
    cuda_backend::set_identity(t);
#endif
  } else {
    cpu::set_identity_batched(t);
  }
  return t;
}

// a (an owned [b, m, n] batch, overwritten) = U diag(S) Vh on its device; U and Vh
// undefined for the values alone.
void singular_value_decomposition(const Tensor& a, const Tensor& U, const Tensor& S, const Tensor& Vh) {
  if (a.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(a.device().index);
    cuda_backend::solver_svd(a, U, S, Vh);
#endif
  } else {
    cpu::svd_batched(a, U, S, Vh);
  }
}

}  // namespace

QrResult qr(const Tensor& A, const std::string& mode) {
  constexpr const char* op = "linalg.qr";
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", op,
             ": mode must be 'reduced', 'complete' or 'r', got '", mode, "'");
  check_matrix_args(op, A, "A", false);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t rows_r = mode == "complete" ? m : k, cols_q = mode == "complete" ? m : k;
  Tensor a = owned_batch(A, batch);
  Tensor R = zeros({b, rows_r, n}, A.dtype(), A.device());
  Tensor Q = mode == "r" ? Tensor() : identity_batch(b, m, cols_q, A.dtype(), A.device());
  if (a.numel() > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::solver_qr(a, Q, R);
#endif
  } else if (a.numel() > 0) {
    cpu::qr_batched(a, Q, R);
  }
  return {mode == "r" ? Tensor::empty({0}, A.dtype(), A.device()) : Q.reshape(concat(batch, {m, cols_q})),
          R.reshape(concat(batch, {rows_r, n}))};
}

SvdResult svd(const Tensor& A, bool full_matrices) {
  constexpr const char* op = "linalg.svd";
  check_matrix_args(op, A, "A", false);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t ucols = full_matrices ? m : k, vrows = full_matrices ? n : k;
  Tensor a = owned_batch(A, batch);
  Tensor U = identity_batch(b, m, ucols, A.dtype(), A.device());
  Tensor Vh = identity_batch(b, vrows, n, A.dtype(), A.device());
  Tensor S = zeros({b, k}, DType::Float32, A.device());
  if (a.numel() > 0) singular_value_decomposition(a, U, S, Vh);
  return {U.reshape(concat(batch, {m, ucols})), S.reshape(concat(batch, {k})), Vh.reshape(concat(batch, {vrows, n}))};
}

Tensor svdvals(const Tensor& A) {
  constexpr const char* op = "linalg.svdvals";
  check_matrix_args(op, A, "A", false);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), k = std::min(A.size(-2), A.size(-1));
  Tensor a = owned_batch(A, batch);
  Tensor S = zeros({b, k}, DType::Float32, A.device());
  if (a.numel() > 0) singular_value_decomposition(a, Tensor(), S, Tensor());
  return S.reshape(concat(batch, {k}));
}

Tensor pinv(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  constexpr const char* op = "linalg.pinv";
  check_matrix_args(op, A, "A", false);
  KILN_CHECK(atol.value_or(0.0) >= 0.0 && rtol.value_or(0.0) >= 0.0, op, ": atol and rtol must be non-negative, got ",
             atol.value_or(0.0), " and ", rtol.value_or(0.0));
  (void)hermitian;
  const int64_t m = A.size(-2), n = A.size(-1);
  const double eps = std::numeric_limits<float>::epsilon();
  const double rt = rtol ? *rtol : (atol && *atol > 0.0 ? 0.0 : eps * static_cast<double>(std::max(m, n)));
  const SvdResult r = svd(A, false);
  const Shape batch = batch_shape(A, 2);
  const int64_t b = shape_numel(batch), k = std::min(m, n);
  Tensor out = zeros({b, n, m}, A.dtype(), A.device());
  if (out.numel() > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::solver_pinv(r.U.reshape({b, m, k}), r.S.reshape({b, k}), r.Vh.reshape({b, k, n}),
                              atol.value_or(0.0), rt, out);
#endif
  } else if (out.numel() > 0) {
    cpu::pinv_from_svd(r.U.reshape({b, m, k}).contiguous(), r.S.reshape({b, k}).contiguous(),
                       r.Vh.reshape({b, k, n}).contiguous(), atol.value_or(0.0), rt, out);
  }
  return out.reshape(concat(batch, {n, m}));
}

LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                  const std::optional<std::string>& driver_name) {
  constexpr const char* op = "linalg.lstsq";
  check_matrix_args(op, A, "A", false);
  // torch's defaults: gelsy on the CPU; CUDA has gels (QR, full-rank A) alone
  const std::string driver = driver_name.value_or(A.is_cuda() ? "gels" : "gelsy");
  if (A.is_cuda())
    KILN_CHECK(driver == "gels", op, ": driver '", driver, "' is not supported on CUDA (gels is, as torch's)");
  KILN_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss", op,
             ": driver must be one of gels, gelsy, gelsd, gelss on the CPU, got '", driver, "'");
  check_defined(op, B);
  check_pair(op, A, B);
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.shape() == batch_shape(A, 1));
  const Tensor b_in = vector ? B.unsqueeze(-1) : B;
  check_matrix_args(op, b_in, "B", false);
  const int64_t m = A.size(-2), n = A.size(-1), k = b_in.size(-1), mn = std::min(m, n);
  KILN_CHECK(b_in.size(-2) == m, op, ": A ", A.shape(), " and B ", B.shape(), " need the same number of rows (", m,
             " vs ", b_in.size(-2), ")");
  const Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(b_in, 2));
  const int64_t nb = shape_numel(batch);
  Tensor a = owned_batch(A, batch);
  Tensor x = zeros({nb, std::max(m, n), k}, A.dtype(), A.device());
  if (x.numel() > 0) x.narrow(1, 0, m).copy_(b_in.expand(concat(batch, {m, k})).reshape({nb, m, k}));
  const char d = driver == "gels" ? 'l' : driver == "gelsy" ? 'y' : driver == "gelsd" ? 'd' : 's';
  const bool has_rank = d != 'l', has_sv = d == 'd' || d == 's';
  Tensor rank = has_rank ? zeros({nb}, DType::Int64, A.device()) : Tensor();
  Tensor sv = has_sv ? zeros({nb, mn}, DType::Float32, A.device()) : Tensor();
  Tensor residual = zeros({nb, k}, DType::Float32, A.device());
  const double eps = std::numeric_limits<float>::epsilon();
  const float rc = static_cast<float>(rcond.value_or(eps * static_cast<double>(std::max(m, n))));
  if (a.numel() > 0 && k > 0 && A.is_cuda()) {
#if KILN_WITH_CUDA
    cuda_backend::DeviceGuard guard(A.device().index);
    cuda_backend::solver_lstsq(a, x, residual);
#endif
  } else if (a.numel() > 0 && k > 0) {
    cpu::lstsq_batched(a, x, d, rc, rank, sv, residual);
  }
  LstsqResult r;
  Tensor sol = x.narrow(1, 0, n).contiguous().reshape(concat(batch, {n, k}));
  r.solution = vector ? sol.squeeze(-1) : sol;
  bool full_rank = true;
  if (has_rank && nb > 0 && m > n) full_rank = amin(rank).item<int64_t>() == n;
  const bool with_residuals = m > n && d != 'y' && full_rank && nb > 0;
  r.residuals = with_residuals ? (vector ? residual.reshape(batch) : residual.reshape(concat(batch, {k})))
                               : Tensor::empty({0}, DType::Float32, A.device());
  r.rank = has_rank ? rank.reshape(batch) : Tensor::empty({0}, DType::Int64, A.device());
  r.singular_values = has_sv ? sv.reshape(concat(batch, {mn})) : Tensor::empty({0}, DType::Float32, A.device());
  return r;
}

}  // namespace kiln::linalg
