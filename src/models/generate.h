// Text generation with a model: prefill the prompt, then sample token by token
// until an end-of-sequence id or the token limit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/qwen3.h"

namespace kiln {

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: all tokens
  double top_p = 1.0;
  uint64_t seed = 0;
};

// generation_config.json: the end-of-sequence ids and the sampling defaults.
// A folder without one gives greedy decoding and no eos ids.
struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  SamplingParams sampling;
};
GenerationConfig load_generation_config(const std::string& folder);

struct GenerateStats {
  int64_t prompt_tokens = 0, new_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // prefill includes the first token's sampling
  bool stopped_on_eos = false;
};

// Runs the prompt from an empty cache and generates up to max_new_tokens ids,
// calling on_token with each as soon as it is known (return false to stop); an
// id in stop_ids ends generation after it is passed on.
GenerateStats generate(Qwen3Model& model, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                       const SamplingParams& sampling, const std::vector<int64_t>& stop_ids,
                       const std::function<bool(int32_t)>& on_token);

}  // namespace kiln
