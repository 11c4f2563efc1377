// kiln bench-decode: a model of a config.json with random weights (nothing to
// download), timed the way generate runs it: prefill of a prompt, then a token
// per step, each sampled greedily and read back to the host.
#include <chrono>
#include <cstdio>

#include "ceilings.h"
#include "commands.h"
#include "core/check.h"
#include "kiln/kiln.h"
#include "models/qwen3.h"

namespace kiln::tools {

WeightOptions weight_options(const std::string& dtype, const Device& device, const ModelConfig& config);

namespace {

void sync(Device d) {
  if (d.is_cuda()) cuda::synchronize(d.index);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GB/s of a device-to-device copy of 1 GiB (CPU: 256 MiB): the read+write ceiling.
double copy_gbps(Device d) {
  const int64_t n = (d.is_cuda() ? 1LL << 30 : 1LL << 28) / 4;
  const Tensor a = zeros({n}, DType::Float32, d), b = empty({n}, DType::Float32, d);
  b.copy_(a);
  sync(d);
  return 2.0 * n * 4 / fastest_seconds(5, [&] {
           b.copy_(a);
           sync(d);
         }) / 1e9;
}

// n token ids drawn uniformly from [0, vocab)
Tensor randint_ids(int64_t vocab, int64_t n, Generator& gen, Device d) {
  return mul(rand({n}, DType::Float32, d, &gen), static_cast<double>(vocab - 1)).to(DType::Int64);
}

// The greedy next token after `ids` (the prompt, or the last token), read back to the host
// as generate reads it.
int64_t greedy_next(Qwen3Model& model, const Tensor& ids) {
  return argmax(model.forward(ids).view({-1})).item<int64_t>();
}

Tensor one_id(int64_t id) { return Tensor::from_vector(std::vector<int64_t>{id}, {1}, DType::Int64, kCPU); }

// Times each op of `steps` eager decode steps after a prompt of `context` tokens
// (StepProfile), per token, against the eager step's wall time.
void profile_ops(Qwen3Model& model, int64_t context, int64_t steps, Generator& gen) {
  const Device dev = model.device();
  model.reset();
  int64_t id = greedy_next(model, randint_ids(model.config().vocab_size, context, gen, dev));
  const auto step = [&] { id = greedy_next(model, one_id(id)); };
  StepProfile profile(dev);
  model.set_profile(&profile);
  step();  // warm-up of the eager launches
  profile.clear();
  const double wall = wall_seconds([&] {
    for (int64_t i = 0; i < steps; ++i) step();
  });
  model.set_profile(nullptr);
  const std::vector<StepProfile::Row> rows = profile.rows();
  double total = 0;
  for (const auto& r : rows) total += r.ms;
  const double n = static_cast<double>(steps);
  std::printf("\nops of an eager decode step at context %lld (%lld steps, no CUDA graph):\n%-44s %10s %12s %7s\n",
              static_cast<long long>(context), static_cast<long long>(steps), "op", "calls/tok", "us/token", "share");
  for (const auto& r : rows)
    std::printf("%-44s %10.0f %12.1f %6.1f%%\n", r.name.c_str(), r.calls / n, 1e3 * r.ms / n, 100.0 * r.ms / total);
  std::printf("%-44s %10s %12.1f\n%-44s %10s %12.1f\n", "sum of the ops", "", 1e3 * total / n,
              "eager step (wall, with argmax and its read)", "", 1e6 * wall / n);
}

}  // namespace

int bench_decode(const BenchDecodeOptions& opts) {
  const ModelConfig config = load_config(opts.config);
  const Device dev = pick_device(opts.device);
  if (dev.is_cuda() && !cuda::is_available()) throw Error("bench-decode: CUDA is not available: " + cuda::availability().reason);
  const WeightOptions wo = weight_options(opts.dtype, dev, config);
  int64_t longest = 0;
  for (int64_t c : opts.contexts) longest = std::max(longest, c);
  KILN_CHECK(longest > 0 && opts.decode_tokens > 0, "bench-decode: contexts and --tokens must be positive");
  const auto t_load = std::chrono::steady_clock::now();
  Qwen3Model model(config, random_weights(config, wo, 0), longest + opts.decode_tokens + 1);
  sync(dev);
  const ModelWeights& w = model.weights();
  const double per_token = static_cast<double>(w.decode_bytes_per_token(config));
  const double copy_ceiling = copy_gbps(dev);
  // the bound of the %-column: the copy on a GPU (SPEC.md's measured 4.3 TB/s); on a CPU
  // the read ceiling, run beside each group of decoded tokens (tools/ceilings.h)
  const Tensor read_input = dev.is_cpu() ? make_read_ceiling_input() : Tensor();
  std::printf("kiln bench-decode: %s, %lld layers%s, %s%s on %s; %.2f GB of weights, %.3f GB read per token; "
              "random init %.1f s; copy ceiling %.0f GB/s%s\n",
              config.model_type.c_str(), static_cast<long long>(config.num_hidden_layers),
              config.is_moe() ? (", " + std::to_string(config.num_experts) + " experts top-" +
                                 std::to_string(config.num_experts_per_tok)).c_str() : "",
              dtype_name(wo.dtype), wo.fp8 ? " (fp8 linear and expert weights)" : "", dev.str().c_str(), w.total_bytes() / 1e9,
              per_token / 1e9, seconds_since(t_load), copy_ceiling,
              dev.is_cpu() ? "; %read: the median over groups of 8 tokens of their GB/s against the fastest of 3 read runs just before each"
                           : "");
  std::printf("%8s %14s %14s %12s %12s %8s %8s%s\n", "context", "prefill tok/s", "decode tok/s", "ms/token",
              "weight GB/s", dev.is_cpu() ? "%read" : "%copy", "with KV", dev.is_cpu() ? "  read GB/s" : "");
  // A decode step also reads the cache's keys and values: per layer, 2 x kv heads x head_dim
  // values for every position up to its own; over the timed steps, on average the context
  // plus half the steps. Past a few thousand positions that is no longer small against the
  // weights (Qwen3-0.6B at 2048: 0.24 GB against 1.19), so the column after the share counts it.
  const double kv_bytes_per_position =
      2.0 * static_cast<double>(config.num_hidden_layers * config.num_key_value_heads * config.head_dim) *
      static_cast<double>(itemsize(model.dtype()));
  Generator gen(1);
  for (int64_t ctx : opts.contexts) {
    const Tensor prompt = randint_ids(config.vocab_size, ctx, gen, dev);
    model.reset();
    model.forward(prompt);  // warm-up: allocator, cuBLAS handles
    sync(dev);
    model.reset();
    const auto t0 = std::chrono::steady_clock::now();
    int64_t id = greedy_next(model, prompt);
    const double prefill = seconds_since(t0);
    int64_t tokens = opts.decode_tokens;
    double decode_seconds = 0;
    const auto decode_some = [&](int64_t n) {
      const double s = wall_seconds([&] {
        for (int64_t i = 0; i < n; ++i) id = greedy_next(model, one_id(id));
      });
      decode_seconds += s;
      return s;
    };
    ReadShare read;
    if (dev.is_cpu()) {
      const int64_t group = std::min<int64_t>(8, tokens);
      tokens = tokens / group * group;
      read = share_of_read(read_input, per_token * static_cast<double>(group), static_cast<int>(tokens / group),
                           [&] { return decode_some(group); });
    } else {
      decode_some(tokens);
    }
    const double decode = decode_seconds / static_cast<double>(tokens);
    const double gbps = per_token / decode / 1e9;
    const double share = dev.is_cpu() ? read.share : gbps / copy_ceiling;
    const double kv_per_token = kv_bytes_per_position * (static_cast<double>(ctx) + (tokens + 1) / 2.0);
    const double with_kv = share * (per_token + kv_per_token) / per_token;
    std::printf("%8lld %14.1f %14.1f %12.3f %12.1f %7.0f%% %7.0f%%", static_cast<long long>(ctx), ctx / prefill,
                1.0 / decode, decode * 1e3, gbps, 100.0 * share, 100.0 * with_kv);
    if (dev.is_cpu()) std::printf("  %9.1f", read.read_gbps);
    std::printf("\n");
  }
  if (opts.profile) profile_ops(model, opts.contexts.front(), std::min<int64_t>(opts.decode_tokens, 16), gen);
  return 0;
}

}  // namespace kiln::tools
