// Front door of topk: the dim is moved last and made contiguous, so backends see [rows, N].
#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  check_defined("topk", x);
  KILN_CHECK(x.dtype() != DType::Complex64 && x.dtype() != DType::Bool && !is_float8(x.dtype()), "topk: dtype ",
             dtype_name(x.dtype()), " is not supported");
  const int64_t nd = x.dim();
  const int64_t w = wrap_dim("topk", dim, nd);
  const int64_t N = nd == 0 ? 1 : x.size(w);
  KILN_CHECK(k >= 0 && k <= N, "topk: k = ", k, " is out of range for dimension ", dim, " of size ", N);
  if (nd == 0) return {x.clone(), zeros({}, DType::Int64, x.device())};
  const DimLast moved(x, w);
  const Tensor& in = moved.rows;
  Shape out_shape = in.shape();
  out_shape.back() = k;
  Tensor values = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(out_shape, DType::Int64, x.device());
  const int64_t M = N == 0 ? 0 : in.numel() / N;
  if (M > 0 && k > 0)
    KILN_ON_DEVICE(x.device(), topk_rows, values.view({M, k}), indices.view({M, k}), in.view({M, N}), largest);
  return {moved.restore(values), moved.restore(indices)};
}

}  // namespace kiln
