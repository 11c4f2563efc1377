// Front door of scaled_mm (torch._scaled_mm): the layout and scale rules of
// PyTorch, checked once, then one backend call.
#include "ops/scaled_mm.h"

#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

void scaled_mm_composed(const ScaledMmArgs& a) {
  const int64_t M = a.a.size(0), N = a.bt.size(0);
  Tensor y = matmul(a.a.to(DType::Float32), a.bt.to(DType::Float32).t());
  y = mul(y, a.scale_a.numel() == 1 ? a.scale_a.view(Shape{}) : a.scale_a.view({M, 1}));
  y = mul(y, a.scale_b.numel() == 1 ? a.scale_b.view(Shape{}) : a.scale_b.view({1, N}));
  if (a.bias.defined()) y = add(y, a.bias.to(DType::Float32));
  a.out.copy_(y);
}

Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const std::optional<Tensor>& bias, DType out_dtype, bool use_fast_accum) {
  constexpr const char* op = "scaled_mm";
  check_defined(op, a, b);
  check_defined(op, scale_a, scale_b);
  for (const Tensor* t : {&b, &scale_a, &scale_b}) check_same_device(op, a, *t);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, op, ": a and b must be 2-D, got shapes ", a.shape(), " and ", b.shape());
  KILN_CHECK(a.dtype() == DType::Float8_e4m3fn && b.dtype() == DType::Float8_e4m3fn, op,
             ": a and b must be float8_e4m3fn, got ", a.dtype(), " and ", b.dtype());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  KILN_CHECK(b.size(0) == K, op, ": shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (", K, " != ",
             b.size(0), ")");
  KILN_CHECK(K % 16 == 0 && N % 16 == 0, op, ": K and N must be multiples of 16, got K = ", K, ", N = ", N);
  KILN_CHECK(a.stride(1) == 1 || a.size(1) <= 1, op, ": a must be row-major (stride(1) == 1), got strides ",
             shape_str(a.strides()));
  KILN_CHECK(b.stride(0) == 1 || b.size(0) <= 1, op, ": b must be column-major (stride(0) == 1, e.g. w.t() of a "
             "row-major [N, K] w), got strides ", shape_str(b.strides()));
  KILN_CHECK(out_dtype == DType::BFloat16 || out_dtype == DType::Float16 || out_dtype == DType::Float32, op,
             ": out_dtype must be bfloat16, float16 or float32, got ", out_dtype);
  KILN_CHECK(scale_a.dtype() == DType::Float32 && scale_b.dtype() == DType::Float32, op,
             ": scales must be float32, got ", scale_a.dtype(), " and ", scale_b.dtype());
  const bool tensorwise = scale_a.numel() == 1 && scale_b.numel() == 1 && scale_a.dim() <= 1 && scale_b.dim() <= 1;
  const bool rowwise = scale_a.dim() == 2 && scale_a.size(0) == M && scale_a.size(1) == 1 && scale_b.dim() == 2 &&
                       scale_b.size(0) == 1 && scale_b.size(1) == N;
  KILN_CHECK(tensorwise || rowwise, op, ": scales must be both tensorwise (one element each) or rowwise (scale_a [",
             M, ", 1] and scale_b [1, ", N, "]), got ", scale_a.shape(), " and ", scale_b.shape());
  Tensor bias_t;
  if (given(bias)) {
    bias_t = *bias;
    check_same_device(op, a, bias_t);
    KILN_CHECK(bias_t.dim() == 1 && bias_t.size(0) == N, op, ": bias shape ", bias_t.shape(), " must be [", N, "]");
    KILN_CHECK(bias_t.dtype() == out_dtype, op, ": bias dtype ", bias_t.dtype(), " must equal out_dtype (",
               out_dtype, ")");
    bias_t = bias_t.contiguous();
  }
  ScaledMmArgs args{Tensor::empty({M, N}, out_dtype, a.device()),
                    a,
                    b.t(),
                    scale_a.reshape({scale_a.numel()}).contiguous(),
                    scale_b.reshape({scale_b.numel()}).contiguous(),
                    bias_t,
                    use_fast_accum};
  if (M == 0 || N == 0) return args.out;
  if (K == 0) {
    if (bias_t.defined()) args.out.copy_(bias_t.expand({M, N}));
    else args.out.fill_(0);
    return args.out;
  }
  KILN_ON_DEVICE(a.device(), scaled_mm, args);
  return args.out;
}

}  // namespace kiln
