// Front doors of the small fused ops of a decoder layer: rms_norm (with the
// residual add), layer_norm, silu_and_mul, apply_rotary.
#include <limits>

#include "core/backend.h"
#include "core/check.h"
#include "ops/common.h"

namespace kiln {

namespace {
std::pair<Tensor, Tensor> rms_norm_impl(const Tensor& x, const Tensor* residual, const std::optional<Tensor>& weight,
                                        std::optional<double> eps) {
  constexpr const char* op = "rms_norm";
  check_defined(op, x);
  check_compute_float(op, x);
  KILN_CHECK(x.dim() >= 1, op, ": input must have at least 1 dimension");
  const int64_t N = x.size(-1), M = N == 0 ? 0 : x.numel() / N;
  check_rms_norm_operands(op, x, residual, given(weight) ? &*weight : nullptr);
  const Tensor w = given(weight) ? weight->contiguous() : Tensor();
  Tensor res, res_out;
  if (residual) {
    res = residual->contiguous().view({M, N});
    res_out = Tensor::empty(x.shape(), x.dtype(), x.device());
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  // torch's default: the machine epsilon of the input's dtype
  const double dtype_eps = x.dtype() == DType::Float32 ? std::numeric_limits<float>::epsilon()
                           : x.dtype() == DType::Float16 ? 0.0009765625 : 0.0078125;
  const float e = static_cast<float>(eps.value_or(dtype_eps));
  if (M > 0)
    KILN_ON_DEVICE(x.device(), rms_norm_rows, out.view({M, N}), x.contiguous().view({M, N}), res,
                   res_out.defined() ? res_out.view({M, N}) : res_out, w, e);
  return {out, res_out};
}
}  // namespace

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, std::optional<double> eps) {
  return rms_norm_impl(x, nullptr, weight, eps).first;
}

std::pair<Tensor, Tensor> rms_norm_residual(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps) {
  check_defined("rms_norm", residual);
  return rms_norm_impl(x, &residual, weight, eps);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  constexpr const char* op = "layer_norm";
  check_defined(op, x);
  check_compute_float(op, x);
  const size_t nd = normalized_shape.size();
  bool trailing = nd >= 1 && nd <= x.shape().size();
  for (size_t i = 0; trailing && i < nd; ++i) trailing = x.shape()[x.shape().size() - nd + i] == normalized_shape[i];
  KILN_CHECK(trailing, op, ": normalized_shape ", normalized_shape, " must be the trailing dims of the input ",
             x.shape());
  KILN_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  int64_t N = 1;
  for (int64_t d : normalized_shape) N *= d;
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  auto param = [&](const std::optional<Tensor>& p, const char* what) {
    if (!given(p)) return Tensor();
    check_same_device(op, x, *p);
    KILN_CHECK(p->shape() == normalized_shape && p->dtype() == x.dtype(), op, ": ", what, " must be ",
               normalized_shape, " of ", x.dtype(), ", got ", p->dtype(), " ", p->shape());
    return p->contiguous().view({N});
  };
  const Tensor w = param(weight, "weight"), b = param(bias, "bias");
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (M > 0)
    KILN_ON_DEVICE(x.device(), layer_norm_rows, out.view({M, N}), x.contiguous().view({M, N}), w, b,
                   static_cast<float>(eps));
  return out;
}

Tensor silu_and_mul(const Tensor& x) {
  constexpr const char* op = "silu_and_mul";
  check_defined(op, x);
  check_compute_float(op, x);
  KILN_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, op, ": the last dim must be even (gate and up halves), got shape ",
             x.shape());
  Shape out_shape = x.shape();
  out_shape.back() /= 2;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  const int64_t H = out_shape.back(), M = H == 0 ? 0 : out.numel() / H;
  if (M > 0) KILN_ON_DEVICE(x.device(), silu_and_mul_rows, out.view({M, H}), x.contiguous().view({M, 2 * H}));
  return out;
}

Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  constexpr const char* op = "apply_rotary";
  check_defined(op, x, cos);
  check_defined(op, sin);
  check_same_device(op, x, cos);
  check_same_device(op, x, sin);
  check_compute_float(op, x);
  KILN_CHECK(x.dim() == 3, op, ": x must be [tokens, heads, head_dim], got shape ", x.shape());
  const int64_t T = x.size(0), D = x.size(2);
  KILN_CHECK(cos.dtype() == DType::Float32 && sin.dtype() == DType::Float32 && cos.dim() == 2 &&
                 cos.shape() == sin.shape() && cos.size(0) == T,
             op, ": cos and sin must be float32 [", T, ", rotary_dim / 2], got ", cos.dtype(), " ", cos.shape(),
             " and ", sin.dtype(), " ", sin.shape());
  KILN_CHECK(cos.size(1) * 2 <= D, op, ": rotary_dim ", cos.size(1) * 2, " exceeds head_dim ", D);
  const Tensor xin = x.stride(2) == 1 ? x : x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) KILN_ON_DEVICE(x.device(), rotary, out, xin, cos.contiguous(), sin.contiguous(), interleaved);
  return out;
}

}  // namespace kiln

