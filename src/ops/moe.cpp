// Front doors of index_select and of the mixture-of-experts router and combine.
#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "core/vector_rows.h"
#include "ops/common.h"

namespace kiln {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined("index_select", x, index);
  check_same_device("index_select", x, index);
  KILN_CHECK(index.dtype() == DType::Int32 || index.dtype() == DType::Int64, "index_select: index must be int32 or "
             "int64, got ", index.dtype());
  KILN_CHECK(index.dim() <= 1, "index_select: index must be 0-d or 1-D, got shape ", index.shape());
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  const int64_t d = wrap_dim("index_select", dim, nd);
  const Tensor xv = x.dim() == 0 ? x.view({1}) : x;
  const int64_t R = index.numel(), S = xv.size(d);
  // dim d moved first: rows of `inner` elements; dim 0 (embeddings) needs no copy.
  Shape to_front{d}, from_front;  // permutations moving dim d first and back
  for (int64_t i = 0; i < nd; ++i)
    if (i != d) to_front.push_back(i);
  for (int64_t i = 0; i < nd; ++i) from_front.push_back(i < d ? i + 1 : (i == d ? 0 : i));
  Tensor moved = d == 0 ? xv.contiguous() : xv.permute(to_front).contiguous();
  const int64_t inner = S == 0 ? 0 : moved.numel() / S;
  Tensor out = Tensor::empty({R, inner}, x.dtype(), x.device());
  KILN_CHECK(R == 0 || S > 0, "index_select: index out of range: dim ", dim, " of shape ", x.shape(), " is empty");
  if (R > 0 && inner > 0)
    KILN_ON_DEVICE(x.device(), index_select_rows, out, moved.view({S, inner}), index.reshape({R}).contiguous());
  Shape moved_shape = moved.shape();
  moved_shape[0] = R;
  Tensor y = out.view(moved_shape);
  y = d == 0 ? y : y.permute(from_front).contiguous();
  return x.dim() == 0 ? y.view(Shape{}) : y;
}

MoeRouting moe_route(const Tensor& logits, int64_t k, RouterScoring scoring, const std::optional<Tensor>& bias,
                     bool renormalize) {
  constexpr const char* op = "moe_route";
  check_defined(op, logits);
  KILN_CHECK(logits.dim() == 2, op, ": logits must be [tokens, experts], got shape ", logits.shape());
  check_compute_float(op, logits, "logits dtype");
  const int64_t T = logits.size(0), E = logits.size(1);
  KILN_CHECK(E >= 1 && E <= 1024, op, ": 1 to 1024 experts are supported, got ", E);
  KILN_CHECK(k >= 1 && k <= std::min<int64_t>(E, 32), op, ": k = ", k, " must be in [1, ", std::min<int64_t>(E, 32),
             "] for ", E, " experts");
  MoeRouteArgs a;
  a.logits = logits.contiguous();
  if (given(bias)) {
    a.bias = *bias;
    check_same_device(op, logits, a.bias);
    KILN_CHECK(a.bias.dtype() == DType::Float32 && a.bias.dim() == 1 && a.bias.size(0) == E, op,
               ": selection_bias must be float32 [", E, "], got ", a.bias.dtype(), " ", a.bias.shape());
    a.bias = a.bias.contiguous();
  }
  const Device dev = logits.device();
  a.k = k;
  a.sigmoid = scoring == RouterScoring::Sigmoid;
  a.renormalize = renormalize;
  a.r.weights = Tensor::empty({T, k}, DType::Float32, dev);
  a.r.experts = Tensor::empty({T, k}, DType::Int32, dev);
  a.r.offs = Tensor::empty({E}, DType::Int32, dev);
  a.r.token_of = Tensor::empty({T * k}, DType::Int32, dev);
  a.r.sorted_pos = Tensor::empty({T, k}, DType::Int32, dev);
  if (T == 0) {
    a.r.offs.zero_();
    return a.r;
  }
  KILN_ON_DEVICE(dev, moe_route, a);
  return a.r;
}

