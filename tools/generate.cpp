// kiln generate: a model folder and a prompt -> streamed text.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "commands.h"
#include "core/check.h"
#include "kiln/ops.h"
#include "models/chat_template.h"
#include "models/generate.h"
#include "models/tokenizer.h"

namespace kiln::tools {

Device pick_device(const std::string& spec) {
  if (!spec.empty()) return Device(spec);
  return cuda::is_available() ? Device("cuda") : kCPU;
}

WeightOptions weight_options(const std::string& dtype, const Device& device, const ModelConfig& config) {
  WeightOptions o;
  o.device = device;
  // a checkpoint's own dtype by default; fp32 checkpoints stay fp32, everything else runs in bf16
  parse_model_dtype(dtype.empty() ? (config.torch_dtype == "float32" ? "fp32" : "bf16") : dtype, o);
  return o;
}

// Bytes and tensors loaded, redrawn on one line of stderr; silent unless stderr is a terminal.
std::function<void(const LoadProgress&)> progress_bar(const std::string& what) {
  if (!isatty(STDERR_FILENO)) return {};
  return [what, last = -1](const LoadProgress& p) mutable {
    const int pct = p.bytes_total ? static_cast<int>(100.0 * p.bytes_done / p.bytes_total) : 100;
    if (pct == last && p.tensors_done != p.tensors_total) return;
    last = pct;
    const int width = 30, filled = pct * width / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%%  %.2f / %.2f GB  %lld / %lld tensors", what.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(), pct,
                 p.bytes_done / 1e9, p.bytes_total / 1e9, static_cast<long long>(p.tensors_done),
                 static_cast<long long>(p.tensors_total));
    if (p.tensors_done == p.tensors_total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

int generate(const GenerateOptions& opts) {
  const ModelConfig config = load_config(opts.model);
  const Tokenizer tok = Tokenizer::from_file(opts.model);
  std::string text = opts.prompt;
  if (text.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (!opts.raw) {
    std::vector<ChatMessage> messages;
    if (!opts.system.empty()) messages.push_back({"system", opts.system});
    messages.push_back({"user", text});
    text = ChatTemplate::from_file(opts.model).render(messages, true, !opts.no_think);
  }
  const std::vector<int32_t> prompt = tok.encode(text);
  KILN_CHECK(!prompt.empty(), "generate: the prompt is empty");
  KILN_CHECK(opts.max_new_tokens >= 0, "generate: --max-new-tokens must be >= 0, got ", opts.max_new_tokens);
  // the last new token is never fed back, so the cache holds the prompt and all but one of them
  const int64_t needed = static_cast<int64_t>(prompt.size()) + std::max<int64_t>(opts.max_new_tokens, 1) - 1;
  KILN_CHECK(!opts.max_context || *opts.max_context >= needed, "generate: --max-context ",
             opts.max_context.value_or(0), " positions cannot hold the ", prompt.size(), "-token prompt and ",
             opts.max_new_tokens, " new tokens (--max-new-tokens), which need ", needed);

  GenerationConfig gen = load_generation_config(opts.model);
  // what is given replaces generation_config.json's; generate() checks the ranges of both
  if (opts.temperature) gen.sampling.temperature = *opts.temperature;
  if (opts.top_k) gen.sampling.top_k = *opts.top_k;
  if (opts.top_p) gen.sampling.top_p = *opts.top_p;
  gen.sampling.seed = opts.seed;
  if (!opts.ignore_eos && gen.eos_token_ids.empty())  // no generation_config.json: the usual end tokens
    for (const char* t : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>"})
      if (auto id = tok.token_to_id(t)) gen.eos_token_ids.push_back(*id);

  const Device device = pick_device(opts.device);
  WeightOptions wo = weight_options(opts.dtype, device, config);
  wo.progress = progress_bar("loading " + opts.model);
  const int64_t context = opts.max_context.value_or(needed + 1);
  Qwen3Model model(config, load_weights(config, opts.model, wo), context);

  StreamDecoder stream(tok);
  const GenerateStats st = generate(model, prompt, opts.max_new_tokens, gen.sampling,
                                    opts.ignore_eos ? std::vector<int64_t>{} : gen.eos_token_ids, [&](int32_t id) {
                                      std::cout << stream.push(id) << std::flush;
                                      return true;
                                    });
  std::cout << stream.flush() << "\n";
  const double decode_tps = st.new_tokens > 1 ? (st.new_tokens - 1) / st.decode_seconds : 0.0;
  std::fprintf(stderr, "kiln: %s on %s: prompt %lld tokens, prefill %.1f tok/s; %lld new tokens, decode %.1f tok/s%s\n",
               config.model_type.c_str(), device.str().c_str(), static_cast<long long>(st.prompt_tokens),
               st.prompt_tokens / st.prefill_seconds, static_cast<long long>(st.new_tokens), decode_tps,
               st.stopped_on_eos ? " (end of sequence)" : "");
  return 0;
}

}  // namespace kiln::tools
