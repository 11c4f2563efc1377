// A model's config.json as a plain struct (the fields kiln's Qwen3 and
// Qwen3-MoE architectures use).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct ModelConfig {
  std::string model_type;  // "qwen3" or "qwen3_moe"
  std::string torch_dtype = "bfloat16";
  int64_t hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0, num_attention_heads = 0,
          num_key_value_heads = 0, head_dim = 0, vocab_size = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  // mixture of experts (qwen3_moe); num_experts == 0 for dense models
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0, decoder_sparse_step = 1;
  bool norm_topk_prob = true;
  std::vector<int64_t> mlp_only_layers;

  bool is_moe() const { return num_experts > 0; }
  // Layer `i` uses the experts (else the dense MLP), as transformers' Qwen3-MoE decides.
  bool layer_is_moe(int64_t i) const;
};

// Reads and checks config.json (or the one in a model folder): required fields present and positive, heads
// divisible by kv heads, top-k within the experts; errors name the file and field.
ModelConfig load_config(const std::string& file_or_folder);

}  // namespace kiln
