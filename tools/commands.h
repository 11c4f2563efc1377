// The kiln CLI's subcommands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/device.h"

namespace kiln::tools {

// Prints every device kiln can see, or why CUDA cannot be used. Returns 0.
int doctor();

struct BenchOptions {
  std::string device;  // "" = best present
  std::string filter;  // substring of case names
  int repeats = 20;
  double scale = 1.0;  // multiplies the default problem sizes
};
int bench(const BenchOptions& opts);

// Reads UTF-8 text on stdin and prints its ids on one line, separated by spaces.
int tokenize(const std::string& tokenizer_path);
// Reads whitespace-separated ids on stdin and writes their text (bytes as decoded).
int detokenize(const std::string& tokenizer_path, bool skip_special);

// "cpu", "cuda", "cuda:N", or "" for the best device present.
Device pick_device(const std::string& spec);

struct GenerateOptions {
  std::string model;   // a Hugging Face model folder
  std::string prompt;  // "" = read stdin
  std::string system;
  bool raw = false;       // the prompt as is, no chat template
  bool no_think = false;  // Qwen3: close the think block at once
  bool ignore_eos = false;
  int64_t max_new_tokens = 256;
  std::optional<int64_t> max_context;  // none: prompt + max_new_tokens
  // none: generation_config.json's (else greedy, all tokens, all the mass)
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  uint64_t seed = 0;
  std::string device, dtype;  // "" = best device, the checkpoint's dtype
};
int generate(const GenerateOptions& opts);

struct BenchDecodeOptions {
  std::string config;  // config.json or a folder holding one
  std::string device, dtype;
  std::vector<int64_t> contexts{128, 2048};
  int64_t decode_tokens = 64;
  bool profile = false;  // then time the ops of eager decode steps at the first context
};
int bench_decode(const BenchDecodeOptions& opts);

}  // namespace kiln::tools
