// Qwen3 and Qwen3-MoE decoders (transformers' Qwen3ForCausalLM and
// Qwen3MoeForCausalLM) over kiln's ops, with a KV cache: prefill a prompt in one
// call, then decode a token per call.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/stream.h"
#include "kiln/tensor.h"
#include "models/config.h"
#include "models/step_profile.h"
#include "models/weights.h"

namespace kiln {

class Qwen3Model {
 public:
  // The cache holds max_context positions (at most the config's max_position_embeddings).
  Qwen3Model(ModelConfig config, ModelWeights weights, int64_t max_context);

  // Runs token ids (1-D int32 or int64, any device) at the cache positions
  // [length(), length() + T) and appends their keys and values to the cache.
  // Returns the logits [T, vocab] (all_logits) or of the last token [1, vocab],
  // in the compute dtype. Ids outside the vocabulary and a full cache raise.
  Tensor forward(const Tensor& ids, bool all_logits = false);

  void reset() { length_ = 0; }  // forget the cached context
  // On CUDA (bfloat16 / float16), a one-token forward is captured once as a CUDA
  // graph and replayed after that (its positions and lengths are read on the
  // device); off, every step launches its kernels one by one. On by default.
  void set_cuda_graphs(bool on);
  bool cuda_graphs() const { return use_graphs_; }
  // Times every op of the following forwards into `profile` (null: none); CUDA
  // graphs are off while one is set (see step_profile.h).
  void set_profile(StepProfile* profile) { profile_ = profile; }
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Device device() const { return weights_.embed.device(); }
  DType dtype() const { return weights_.embed.dtype(); }

 private:
  // The positions of a forward: on the device, plus the host's start when known.
  struct Step {
    Tensor ids, positions;  // [T] (int32 / int64), int32 [T]
    Tensor seq_len;         // int32 [1] = position + 1, for one-token steps
    int64_t start = 0;      // first position (prefill)
  };
  Tensor run(const Step& step, bool all_logits);
  // A layer's two blocks on rms_norm(delta + residual), each returning its output (the
  // next delta) and leaving delta + residual in residual (none: the embedding alone).
  // After a mixture-of-experts block on CUDA's one-token path the next block's add and
  // norm are begun by the experts' kernel instead: mlp then fills `pending` (for the
  // norm weight next_norm) and returns no delta, and the next block takes it.
  Tensor attention(int64_t layer, const Tensor& delta, std::optional<Tensor>& residual,
                   std::optional<PendingRmsNorm>& pending, const Step& step);
  Tensor mlp(const LayerWeights& l, const Tensor& delta, std::optional<Tensor>& residual, const Tensor* next_norm,
             std::optional<PendingRmsNorm>& pending) const;
  bool graph_capable() const;
  // f(), timed as `op` when a profile is set
  template <class F>
  auto timed(const char* op, F&& f) const {
    const StepProfile::Scope scope(profile_, op);
    return f();
  }
  Tensor decode_step(const Tensor& id);

  ModelConfig config_;
  ModelWeights weights_;
  int64_t capacity_ = 0, length_ = 0;
  std::vector<Tensor> k_cache_, v_cache_;  // per layer [Hkv, capacity, D]
  Tensor rope_cos_, rope_sin_;             // [capacity, D / 2] float32
  // one-token steps: [id, position, position + 1] on the device, read by the kernels
  Tensor step_buf_;
  bool use_graphs_ = true;
  Stream graph_stream_ = Stream::default_stream(kCPU);
  std::unique_ptr<CudaGraph> graph_;  // captured at the first graph-capable one-token step
  Tensor graph_logits_;               // the graph's output
  StepProfile* profile_ = nullptr;
};

// Rotary tables as transformers computes them in float32: inv_freq[i] =
// 1 / theta^(2i / D), angle = position * inv_freq[i]; returns {cos, sin} [positions, D / 2].
std::pair<Tensor, Tensor> rotary_tables(int64_t positions, int64_t head_dim, double theta, Device device);

}  // namespace kiln
