// The Qwen3 / Qwen3-MoE forward pass. Per layer: RMSNorm, one q|k|v projection,
// per-head q/k RMSNorm + rotary + the new keys and values written into the cache
// (one kernel), attention over the cache (the decode kernel for one token, with
// the length read on the device; for a prompt, causal from the bottom right, so
// that a chunk after cached context sees it; a token's two ops can be one,
// attention_decode_qkv, whose CUDA kernel makes q and the cache row itself), o_proj,
// the residual add fused into the next RMSNorm, then SwiGLU (gate|up and silu_and_mul
// in one call, linear_silu_and_mul) or the router (with that add and norm inside its
// kernel, rms_norm_linear; see mlp()) and the experts (their combine fused into the
// down projection:
// on the H100, 30B-A3B config, in one run against the combine fused into the next
// add and norm instead, fp8 379-381 -> 405-407 tok/s at 128 context, 374-376 ->
// 401-403 at 2048; bf16 275-279 either way, then 287-289 and 293-297 with the two
// kernels' register bounds, grouped_mm_gemv.cu); on CUDA's one-token path that kernel also
// begins the next layer's add and norm (moe_experts_combine_rms_norm: the sum, the sum
// times the norm's weight, partial sums of squares), and the q|k|v projection (or lm_head)
// puts 1 / rms on its dot products (pending_rms_norm_linear), so no norm kernel sits between
// them (H100, Qwen3-30B-A3B decode, alternated in one run, three rounds, against
// KILN_PENDING_NORM=0: bf16 299.5-300.8 / 305.7-307.4 tok/s at 128 / 2048 context against
// 296.0-299.6 / 300.8-302.7, fp8 403.2-405.5 / 414.3-417.5 against 389.4-397.4 /
// 403.8-408.3). On CUDA a one-token step is a CUDA graph.
// Tried for the one-token step and slower (H100, Qwen3-30B-A3B config, 128 context):
// fetching the next projection's weights into L2 (cp.async.bulk.prefetch.L2) from a
// small chained kernel ahead of rotary and attention, and the next layer's q|k|v ahead
// of the combine: 281 -> 253 tok/s bf16, 370 -> 317 fp8. The prefetch kernel ends
// only when its bulk copies do, so the chain waits for it (3 us a launch); and with
// its weights in L2, o_proj still took 6.7 us against 7.4. Also slower: each norm fused
// into the linear after it (q|k|v, the router, lm_head), every block of the linear
// normalising the row itself (branch exp/norm-linear): 290.8-295.8 against 297.4-297.7
// tok/s (30B bf16), 174 against 179 (8B), q|k|v 16.0 us against 8.6 plus 2.0 for the
// norm: the block's norm sits between the wait and its weight loads. So was the
// routing made by every block of the experts' gate|up kernel, with no route kernel
// (branch exp/route-in-gateup): 286-288 against 305.5-309 tok/s bf16, 395-398
// against 419-424 fp8, as its 768 blocks each ranked the router's scores behind
// four barriers before their weight loads. No faster either: the add and norm after
// attention, the router and the routing as one kernel (branch exp/norm-route: a
// cluster of 8 blocks, each with 16 experts' router rows fetched into shared memory
// before its wait, normalising the row itself and sending its logits to block 0's
// shared memory, which routes): H100, in one run, bf16 299.9-300.1 against
// 300.3-300.9 tok/s, fp8 419.0 against 421.4-421.6.
#include "models/qwen3.h"

#include <cmath>

#include "core/check.h"
#include "core/env.h"
#include "ops/common.h"
#include "kiln/ops.h"

namespace kiln {

std::pair<Tensor, Tensor> rotary_tables(int64_t positions, int64_t head_dim, double theta, Device device) {
  const int64_t half = head_dim / 2;
  std::vector<float> inv_freq(half), c(positions * half), s(positions * half);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(head_dim));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      c[p * half + i] = std::cos(angle);
      s[p * half + i] = std::sin(angle);
    }
  return {Tensor::from_vector(c, {positions, half}, DType::Float32, device),
          Tensor::from_vector(s, {positions, half}, DType::Float32, device)};
}