namespace {
// The routing's weights and sorted_pos as a combine reads them, on `like`'s device.
void check_combine_routing(const char* op, const Tensor& like, const MoeRouting& r) {
  check_defined(op, r.weights, r.sorted_pos);
  check_same_device(op, like, r.weights);
  check_same_device(op, like, r.sorted_pos);
  KILN_CHECK(r.weights.dim() == 2 && r.weights.dtype() == DType::Float32 && r.sorted_pos.dtype() == DType::Int32 &&
                 r.sorted_pos.shape() == r.weights.shape(),
             op, ": routing weights must be float32 [T, k] and sorted_pos int32 of the same shape, got ",
             r.weights.dtype(), " ", r.weights.shape(), " and ", r.sorted_pos.dtype(), " ", r.sorted_pos.shape());
}

// The checks of moe_combine; returns T (tokens).
int64_t check_combine(const char* op, const Tensor& y, const MoeRouting& r) {
  check_defined(op, y);
  check_compute_float(op, y, "expert_out dtype");
  check_combine_routing(op, y, r);
  const int64_t T = r.weights.size(0), k = r.weights.size(1);
  KILN_CHECK(y.dim() == 2 && y.size(0) == T * k, op, ": expert_out must be [", T * k, ", N] (tokens x k rows), got ",
             y.shape());
  return T;
}
}  // namespace

Tensor moe_combine(const Tensor& y, const MoeRouting& r) {
  const int64_t T = check_combine("moe_combine", y, r);
  Tensor out = Tensor::empty({T, y.size(1)}, y.dtype(), y.device());
  if (out.numel() == 0) return out;
  KILN_ON_DEVICE(y.device(), moe_combine, out, y.contiguous(), r.weights.contiguous(), r.sorted_pos.contiguous());
  return out;
}

std::pair<Tensor, Tensor> moe_combine_rms_norm_residual(const Tensor& y, const MoeRouting& r, const Tensor& residual,
                                                        const Tensor& weight, double eps) {
  constexpr const char* op = "moe_combine_rms_norm_residual";
  const int64_t T = check_combine(op, y, r), N = y.size(1);
  check_defined(op, residual, weight);
  check_same_device(op, y, residual);
  check_same_device(op, y, weight);
  KILN_CHECK(residual.dtype() == y.dtype() && residual.dim() == 2 && residual.size(0) == T && residual.size(1) == N,
             op, ": residual must be ", y.dtype(), " [", T, ", ", N, "], got ", residual.dtype(), " ",
             residual.shape());
  KILN_CHECK(weight.dtype() == y.dtype() && weight.dim() == 1 && weight.size(0) == N, op, ": weight must be ",
             y.dtype(), " [", N, "], got ", weight.dtype(), " ", weight.shape());
  Tensor out = Tensor::empty({T, N}, y.dtype(), y.device());
  Tensor res_out = Tensor::empty({T, N}, y.dtype(), y.device());
  if (out.numel() > 0)
    KILN_ON_DEVICE(y.device(), rms_norm_combine_rows, out, y.contiguous(), r.weights.contiguous(),
                   r.sorted_pos.contiguous(), residual.contiguous(), res_out, weight.contiguous(),
                   static_cast<float>(eps));
  return {out, res_out};
}

