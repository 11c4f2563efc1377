// kiln's ops in Python, with torch's names and argument conventions; Python
// numbers are accepted wherever torch accepts them.
#include <pybind11/functional.h>

#include "core/check.h"
#include "kiln/safetensors.h"
#include "python/convert.h"

namespace kiln::python {
namespace {

using TT = Tensor (*)(const Tensor&, const Tensor&);
using TS = Tensor (*)(const Tensor&, const Scalar&);

// f(tensor, tensor) or f(tensor, number); a number on the left becomes a 0-d tensor.
Tensor binary(const char* name, TT tt, TS ts, py::handle a, py::handle b) {
  if (py::isinstance<Tensor>(a)) {
    const Tensor& x = a.cast<const Tensor&>();
    if (py::isinstance<Tensor>(b)) return tt(x, b.cast<const Tensor&>());
    return ts(x, to_scalar(b, name));
  }
  KILN_CHECK(py::isinstance<Tensor>(b), name, ": expected at least one kiln.Tensor argument");
  const Tensor& y = b.cast<const Tensor&>();
  return tt(as_tensor_like(a, y, name), y);
}

// generator=None -> the default generator
Generator* to_generator(py::handle g) { return g.is_none() ? nullptr : g.cast<Generator*>(); }

std::optional<DType> opt_dtype(py::handle d) {
  if (d.is_none()) return std::nullopt;
  return d.cast<DType>();
}

// (values, indices) as torch's return_types: attribute access and tuple unpacking.
// Runs f, which returns two tensors, without the GIL; the pair as a Python tuple.
template <class F>
py::tuple pair_without_gil(F&& f) {
  std::pair<Tensor, Tensor> r;
  {
    py::gil_scoped_release release;
    r = f();
  }
  return py::make_tuple(r.first, r.second);
}

py::object values_indices(const std::pair<Tensor, Tensor>& r) {
  static py::object nt = py::module_::import("collections").attr("namedtuple")("values_indices", "values indices");
  return nt(r.first, r.second);
}

py::object max_like(bool is_max, py::handle a, py::handle dim_or_other, bool keepdim) {
  const Tensor& x = a.cast<const Tensor&>();
  if (dim_or_other.is_none()) return py::cast(is_max ? max(x) : min(x));
  if (py::isinstance<Tensor>(dim_or_other))
    return py::cast(is_max ? maximum(x, dim_or_other.cast<Tensor>()) : minimum(x, dim_or_other.cast<Tensor>()));
  const int64_t dim = dim_or_other.cast<int64_t>();
  return values_indices(is_max ? max(x, dim, keepdim) : min(x, dim, keepdim));
}

Tensor add_tt(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub_tt(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor add_ts(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor sub_ts(const Tensor& a, const Scalar& b) { return sub(a, b); }

void def_binary(py::module_& m, py::class_<Tensor>& cls, const char* name, TT tt, TS ts) {
  m.def(name, [name, tt, ts](py::object a, py::object b) { return binary(name, tt, ts, a, b); });
  cls.def(name, [name, tt, ts](py::object a, py::object b) { return binary(name, tt, ts, a, b); });
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  using py::arg;
  const auto none = py::none();

  // ---- creation ----
  m.def("empty", [](py::args a, py::object dtype, py::object device) {
    return empty(to_shape(a), opt_dtype(dtype).value_or(float32), to_device(device));
  }, arg("dtype") = none, arg("device") = none);
  m.def("zeros", [](py::args a, py::object dtype, py::object device) {
    return zeros(to_shape(a), opt_dtype(dtype).value_or(float32), to_device(device));
  }, arg("dtype") = none, arg("device") = none);
  m.def("ones", [](py::args a, py::object dtype, py::object device) {
    return ones(to_shape(a), opt_dtype(dtype).value_or(float32), to_device(device));
  }, arg("dtype") = none, arg("device") = none);
  m.def("full", [](const Shape& shape, py::object value, py::object dtype, py::object device) {
    const Scalar v = to_scalar(value, "full");
    DType d = v.is_complex() ? complex64 : v.is_floating_point() ? float32 : v.kind() == Scalar::Kind::Bool ? bool_ : int64;
    return full(shape, v, opt_dtype(dtype).value_or(d), to_device(device));
  }, arg("size"), arg("fill_value"), arg("dtype") = none, arg("device") = none);
  m.def("arange", [](py::object a, py::object b, py::object step, py::object dtype, py::object device) {
    if (b.is_none()) return arange(Scalar(0), to_scalar(a, "arange"), to_scalar(step, "arange"), opt_dtype(dtype), to_device(device));
    return arange(to_scalar(a, "arange"), to_scalar(b, "arange"), to_scalar(step, "arange"), opt_dtype(dtype),
                  to_device(device));
  }, arg("start"), arg("end") = none, arg("step") = 1, arg("dtype") = none, arg("device") = none);
  m.def("empty_like", &empty_like);
  m.def("zeros_like", &zeros_like);
  m.def("ones_like", &ones_like);
  m.def("full_like", [](const Tensor& t, py::object v) { return full_like(t, to_scalar(v, "full_like")); });
  m.def("rand", [](py::args a, py::object dtype, py::object device, py::object gen) {
    return rand(to_shape(a), opt_dtype(dtype).value_or(float32), to_device(device), to_generator(gen));
  }, arg("dtype") = none, arg("device") = none, arg("generator") = none);
  m.def("randn", [](py::args a, py::object dtype, py::object device, py::object gen) {
    return randn(to_shape(a), opt_dtype(dtype).value_or(float32), to_device(device), to_generator(gen));
  }, arg("dtype") = none, arg("device") = none, arg("generator") = none);
  cls.def("uniform_", [](Tensor& t, double lo, double hi, py::object g) { uniform_(t, lo, hi, to_generator(g)); return t; },
          arg("from") = 0.0, arg("to") = 1.0, arg("generator") = none);
  cls.def("normal_", [](Tensor& t, double mean, double std, py::object g) { normal_(t, mean, std, to_generator(g)); return t; },
          arg("mean") = 0.0, arg("std") = 1.0, arg("generator") = none);

  // ---- elementwise ----
  // add/sub take alpha (other scaled first), which needs two tensors.
  using TTA = Tensor (*)(const Tensor&, const Tensor&, const Scalar&);
  struct AlphaOp {
    const char* name;
    TTA tta;
    TT tt;
    TS ts;
  };
  static const AlphaOp alpha_ops[] = {{"add", add, add_tt, add_ts}, {"sub", sub, sub_tt, sub_ts}};
  for (const AlphaOp& op : alpha_ops) {
    auto f = [&op](py::object a, py::object b, py::object alpha) {
      const Scalar al = to_scalar(alpha, op.name);
      if (py::isinstance<Tensor>(a) && py::isinstance<Tensor>(b)) return op.tta(a.cast<Tensor>(), b.cast<Tensor>(), al);
      KILN_CHECK(al.to_double() == 1.0, op.name, ": alpha needs two tensors");
      return binary(op.name, op.tt, op.ts, a, b);
    };
    m.def(op.name, f, arg("input"), arg("other"), py::kw_only(), arg("alpha") = 1);
    cls.def(op.name, f, arg("other"), py::kw_only(), arg("alpha") = 1);
  }
  def_binary(m, cls, "mul", mul, mul);
  def_binary(m, cls, "div", div, div);
  def_binary(m, cls, "pow", pow, pow);
  def_binary(m, cls, "eq", eq, eq);
  def_binary(m, cls, "ne", ne, ne);
  def_binary(m, cls, "lt", lt, lt);
  def_binary(m, cls, "le", le, le);
  def_binary(m, cls, "gt", gt, gt);
  def_binary(m, cls, "ge", ge, ge);
  m.def("maximum", &maximum);
  m.def("minimum", &minimum);
  cls.def("maximum", &maximum);
  cls.def("minimum", &minimum);

  // Python operators; a number on either side.
  struct Op {
    const char* name;
    const char* rname;
    TT tt;
    TS ts;
  };
  static const Op ops[] = {{"__add__", "__radd__", add_tt, add_ts},
                           {"__sub__", "__rsub__", sub_tt, sub_ts},
                           {"__mul__", "__rmul__", mul, mul},
                           {"__truediv__", "__rtruediv__", div, div},
                           {"__pow__", "__rpow__", pow, pow}};
  for (const Op& op : ops) {
    cls.def(op.name, [&op](py::object a, py::object b) { return binary(op.name, op.tt, op.ts, a, b); },
            py::is_operator());
    cls.def(op.rname, [&op](py::object a, py::object b) { return binary(op.rname, op.tt, op.ts, b, a); },
            py::is_operator());
  }
  static const Op cmps[] = {{"__eq__", "", eq, eq}, {"__ne__", "", ne, ne}, {"__lt__", "", lt, lt},
                            {"__le__", "", le, le}, {"__gt__", "", gt, gt}, {"__ge__", "", ge, ge}};
  for (const Op& op : cmps)
    cls.def(op.name, [&op](py::object a, py::object b) { return binary(op.name, op.tt, op.ts, a, b); },
            py::is_operator());
  cls.def("__hash__", [](py::object self) { return py::hash(py::int_(reinterpret_cast<uintptr_t>(self.ptr()))); });
  cls.def("__neg__", &neg);

  using U = Tensor (*)(const Tensor&);
  static const std::pair<const char*, U> unary[] = {
      {"neg", neg}, {"abs", abs}, {"exp", exp}, {"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt},
      {"tanh", tanh}, {"sigmoid", sigmoid}, {"silu", silu}};
  for (const auto& [name, fn] : unary) {
    m.def(name, fn, arg("input"));
    cls.def(name, fn);
  }
  cls.def("__abs__", &abs);
  m.def("gelu", &gelu, arg("input"), arg("approximate") = "none");
  m.def("where", [](const Tensor& c, py::object a, py::object b) {
    if (py::isinstance<Tensor>(a) && py::isinstance<Tensor>(b)) return where(c, a.cast<Tensor>(), b.cast<Tensor>());
    if (py::isinstance<Tensor>(b)) return where(c, to_scalar(a, "where"), b.cast<Tensor>());
    if (py::isinstance<Tensor>(a)) return where(c, a.cast<Tensor>(), to_scalar(b, "where"));
    return where(c, scalar_tensor(to_scalar(a, "where"), c.device()), to_scalar(b, "where"));
  }, arg("condition"), arg("input"), arg("other"));

  // ---- reductions ----
  using R = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool, std::optional<DType>);
  static const std::pair<const char*, R> reductions[] = {{"sum", sum}, {"mean", mean}, {"prod", prod}};
  for (const auto& [name, fn] : reductions) {
    auto f = [fn = fn](const Tensor& t, py::object dim, bool keepdim, py::object dtype) {
      return fn(t, to_dims(dim), keepdim, opt_dtype(dtype));
    };
    m.def(name, f, arg("input"), arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none);
    cls.def(name, f, arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none);
  }
  using E = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool);
  static const std::pair<const char*, E> extremes[] = {{"amax", amax}, {"amin", amin}};
  for (const auto& [name, fn] : extremes) {
    auto f = [fn = fn](const Tensor& t, py::object dim, bool keepdim) { return fn(t, to_dims(dim), keepdim); };
    m.def(name, f, arg("input"), arg("dim") = none, arg("keepdim") = false);
    cls.def(name, f, arg("dim") = none, arg("keepdim") = false);
  }
  for (bool is_max : {true, false}) {
    auto f = [is_max](py::object t, py::object dim, bool keepdim) { return max_like(is_max, t, dim, keepdim); };
    m.def(is_max ? "max" : "min", f, arg("input"), arg("dim") = none, arg("keepdim") = false);
    cls.def(is_max ? "max" : "min", f, arg("dim") = none, arg("keepdim") = false);
    auto g = [is_max](const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
      return is_max ? argmax(t, dim, keepdim) : argmin(t, dim, keepdim);
    };
    m.def(is_max ? "argmax" : "argmin", g, arg("input"), arg("dim") = none, arg("keepdim") = false);
    cls.def(is_max ? "argmax" : "argmin", g, arg("dim") = none, arg("keepdim") = false);
  }

  // ---- linear algebra ----
  m.def("matmul", &matmul, py::call_guard<py::gil_scoped_release>());
  m.def("mm", &mm, py::call_guard<py::gil_scoped_release>());
  m.def("bmm", &bmm, py::call_guard<py::gil_scoped_release>());
  cls.def("matmul", &matmul);
  cls.def("__matmul__", &matmul, py::is_operator());
  m.def("linear", [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias, std::optional<Tensor> scale) {
    return linear(x, w, bias, scale);
  }, arg("input"), arg("weight"), arg("bias") = none, py::kw_only(), arg("weight_scale") = none,
     py::call_guard<py::gil_scoped_release>());
  m.def("linear_silu_and_mul", [](const Tensor& x, const Tensor& w, std::optional<Tensor> bias,
                                  std::optional<Tensor> scale) { return linear_silu_and_mul(x, w, bias, scale); },
        arg("input"), arg("weight"), arg("bias") = none, py::kw_only(), arg("weight_scale") = none,
        py::call_guard<py::gil_scoped_release>());
  // torch._scaled_mm's signature (scale_result is for fp8 outputs, which kiln does not produce).
  m.def("_scaled_mm", [](const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                         std::optional<Tensor> bias, py::object scale_result, py::object out_dtype, bool fast) {
    if (!scale_result.is_none())
      throw NotImplementedError("_scaled_mm: scale_result (an fp8 output) is not supported; use out_dtype bfloat16, "
                                "float16 or float32");
    const DType od = opt_dtype(out_dtype).value_or(DType::BFloat16);
    py::gil_scoped_release release;
    return scaled_mm(a, b, scale_a, scale_b, bias, od, fast);
  }, arg("input"), arg("mat2"), arg("scale_a"), arg("scale_b"), arg("bias") = none, arg("scale_result") = none,
     arg("out_dtype") = none, arg("use_fast_accum") = false);
  m.def("_grouped_mm", [](const Tensor& a, const Tensor& b, std::optional<Tensor> offs, std::optional<Tensor> bias,
                          py::object out_dtype, std::optional<Tensor> b_scale) {
    const std::optional<DType> od = opt_dtype(out_dtype);
    py::gil_scoped_release release;
    return grouped_mm(a, b, offs, bias, od, b_scale);
  }, arg("mat_a"), arg("mat_b"), arg("offs") = none, arg("bias") = none, arg("out_dtype") = none,
     arg("b_scale") = none);
  m.def("quantize_fp8_rows", [](const Tensor& w) { return pair_without_gil([&] { return quantize_fp8_rows(w); }); },
        arg("weight"));
  for (bool log : {false, true}) {
    auto f = [log](const Tensor& x, int64_t dim, py::object dtype) {
      return log ? log_softmax(x, dim, opt_dtype(dtype)) : softmax(x, dim, opt_dtype(dtype));
    };
    m.def(log ? "log_softmax" : "softmax", f, arg("input"), arg("dim"), arg("dtype") = none);
    cls.def(log ? "log_softmax" : "softmax", f, arg("dim"), arg("dtype") = none);
  }
  m.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v,
                                           std::optional<Tensor> mask, double dropout_p, bool is_causal,
                                           std::optional<double> scale, bool enable_gqa,
                                           const std::string& causal_variant) {
    if (dropout_p != 0.0)
      throw NotImplementedError("scaled_dot_product_attention: dropout_p != 0 is not supported (kiln is for inference)");
    if (causal_variant != "upper_left" && causal_variant != "lower_right")
      throw Error("scaled_dot_product_attention: causal_variant must be 'upper_left' or 'lower_right', got '" +
                  causal_variant + "'");
    return scaled_dot_product_attention(q, k, v, mask, is_causal, scale, enable_gqa,
                                        causal_variant == "lower_right" ? CausalVariant::LowerRight
                                                                        : CausalVariant::UpperLeft);
  }, arg("query"), arg("key"), arg("value"), arg("attn_mask") = none, arg("dropout_p") = 0.0,
     arg("is_causal") = false, py::kw_only(), arg("scale") = none, arg("enable_gqa") = false,
     arg("causal_variant") = "upper_left", py::call_guard<py::gil_scoped_release>());
  {
    auto f = [](const Tensor& x, int64_t kk, int64_t dim, bool largest, bool sorted) {
      (void)sorted;  // always sorted, which torch allows for sorted=False too
      return values_indices(topk(x, kk, dim, largest));
    };
    m.def("topk", f, arg("input"), arg("k"), arg("dim") = -1, arg("largest") = true, arg("sorted") = true);
    cls.def("topk", f, arg("k"), arg("dim") = -1, arg("largest") = true, arg("sorted") = true);
  }
  // ---- checkpoints ----
  // Loads with the GIL released, then hands the tensors over as a dict.
  auto load = [](SafetensorsFile (*loader)(const std::string&), const std::string& path) {
    SafetensorsFile f;
    {
      py::gil_scoped_release release;
      f = loader(path);
    }
    py::dict tensors;
    for (auto& [name, t] : f.tensors) tensors[py::str(name)] = py::cast(t);
    return std::make_pair(tensors, f.metadata);
  };
  m.def("load_safetensors", [load](const std::string& path) {
    auto [tensors, metadata] = load(&load_safetensors, path);
    return py::make_tuple(tensors, py::cast(metadata));
  }, arg("path"), "(tensors, metadata) of a safetensors file; tensors are views of its memory map");
  m.def("load_checkpoint", [load](const std::string& folder) { return load(&load_checkpoint, folder).first; }, arg("folder"), "the weights of a Hugging Face model folder (single file or sharded with an index)");
  // ---- the small fused ops of a decoder layer ----
  // normalized_shape: an int or a sequence of ints, as torch takes it
  const auto normalized = [](py::handle s) { return py::isinstance<py::int_>(s) ? Shape{s.cast<int64_t>()} : s.cast<Shape>(); };
  m.def("rms_norm", [normalized](const Tensor& x, py::object normalized_shape, std::optional<Tensor> w, std::optional<double> eps) {
    const Shape ns = normalized(normalized_shape);
    KILN_CHECK(ns.size() == 1 && x.dim() >= 1 && ns[0] == x.size(-1), "rms_norm: normalized_shape must be the last "
               "dim (", x.dim() >= 1 ? x.size(-1) : 0, "), got ", shape_str(ns));
    py::gil_scoped_release release;
    return rms_norm(x, w, eps);
  }, arg("input"), arg("normalized_shape"), arg("weight") = none, arg("eps") = none);
  m.def("layer_norm", [normalized](const Tensor& x, py::object normalized_shape, std::optional<Tensor> w,
                                   std::optional<Tensor> b, double eps) {
    const Shape ns = normalized(normalized_shape);
    py::gil_scoped_release release;
    return layer_norm(x, ns, w, b, eps);
  }, arg("input"), arg("normalized_shape"), arg("weight") = none, arg("bias") = none, arg("eps") = 1e-5);
  m.def("sample", [](const Tensor& logits, double temperature, int64_t top_k, double top_p, py::object gen) {
    Generator* g = to_generator(gen);
    py::gil_scoped_release release;
    return sample(logits, temperature, top_k, top_p, g);
  }, arg("logits"), arg("temperature") = 1.0, arg("top_k") = 0, arg("top_p") = 1.0, arg("generator") = none,
     "a token id per row of logits: softmax(logits / temperature), top-k, then top-p, one seeded draw per row");
  m.def("rms_norm_linear", [](const Tensor& x, std::optional<Tensor> residual, const Tensor& norm_weight, double eps,
                              const Tensor& w, std::optional<Tensor> bias, std::optional<Tensor> scale, bool silu,
                              bool want_normed) {
    RmsNormLinear r;
    {
      py::gil_scoped_release release;
      r = rms_norm_linear(x, residual, norm_weight, eps, w, bias, scale, silu, want_normed);
    }
    return py::make_tuple(r.out, r.sum, r.normed.defined() ? py::cast(r.normed) : py::none());
  }, arg("input"), arg("residual"), arg("norm_weight"), arg("eps"), arg("weight"), arg("bias") = none, py::kw_only(),
     arg("weight_scale") = none, arg("silu_and_mul") = false, arg("want_normed") = false,
     "(linear(rms_norm(input + residual)), input + residual, the normalised rows or None); one kernel for a row on CUDA");
  m.def("rms_norm_residual", [](const Tensor& x, const Tensor& r, const Tensor& w, double eps) {
    return pair_without_gil([&] { return rms_norm_residual(x, r, w, eps); });
  }, arg("input"), arg("residual"), arg("weight"), arg("eps"));
  m.def("silu_and_mul", &silu_and_mul, arg("input"), py::call_guard<py::gil_scoped_release>());
  m.def("apply_rotary", &apply_rotary, arg("input"), arg("cos"), arg("sin"), arg("interleaved") = false,
        py::call_guard<py::gil_scoped_release>());
  m.def("qkv_rotary_cache", [](const Tensor& qkv, int64_t hq, int64_t hkv, std::optional<Tensor> q_norm,
                               std::optional<Tensor> k_norm, double eps, const Tensor& cos, const Tensor& sin,
                               const Tensor& positions, const Tensor& k_cache, const Tensor& v_cache) {
    py::gil_scoped_release release;
    return qkv_rotary_cache(qkv, hq, hkv, q_norm.value_or(Tensor()), k_norm.value_or(Tensor()), eps, cos, sin,
                            positions, k_cache, v_cache);
  }, arg("qkv"), arg("num_heads"), arg("num_kv_heads"), arg("q_norm"), arg("k_norm"), arg("eps"), arg("cos"),
     arg("sin"), arg("positions"), arg("k_cache"), arg("v_cache"));
  m.def("attention_decode_cache", &attention_decode_cache, arg("q"), arg("k_cache"), arg("v_cache"), arg("seq_lens"),
        arg("scale") = none, py::call_guard<py::gil_scoped_release>());
  m.def("attention_decode_qkv", [](const Tensor& qkv, int64_t hq, int64_t hkv, std::optional<Tensor> q_norm,
                                   std::optional<Tensor> k_norm, double eps, const Tensor& cos, const Tensor& sin,
                                   const Tensor& seq_len, const Tensor& k_cache, const Tensor& v_cache,
                                   std::optional<double> scale, bool cache_settled) {
    py::gil_scoped_release release;
    return attention_decode_qkv(qkv, hq, hkv, q_norm.value_or(Tensor()), k_norm.value_or(Tensor()), eps, cos, sin,
                                seq_len, k_cache, v_cache, scale, cache_settled);
  }, arg("qkv"), arg("num_heads"), arg("num_kv_heads"), arg("q_norm"), arg("k_norm"), arg("eps"), arg("cos"),
     arg("sin"), arg("seq_len"), arg("k_cache"), arg("v_cache"), arg("scale") = none, arg("cache_settled") = false);
  // ---- gathers and mixture-of-experts routing ----
  m.def("index_select", &index_select, arg("input"), arg("dim"), arg("index"), py::call_guard<py::gil_scoped_release>());
  cls.def("index_select", &index_select, arg("dim"), arg("index"));
  py::class_<MoeRouting>(m, "MoeRouting", "moe_route's result: weights, experts, offs, token_of, sorted_pos")
      .def_readonly("weights", &MoeRouting::weights)
      .def_readonly("experts", &MoeRouting::experts)
      .def_readonly("offs", &MoeRouting::offs)
      .def_readonly("token_of", &MoeRouting::token_of)
      .def_readonly("sorted_pos", &MoeRouting::sorted_pos);
  m.def("moe_route", [](const Tensor& logits, int64_t kk, const std::string& scoring, std::optional<Tensor> bias,
                        bool renormalize) {
    KILN_CHECK(scoring == "softmax" || scoring == "sigmoid", "moe_route: scoring must be 'softmax' or 'sigmoid', got '",
               scoring, "'");
    py::gil_scoped_release release;
    return moe_route(logits, kk, scoring == "softmax" ? RouterScoring::Softmax : RouterScoring::Sigmoid, bias,
                     renormalize);
  }, arg("logits"), arg("k"), arg("scoring") = "softmax", arg("selection_bias") = none, arg("renormalize") = true);
  m.def("moe_combine", &moe_combine, arg("expert_out"), arg("routing"), py::call_guard<py::gil_scoped_release>());
  m.def("moe_combine_rms_norm_residual", [](const Tensor& y, const MoeRouting& r, const Tensor& res, const Tensor& w,
                                             double eps) {
    return pair_without_gil([&] { return moe_combine_rms_norm_residual(y, r, res, w, eps); });
  }, arg("expert_out"), arg("routing"), arg("residual"), arg("weight"), arg("eps"));
  m.def("moe_experts", &moe_experts, arg("x"), arg("gate_up"), arg("down"), arg("routing"),
        arg("gate_up_scale") = none, arg("down_scale") = none, py::call_guard<py::gil_scoped_release>());
  m.def("moe_experts_combine", &moe_experts_combine, arg("x"), arg("gate_up"), arg("down"), arg("routing"),
        arg("gate_up_scale") = none, arg("down_scale") = none, py::call_guard<py::gil_scoped_release>());
  py::class_<PendingRmsNorm>(m, "PendingRmsNorm",
                             "an RMSNorm with its 1 / rms still to apply: sum, scaled = sum * weight, sq_parts "
                             "(partial sums of squares of sum's rows), weight, eps")
      .def(py::init([](const Tensor& sum, const Tensor& scaled, const Tensor& sq_parts, const Tensor& weight,
                       double eps) { return PendingRmsNorm{sum, scaled, sq_parts, weight, eps}; }),
           arg("sum"), arg("scaled"), arg("sq_parts"), arg("weight"), arg("eps"))
      .def_readonly("sum", &PendingRmsNorm::sum)
      .def_readonly("scaled", &PendingRmsNorm::scaled)
      .def_readonly("sq_parts", &PendingRmsNorm::sq_parts)
      .def_readonly("weight", &PendingRmsNorm::weight)
      .def_readonly("eps", &PendingRmsNorm::eps);
  m.def("moe_experts_combine_rms_norm", &moe_experts_combine_rms_norm, arg("x"), arg("gate_up"), arg("down"),
        arg("routing"), arg("residual"), arg("norm_weight"), arg("eps"), arg("gate_up_scale") = none,
        arg("down_scale") = none, py::call_guard<py::gil_scoped_release>());
  m.def("pending_rms_norm_linear", &pending_rms_norm_linear, arg("pending"), arg("weight"), arg("bias") = none,
        arg("weight_scale") = none, py::call_guard<py::gil_scoped_release>(),
        "linear(rms_norm(pending.sum, pending.weight, pending.eps)); one kernel for a row on CUDA");
  m.def("broadcast_shapes", [](py::args shapes) {
    Shape out;
    for (auto s : shapes) out = broadcast_shapes(out, s.cast<Shape>());
    return out;
  });
}

}  // namespace kiln::python