Qwen3Model::Qwen3Model(ModelConfig config, ModelWeights weights, int64_t max_context)
    : config_(std::move(config)), weights_(std::move(weights)) {
  const ModelConfig& c = config_;
  KILN_CHECK(static_cast<int64_t>(weights_.layers.size()) == c.num_hidden_layers, "Qwen3Model: ",
             weights_.layers.size(), " layers of weights for a config of ", c.num_hidden_layers);
  KILN_CHECK(max_context > 0, "Qwen3Model: max_context must be positive, got ", max_context);
  KILN_CHECK(c.head_dim % 2 == 0, "Qwen3Model: head_dim ", c.head_dim, " must be even for rotary");
  capacity_ = std::min(max_context, c.max_position_embeddings);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    k_cache_.push_back(Tensor::empty({c.num_key_value_heads, capacity_, c.head_dim}, dtype(), device()));
    v_cache_.push_back(Tensor::empty({c.num_key_value_heads, capacity_, c.head_dim}, dtype(), device()));
  }
  std::tie(rope_cos_, rope_sin_) = rotary_tables(capacity_, c.head_dim, c.rope_theta, device());
  step_buf_ = zeros({3}, DType::Int32, device());
}

Tensor Qwen3Model::forward(const Tensor& ids_in, bool all_logits) {
  KILN_CHECK(ids_in.defined() && ids_in.dim() == 1 &&
                 (ids_in.dtype() == DType::Int64 || ids_in.dtype() == DType::Int32),
             "Qwen3Model.forward: ids must be a 1-D int32 or int64 tensor, got ",
             ids_in.defined() ? dtype_name(ids_in.dtype()) : "undefined", " ", ids_in.shape());
  const int64_t T = ids_in.size(0);
  KILN_CHECK(T > 0, "Qwen3Model.forward: no tokens given");
  KILN_CHECK(length_ + T <= capacity_, "Qwen3Model.forward: ", T, " tokens after ", length_,
             " cached ones exceed the context of ", capacity_, " positions");
  // ids from the host are checked here (on CUDA a bad id would stop the device)
  check_host_range("Qwen3Model.forward", "token ids", ids_in, config_.vocab_size);
  Tensor logits;
  if (T == 1) {
    logits = decode_step(ids_in);
  } else {
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(length_ + t);
    Step step{ids_in.to(device()), Tensor::from_vector(pos, {T}, DType::Int32, device()), Tensor(), length_};
    logits = run(step, all_logits);
  }
  length_ += T;
  return logits;
}

void Qwen3Model::set_cuda_graphs(bool on) {
  use_graphs_ = on;
  if (!on) {
    graph_logits_ = Tensor();
    graph_.reset();
  }
}

bool Qwen3Model::graph_capable() const {
  return use_graphs_ && !profile_ && device().is_cuda() && dtype() != DType::Float32;
}

// One token: its id, position and the new length go to the device in one copy;
// the kernels read them there, so the same launches (or the captured graph)
// serve every position.
Tensor Qwen3Model::decode_step(const Tensor& id) {
  step_buf_.narrow(0, 1, 2).copy_(Tensor::from_vector(std::vector<int32_t>{static_cast<int32_t>(length_),
                                                                           static_cast<int32_t>(length_ + 1)},
                                                      {2}, DType::Int32, kCPU));
  step_buf_.narrow(0, 0, 1).copy_(id);
  const Step step{step_buf_.narrow(0, 0, 1), step_buf_.narrow(0, 1, 1), step_buf_.narrow(0, 2, 1), length_};
  if (!graph_capable()) return run(step, false);
  if (!graph_) {
    if (graph_stream_.device().is_cpu()) graph_stream_ = Stream::create(device());
    auto graph = std::make_unique<CudaGraph>(graph_stream_);
    graph->capture_begin();
    try {
      graph_logits_ = run(step, false);
    } catch (...) {
      try {
        graph->capture_end();
      } catch (...) {
      }
      graph_logits_ = Tensor();
      throw;
    }
    graph->capture_end();
    graph_ = std::move(graph);
  }
  graph_->replay(Stream::current(device()));
  return graph_logits_.clone();  // the graph writes graph_logits_ again at the next step
}

