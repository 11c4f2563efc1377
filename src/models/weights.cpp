// Qwen3 / Qwen3-MoE weights: names of the Hugging Face checkpoint -> kiln's
// stacked layouts, from a checkpoint folder or at random (benchmarks). One
// builder for both, over a source that fills a destination tensor by name.
#include "models/weights.h"

#include <algorithm>
#include <optional>

#include "kiln/ops.h"
#include "kiln/safetensors.h"
#include "core/allocator.h"
#include "core/check.h"

namespace kiln {

namespace {

// An optional operand of linear: given when the weights hold it.
std::optional<Tensor> if_defined(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

}  // namespace

Tensor LinearWeights::operator()(const Tensor& x) const { return linear(x, weight, if_defined(bias), if_defined(scale)); }

Tensor LinearWeights::silu_and_mul_of(const Tensor& x) const {
  return linear_silu_and_mul(x, weight, if_defined(bias), if_defined(scale));
}

RmsNormLinear LinearWeights::of_rms_norm(const Tensor& x, const std::optional<Tensor>& residual,
                                         const Tensor& norm_weight, double eps, bool silu_and_mul,
                                         bool want_normed) const {
  return rms_norm_linear(x, residual, norm_weight, eps, weight, if_defined(bias), if_defined(scale), silu_and_mul,
                         want_normed);
}

Tensor LinearWeights::of_pending(const PendingRmsNorm& p) const {
  return pending_rms_norm_linear(p, weight, if_defined(bias), if_defined(scale));
}

size_t LinearWeights::nbytes() const {
  return weight.nbytes() + (scale.defined() ? scale.nbytes() : 0) + (bias.defined() ? bias.nbytes() : 0);
}

size_t MoeWeights::expert_bytes() const {
  if (!gate_up.defined()) return 0;
  return gate_up.nbytes() + down.nbytes() + (gate_up_scale.defined() ? gate_up_scale.nbytes() + down_scale.nbytes() : 0);
}

size_t ModelWeights::decode_bytes_per_token(const ModelConfig& c) const {
  size_t n = final_norm.nbytes() + lm_head.nbytes() + embed.nbytes() / std::max<int64_t>(1, embed.size(0));
  for (const auto& l : layers) {
    n += l.input_norm.nbytes() + l.post_attention_norm.nbytes() + l.attn.qkv.nbytes() + l.attn.o.nbytes() +
         l.attn.q_norm.nbytes() + l.attn.k_norm.nbytes();
    if (l.is_moe) {
      const size_t per_expert = l.moe.expert_bytes() / l.moe.gate_up.size(0);
      n += l.moe.router.nbytes() + per_expert * static_cast<size_t>(c.num_experts_per_tok);
    } else {
      n += l.mlp.gate_up.nbytes() + l.mlp.down.nbytes();
    }
  }
  return n;
}

size_t ModelWeights::total_bytes() const {
  size_t n = embed.nbytes() + final_norm.nbytes() + (lm_head.weight.is_alias_of(embed) ? 0 : lm_head.nbytes());
  for (const auto& l : layers)
    n += l.input_norm.nbytes() + l.post_attention_norm.nbytes() + l.attn.qkv.nbytes() + l.attn.o.nbytes() +
         l.attn.q_norm.nbytes() + l.attn.k_norm.nbytes() + l.mlp.gate_up.nbytes() + l.mlp.down.nbytes() +
         l.moe.router.nbytes() + l.moe.expert_bytes();
  return n;
}

void parse_model_dtype(const std::string& name, WeightOptions& opts) {
  opts.fp8 = false;
  if (name == "bf16" || name == "bfloat16") opts.dtype = DType::BFloat16;
  else if (name == "fp16" || name == "float16") opts.dtype = DType::Float16;
  else if (name == "fp32" || name == "float32") opts.dtype = DType::Float32;
  else if (name == "fp8") opts.dtype = DType::BFloat16, opts.fp8 = true;
  else throw Error("model dtype '" + name + "' is not one of bf16, fp16, fp32, fp8");
}

namespace {

// Fills a destination (a whole weight or a slice of a stacked one) by name.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual void fill(const std::string& name, const Tensor& dst, bool is_norm) = 0;
};

class CheckpointSource : public WeightSource {
 public:
  CheckpointSource(const std::string& folder, const WeightOptions& opts)
      : folder_(folder), file_(load_checkpoint(folder)), opts_(opts) {
    for (const auto& [name, t] : file_.tensors) progress_.bytes_total += t.nbytes();
    progress_.tensors_total = static_cast<int64_t>(file_.tensors.size());
  }
  bool has(const std::string& name) const override { return file_.tensors.count(name) > 0; }