namespace {
// The add and norm after the combine (moe_experts_combine_rms_norm): its inputs, checked,
// and its result.
struct NormAfterCombine {
  Tensor residual, weight;
  double eps = 0.0;
  PendingRmsNorm out;
};

// The norm left pending of delta + residual, from ops in sequence.
PendingRmsNorm pending_rms_norm_of(const Tensor& delta, const Tensor& residual, const Tensor& weight, double eps) {
  const Tensor sum = add(delta, residual);  // rounded to the dtype, as the add's output
  const Tensor s32 = sum.to(DType::Float32);
  return {sum, mul(sum, weight), kiln::sum(mul(s32, s32), {-1}, true), weight, eps};
}

// moe_experts, or with `combine` moe_combine of it (and with `norm` the add and norm
// after that, into norm->out); on CUDA's decode path the activation is made by the
// gate|up kernel and the combine (and norm) by the down kernel.
Tensor run_experts(const char* op, const Tensor& x, const Tensor& gate_up, const Tensor& down, const MoeRouting& r,
                   const std::optional<Tensor>& gate_up_scale, const std::optional<Tensor>& down_scale,
                   bool combine, NormAfterCombine* norm = nullptr) {
  check_defined(op, x, gate_up);
  check_defined(op, down, r.token_of);
  check_same_device(op, x, gate_up);
  check_same_device(op, x, down);
  check_same_device(op, x, r.token_of);
  check_compute_float(op, x);
  const bool fp8 = gate_up.dtype() == DType::Float8_e4m3fn;
  KILN_CHECK(x.dim() == 2 && gate_up.dim() == 3 && down.dim() == 3 && gate_up.size(2) == x.size(1) &&
                 gate_up.size(1) % 2 == 0 && down.size(0) == gate_up.size(0) && down.size(1) == x.size(1) &&
                 down.size(2) * 2 == gate_up.size(1) && (fp8 || gate_up.dtype() == x.dtype()) &&
                 down.dtype() == gate_up.dtype(),
             op, ": x [T, H], gate_up [E, 2I, H] and down [E, H, I] of x's dtype (or both float8_e4m3fn) expected, "
             "got ", x.dtype(), " ", x.shape(), ", ", gate_up.dtype(), " ", gate_up.shape(), " and ", down.dtype(),
             " ", down.shape());
  const bool both_scales = given(gate_up_scale) && given(down_scale);
  const bool any_scale = given(gate_up_scale) || given(down_scale);
  KILN_CHECK(fp8 ? both_scales : !any_scale, op, fp8 ? ": float8_e4m3fn experts need gate_up_scale and down_scale"
                                                    : ": gate_up_scale and down_scale are only for float8_e4m3fn experts");
  KILN_CHECK(r.offs.defined() && r.offs.dim() == 1 && r.offs.size(0) == gate_up.size(0) &&
                 r.token_of.dtype() == DType::Int32 && r.token_of.dim() == 1,
             op, ": the routing must be moe_route's for ", gate_up.size(0), " experts");
  const int64_t rows = r.token_of.size(0), E = gate_up.size(0), H = x.size(1), I = down.size(2);
  if (combine) {  // the down kernel's combine also reads the routing's experts
    check_combine_routing(op, x, r);
    check_defined(op, r.experts);
    check_same_device(op, x, r.experts);
    KILN_CHECK(r.experts.dtype() == DType::Int32 && r.experts.shape() == r.weights.shape() && r.weights.numel() == rows,
               op, ": routing weights and experts must be [T, k] with T * k = ", rows, " rows (token_of's), experts "
               "int32, got weights ", r.weights.shape(), " and experts ", r.experts.dtype(), " ", r.experts.shape());
  }
  const Tensor b1 = gate_up.transpose(1, 2), b2 = down.transpose(1, 2);  // [E, H, 2I], [E, I, H]: k contiguous
  const Tensor scale1 = fp8 ? grouped_b_scale(op, x, *gate_up_scale, E, 2 * I) : Tensor();
  const Tensor scale2 = fp8 ? grouped_b_scale(op, x, *down_scale, E, H) : Tensor();
  // whole 16-byte vectors of k, in the activations and in the weights
  auto whole_vectors = [&](int64_t k) {
    return (k * static_cast<int64_t>(x.itemsize())) % 16 == 0 && (k * static_cast<int64_t>(gate_up.itemsize())) % 16 == 0;
  };
  const bool fused = x.is_cuda() && x.dtype() != DType::Float32 && rows <= E && rows > 0 &&
                     x.stride(1) == 1 && rows_vector_aligned(x, 1) && rows_vector_aligned(b1, 1) &&
                     rows_vector_aligned(b2, 1) && whole_vectors(H) && whole_vectors(I) &&
                     (!combine || r.weights.size(1) <= 32);  // the down kernel's combine holds k <= 32 slots
  if (!fused) {
    const Tensor h = grouped_mm(index_select(x, 0, r.token_of), b1, r.offs, std::nullopt, std::nullopt, gate_up_scale);
    const Tensor y = grouped_mm(silu_and_mul(h), b2, r.offs, std::nullopt, std::nullopt, down_scale);
    if (!combine) return y;
    Tensor delta = moe_combine(y, r);
    if (norm) norm->out = pending_rms_norm_of(delta, norm->residual, norm->weight, norm->eps);
    return delta;
  }
  GroupedMmArgs first;
  first.a = x;
  first.b = b1;
  first.b_scale = scale1;
  first.offs = r.offs.contiguous();
  first.row_index = r.token_of.contiguous();
  first.swiglu = true;
  first.out = Tensor::empty({rows, I}, x.dtype(), x.device());
  KILN_ON_DEVICE(x.device(), grouped_mm, first);
  GroupedMmArgs second;
  second.a = first.out;
  second.b = b2;
  second.b_scale = scale2;
  second.offs = first.offs;
  if (combine) {
    second.combine_pos = r.sorted_pos.contiguous();
    second.combine_experts = r.experts.contiguous();
    second.combine_weights = r.weights.contiguous();
  }
  second.out = Tensor::empty({combine ? r.weights.size(0) : rows, H}, x.dtype(), x.device());
  if (norm) {  // second.out is the sum
    constexpr int64_t kCols = GroupedMmArgs::kNormPartColumns;
    const int64_t T = second.out.size(0), parts = (H + kCols - 1) / kCols;
    second.norm_residual = norm->residual.contiguous();
    second.norm_weight = norm->weight.contiguous();
    second.norm_scaled = Tensor::empty({T, H}, x.dtype(), x.device());
    second.norm_sq_parts = Tensor::empty({T, parts}, DType::Float32, x.device());
    norm->out = {second.out, second.norm_scaled, second.norm_sq_parts, norm->weight, norm->eps};
  }
  KILN_ON_DEVICE(x.device(), grouped_mm, second);
  return second.out;
}
}  // namespace