namespace kiln {

int64_t check_qkv_rotary_operands(const char* op, const Tensor& qkv, int64_t hq, int64_t hkv, const Tensor& q_norm,
                                  const Tensor& k_norm, const Tensor& cos, const Tensor& sin, const Tensor& k_cache,
                                  const Tensor& v_cache) {
  check_defined(op, qkv, cos);
  check_defined(op, sin, k_cache);
  check_defined(op, v_cache);
  check_compute_float(op, qkv);
  for (const Tensor* t : {&cos, &sin, &k_cache, &v_cache}) check_same_device(op, qkv, *t);
  KILN_CHECK(hq > 0 && hkv > 0 && qkv.dim() == 2 && qkv.size(1) % (hq + 2 * hkv) == 0, op, ": qkv must be [T, (",
             hq, " + 2 * ", hkv, ") * head_dim], got shape ", qkv.shape());
  const int64_t D = qkv.size(1) / (hq + 2 * hkv);
  KILN_CHECK(k_cache.dim() == 3 && k_cache.size(0) == hkv && k_cache.size(2) == D && v_cache.shape() == k_cache.shape() &&
                 k_cache.dtype() == qkv.dtype() && v_cache.dtype() == qkv.dtype() && k_cache.stride(2) == 1 &&
                 v_cache.stride(2) == 1,
             op, ": k_cache and v_cache must be [", hkv, ", capacity, ", D, "] of ", qkv.dtype(),
             " with unit inner stride, got ", k_cache.dtype(), " ", k_cache.shape(), " and ", v_cache.dtype(), " ",
             v_cache.shape());
  const int64_t capacity = k_cache.size(1);
  KILN_CHECK(cos.dtype() == DType::Float32 && cos.dim() == 2 && cos.shape() == sin.shape() &&
                 sin.dtype() == DType::Float32 && cos.size(0) >= capacity && cos.size(1) * 2 <= D,
             op, ": cos and sin must be float32 [>= ", capacity, ", <= ", D / 2, "], got ", cos.dtype(), " ",
             cos.shape(), " and ", sin.dtype(), " ", sin.shape());
  for (const Tensor* n : {&q_norm, &k_norm})
    if (n->defined()) {
      check_same_device(op, qkv, *n);
      KILN_CHECK(n->dim() == 1 && n->size(0) == D && n->dtype() == qkv.dtype(), op, ": q_norm and k_norm must be [",
                 D, "] of ", qkv.dtype(), ", got ", n->dtype(), " ", n->shape());
    }
  return D;
}

Tensor qkv_rotary_cache(const Tensor& qkv, int64_t hq, int64_t hkv, const Tensor& q_norm, const Tensor& k_norm,
                        double eps, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                        const Tensor& k_cache, const Tensor& v_cache) {
  constexpr const char* op = "qkv_rotary_cache";
  check_defined(op, positions);
  const int64_t D = check_qkv_rotary_operands(op, qkv, hq, hkv, q_norm, k_norm, cos, sin, k_cache, v_cache);
  check_same_device(op, qkv, positions);
  const int64_t T = qkv.size(0), capacity = k_cache.size(1);
  KILN_CHECK(positions.dtype() == DType::Int32 && positions.dim() == 1 && positions.size(0) == T, op,
             ": positions must be int32 [", T, "], got ", positions.dtype(), " ", positions.shape());
  check_host_range(op, "positions", positions, capacity);
  QkvRotaryCacheArgs a;
  a.q_out = Tensor::empty({T, hq, D}, qkv.dtype(), qkv.device());
  a.qkv = qkv.stride(1) == 1 ? qkv : qkv.contiguous();
  a.q_norm = q_norm.defined() ? q_norm.contiguous() : q_norm;
  a.k_norm = k_norm.defined() ? k_norm.contiguous() : k_norm;
  a.cos = cos.contiguous();
  a.sin = sin.contiguous();
  a.positions = positions.contiguous();
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.hq = hq;
  a.hkv = hkv;
  a.eps = static_cast<float>(eps);
  if (T > 0) KILN_ON_DEVICE(qkv.device(), qkv_rotary_cache, a);
  return a.q_out;
}

}  // namespace kiln