namespace {
// rms_norm(delta + residual) and the sum, the new residual (the embedding alone at the first layer)
std::pair<Tensor, Tensor> add_rms_norm(const Tensor& delta, const std::optional<Tensor>& residual,
                                       const Tensor& weight, double eps) {
  if (residual) return rms_norm_residual(delta, *residual, weight, eps);
  return {rms_norm(delta, weight, eps), delta};
}
}  // namespace

Tensor Qwen3Model::run(const Step& step, bool all_logits) {
  const int64_t T = step.ids.size(0);
  const auto& layers = weights_.layers;
  Tensor delta = timed("embedding", [&] { return index_select(weights_.embed, 0, step.ids); });  // [T, hidden]
  std::optional<Tensor> residual;
  std::optional<PendingRmsNorm> pending;
  // KILN_PENDING_NORM=0: the norm kernel after the experts instead (to measure it, or to rule it out)
  static const bool begin_norms = env_switch_on("KILN_PENDING_NORM");
  // (float32 runs the experts as ops in sequence, where the pending norm would only add ops)
  const bool pending_norms = T == 1 && device().is_cuda() && dtype() != DType::Float32 && begin_norms;
  for (size_t i = 0; i < layers.size(); ++i) {
    delta = attention(static_cast<int64_t>(i), delta, residual, pending, step);
    const Tensor& next_norm = i + 1 < layers.size() ? layers[i + 1].input_norm : weights_.final_norm;
    delta = mlp(layers[i], delta, residual, pending_norms ? &next_norm : nullptr, pending);
  }
  if (pending) return timed("lm_head", [&] { return weights_.lm_head.of_pending(*pending); });
  const auto last = [&](const Tensor& t) { return all_logits ? t : t.narrow(0, T - 1, 1); };
  const Tensor h = timed("add + rms_norm", [&] {
    return add_rms_norm(last(delta), last(*residual), weights_.final_norm, config_.rms_norm_eps).first;
  });
  return timed("lm_head", [&] { return weights_.lm_head(h); });
}

