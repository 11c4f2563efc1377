// config.json parsing: the fields of real Qwen3 / Qwen3-MoE configs, and the errors;
// generation_config.json's, a model too large for the CPU, and the op profile of a step.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/allocator.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "models/config.h"
#include "models/generate.h"
#include "models/qwen3.h"
#include "models/step_profile.h"
#include "models/weights.h"

namespace {

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/kiln_config_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  std::ofstream(name) << text;
  close(fd);
  return name;
}

// load_config's error message for a config.json holding `text`; "(no error)" when it loads.
std::string message_of(const std::string& text) {
  const std::string path = write_temp(text);
  std::string msg = "(no error)";
  try {
    kiln::load_config(path);
  } catch (const kiln::Error& e) {
    msg = e.what();
  }
  std::remove(path.c_str());
  return msg;
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
  // a folder whose config.json is itself a folder: it opens as a stream and failed only when
  // read, with a std::ios_base::failure instead of a kiln::Error
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_dir_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "config.json");
  try {
    kiln::load_config(dir.string());
    ADD_FAILURE() << "a config.json folder was read";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json is a directory, not a JSON file"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// A field of the wrong JSON type is a kiln::Error naming it (nlohmann's value() would throw
// its own type_error, which ended the CLI through std::terminate).
TEST(ModelConfig, FieldsOfTheWrongTypeAreErrors) {
  const std::string dense = R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10, )";
  const std::string moe = std::string(kQwen3Moe).substr(0, std::string(kQwen3Moe).size() - 1) + ", ";
  const std::pair<std::string, std::string> cases[] = {
      {dense + R"("tie_word_embeddings": "yes"})", "'tie_word_embeddings' must be true or false, got \"yes\""},
      {dense + R"("rope_scaling": {"rope_type": 5}})", "'rope_type' must be a string, got 5"},
      {dense + R"("rope_parameters": {"rope_theta": 0}})", "rope_parameters's 'rope_theta' must be a positive number"},
      {dense + R"("max_position_embeddings": 0})", "'max_position_embeddings' must be positive"},
      {moe + R"("norm_topk_prob": 3})", "'norm_topk_prob' must be true or false, got 3"},
      {moe + R"("mlp_only_layers": [1.5]})", "'mlp_only_layers' holds 1.5, not a layer index"},
      {moe + R"("mlp_only_layers": 7})", "'mlp_only_layers' must be a list of layer indices"},
      {dense + R"("head_dim": 16.5})", "'head_dim' must be a non-negative integer, got 16.5"},
      {dense + R"("num_key_value_heads": -2})", "'num_key_value_heads' must be a non-negative integer, got -2"},
      {dense + R"("max_position_embeddings": 18446744073709551615})",
       "'max_position_embeddings' must be a non-negative integer, got 18446744073709551615"},
      {dense + R"("rms_norm_eps": "1e-6"})", "'rms_norm_eps' must be a finite number, got \"1e-6\""},
      {dense + R"("rope_theta": -1})", "'rope_theta' must be a positive number, got -1"},
      {moe + R"("num_experts_per_tok": 0})", "'num_experts_per_tok' must be a positive integer, got 0"},
  };
  for (const auto& [text, want] : cases) EXPECT_NE(message_of(text).find(want), std::string::npos) << message_of(text);
  // null stands for the default, as transformers writes it
  EXPECT_EQ(message_of(dense + R"("tie_word_embeddings": null, "rope_scaling": null})"), "(no error)");
}

