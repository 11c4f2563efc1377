// config.json parsing: the fields of real Qwen3 / Qwen3-MoE configs, and the errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "kiln/error.h"
#include "models/config.h"

namespace {

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/kiln_config_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  std::ofstream(name) << text;
  close(fd);
  return name;
}

// Qwen3-30B-A3B's config.json (the fields kiln reads, values as published).
const char* kQwen3Moe = R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
  "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": false, "num_experts": 128,
  "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1, "norm_topk_prob": true,
  "mlp_only_layers": [], "torch_dtype": "bfloat16"})";

TEST(ModelConfig, ReadsQwen3Moe) {
  const std::string path = write_temp(kQwen3Moe);
  const kiln::ModelConfig c = kiln::load_config(path);
  std::remove(path.c_str());
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.layer_is_moe(0));
  EXPECT_TRUE(c.layer_is_moe(47));
}

TEST(ModelConfig, DenseDefaultsAndSparseSteps) {
  std::string path = write_temp(R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "vocab_size": 151936, "tie_word_embeddings": true})");
  kiln::ModelConfig c = kiln::load_config(path);
  EXPECT_EQ(c.num_key_value_heads, 16);  // defaults to the attention heads
  EXPECT_EQ(c.head_dim, 64);             // hidden / heads
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.is_moe());
  EXPECT_FALSE(c.layer_is_moe(0));
  std::remove(path.c_str());
  std::string moe = kQwen3Moe;
  moe.replace(moe.find("\"decoder_sparse_step\": 1"), 24, "\"decoder_sparse_step\": 2");
  moe.replace(moe.find("\"mlp_only_layers\": []"), 21, "\"mlp_only_layers\": [3]");
  path = write_temp(moe);
  c = kiln::load_config(path);
  std::remove(path.c_str());
  EXPECT_FALSE(c.layer_is_moe(0));  // (i + 1) % step == 0 picks layers 1, 3, 5...
  EXPECT_TRUE(c.layer_is_moe(1));
  EXPECT_FALSE(c.layer_is_moe(3));  // listed in mlp_only_layers
  EXPECT_TRUE(c.layer_is_moe(5));
}

TEST(ModelConfig, RotarySettingsOfTransformers5) {
  const std::string dense = R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10, "dtype": "float32", )";
  std::string path = write_temp(dense + R"("rope_parameters": {"rope_type": "default", "rope_theta": 5e5}})");
  const kiln::ModelConfig c = kiln::load_config(path);
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.torch_dtype, "float32");
  std::remove(path.c_str());
  path = write_temp(dense + R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  try {
    kiln::load_config(path);
    ADD_FAILURE() << "yarn scaling was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary scaling 'yarn' (rope_scaling) is not supported"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

TEST(ModelConfig, ErrorsNameTheField) {
  auto message_of = [](const std::string& text) {
    const std::string path = write_temp(text);
    std::string msg;
    try {
      kiln::load_config(path);
    } catch (const kiln::Error& e) {
      msg = e.what();
    }
    std::remove(path.c_str());
    return msg;
  };
  EXPECT_NE(message_of(R"({"model_type": "llama"})").find("model_type 'llama' is not supported"), std::string::npos);
  EXPECT_NE(message_of(R"({"model_type": "qwen3", "hidden_size": -4})").find("'hidden_size' must be a positive"),
            std::string::npos);
  EXPECT_NE(message_of(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 6, "num_key_value_heads": 4, "vocab_size": 10})")
                .find("must be a multiple of num_key_value_heads (4)"),
            std::string::npos);
  EXPECT_NE(message_of("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message_of(std::string(kQwen3Moe).replace(std::string(kQwen3Moe).find("\"num_experts_per_tok\": 8"), 24,
                                                      "\"num_experts_per_tok\": 200"))
                .find("num_experts_per_tok (200) exceeds num_experts (128)"),
            std::string::npos);
  EXPECT_THROW(kiln::load_config("/nonexistent/config.json"), kiln::Error);
}

}  // namespace