Tensor Qwen3Model::attention(int64_t layer, const Tensor& delta, std::optional<Tensor>& residual,
                             std::optional<PendingRmsNorm>& pending, const Step& step) {
  const LayerWeights& l = weights_.layers[layer];
  const AttentionWeights& w = l.attn;
  const int64_t T = step.ids.size(0), D = config_.head_dim, hq = config_.num_attention_heads,
                hkv = config_.num_key_value_heads;
  const Tensor& kc = k_cache_[layer];
  const Tensor& vc = v_cache_[layer];
  // q, and k and v written into the cache at their positions
  Tensor qkv;
  if (pending) {
    residual = pending->sum;
    qkv = timed("q|k|v projection (of the pending norm)", [&] { return w.qkv.of_pending(*pending); });
    pending.reset();
  } else {
    Tensor h;
    std::tie(h, residual) =
        timed("add + rms_norm", [&] { return add_rms_norm(delta, residual, l.input_norm, config_.rms_norm_eps); });
    qkv = timed("q|k|v projection", [&] { return w.qkv(h); });
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // On CUDA the one kernel is opt-in (KILN_FUSED_ATTENTION=1) until it has run on a GPU; on the CPU the op
  // is the two ops in one call
  static const bool fused_on_cuda = env_opt_in("KILN_FUSED_ATTENTION");
  if (T == 1 && (!device().is_cuda() || (dtype() != DType::Float32 && fused_on_cuda))) {
    // the cache's length read on the device; only the q|k|v projection runs just before, and it writes
    // no cache row, so the kernel may copy the rows it has while the projection finishes
    const Tensor o = timed("q/k norm + rotary + cache + attention", [&] {
      return attention_decode_qkv(qkv, hq, hkv, w.q_norm, w.k_norm, config_.rms_norm_eps, rope_cos_, rope_sin_,
                                  step.seq_len, kc, vc, scale, /*cache_settled=*/true)
          .view({1, hq * D});
    });
    return timed("o projection", [&] { return w.o(o); });
  }
  const Tensor q = timed("q/k norm + rotary + cache", [&] {
    return qkv_rotary_cache(qkv, hq, hkv, w.q_norm, w.k_norm, config_.rms_norm_eps, rope_cos_, rope_sin_,
                            step.positions, kc, vc);
  });
  const Tensor o = timed("attention", [&] {
    if (T == 1 && (dtype() != DType::Float32 || !device().is_cuda()))  // the cache's length read on the device
      return attention_decode_cache(q.view({1, hq, D}), kc.unsqueeze(0), vc.unsqueeze(0), step.seq_len, scale)
          .view({1, hq * D});
    const int64_t S = step.start + T;
    const Tensor keys = kc.narrow(1, 0, S).unsqueeze(0), values = vc.narrow(1, 0, S).unsqueeze(0);
    const Tensor q4 = q.transpose(0, 1).unsqueeze(0);  // [1, hq, T, D]
    // causal from the bottom right: query i (position start + i) sees keys up to start + i
    return scaled_dot_product_attention(q4, keys, values, std::nullopt, true, scale, true, CausalVariant::LowerRight)
        .squeeze(0)
        .transpose(0, 1)
        .reshape({T, hq * D});
  });
  return timed("o projection", [&] { return w.o(o); });
}

Tensor Qwen3Model::mlp(const LayerWeights& l, const Tensor& delta, std::optional<Tensor>& residual,
                       const Tensor* next_norm, std::optional<PendingRmsNorm>& pending) const {
  const double eps = config_.rms_norm_eps;
  if (!l.is_moe) {
    Tensor h;
    std::tie(h, residual) =
        timed("add + rms_norm", [&] { return add_rms_norm(delta, residual, l.post_attention_norm, eps); });
    const Tensor a = timed("gate|up projection + silu_and_mul", [&] { return l.mlp.gate_up.silu_and_mul_of(h); });
    return timed("down projection", [&] { return l.mlp.down(a); });
  }
  // The add and norm run inside the router's kernel, which also gives the normalised
  // rows the experts take (rms_norm_linear). Only here: a narrow projection of few
  // blocks. In front of q|k|v, gate|up or lm_head, whose hundreds of blocks each redo
  // the norm's loads and barrier before their products, it was slower (H100, in one
  // run, against the norm kernel then the projection: Qwen3-30B-A3B decode with all of
  // them fused, bf16 290.9 against 297.6 tok/s, fp8 378.6 against 402.5; Qwen3-8B 167.9
  // against 176.9; q|k|v 10.7 us against 4.8 plus 3.6 for the norm; the router 3.7 us
  // against 2.2 plus 3.6). In front of the router alone, alternated twice in one run
  // (KILN_NORM_LINEAR=1 / 0): bf16 299.0-299.1 against 294.6-297.0 tok/s at 128 context,
  // 301.2 against 299.0-299.5 at 2048; fp8 400.7-404.2 against 399.5-403.1, 407.0-407.1
  // against 406.4-406.8.
  const RmsNormLinear r = timed("add + rms_norm + router", [&] {
    return l.moe.router.of_rms_norm(delta, residual, l.post_attention_norm, eps, false, true);
  });
  residual = r.sum;
  const MoeRouting routing = timed("routing", [&] {
    return moe_route(r.out, config_.num_experts_per_tok, RouterScoring::Softmax, std::nullopt,
                     config_.norm_topk_prob);
  });
  if (next_norm) {
    pending = timed("experts (gate|up + silu, down + combine + add + norm begun)", [&] {
      return moe_experts_combine_rms_norm(r.normed, l.moe.gate_up, l.moe.down, routing, *residual, *next_norm, eps,
                                          l.moe.gate_up_scale, l.moe.down_scale);
    });
    return Tensor();
  }
  return timed("experts (gate|up + silu, down + combine)", [&] {
    return moe_experts_combine(r.normed, l.moe.gate_up, l.moe.down, routing, l.moe.gate_up_scale, l.moe.down_scale);
  });
}

}  // namespace kiln
