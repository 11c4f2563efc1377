// The generation loop and generation_config.json.
#include "models/generate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "kiln/ops.h"
#include "models/json_file.h"

namespace kiln {

GenerationConfig load_generation_config(const std::string& folder) {
  GenerationConfig g;
  const std::filesystem::path path = std::filesystem::path(folder) / "generation_config.json";
  if (!std::filesystem::exists(path)) return g;
  const nlohmann::json j = read_json_file(path.string(), "generation config");
  KILN_CHECK(j.is_object(), "generation config: ", path.string(), " must hold a JSON object");
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const auto& e = j["eos_token_id"];
    KILN_CHECK(e.is_number_integer() || e.is_array(), "generation config: ", path.string(),
               ": 'eos_token_id' must be a token id or a list of them, got ", e.dump());
    for (const auto& v : e.is_array() ? e : nlohmann::json::array({e})) {
      KILN_CHECK(v.is_number_integer(), "generation config: ", path.string(), ": eos_token_id holds a non-integer");
      g.eos_token_ids.push_back(v.get<int64_t>());
    }
  }
  if (json_bool(j, "do_sample", false, "generation config", path.string())) {
    const std::string file = path.string();
    g.sampling.temperature = json_number(j, "temperature", 1.0, "generation config", file);
    g.sampling.top_k = json_int(j, "top_k", 50, 0, "generation config", file);
    g.sampling.top_p = json_number(j, "top_p", 1.0, "generation config", file);
    KILN_CHECK(g.sampling.temperature >= 0, "generation config: ", file, ": 'temperature' must be >= 0, got ",
               g.sampling.temperature);
    KILN_CHECK(g.sampling.top_p > 0 && g.sampling.top_p <= 1, "generation config: ", file,
               ": 'top_p' must be in (0, 1], got ", g.sampling.top_p);
  }
  return g;
}

GenerateStats generate(Qwen3Model& model, const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                       const SamplingParams& sampling, const std::vector<int64_t>& stop_ids,
                       const std::function<bool(int32_t)>& on_token) {
  KILN_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  KILN_CHECK(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  KILN_CHECK(sampling.temperature >= 0 && sampling.top_k >= 0 && sampling.top_p > 0 && sampling.top_p <= 1,
             "generate: temperature ", sampling.temperature, ", top_k ", sampling.top_k, ", top_p ", sampling.top_p,
             " out of range (temperature >= 0, top_k >= 0, 0 < top_p <= 1)");
  using clock = std::chrono::steady_clock;
  GenerateStats st;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  Generator gen(sampling.seed);
  model.reset();
  const auto t0 = clock::now();
  Tensor logits = model.forward(Tensor::from_vector(prompt, {st.prompt_tokens}, DType::Int32, kCPU));
  auto t_first = t0;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const int64_t id = sample(logits, sampling.temperature, sampling.top_k, sampling.top_p, &gen).item<int64_t>();
    if (i == 0) t_first = clock::now();
    ++st.new_tokens;
    const bool keep_going = on_token(static_cast<int32_t>(id));
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
      st.stopped_on_eos = true;
      break;
    }
    if (!keep_going || i + 1 == max_new_tokens || model.length() == model.capacity()) break;
    logits = model.forward(Tensor::from_vector(std::vector<int64_t>{id}, {1}, DType::Int64, kCPU));
  }
  const auto t_end = clock::now();
  if (st.new_tokens == 0) t_first = t_end;
  st.prefill_seconds = std::chrono::duration<double>(t_first - t0).count();
  st.decode_seconds = std::chrono::duration<double>(t_end - t_first).count();
  return st;
}

}  // namespace kiln