  void fill(const std::string& name, const Tensor& dst, bool) override {
    auto it = file_.tensors.find(name);
    KILN_CHECK(it != file_.tensors.end(), "weights: ", folder_, " has no tensor '", name, "'");
    const Tensor& src = it->second;
    KILN_CHECK(src.shape() == dst.shape(), "weights: ", folder_, ": '", name, "' has shape ", src.shape(),
               ", the config needs ", dst.shape());
    const DType d = src.dtype();
    KILN_CHECK(d == DType::BFloat16 || d == DType::Float16 || d == DType::Float32 || d == DType::Float8_e4m3fn,
               "weights: ", folder_, ": '", name, "' has dtype ", d, " (bfloat16, float16, float32 or float8_e4m3fn "
               "with its scale expected)");
    if (d == DType::Float8_e4m3fn) dst.copy_(dequantize(name, src));
    else dst.copy_(src);
    note(src);
  }

  void finish() {
    progress_.bytes_done = progress_.bytes_total;
    progress_.tensors_done = progress_.tensors_total;
    if (opts_.progress) opts_.progress(progress_);
  }

 private:
  void note(const Tensor& t) {
    progress_.bytes_done += t.nbytes();
    progress_.tensors_done += 1;
    if (opts_.progress) opts_.progress(progress_);
  }

  // An FP8 checkpoint's weight times its scale: weight_scale_inv in blocks (Qwen's
  // and DeepSeek's [ceil(N/b), ceil(K/b)] layout) or weight_scale per tensor / row.
  Tensor dequantize(const std::string& name, const Tensor& w8) {
    KILN_CHECK(w8.dim() == 2, "weights: ", folder_, ": float8 tensor '", name, "' must be 2-D, got ", w8.shape());
    const std::string base = name.size() > 7 && name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
    const Tensor w = w8.to(opts_.device).to(DType::Float32);
    const int64_t N = w.size(0), K = w.size(1);
    if (auto it = file_.tensors.find(base + ".weight_scale_inv"); it != file_.tensors.end()) {
      const Tensor s = it->second.to(opts_.device).to(DType::Float32);
      KILN_CHECK(s.dim() == 2 && s.size(0) > 0 && s.size(1) > 0, "weights: ", folder_, ": '", it->first,
                 "' must be 2-D block scales, got ", s.shape());
      const int64_t bn = (N + s.size(0) - 1) / s.size(0), bk = (K + s.size(1) - 1) / s.size(1);
      KILN_CHECK((N + bn - 1) / bn == s.size(0) && (K + bk - 1) / bk == s.size(1), "weights: ", folder_, ": '",
                 it->first, "' of shape ", s.shape(), " does not tile '", name, "' of shape ", w.shape());
      const Tensor full_scale = s.unsqueeze(1).unsqueeze(3).expand({s.size(0), bn, s.size(1), bk})
                                    .reshape({s.size(0) * bn, s.size(1) * bk}).narrow(0, 0, N).narrow(1, 0, K);
      note(it->second);
      return mul(w, full_scale);
    }
    if (auto it = file_.tensors.find(base + ".weight_scale"); it != file_.tensors.end()) {
      const Tensor s = it->second.to(opts_.device).to(DType::Float32);
      KILN_CHECK(s.numel() == 1 || s.numel() == N, "weights: ", folder_, ": '", it->first, "' of shape ", s.shape(),
                 " is neither one scale nor one per row of '", name, "' ", w.shape());
      note(it->second);
      return mul(w, s.numel() == 1 ? s.reshape({1, 1}) : s.reshape({N, 1}));
    }
    throw Error("weights: " + folder_ + ": float8 tensor '" + name + "' has no " + base + ".weight_scale_inv or " +
                base + ".weight_scale");
  }

