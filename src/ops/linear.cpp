// Front door of linear: the checks, the choice between the few-rows kernel and
// a GEMM, and the fp8 weight scales.
#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"
#include "ops/linear.h"

namespace kiln {

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

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::optional<Tensor>& weight_scale) {
  check_defined("linear", x, weight);
  check_same_device("linear", x, weight);
  check_compute_float("linear", x, "input dtype");
  KILN_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got shape ", weight.shape());
  KILN_CHECK(x.dim() >= 1, "linear: input must have at least 1 dimension, got a 0-d tensor");
  const int64_t N = weight.size(0), K = weight.size(1);
  KILN_CHECK(x.size(-1) == K, "linear: input shape ", x.shape(), " and weight shape ", weight.shape(),
             " do not match (input's last dim must equal in_features = ", K, ")");
  const bool fp8 = weight.dtype() == DType::Float8_e4m3fn;
  KILN_CHECK(fp8 || weight.dtype() == x.dtype(), "linear: weight dtype ", dtype_name(weight.dtype()),
             " must equal the input's (", dtype_name(x.dtype()), ") or be float8_e4m3fn");
  Tensor scale;
  if (fp8) {
    KILN_CHECK(given(weight_scale),
               "linear: a float8_e4m3fn weight needs weight_scale (its float32 dequantisation scale)");
    scale = *weight_scale;
    check_same_device("linear", x, scale);
    KILN_CHECK(scale.dtype() == DType::Float32, "linear: weight_scale must be float32, got ", dtype_name(scale.dtype()));
    const bool per_tensor = scale.numel() == 1 && scale.dim() <= 1;
    const bool per_row = (scale.dim() == 1 && scale.size(0) == N) || (scale.dim() == 2 && scale.size(0) == N &&
                                                                      scale.size(1) == 1);
    KILN_CHECK(per_tensor || per_row, "linear: weight_scale shape ", scale.shape(), " must be [] or [1] (per tensor) or [",
               N, "] / [", N, ", 1] (per output row)");
    scale = scale.reshape({scale.numel()}).contiguous();
  } else {
    KILN_CHECK(!given(weight_scale), "linear: weight_scale is only for float8_e4m3fn "
               "weights, the weight is ", dtype_name(weight.dtype()));
  }
  Tensor b;
  if (given(bias)) {
    b = *bias;
    check_same_device("linear", x, b);
    KILN_CHECK(b.dtype() == x.dtype(), "linear: bias dtype ", dtype_name(b.dtype()), " must equal the input's (",
               dtype_name(x.dtype()), ")");
    KILN_CHECK(b.dim() == 1 && b.size(0) == N, "linear: bias shape ", b.shape(), " must be [", N, "]");
    b = b.contiguous();
  }

  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  const int64_t rows = shape_numel(out_shape) / std::max<int64_t>(N, 1);
  if (rows == 0 || N == 0) return Tensor::empty(out_shape, x.dtype(), x.device());
  if (K == 0) return b.defined() ? b.expand(out_shape).contiguous() : zeros(out_shape, x.dtype(), x.device());

  Tensor x2 = x.reshape({rows, K});
  if (rows <= max_decode_rows(x, fp8)) {
    if (x2.stride(1) != 1) x2 = x2.contiguous();
    LinearArgs args{Tensor::empty({rows, N}, x.dtype(), x.device()), x2,
                    weight.stride(1) == 1 ? weight : weight.contiguous(), scale, b};
    KILN_ON_DEVICE(x.device(), linear_rows, args);
    return args.out.view(out_shape);
  }
  return linear_gemm(x2, weight, scale, b).view(out_shape);
}

}  // namespace kiln