Tensor moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const MoeRouting& r,
                   const std::optional<Tensor>& gate_up_scale, const std::optional<Tensor>& down_scale) {
  return run_experts("moe_experts", x, gate_up, down, r, gate_up_scale, down_scale, false);
}

Tensor moe_experts_combine(const Tensor& x, const Tensor& gate_up, const Tensor& down, const MoeRouting& r,
                           const std::optional<Tensor>& gate_up_scale, const std::optional<Tensor>& down_scale) {
  return run_experts("moe_experts_combine", x, gate_up, down, r, gate_up_scale, down_scale, true);
}

PendingRmsNorm moe_experts_combine_rms_norm(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                                            const MoeRouting& r, const Tensor& residual, const Tensor& norm_weight,
                                            double eps, const std::optional<Tensor>& gate_up_scale,
                                            const std::optional<Tensor>& down_scale) {
  constexpr const char* op = "moe_experts_combine_rms_norm";
  check_defined(op, x, residual);
  check_defined(op, norm_weight);
  KILN_CHECK(r.weights.defined() && r.weights.dim() == 2 && x.dim() == 2, op, ": x [T, H] and moe_route's "
             "routing expected, got x ", x.shape());
  const int64_t T = r.weights.size(0);
  KILN_CHECK(residual.dim() == 2 && residual.size(0) == T && residual.size(1) == x.size(1), op, ": residual must be [",
             T, ", ", x.size(1), "] (the routing's tokens, x's width), got ", residual.shape());
  check_rms_norm_operands(op, residual, nullptr, &norm_weight, "norm_weight");
  KILN_CHECK(residual.dtype() == x.dtype(), op, ": residual must be ", x.dtype(), " as x, got ", residual.dtype());
  check_same_device(op, x, residual);
  KILN_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  NormAfterCombine norm{residual, norm_weight, eps, {}};
  run_experts(op, x, gate_up, down, r, gate_up_scale, down_scale, true, &norm);
  return norm.out;
}

}  // namespace kiln
