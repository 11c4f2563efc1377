// Front door of grouped_mm (torch.nn.functional.grouped_mm): 2-D x 3-D (tokens
// sorted by expert, rows split by offs), 3-D x 3-D (a batched matmul) and 2-D x
// 2-D (k split by offs, as a weight gradient). offs stays on the device: nothing
// here reads it, so a CUDA call never waits for the GPU.
#include "core/backend.h"
#include "core/check.h"
#include "ops/common.h"

namespace kiln {

Tensor grouped_mm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& offs,
                  const std::optional<Tensor>& bias, std::optional<DType> out_dtype) {
  constexpr const char* op = "grouped_mm";
  check_defined(op, a, b);
  check_same_device(op, a, b);
  KILN_CHECK(!bias.has_value() || !bias->defined(), op, ": bias is not supported (PyTorch's grouped_mm rejects it too)");
  KILN_CHECK(is_compute_float(a.dtype()) && a.dtype() == b.dtype(), op,
             ": a and b must share one dtype of bfloat16, float16, float32; got ", a.dtype(), " and ", b.dtype());
  const DType od = out_dtype.value_or(a.dtype());
  KILN_CHECK(od == a.dtype() || od == DType::Float32, op, ": out_dtype must be the inputs' dtype (", a.dtype(),
             ") or float32, got ", od);
  KILN_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3), op,
             ": a and b must be 2-D or 3-D, got shapes ", a.shape(), " and ", b.shape());
  const bool has_offs = offs.has_value() && offs->defined();

  if (a.dim() == 3 && b.dim() == 3) {
    KILN_CHECK(!has_offs, op, ": offs must be None when a and b are both 3-D");
    KILN_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), op, ": 3-D shapes ", a.shape(), " and ", b.shape(),
               " do not match ([G, M, K] and [G, K, N])");
    if (od == a.dtype()) return bmm(a, b);
    return bmm(a.to(DType::Float32), b.to(DType::Float32));
  }
  KILN_CHECK(a.dim() == 2, op, ": a 3-D a with a 2-D b (", a.shape(), " x ", b.shape(), ") is not supported");
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