TEST(GenerationConfig, FieldsOfTheWrongTypeAreErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_gen_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json") << R"({"do_sample": "yes", "eos_token_id": 7})";
  try {
    kiln::load_generation_config(dir.string());
    ADD_FAILURE() << "do_sample \"yes\" was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'do_sample' must be true or false"), std::string::npos) << e.what();
  }
  // the sampling fields of the wrong type or out of range, where they fell back to defaults before
  const std::pair<std::string, std::string> cases[] = {
      {R"({"do_sample": true, "temperature": "0.7"})", "'temperature' must be a finite number, got \"0.7\""},
      {R"({"do_sample": true, "temperature": -0.5})", "'temperature' must be >= 0, got -0.5"},
      {R"({"do_sample": true, "top_k": 2.5})", "'top_k' must be a non-negative integer, got 2.5"},
      {R"({"do_sample": true, "top_k": -1})", "'top_k' must be a non-negative integer, got -1"},
      {R"({"do_sample": true, "top_p": 1.5})", "'top_p' must be in (0, 1], got 1.5"},
      {R"({"eos_token_id": "7"})", "'eos_token_id' must be a token id or a list of them, got \"7\""},
  };
  for (const auto& [text, want] : cases) {
    std::ofstream(dir / "generation_config.json") << text;
    try {
      kiln::load_generation_config(dir.string());
      ADD_FAILURE() << text << " was accepted";
    } catch (const kiln::Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir / "generation_config.json")
      << R"({"do_sample": true, "top_k": 5, "top_p": null, "temperature": 0.6, "eos_token_id": [7, 9]})";
  const kiln::GenerationConfig g = kiln::load_generation_config(dir.string());
  EXPECT_EQ(g.sampling.top_k, 5);
  EXPECT_EQ(g.sampling.top_p, 1.0);  // null: the default
  EXPECT_EQ(g.sampling.temperature, 0.6);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{7, 9}));
  std::filesystem::remove_all(dir);
}

// On the CPU, allocations past the machine's memory succeed and the process is killed as
// their pages are touched: the weight builder stops first, with an error, once the layers
// still to come cannot fit. 10^12 layers of 40 KB cannot fit any machine.
TEST(ModelWeights, ConfigTooLargeForTheCpuIsAnError) {
  if (!kiln::cpu_available_bytes()) GTEST_SKIP() << "the system does not say how much memory is available";
  const std::string path = write_temp(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 64,
    "num_hidden_layers": 1000000000000, "num_attention_heads": 4, "vocab_size": 10})");
  const kiln::ModelConfig c = kiln::load_config(path);
  std::remove(path.c_str());
  try {
    kiln::random_weights(c, kiln::WeightOptions{}, 0);
    ADD_FAILURE() << "10^12 layers were built";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the 999999999999 layers still to build need about"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("1 of 1000000000000 layers were built"), std::string::npos) << e.what();
  }
  // and a config that fits builds all of its layers
  kiln::ModelConfig two = c;
  two.num_hidden_layers = 2;
  EXPECT_EQ(kiln::random_weights(two, kiln::WeightOptions{}, 0).layers.size(), 2u);
}

// A one-token step's profile names every op of the forward as often as the config
// says it runs (layers 0 and 2 MoE, layer 1 dense), and timing changes no result.
TEST(StepProfile, TimesEveryOpOfAStep) {
  const std::string path = write_temp(R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 50,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "decoder_sparse_step": 1,
    "mlp_only_layers": [1], "norm_topk_prob": true, "torch_dtype": "float32"})");
  const kiln::ModelConfig c = kiln::load_config(path);
  std::remove(path.c_str());
  kiln::Qwen3Model model(c, kiln::random_weights(c, kiln::WeightOptions{}, 0), 8);
  const kiln::Tensor prompt =
      kiln::Tensor::from_vector(std::vector<int32_t>{3, 14, 15}, {3}, kiln::DType::Int32, kiln::kCPU);
  const kiln::Tensor next = kiln::Tensor::from_vector(std::vector<int32_t>{9}, {1}, kiln::DType::Int32, kiln::kCPU);
  model.forward(prompt);
  const kiln::Tensor plain = model.forward(next);
  model.reset();
  model.forward(prompt);
  kiln::StepProfile profile(kiln::kCPU);
  model.set_profile(&profile);
  const kiln::Tensor timed = model.forward(next);
  model.set_profile(nullptr);
  EXPECT_EQ(kiln::max(kiln::abs(kiln::sub(timed, plain))).item<float>(), 0.0f);
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"embedding", 1}, {"add + rms_norm", 5}, {"q|k|v projection", 3}, {"q/k norm + rotary + cache + attention", 3},
      {"o projection", 3}, {"add + rms_norm + router", 2}, {"routing", 2},
      {"experts (gate|up + silu, down + combine)", 2}, {"gate|up projection + silu_and_mul", 1},
      {"down projection", 1}, {"lm_head", 1}};
  const std::vector<kiln::StepProfile::Row> rows = profile.rows();
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].name, expected[i].first);
    EXPECT_EQ(rows[i].calls, expected[i].second) << rows[i].name;
    EXPECT_GE(rows[i].ms, 0.0) << rows[i].name;
  }
}

}  // namespace
