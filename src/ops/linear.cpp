// Front doors of linear, linear_silu_and_mul, rms_norm_linear and
// pending_rms_norm_linear: the checks, the choice between the few-rows kernel and a
// GEMM, and the fp8 weight scales.
#include <algorithm>

#include "core/backend.h"
#include "core/check.h"
#include "core/env.h"
#include "core/shape.h"
#include "core/vector_rows.h"
#include "kiln/ops.h"
#include "ops/common.h"
#include "ops/linear.h"

namespace kiln {

bool vector_rows(const LinearArgs& args) {
  const int64_t vec = 16 / static_cast<int64_t>(args.weight.itemsize());  // weight elements a 16-byte load
  return args.weight.size(1) % vec == 0 && rows_vector_aligned(args.weight, 1) && rows_vector_aligned(args.x, 1);
}

namespace {
// Rows up to which the bandwidth-bound kernel runs instead of a GEMM. On CUDA a
// float weight with 2+ rows goes to cuBLAS: the kernel's input rows stop fitting
// in L1 (H200, 2x14336 -> 4096 bf16: 44 us vs cuBLAS 32.5 us); fp8 weights stay on
// the kernel, which reads them without a dequantised copy.
constexpr int64_t kMaxDecodeRows = 8;
int64_t max_decode_rows(const Tensor& x, bool fp8) { return x.is_cuda() && !fp8 ? 1 : kMaxDecodeRows; }
}  // namespace

Tensor linear_gemm(const Tensor& x, const Tensor& weight, const Tensor& scale, const Tensor& b) {
  Tensor w = weight;
  if (weight.dtype() == DType::Float8_e4m3fn) {
    w = weight.to(DType::Float32);
    w = (scale.numel() == 1 ? mul(w, scale.view(Shape{})) : mul(w, scale.view({weight.size(0), 1}))).to(x.dtype());
  }
  Tensor y = matmul(x, w.t());
  return b.defined() ? add(y, b) : y;
}

std::pair<Tensor, Tensor> quantize_fp8_rows(const Tensor& w) {
  check_defined("quantize_fp8_rows", w);
  KILN_CHECK(is_compute_float(w.dtype()) && w.dim() >= 2, "quantize_fp8_rows: w must be a float32, float16 or "
             "bfloat16 weight [..., out_features, in_features] of 2 or more dims, got ", w.dtype(), " ", w.shape());
  const Tensor wf = w.to(DType::Float32);
  Tensor amax_rows = amax(abs(wf), {-1}, true);                  // [..., N, 1]
  amax_rows = where(eq(amax_rows, 0.0), 448.0, amax_rows);       // an all-zero row: scale 1
  const Tensor scale = div(amax_rows, 448.0);
  Shape rows = w.shape();
  rows.pop_back();
  return {div(wf, scale).to(DType::Float8_e4m3fn), scale.reshape(rows)};
}

namespace {

// linear's operands, checked once for both front doors: the fp8 scale as a flat
// float32 tensor and the bias contiguous (each undefined when not given).
struct LinearOperands {
  Tensor scale, bias;
  bool fp8 = false;
};

LinearOperands check_linear(const char* op, const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                            const std::optional<Tensor>& weight_scale) {
  check_defined(op, x, weight);
  check_same_device(op, x, weight);
  check_compute_float(op, x, "input dtype");
  KILN_CHECK(weight.dim() == 2, op, ": weight must be 2-D [out_features, in_features], got shape ", weight.shape());
  KILN_CHECK(x.dim() >= 1, op, ": input must have at least 1 dimension, got a 0-d tensor");
  const int64_t N = weight.size(0), K = weight.size(1);
  KILN_CHECK(x.size(-1) == K, op, ": input shape ", x.shape(), " and weight shape ", weight.shape(),
             " do not match (input's last dim must equal in_features = ", K, ")");
  LinearOperands o;
  o.fp8 = weight.dtype() == DType::Float8_e4m3fn;
  KILN_CHECK(o.fp8 || weight.dtype() == x.dtype(), op, ": weight dtype ", dtype_name(weight.dtype()),
             " must equal the input's (", dtype_name(x.dtype()), ") or be float8_e4m3fn");
  if (o.fp8) {
    KILN_CHECK(given(weight_scale), op,
               ": a float8_e4m3fn weight needs weight_scale (its float32 dequantisation scale)");
    const Tensor& scale = *weight_scale;
    check_same_device(op, x, scale);
    KILN_CHECK(scale.dtype() == DType::Float32, op, ": weight_scale must be float32, got ", dtype_name(scale.dtype()));
    const bool per_tensor = scale.numel() == 1 && scale.dim() <= 1;
    const bool per_row = (scale.dim() == 1 && scale.size(0) == N) || (scale.dim() == 2 && scale.size(0) == N &&
                                                                      scale.size(1) == 1);
    KILN_CHECK(per_tensor || per_row, op, ": weight_scale shape ", scale.shape(),
               " must be [] or [1] (per tensor) or [", N, "] / [", N, ", 1] (per output row)");
    o.scale = scale.reshape({scale.numel()}).contiguous();
  } else {
    KILN_CHECK(!given(weight_scale), op, ": weight_scale is only for float8_e4m3fn "
               "weights, the weight is ", dtype_name(weight.dtype()));
  }
  if (given(bias)) {
    const Tensor& b = *bias;
    check_same_device(op, x, b);
    KILN_CHECK(b.dtype() == x.dtype(), op, ": bias dtype ", dtype_name(b.dtype()), " must equal the input's (",
               dtype_name(x.dtype()), ")");
    KILN_CHECK(b.dim() == 1 && b.size(0) == N, op, ": bias shape ", b.shape(), " must be [", N, "]");
    o.bias = b.contiguous();
  }
  return o;
}

// The few-rows kernel's arguments for x's rows, or an undefined out where the rows are too many.
LinearArgs decode_args(const Tensor& x, const Tensor& weight, const LinearOperands& o, int64_t rows, int64_t out_cols) {
  LinearArgs args;
  if (rows > max_decode_rows(x, o.fp8)) return args;
  args.x = x.reshape({rows, weight.size(1)});
  if (args.x.stride(1) != 1) args.x = args.x.contiguous();
  args.weight = weight.stride(1) == 1 ? weight : weight.contiguous();
  args.scale = o.scale;
  args.bias = o.bias;
  args.out = Tensor::empty({rows, out_cols}, x.dtype(), x.device());
  return args;
}

// linear of operands check_linear has passed.
Tensor linear_checked(const Tensor& x, const Tensor& weight, const LinearOperands& o) {
  const int64_t N = weight.size(0), K = weight.size(1);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  const int64_t rows = shape_numel(out_shape) / std::max<int64_t>(N, 1);
  if (rows == 0 || N == 0) return Tensor::empty(out_shape, x.dtype(), x.device());
  if (K == 0) return o.bias.defined() ? o.bias.expand(out_shape).contiguous() : zeros(out_shape, x.dtype(), x.device());
  if (LinearArgs args = decode_args(x, weight, o, rows, N); args.out.defined()) {
    KILN_ON_DEVICE(x.device(), linear_rows, args);
    return args.out.view(out_shape);
  }
  return linear_gemm(x.reshape({rows, K}), weight, o.scale, o.bias).view(out_shape);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::optional<Tensor>& weight_scale) {
  return linear_checked(x, weight, check_linear("linear", x, weight, bias, weight_scale));
}

Tensor linear_silu_and_mul(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                           const std::optional<Tensor>& weight_scale) {
  constexpr const char* op = "linear_silu_and_mul";
  const LinearOperands o = check_linear(op, x, weight, bias, weight_scale);
  const int64_t N = weight.size(0), K = weight.size(1), H = N / 2;
  KILN_CHECK(N % 2 == 0, op, ": the weight's out_features must be even (gate rows, then up rows), got shape ",
             weight.shape());
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(H);
  const int64_t rows = H == 0 ? 0 : shape_numel(out_shape) / H;
  LinearArgs args = rows == 0 || K == 0 ? LinearArgs{} : decode_args(x, weight, o, rows, H);
  if (!args.out.defined()) return silu_and_mul(linear_checked(x, weight, o));  // GEMM rows or empty
  args.swiglu = true;
  KILN_ON_DEVICE(x.device(), linear_rows, args);
  return args.out.view(out_shape);
}

RmsNormLinear rms_norm_linear(const Tensor& x, const std::optional<Tensor>& residual, const Tensor& norm_weight,
                              double eps, const Tensor& weight, const std::optional<Tensor>& bias,
                              const std::optional<Tensor>& weight_scale, bool silu_and_mul, bool want_normed) {
  constexpr const char* op = "rms_norm_linear";
  const LinearOperands o = check_linear(op, x, weight, bias, weight_scale);
  const int64_t N = weight.size(0), K = weight.size(1);
  KILN_CHECK(!silu_and_mul || N % 2 == 0, op, ": with silu_and_mul the weight's out_features must be even (gate "
             "rows, then up rows), got shape ", weight.shape());
  check_defined(op, norm_weight);
  check_rms_norm_operands(op, x, given(residual) ? &*residual : nullptr, &norm_weight, "norm_weight");
  KILN_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  const int64_t cols = silu_and_mul ? N / 2 : N, rows = K == 0 ? 0 : x.numel() / K;
  // KILN_NORM_LINEAR=0: the ops in sequence everywhere (to measure the fusion, or to rule it out)
  static const bool fuse = env_switch_on("KILN_NORM_LINEAR");
  LinearArgs args = fuse && x.is_cuda() && rows == 1 && cols > 0 ? decode_args(x, weight, o, 1, cols) : LinearArgs{};
  if (args.out.defined()) {
    args.swiglu = silu_and_mul;
    args.norm_weight = norm_weight.contiguous();
    args.eps = static_cast<float>(eps);
    if (given(residual)) {
      args.residual = residual->reshape({1, K});
      if (args.residual.stride(1) != 1) args.residual = args.residual.contiguous();
      args.residual_out = Tensor::empty({1, K}, x.dtype(), x.device());
    }
    if (want_normed) args.normed_out = Tensor::empty({1, K}, x.dtype(), x.device());
    // the kernel holds the row as float32 in shared memory
    const bool aligned = K <= LinearArgs::kMaxNormFloats && vector_rows(args) &&
                         rows_vector_aligned(args.norm_weight, 0) &&
                         (!args.residual.defined() || rows_vector_aligned(args.residual, 1));
    if (aligned) {
      KILN_ON_DEVICE(x.device(), linear_rows, args);
      Shape out_shape(x.shape().begin(), x.shape().end() - 1);
      out_shape.push_back(cols);
      return {args.out.view(out_shape), given(residual) ? args.residual_out.view(x.shape()) : x,
              want_normed ? args.normed_out.view(x.shape()) : Tensor()};
    }
  }
  // the ops in sequence: the CPU, several rows, or rows the kernel's vector loads cannot take
  Tensor h, sum = x;
  if (given(residual)) std::tie(h, sum) = rms_norm_residual(x, *residual, norm_weight, eps);
  else h = rms_norm(x, norm_weight, eps);
  Tensor out = silu_and_mul ? linear_silu_and_mul(h, weight, bias, weight_scale) : linear(h, weight, bias, weight_scale);
  return {out, sum, want_normed ? h : Tensor()};
}

Tensor pending_rms_norm_linear(const PendingRmsNorm& p, const Tensor& weight, const std::optional<Tensor>& bias,
                              const std::optional<Tensor>& weight_scale) {
  constexpr const char* op = "pending_rms_norm_linear";
  check_defined(op, p.sum, p.scaled);
  check_defined(op, p.sq_parts, p.weight);
  const LinearOperands o = check_linear(op, p.scaled, weight, bias, weight_scale);
  KILN_CHECK(p.sum.shape() == p.scaled.shape() && p.sum.dtype() == p.scaled.dtype(), op, ": sum and scaled must "
             "match, got ", p.sum.dtype(), " ", p.sum.shape(), " and ", p.scaled.dtype(), " ", p.scaled.shape());
  check_same_device(op, p.scaled, p.sum);
  check_rms_norm_operands(op, p.sum, nullptr, &p.weight, "the norm's weight");
  check_same_device(op, p.scaled, p.sq_parts);
  const Shape& rows_shape = p.sum.shape();
  const bool parts_match = p.sq_parts.dim() == p.sum.dim() && p.sq_parts.size(-1) >= 1 &&
                           std::equal(rows_shape.begin(), rows_shape.end() - 1, p.sq_parts.shape().begin());
  KILN_CHECK(p.sq_parts.dtype() == DType::Float32 && parts_match, op, ": sq_parts must be float32 [..., P] with "
             "the leading dims of sum ", p.sum.shape(), ", got ", p.sq_parts.dtype(), " ", p.sq_parts.shape());
  KILN_CHECK(p.eps >= 0, op, ": eps must be non-negative, got ", p.eps);
  const int64_t N = weight.size(0), K = weight.size(1), rows = K == 0 ? 0 : p.sum.numel() / K;
  LinearArgs args = p.scaled.is_cuda() && rows == 1 && N > 0 ? decode_args(p.scaled, weight, o, 1, N) : LinearArgs{};
  // the kernel holds the partial sums in shared memory
  if (args.out.defined() && p.sq_parts.numel() <= LinearArgs::kMaxNormFloats && vector_rows(args)) {
    args.sq_parts = p.sq_parts.reshape({-1}).contiguous();
    args.eps = static_cast<float>(p.eps);
    KILN_ON_DEVICE(p.scaled.device(), linear_rows, args);
    Shape out_shape(rows_shape.begin(), rows_shape.end() - 1);
    out_shape.push_back(N);
    return args.out.view(out_shape);
  }
  // the ops in sequence: the CPU, several rows, or rows the kernel's vector loads cannot take
  return linear(rms_norm(p.sum, p.weight, p.eps), weight, bias, weight_scale);
}

}  // namespace kiln
