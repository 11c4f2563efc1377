// The weights of a Qwen3 / Qwen3-MoE model as plain structs, on one device, in
// the layouts kiln's kernels read: q, k, v stacked into one projection, gate and
// up stacked (SwiGLU reads [gate | up]), experts stacked [E, N, K].
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops.h"
#include "kiln/tensor.h"
#include "models/config.h"

namespace kiln {

// y = x @ weight^T (+ bias); weight in the compute dtype, or float8_e4m3fn with a
// per-row float32 scale.
struct LinearWeights {
  Tensor weight, scale, bias;
  Tensor operator()(const Tensor& x) const;
  // silu_and_mul of the product, for [gate | up] weights (one kernel a decode step on CUDA)
  Tensor silu_and_mul_of(const Tensor& x) const;
  // this projection (or its silu_and_mul) of rms_norm(x + residual), see rms_norm_linear
  RmsNormLinear of_rms_norm(const Tensor& x, const std::optional<Tensor>& residual, const Tensor& norm_weight,
                            double eps, bool silu_and_mul = false, bool want_normed = false) const;
  // this projection of a pending norm's row, see pending_rms_norm_linear
  Tensor of_pending(const PendingRmsNorm& p) const;
  size_t nbytes() const;
};

struct AttentionWeights {
  LinearWeights qkv;  // [(Hq + 2 Hkv) * D, hidden]
  LinearWeights o;    // [hidden, Hq * D]
  Tensor q_norm, k_norm;  // [D]
};

struct DenseMlpWeights {
  LinearWeights gate_up;  // [2 I, hidden]: gate rows, then up rows
  LinearWeights down;     // [hidden, I]
};

struct MoeWeights {
  LinearWeights router;  // [E, hidden]
  Tensor gate_up;        // [E, 2 I, hidden]
  Tensor down;           // [E, hidden, I]
  Tensor gate_up_scale, down_scale;  // fp8 experts: [E, 2 I] and [E, hidden] float32 per-row scales
  size_t expert_bytes() const;       // all experts with their scales
};

struct LayerWeights {
  Tensor input_norm, post_attention_norm;  // [hidden]
  AttentionWeights attn;
  bool is_moe = false;
  DenseMlpWeights mlp;  // when !is_moe
  MoeWeights moe;       // when is_moe
};

struct ModelWeights {
  Tensor embed;       // [V, hidden]
  Tensor final_norm;  // [hidden]
  LinearWeights lm_head;  // [V, hidden]; the embedding itself when tied (and not fp8)
  std::vector<LayerWeights> layers;
  // Bytes a decode step reads: everything but the embedding table (one row of it)
  // and the experts not chosen (top-k of E per MoE layer).
  size_t decode_bytes_per_token(const ModelConfig& c) const;
  size_t total_bytes() const;
};

struct LoadProgress {
  size_t bytes_done = 0, bytes_total = 0;
  int64_t tensors_done = 0, tensors_total = 0;
};

struct WeightOptions {
  Device device = kCPU;
  DType dtype = DType::BFloat16;  // the compute dtype: bfloat16, float16 or float32
  bool fp8 = false;  // quantise the linear layers and experts (not norms, embedding, router) to e4m3fn per row
  std::function<void(const LoadProgress&)> progress;  // called as tensors land
};

// The weights of a Hugging Face model folder (config.json's architecture): every
// tensor the architecture needs is looked up by name and its shape checked; an
// error names the tensor and the folder. Experts stored one by one
// (mlp.experts.N.gate_proj ...) or fused (mlp.experts.gate_up_proj) both load.
ModelWeights load_weights(const ModelConfig& config, const std::string& folder, const WeightOptions& opts);

// Random weights of the right shapes (normal, std 0.02; norms 1), for benchmarks.
ModelWeights random_weights(const ModelConfig& config, const WeightOptions& opts, uint64_t seed = 0);

// The compute dtype a name stands for ("bf16", "bfloat16", "fp16", "float16",
// "fp32", "float32"); "fp8" means bfloat16 compute with fp8 linear weights.
void parse_model_dtype(const std::string& name, WeightOptions& opts);

}  // namespace kiln
