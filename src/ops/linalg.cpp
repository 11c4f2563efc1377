// Front doors of matmul / bmm / mm.
#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

namespace {
void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, b);
  check_same_device(op, a, b);
  KILN_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, but got ",
             dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  check_compute_float(op, a);
}

// a [B, M, K] x b [B, K, N], shapes already checked.
Tensor batched(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (a.size(2) == 0) return out.zero_();
  KILN_ON_DEVICE(out.device(), matmul, out, a, b);
  return out;
}
}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_matmul_dtypes("bmm", a, b);
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", a.shape(), " and ", b.shape());
  KILN_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes ", a.shape(), " and ", b.shape(),
             " cannot be multiplied (batch ", a.size(0), " vs ", b.size(0), ", inner ", a.size(2), " vs ", b.size(1),
             ")");
  return batched(a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_matmul_dtypes("mm", a, b);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got ", a.shape(), " and ", b.shape());
  KILN_CHECK(a.size(1) == b.size(0), "mm: shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (",
             a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  return batched(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  check_matmul_dtypes("matmul", a_in, b_in);
  KILN_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "matmul: both arguments need at least 1 dimension, got ",
             a_in.shape(), " and ", b_in.shape());
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  Tensor a = a_vec ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_vec ? b_in.unsqueeze(1) : b_in;
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  KILN_CHECK(K == b.size(-2), "matmul: shapes ", a_in.shape(), " and ", b_in.shape(), " cannot be multiplied (",
             M, "x", K, " and ", b.size(-2), "x", N, ")");
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch);
  const int64_t B = shape_numel(batch);
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {M, K});
  b_full.insert(b_full.end(), {K, N});
  Tensor out = batched(a.expand(a_full).reshape({B, M, K}), b.expand(b_full).reshape({B, K, N}));
  Shape out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  return out.view(out_shape);
}

}  // namespace kiln
