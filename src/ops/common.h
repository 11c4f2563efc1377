// Checks shared by the op front doors, so messages read the same everywhere.
#pragma once

#include <algorithm>

#include "core/check.h"
#include "kiln/ops.h"

namespace kiln {

inline void check_defined(const char* op, const Tensor& a) {
  KILN_CHECK(a.defined(), op, ": got an undefined tensor");
}
inline void check_defined(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a);
  check_defined(op, b);
}
inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device() == b.device(), op, ": expected all tensors to be on the same device, but found ",
             a.device().str(), " and ", b.device().str());
}

// float32, float16, bfloat16: the dtypes ops that compute in float32 take.
// Integers of a host tensor (positions, lengths, ids) within [0, end) or, with
// end_inclusive, [0, end]; on CUDA they are not read (that would wait for the
// device), the kernels guard them. "<op>: <what> must lie in [0, end), got v".
// int32 and int64 (every caller's) are scanned in place: amin and amax would cost a
// decode step's qkv_rotary_cache more than its own work.
inline void check_host_range(const char* op, const char* what, const Tensor& t, int64_t end,
                             bool end_inclusive = false) {
  if (t.is_cuda() || t.numel() == 0) return;
  int64_t lo = 0, hi = 0;
  if ((t.dtype() == DType::Int32 || t.dtype() == DType::Int64) && t.is_contiguous()) {
    auto scan = [&](const auto* p) {
      lo = hi = p[0];
      for (int64_t i = 1; i < t.numel(); ++i) {
        lo = std::min<int64_t>(lo, p[i]);
        hi = std::max<int64_t>(hi, p[i]);
      }
    };
    if (t.dtype() == DType::Int32) scan(t.data<int32_t>());
    else scan(t.data<int64_t>());
  } else {
    lo = amin(t).item<int64_t>();
    hi = amax(t).item<int64_t>();
  }
  KILN_CHECK(lo >= 0 && (end_inclusive ? hi <= end : hi < end), op, ": ", what, " must lie in [0, ", end,
             end_inclusive ? "]" : ")", ", got ", lo < 0 ? lo : hi);
}

// An optional tensor argument that was passed (present and defined).
inline bool given(const std::optional<Tensor>& t) { return t.has_value() && t->defined(); }

// grouped_mm's b_scale for a float8_e4m3fn b [G, K, N], checked (float32, a's
// device; [], [G], [G, 1] or [G, N]) and returned as a [G, N] view.
Tensor grouped_b_scale(const char* op, const Tensor& a, const Tensor& scale, int64_t G, int64_t N);

inline bool is_compute_float(DType d) { return d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16; }
// "op: <what> <dtype> is not supported (float32, float16, bfloat16 are)" unless t has one of them.
inline void check_compute_float(const char* op, const Tensor& t, const char* what = "dtype") {
  KILN_CHECK(is_compute_float(t.dtype()), op, ": ", what, " ", dtype_name(t.dtype()),
             " is not supported (float32, float16, bfloat16 are)");
}

// An RMSNorm's operands beside its input x [..., N] (rms_norm, rms_norm_linear): the
// weight `name` [N] of x's dtype and, when given, the residual of x's shape and dtype,
// each on x's device.
inline void check_rms_norm_operands(const char* op, const Tensor& x, const Tensor* residual, const Tensor* weight,
                                    const char* name = "weight") {
  if (weight) {
    check_same_device(op, x, *weight);
    const int64_t N = x.size(-1);
    KILN_CHECK(weight->dim() == 1 && weight->size(0) == N && weight->dtype() == x.dtype(), op, ": ", name,
               " must be [", N, "] of ", x.dtype(), ", got ", weight->dtype(), " ", weight->shape());
  }
  if (residual) {
    check_same_device(op, x, *residual);
    KILN_CHECK(residual->shape() == x.shape() && residual->dtype() == x.dtype(), op, ": residual must match the input (",
               x.dtype(), " ", x.shape(), "), got ", residual->dtype(), " ", residual->shape());
  }
}

// qkv_rotary_cache's operands besides its positions (also attention_decode_qkv's):
// qkv [T, (hq + 2 hkv) D] of a float dtype, the caches [hkv, capacity, D] of its dtype
// with unit inner stride, cos and sin float32 [>= capacity, <= D / 2], the norms [D]
// of its dtype or undefined, all on qkv's device. Returns D.
int64_t check_qkv_rotary_operands(const char* op, const Tensor& qkv, int64_t hq, int64_t hkv, const Tensor& q_norm,
                                  const Tensor& k_norm, const Tensor& cos, const Tensor& sin, const Tensor& k_cache,
                                  const Tensor& v_cache);

// torch.result_type for two tensors: a 0-d tensor only decides the dtype when
// its category (bool < integer < float < complex) is higher than the other's.
inline int dtype_category(DType d) {
  if (d == DType::Bool) return 0;
  if (is_integral(d, false)) return 1;
  if (is_floating_point(d)) return 2;
  return 3;
}
inline DType result_type(const char* op, const Tensor& a, const Tensor& b) {
  try {
    const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
    if (a0 != b0) {
      const Tensor& dimmed = a0 ? b : a;
      const Tensor& zero = a0 ? a : b;
      if (dtype_category(zero.dtype()) <= dtype_category(dimmed.dtype())) return dimmed.dtype();
      return zero.dtype();
    }
    return promote_types(a.dtype(), b.dtype());
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

// A dim moved last and the input made contiguous, for ops that work on rows
// (softmax, topk): backends see [rows, size of dim]; restore() lays a result of
// that layout back out with the dim where it was.
struct DimLast {
  Tensor rows;      // contiguous, `dim` last
  int64_t dim = 0;  // wrapped
  Shape perm;       // empty when `dim` already was last

  DimLast(const Tensor& x, int64_t wrapped_dim) : dim(wrapped_dim) {
    const int64_t nd = x.dim();
    if (dim != nd - 1) {
      for (int64_t i = 0; i < nd; ++i)
        if (i != dim) perm.push_back(i);
      perm.push_back(dim);
    }
    rows = (perm.empty() ? x : x.permute(perm)).contiguous();
  }
  Tensor restore(const Tensor& y) const {
    if (perm.empty()) return y;
    Shape inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
    return y.permute(inverse).contiguous();
  }
};

}  // namespace kiln
