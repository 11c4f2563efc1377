// Front door of softmax / log_softmax: the reduced dim is moved last and made
// contiguous, so backends see [rows, N]; the result is laid back out as the input.
#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

namespace {
Tensor softmax_impl(const char* op, const Tensor& x_in, int64_t dim, std::optional<DType> dtype, bool log) {
  check_defined(op, x_in);
  const Tensor x = dtype ? x_in.to(*dtype) : x_in;
  const DType d = x.dtype();
  KILN_CHECK(d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16, op, ": dtype ", dtype_name(d),
             " is not supported (float32, float16, bfloat16 are; pass dtype= to cast)");
  const int64_t nd = x.dim();
  const int64_t w = wrap_dim(op, dim, nd);
  if (x.numel() == 0) return Tensor::empty(x.shape(), d, x.device());
  if (nd == 0) return full({}, log ? 0.0 : 1.0, d, x.device());  // softmax of one element
  const DimLast moved(x, w);
  const Tensor& in = moved.rows;
  const int64_t N = x.size(w);
  Tensor out = Tensor::empty(in.shape(), d, x.device());
  KILN_ON_DEVICE(x.device(), softmax_rows, out.view({in.numel() / N, N}), in.view({in.numel() / N, N}), log);
  return moved.restore(out);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl("softmax", x, dim, dtype, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_impl("log_softmax", x, dim, dtype, true);
}

}  // namespace kiln
