// Front door of grouped_mm (torch.nn.functional.grouped_mm): 2-D x 3-D (tokens
// sorted by expert, rows split by offs), 3-D x 3-D (a batched matmul) and 2-D x
// 2-D (k split by offs, as a weight gradient); weight-only fp8 b with its scale.
// offs stays on the device: nothing here reads it, so a CUDA call never waits for the GPU.
#include "core/backend.h"
#include "core/check.h"
#include "ops/common.h"

namespace kiln {

// Stride 0 where the scale is per group or per tensor.
Tensor grouped_b_scale(const char* op, const Tensor& a, const Tensor& scale, int64_t G, int64_t N) {
  check_same_device(op, a, scale);
  KILN_CHECK(scale.dtype() == DType::Float32, op, ": b_scale must be float32, got ", scale.dtype());
  const Shape& s = scale.shape();
  if (scale.numel() == 1 && scale.dim() <= 1) return scale.reshape({1, 1}).expand({G, N});
  if ((scale.dim() == 1 && s[0] == G) || (scale.dim() == 2 && s[0] == G && s[1] == 1))
    return scale.reshape({G, 1}).expand({G, N});
  KILN_CHECK(scale.dim() == 2 && s[0] == G && s[1] == N, op, ": b_scale shape ", s, " must be [] (per tensor), [",
             G, "] or [", G, ", 1] (per group) or [", G, ", ", N, "] (per group and output column)");
  return scale;
}

Tensor grouped_mm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& offs,
                  const std::optional<Tensor>& bias, std::optional<DType> out_dtype,
                  const std::optional<Tensor>& b_scale) {
  constexpr const char* op = "grouped_mm";
  check_defined(op, a, b);
  check_same_device(op, a, b);
  KILN_CHECK(!given(bias), op, ": bias is not supported (PyTorch's grouped_mm rejects it too)");
  const bool fp8 = b.dtype() == DType::Float8_e4m3fn;
  const bool has_scale = given(b_scale);
  if (fp8) {
    KILN_CHECK(is_compute_float(a.dtype()), op, ": a must be bfloat16, float16 or float32 with a float8_e4m3fn b, got ",
               a.dtype());
    KILN_CHECK(has_scale, op, ": a float8_e4m3fn b needs b_scale (its float32 dequantisation scale)");
  } else {
    KILN_CHECK(is_compute_float(a.dtype()) && a.dtype() == b.dtype(), op,
               ": a and b must share one dtype of bfloat16, float16, float32 (or b float8_e4m3fn with b_scale); got ",
               a.dtype(), " and ", b.dtype());
    KILN_CHECK(!has_scale, op, ": b_scale is only for a float8_e4m3fn b, got b ", b.dtype());
  }
  const DType od = out_dtype.value_or(a.dtype());
  KILN_CHECK(od == a.dtype() || od == DType::Float32, op, ": out_dtype must be the inputs' dtype (", a.dtype(),
             ") or float32, got ", od);
  KILN_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3), op,
             ": a and b must be 2-D or 3-D, got shapes ", a.shape(), " and ", b.shape());
  const bool has_offs = given(offs);

  if (a.dim() == 3 && b.dim() == 3) {
    KILN_CHECK(!has_offs, op, ": offs must be None when a and b are both 3-D");
    KILN_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), op, ": 3-D shapes ", a.shape(), " and ", b.shape(),
               " do not match ([G, M, K] and [G, K, N])");
    if (fp8) {  // a batched matmul: dequantised in float32, as the reference defines it
      const Tensor scale = grouped_b_scale(op, a, *b_scale, b.size(0), b.size(2));
      const Tensor wf = mul(b.to(DType::Float32), scale.unsqueeze(1));
      return bmm(a.to(DType::Float32), wf).to(od);
    }
    if (od == a.dtype()) return bmm(a, b);
    return bmm(a.to(DType::Float32), b.to(DType::Float32));
  }
  KILN_CHECK(a.dim() == 2, op, ": a 3-D a with a 2-D b (", a.shape(), " x ", b.shape(), ") is not supported");
  KILN_CHECK(!fp8 || b.dim() == 3, op, ": a float8_e4m3fn b is supported for 2-D x 3-D and 3-D x 3-D, not 2-D x 2-D "
             "(k split by offs), got shapes ", a.shape(), " and ", b.shape());
  KILN_CHECK(has_offs, op, ": offs is required when a is 2-D (shapes ", a.shape(), " and ", b.shape(), ")");
  const Tensor& o = *offs;
  check_same_device(op, a, o);
  KILN_CHECK(o.dtype() == DType::Int32 && o.dim() == 1, op, ": offs must be a 1-D int32 tensor, got ", o.dtype(),
             " of shape ", o.shape());
  const int64_t G = o.size(0);
  KILN_CHECK(G > 0, op, ": offs must hold at least one group");
  GroupedMmArgs args;
  args.a = a;
  args.b = b;
  args.offs = o.contiguous();
  if (b.dim() == 3) {
    KILN_CHECK(b.size(0) == G, op, ": b has ", b.size(0), " groups but offs has ", G);
    KILN_CHECK(a.size(1) == b.size(1), op, ": shapes ", a.shape(), " and ", b.shape(),
               " do not match ([T, K] and [G, K, N])");
    args.out = Tensor::empty({a.size(0), b.size(2)}, od, a.device());
    if (fp8) args.b_scale = grouped_b_scale(op, a, *b_scale, G, b.size(2));
  } else {
    KILN_CHECK(a.size(1) == b.size(0), op, ": shapes ", a.shape(), " and ", b.shape(),
               " do not match ([M, K] and [K, N], k split by offs)");
    args.out = Tensor::empty({G, a.size(0), b.size(1)}, od, a.device());
  }
  if (args.out.numel() == 0) return args.out;
  KILN_ON_DEVICE(a.device(), grouped_mm, args);
  return args.out;
}

}  // namespace kiln
