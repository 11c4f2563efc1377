// config.json -> ModelConfig, with every field the architectures rely on checked.
#include "models/config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/json_file.h"

namespace kiln {

bool ModelConfig::layer_is_moe(int64_t i) const {
  return is_moe() && std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end() &&
         (i + 1) % decoder_sparse_step == 0;
}

ModelConfig load_config(const std::string& file_or_folder) {
  const std::string path = file_or_in_folder(file_or_folder, "config.json");
  const nlohmann::json j = read_json_file(path, "config");
  KILN_CHECK(j.is_object(), "config: ", path, " must hold a JSON object");
  auto need_int = [&](const char* name) {
    KILN_CHECK(j.contains(name) && !j[name].is_null(), "config: ", path, ": '", name, "' is missing");
    return json_int(j, name, 0, 1, "config", path);
  };
  auto opt_int = [&](const char* name, int64_t dflt) { return json_int(j, name, dflt, 0, "config", path); };
  auto positive_num = [&](const char* name, double dflt) {
    const double v = json_number(j, name, dflt, "config", path);
    KILN_CHECK(v > 0, "config: ", path, ": '", name, "' must be a positive number, got ", v);
    return v;
  };
  ModelConfig c;
  KILN_CHECK(j.contains("model_type") && j["model_type"].is_string(), "config: ", path, ": 'model_type' is missing");
  c.model_type = j["model_type"].get<std::string>();
  KILN_CHECK(c.model_type == "qwen3" || c.model_type == "qwen3_moe", "config: ", path, ": model_type '", c.model_type,
             "' is not supported (qwen3 and qwen3_moe are)");
  for (const char* key : {"torch_dtype", "dtype"})  // transformers 5 writes "dtype"
    if (j.contains(key) && j[key].is_string()) c.torch_dtype = j[key].get<std::string>();
  c.hidden_size = need_int("hidden_size");
  c.num_hidden_layers = need_int("num_hidden_layers");
  c.num_attention_heads = need_int("num_attention_heads");
  c.vocab_size = need_int("vocab_size");
  c.num_key_value_heads = opt_int("num_key_value_heads", c.num_attention_heads);
  c.head_dim = opt_int("head_dim", c.hidden_size / c.num_attention_heads);
  c.intermediate_size = opt_int("intermediate_size", 0);
  c.max_position_embeddings = opt_int("max_position_embeddings", 32768);
  c.rms_norm_eps = positive_num("rms_norm_eps", 1e-6);
  c.rope_theta = positive_num("rope_theta", 10000.0);
  // transformers 5 keeps rotary settings in rope_parameters, 4 in rope_theta and rope_scaling
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    const auto& r = j[key];
    KILN_CHECK(r.is_object(), "config: ", path, ": '", key, "' must be an object");
    const std::string type =
        json_string(r, "rope_type", json_string(r, "type", "default", "config", path), "config", path);
    KILN_CHECK(type == "default", "config: ", path, ": rotary scaling '", type, "' (", key,
               ") is not supported; only the default rotary embedding is");
    c.rope_theta = json_number(r, "rope_theta", c.rope_theta, "config", path);
    KILN_CHECK(c.rope_theta > 0, "config: ", path, ": ", key, "'s 'rope_theta' must be a positive number, got ",
               c.rope_theta);
  }
  KILN_CHECK(c.max_position_embeddings > 0, "config: ", path, ": 'max_position_embeddings' must be positive");
  c.tie_word_embeddings = json_bool(j, "tie_word_embeddings", false, "config", path);
  KILN_CHECK(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, "config: ", path,
             ": num_attention_heads (", c.num_attention_heads, ") must be a multiple of num_key_value_heads (",
             c.num_key_value_heads, ")");
  KILN_CHECK(c.head_dim > 0, "config: ", path, ": head_dim must be positive");
  if (c.model_type == "qwen3_moe") {
    // transformers 5 may write the expert count as num_local_experts
    c.num_experts = need_int(j.contains("num_experts") || !j.contains("num_local_experts") ? "num_experts"
                                                                                          : "num_local_experts");
    c.num_experts_per_tok = need_int("num_experts_per_tok");
    c.moe_intermediate_size = need_int("moe_intermediate_size");
    c.decoder_sparse_step = std::max<int64_t>(1, opt_int("decoder_sparse_step", 1));
    c.norm_topk_prob = json_bool(j, "norm_topk_prob", true, "config", path);
    if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
      const auto& layers = j["mlp_only_layers"];
      KILN_CHECK(layers.is_array(), "config: ", path, ": 'mlp_only_layers' must be a list of layer indices");
      for (const auto& v : layers) {
        KILN_CHECK(v.is_number_integer(), "config: ", path, ": 'mlp_only_layers' holds ", v.dump(),
                   ", not a layer index");
        c.mlp_only_layers.push_back(v.get<int64_t>());
      }
    }
    KILN_CHECK(c.num_experts_per_tok <= c.num_experts, "config: ", path, ": num_experts_per_tok (",
               c.num_experts_per_tok, ") exceeds num_experts (", c.num_experts, ")");
  } else {
    KILN_CHECK(c.intermediate_size > 0, "config: ", path, ": 'intermediate_size' must be a positive integer");
  }
  return c;
}

}  // namespace kiln