  std::string folder_;
  SafetensorsFile file_;
  const WeightOptions& opts_;
  LoadProgress progress_;
};

class RandomSource : public WeightSource {
 public:
  explicit RandomSource(uint64_t seed) : gen_(seed) {}
  // no biases; lm_head is the embedding when the config ties them
  bool has(const std::string& name) const override { return !name.ends_with(".bias") && name != "lm_head.weight"; }
  void fill(const std::string&, const Tensor& dst, bool is_norm) override {
    Tensor t = dst;
    if (is_norm) t.fill_(1.0);
    else normal_(t, 0.0, 0.02, &gen_);
  }

 private:
  Generator gen_;
};

class Builder {
 public:
  Builder(const ModelConfig& c, const WeightOptions& o, WeightSource& s) : c_(c), o_(o), src_(s) {}

  ModelWeights build() {
    ModelWeights w;
    const int64_t H = c_.hidden_size;
    w.embed = dense("model.embed_tokens.weight", {c_.vocab_size, H});
    w.final_norm = norm("model.norm.weight", H);
    if (c_.tie_word_embeddings && !src_.has("lm_head.weight")) w.lm_head = linear(w.embed);
    else w.lm_head = linear(dense("lm_head.weight", {c_.vocab_size, H}));
    size_t largest_layer = 0;
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      const size_t before = memory_stats(o_.device).allocated;
      w.layers.push_back(layer(i));
      largest_layer = std::max(largest_layer, memory_stats(o_.device).allocated - before);
      check_room(i + 1, largest_layer);
    }
    return w;
  }

 private:
  Tensor dense(const std::string& name, const Shape& shape, bool is_norm = false) {
    Tensor t = Tensor::empty(shape, o_.dtype, o_.device);
    src_.fill(name, t, is_norm);
    return t;
  }
  Tensor norm(const std::string& name, int64_t n) { return dense(name, {n}, true); }

  // On the CPU the system grants allocations past its memory and kills the process once
  // their pages are touched: so after each layer, the layers still to come (at the
  // largest layer's size so far) must fit in what is available, or this is an error.
  void check_room(int64_t built, size_t largest_layer) const {
    if (!o_.device.is_cpu() || built == c_.num_hidden_layers) return;
    const std::optional<size_t> available = cpu_available_bytes();
    const double left = static_cast<double>(largest_layer) * static_cast<double>(c_.num_hidden_layers - built);
    KILN_CHECK(!available || left <= static_cast<double>(*available), "weights: the ",
               c_.num_hidden_layers - built, " layers still to build need about ", left / 1e9, " GB (",
               largest_layer / 1e9, " GB a layer in ", o_.dtype, o_.fp8 ? " with fp8 linears" : "",
               "), but the CPU has ", available ? *available / 1e9 : 0.0, " GB available; ", built, " of ",
               c_.num_hidden_layers, " layers were built");
  }

  // rows of several checkpoint tensors stacked into one [sum rows, cols]
  Tensor stacked(const std::vector<std::pair<std::string, int64_t>>& parts, int64_t cols) {
    int64_t rows = 0;
    for (const auto& p : parts) rows += p.second;
    Tensor t = Tensor::empty({rows, cols}, o_.dtype, o_.device);
    int64_t at = 0;
    for (const auto& [name, n] : parts) {
      src_.fill(name, t.narrow(0, at, n), false);
      at += n;
    }
    return t;
  }

  LinearWeights linear(const Tensor& w, const Tensor& bias = Tensor()) {
    LinearWeights l;
    l.bias = bias;
    if (o_.fp8) std::tie(l.weight, l.scale) = quantize_fp8_rows(w);
    else l.weight = w;
    return l;
  }

