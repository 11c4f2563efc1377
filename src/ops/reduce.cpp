// Front doors of the reductions.
#include <algorithm>

#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

const char* op_name(ReduceOp op) {
  static const char* n[] = {"sum", "mean", "prod", "amax", "amin"};
  return n[static_cast<int>(op)];
}

namespace {

struct Plan {
  std::vector<bool> reduced;
  Shape out_shape;      // with keepdim applied
  Shape kept_shape;     // kept dims only
  Tensor permuted;      // [kept..., reduced...]
  int64_t M = 1, R = 1;
};

Plan plan_reduction(const char* op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Plan p;
  const int64_t nd = a.dim();
  p.reduced.assign(std::max<int64_t>(nd, 1), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(op, d, nd);
    KILN_CHECK(!p.reduced[w], op, ": dim ", d, " appears multiple times in the list of dims");
    p.reduced[w] = true;
  }
  Shape perm;
  for (int64_t d = 0; d < nd; ++d)
    if (!p.reduced[d]) {
      perm.push_back(d);
      p.kept_shape.push_back(a.size(d));
      p.out_shape.push_back(a.size(d));
      p.M *= a.size(d);
    } else if (keepdim) {
      p.out_shape.push_back(1);
    }
  for (int64_t d = 0; d < nd; ++d)
    if (p.reduced[d]) {
      perm.push_back(d);
      p.R *= a.size(d);
    }
  p.permuted = a.permute(perm);
  return p;
}

Tensor run(ReduceOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype,
           Tensor* index_out = nullptr) {
  const char* name = op_name(op);
  Plan p = plan_reduction(name, a, dims, keepdim);
  if (op == ReduceOp::Max || op == ReduceOp::Min)
    KILN_CHECK(p.R > 0 || p.M == 0, name, ": cannot reduce over a zero-size dimension (input shape ",
               a.shape(), ") because the operation has no identity");
  Tensor in = a.dtype() == out_dtype ? p.permuted : p.permuted.to(out_dtype);
  // bool max/min work on the uint8 bytes
  const bool as_bytes = out_dtype == DType::Bool;
  if (as_bytes) in = in.view(DType::UInt8);
  ReduceArgs args;
  args.op = op;
  args.in = in;
  args.out = Tensor::empty(p.kept_shape, as_bytes ? DType::UInt8 : out_dtype, a.device());
  if (index_out) args.out_index = Tensor::empty(p.kept_shape, DType::Int64, a.device());
  args.num_kept_dims = static_cast<int64_t>(p.kept_shape.size());
  args.M = p.M;
  args.R = p.R;
  if (p.M > 0) KILN_ON_DEVICE(a.device(), reduce, args);
  Tensor out = as_bytes ? args.out.view(DType::Bool) : args.out;
  if (index_out) *index_out = args.out_index.view(p.out_shape);
  return out.view(p.out_shape);
}

DType check_reducible(const char* op, const Tensor& a, bool allow_bool_ints) {
  check_defined(op, a);
  const DType d = a.dtype();
  KILN_CHECK(!is_float8(d) && !is_complex(d), op, ": dtype ", dtype_name(d), " is not supported");
  KILN_CHECK(allow_bool_ints || !is_integral(d, true), op, ": dtype ", dtype_name(d), " is not supported");
  return d;
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  const DType d = check_reducible("sum", a, true);
  return run(ReduceOp::Sum, a, dims, keepdim, dtype.value_or(is_integral(d, true) ? DType::Int64 : d));
}

Tensor prod(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  const DType d = check_reducible("prod", a, true);
  return run(ReduceOp::Prod, a, dims, keepdim, dtype.value_or(is_integral(d, true) ? DType::Int64 : d));
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  check_defined("mean", a);
  const DType d = dtype.value_or(a.dtype());
  KILN_CHECK(d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16,
             "mean: could not infer output dtype; input dtype must be floating point, got ", dtype_name(d));
  check_reducible("mean", a, true);
  return run(ReduceOp::Mean, a, dims, keepdim, d);
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return run(ReduceOp::Max, a, dims, keepdim, check_reducible("amax", a, true));
}
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return run(ReduceOp::Min, a, dims, keepdim, check_reducible("amin", a, true));
}
Tensor max(const Tensor& a) { return amax(a); }
Tensor min(const Tensor& a) { return amin(a); }

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  Tensor idx;
  Tensor v = run(ReduceOp::Max, a, {dim}, keepdim, check_reducible("max", a, true), &idx);
  return {v, idx};
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  Tensor idx;
  Tensor v = run(ReduceOp::Min, a, {dim}, keepdim, check_reducible("min", a, true), &idx);
  return {v, idx};
}

namespace {
Tensor arg_extreme(const char* name, ReduceOp op, const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  check_reducible(name, a, true);
  Tensor idx;
  if (!dim) {
    run(op, a.reshape({-1}), {0}, false, a.dtype(), &idx);
    return keepdim ? idx.view(Shape(a.dim(), 1)) : idx;
  }
  run(op, a, {*dim}, keepdim, a.dtype(), &idx);
  return idx;
}
}  // namespace

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmax", ReduceOp::Max, a, dim, keepdim);
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmin", ReduceOp::Min, a, dim, keepdim);
}

}  // namespace kiln