  LayerWeights layer(int64_t i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int64_t H = c_.hidden_size, D = c_.head_dim, hq = c_.num_attention_heads * D,
                  hkv = c_.num_key_value_heads * D;
    LayerWeights l;
    l.input_norm = norm(p + "input_layernorm.weight", H);
    l.post_attention_norm = norm(p + "post_attention_layernorm.weight", H);
    const std::string a = p + "self_attn.";
    Tensor qkv_bias;
    if (src_.has(a + "q_proj.bias")) {
      qkv_bias = Tensor::empty({hq + 2 * hkv}, o_.dtype, o_.device);
      src_.fill(a + "q_proj.bias", qkv_bias.narrow(0, 0, hq), false);
      src_.fill(a + "k_proj.bias", qkv_bias.narrow(0, hq, hkv), false);
      src_.fill(a + "v_proj.bias", qkv_bias.narrow(0, hq + hkv, hkv), false);
    }
    l.attn.qkv = linear(stacked({{a + "q_proj.weight", hq}, {a + "k_proj.weight", hkv}, {a + "v_proj.weight", hkv}}, H),
                        qkv_bias);
    l.attn.o = linear(dense(a + "o_proj.weight", {H, hq}));
    l.attn.q_norm = norm(a + "q_norm.weight", D);
    l.attn.k_norm = norm(a + "k_norm.weight", D);
    l.is_moe = c_.layer_is_moe(i);
    const std::string m = p + "mlp.";
    if (!l.is_moe) {
      const int64_t I = c_.intermediate_size;
      KILN_CHECK(I > 0, "weights: layer ", i, " is dense but the config has no intermediate_size");
      l.mlp.gate_up = linear(stacked({{m + "gate_proj.weight", I}, {m + "up_proj.weight", I}}, H));
      l.mlp.down = linear(dense(m + "down_proj.weight", {H, I}));
      return l;
    }
    const int64_t E = c_.num_experts, I = c_.moe_intermediate_size;
    l.moe.router.weight = dense(m + "gate.weight", {E, H});
    l.moe.gate_up = Tensor::empty({E, 2 * I, H}, o_.dtype, o_.device);
    l.moe.down = Tensor::empty({E, H, I}, o_.dtype, o_.device);
    if (src_.has(m + "experts.gate_up_proj")) {  // transformers 5's fused experts
      src_.fill(m + "experts.gate_up_proj", l.moe.gate_up, false);
      src_.fill(m + "experts.down_proj", l.moe.down, false);
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        src_.fill(x + "gate_proj.weight", l.moe.gate_up.select(0, e).narrow(0, 0, I), false);
        src_.fill(x + "up_proj.weight", l.moe.gate_up.select(0, e).narrow(0, I, I), false);
        src_.fill(x + "down_proj.weight", l.moe.down.select(0, e), false);
      }
    }
    if (o_.fp8) {
      std::tie(l.moe.gate_up, l.moe.gate_up_scale) = quantize_fp8_rows(l.moe.gate_up);
      std::tie(l.moe.down, l.moe.down_scale) = quantize_fp8_rows(l.moe.down);
    }
    return l;
  }

  const ModelConfig& c_;
  const WeightOptions& o_;
  WeightSource& src_;
};

void check_options(const WeightOptions& o) {
  KILN_CHECK(o.dtype == DType::BFloat16 || o.dtype == DType::Float16 || o.dtype == DType::Float32,
             "weights: the compute dtype must be bfloat16, float16 or float32, got ", o.dtype);
}

}  // namespace

ModelWeights load_weights(const ModelConfig& config, const std::string& folder, const WeightOptions& opts) {
  check_options(opts);
  CheckpointSource src(folder, opts);
  ModelWeights w = Builder(config, opts, src).build();
  src.finish();
  return w;
}

ModelWeights random_weights(const ModelConfig& config, const WeightOptions& opts, uint64_t seed) {
  check_options(opts);
  RandomSource src(seed);
  return Builder(config, opts, src).build();
}

}  // namespace kiln
