// kiln's ops. Each checks its arguments once (dtype, device, shape) and throws
// kiln::Error naming the op and the offending values, then runs on the device
// of its inputs. Semantics and names follow PyTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// ---- creation ----
Tensor empty(const Shape& shape, DType dtype = float32, Device device = kCPU);
Tensor zeros(const Shape& shape, DType dtype = float32, Device device = kCPU);
Tensor ones(const Shape& shape, DType dtype = float32, Device device = kCPU);
Tensor full(const Shape& shape, const Scalar& value, DType dtype = float32, Device device = kCPU);
// [start, end) by step, as torch.arange: int64 when all three are integers, else float32,
// unless dtype is given.
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              std::optional<DType> dtype = {}, Device device = kCPU);
Tensor arange(const Scalar& end, std::optional<DType> dtype = {}, Device device = kCPU);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);

// ---- random (Philox4x32-10; the same seed gives the same numbers on every device: uniform
// draws exactly, normal ones to a few ulps) ----
struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;  // counter advanced by every call, so successive calls differ
  explicit Generator(uint64_t s = 0) : seed(s) {}
};
Generator& default_generator();
void manual_seed(uint64_t seed);
// uniform on [low, high)
Tensor rand(const Shape& shape, DType dtype = float32, Device device = kCPU, Generator* gen = nullptr);
Tensor randn(const Shape& shape, DType dtype = float32, Device device = kCPU, Generator* gen = nullptr);
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);

// ---- elementwise (broadcasting, PyTorch type promotion) ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor silu(const Tensor& a);
// approximate: "none" (erf) or "tanh", as torch.nn.functional.gelu
Tensor gelu(const Tensor& a, const std::string& approximate = "none");

// comparisons give bool
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);

// ---- reductions: dims empty = all dims ----
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = {});
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = {});
Tensor prod(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = {});
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a);  // over everything; NaN propagates
Tensor min(const Tensor& a);
// values and int64 indices along one dim (the first index among equal values)
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
// int64 indices; without dim, the index into the flattened tensor
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = {}, bool keepdim = false);

// ---- linear algebra ----
// torch.matmul: 1-D/2-D/batched with broadcasting of batch dims. float32, float16, bfloat16.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, M, K] x [B, K, N] -> [B, M, N]
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);

// ---- neural-network functions (torch.nn.functional) ----
// y = x @ weight^T + bias, as torch.nn.functional.linear: x [..., K], weight [N, K],
// bias [N]. weight is float32, float16 or bfloat16 (x's dtype), or float8_e4m3fn
// with weight_scale, a float32 dequantisation scale: 0-d or [1] (per tensor) or
// [N] / [N, 1] (per output row), y = x @ (weight * scale)^T + bias. Up to 8 rows
// run a kernel written for memory bandwidth (decode); more go to cuBLAS/OpenBLAS.
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::optional<Tensor>& weight_scale = std::nullopt);

// SwiGLU's projection: silu_and_mul(linear(x, weight, bias, weight_scale)), weight
// [2H, K] the gate rows then the up rows, -> [..., H]. The same values as the two
// calls (each product rounded to x's dtype before the activation); on CUDA the few
// rows of a decode step run in one kernel, with no [..., 2H] intermediate.
Tensor linear_silu_and_mul(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                           const std::optional<Tensor>& weight_scale = std::nullopt);

// A projection with the RMSNorm (and residual add) before it fused in, as a decoder
// layer has them: sum = x + residual (rounded to x's dtype; x itself without a
// residual), out = linear(rms_norm(sum, norm_weight, eps), weight, bias, weight_scale),
// or linear_silu_and_mul of it with silu_and_mul. normed is rms_norm(sum) when
// want_normed (else undefined). x and residual [..., K], norm_weight [K] of x's dtype.
// On CUDA one row runs as one kernel (the norm's 1 / rms applied to the finished
// dot products, so the normalised row is not rounded before the product: the
// values differ from the ops in sequence by that rounding); otherwise the ops in sequence.
struct RmsNormLinear {
  Tensor out, sum, normed;
};
RmsNormLinear rms_norm_linear(const Tensor& x, const std::optional<Tensor>& residual, const Tensor& norm_weight,
                              double eps, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                              const std::optional<Tensor>& weight_scale = std::nullopt, bool silu_and_mul = false,
                              bool want_normed = false);

// An RMSNorm with its 1 / rms still to apply, as a kernel that makes only part of a
// row can leave it: sum (the row, after the residual add), scaled = sum * weight
// (rounded to sum's dtype) and sq_parts, float32 [..., P], partial sums of squares of
// sum's rows (in float32) whose total is the row's. rms_norm(sum, weight, eps) is
// scaled * rsqrt(total / N + eps), up to the rounding of scaled.
struct PendingRmsNorm {
  Tensor sum, scaled, sq_parts, weight;
  double eps = 0.0;
};
// linear(rms_norm(p.sum, p.weight, p.eps), weight, bias, weight_scale). On CUDA one row
// runs as one kernel that reads p.scaled and puts 1 / rms on the finished dot products
// (the values differ from the ops in sequence by the rounding of the normalised row);
// otherwise the ops in sequence.
Tensor pending_rms_norm_linear(const PendingRmsNorm& p, const Tensor& weight,
                               const std::optional<Tensor>& bias = std::nullopt,
                               const std::optional<Tensor>& weight_scale = std::nullopt);

// Weight-only FP8 for linear: w [N, K] (float32/float16/bfloat16) -> {w8 [N, K]
// float8_e4m3fn, scale [N] float32} with scale[n] = max|w[n]| / 448, so that each
// row's largest magnitude lands on 448 and linear(x, w8, weight_scale=scale) ~
// linear(x, w). An all-zero row gets scale 1. Stacked weights [..., N, K] (the
// experts of an MoE layer) give scale [..., N].
std::pair<Tensor, Tensor> quantize_fp8_rows(const Tensor& w);

// torch._scaled_mm: (a @ b) * scale_a * scale_b + bias for float8_e4m3fn a [M, K]
// (row-major) and b [K, N] (column-major: b = w.t() of a row-major [N, K] w), K and N
// multiples of 16. Scales are float32 dequantisation factors, tensorwise (one
// element each) or rowwise (scale_a [M, 1], scale_b [1, N]); bias [N] in out_dtype
// (bfloat16, float16 or float32). Accumulates in float32; use_fast_accum lets CUDA's
// fp8 GEMM skip its periodic promotion, as PyTorch's flag does.
Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const std::optional<Tensor>& bias = std::nullopt, DType out_dtype = DType::BFloat16,
                 bool use_fast_accum = false);

// torch.nn.functional.grouped_mm: one matrix product per group, for mixture-of-
// experts layers. a [T, K] x b [G, K, N] with offs (int32 [G], cumulative end row
// of each group; rows sorted by group) -> [T, N], rows past offs[G-1] zero;
// a [G, M, K] x b [G, K, N] (no offs) -> [G, M, N]; a [M, K] x b [K, N] with offs
// splitting K -> [G, M, N]. bfloat16, float16 or float32; out_dtype the inputs'
// dtype or float32. offs is read on the device (no host synchronisation); on CUDA
// offsets that decrease or pass the end are clamped, on the CPU they raise.
// Weight-only fp8 (2-D x 3-D and 3-D x 3-D): b float8_e4m3fn with b_scale, its
// float32 dequantisation scale, [G, N] (per group and output column: a weight
// [G, N, K] quantised per row), [G] or [G, 1] (per group) or 0-d (per tensor):
// the product is a @ (b * b_scale), a's dtype out (or float32).
Tensor grouped_mm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& offs = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, std::optional<DType> out_dtype = std::nullopt,
                  const std::optional<Tensor>& b_scale = std::nullopt);

// torch.index_select: the entries of `index` (int32 or int64, 1-D) along `dim`.
// An embedding lookup is index_select(weight, 0, ids). Out-of-range indices raise
// on the CPU; on CUDA they stop the kernel with a device-side error, as PyTorch's do.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

// ---- the small fused ops of a decoder layer ----
// torch.nn.functional.rms_norm over the last dim: x * rsqrt(mean(x^2) + eps) * weight,
// computed in float32, weight [N] in x's dtype (or none); eps defaults to the
// machine epsilon of x's dtype, as torch's.
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
// The residual add fused in: sum = x + residual (rounded to x's dtype, as the two
// ops in sequence), returns {rms_norm(sum, weight, eps), sum}.
std::pair<Tensor, Tensor> rms_norm_residual(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps);
// torch.nn.functional.layer_norm over the trailing dims of `normalized_shape`:
// (x - mean) * rsqrt(var + eps) * weight + bias, biased variance, computed in
// float32; weight and bias (either optional) have shape normalized_shape and x's dtype.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// SwiGLU's gate: x [..., 2H] -> silu(x[..., :H]) * x[..., H:] (computed in float32).
Tensor silu_and_mul(const Tensor& x);
// Rotary position embedding of x [T, H, D] (any head layout with unit inner
// stride) with per-token cos, sin [T, R / 2] float32 (R <= D even, the rotated
// dims; the rest pass through). Half-rotated (Llama, Qwen: pairs (i, i + R/2)) or
// interleaved (GPT-J: pairs (2i, 2i + 1)).
Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);

// The attention prologue of a Qwen3-style layer in one kernel, for a KV cache on
// the device: from the fused projection qkv [T, (Hq + 2 Hkv) * D] (rows with unit
// inner stride), q = rotary(rms_norm(q, q_norm)) and k = rotary(rms_norm(k, k_norm))
// per head (each rounded to qkv's dtype after the norm, as the two ops in
// sequence), v as is. k and v are written into k_cache and v_cache
// [Hkv, capacity, D] (unit inner stride) at rows positions[t] (int32 [T] on the
// same device); q [T, Hq, D] is returned. cos, sin [capacity, R / 2] float32
// tables indexed by position (half-rotated pairs, dims past R pass through). An
// undefined q_norm / k_norm skips that norm. Positions past the cache raise on the
// CPU and stop the kernel on CUDA (as index_select's bad indices).
Tensor qkv_rotary_cache(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, const Tensor& q_norm,
                        const Tensor& k_norm, double eps, const Tensor& cos, const Tensor& sin, const Tensor& positions,
                        const Tensor& k_cache, const Tensor& v_cache);

// ---- mixture-of-experts routing ----
enum class RouterScoring { Softmax, Sigmoid };

// What moe_route produces for T tokens, top-k of E experts, all on the logits'
// device. Rows of the expert computation are the (token, choice) pairs sorted by
// expert: row p holds token token_of[p]; pair (t, j) sits at row sorted_pos[t, j].
// offs is grouped_mm's: the cumulative end row of each expert. Within one expert
// the CPU keeps token order; CUDA's order is unspecified (results do not depend on it).
struct MoeRouting {
  Tensor weights;     // [T, k] float32: the combine weight of each choice
  Tensor experts;     // [T, k] int32: the chosen experts, best first
  Tensor offs;        // [E] int32
  Tensor token_of;    // [T * k] int32
  Tensor sorted_pos;  // [T, k] int32
};

// The router of an MoE layer with no host synchronisation (on CUDA one kernel up to
// 32 tokens, three past that): scores
// (softmax over experts, or sigmoid as DeepSeek-V3), top-k on the scores plus
// `selection_bias` ([E] float32, used only to choose, as DeepSeek's correction
// bias), weights = the chosen scores, divided by their sum when `renormalize`
// (Qwen3-MoE's norm_topk_prob), then counts, offsets and the permutation.
// logits [T, E] float32, float16 or bfloat16; E <= 1024, k <= min(E, 32).
MoeRouting moe_route(const Tensor& logits, int64_t k, RouterScoring scoring = RouterScoring::Softmax,
                     const std::optional<Tensor>& selection_bias = std::nullopt, bool renormalize = true);

// The weighted combine of expert outputs: out[t] = sum_j weights[t, j] *
// expert_out[sorted_pos[t, j]], expert_out [T * k, N] -> [T, N] in its dtype
// (accumulated in float32). A gather, so no atomics: the result is deterministic.
Tensor moe_combine(const Tensor& expert_out, const MoeRouting& routing);

// rms_norm_residual(moe_combine(expert_out, routing), residual, weight, eps), equal
// to the two ops in sequence (the combine rounded to the dtype before the add); on
// CUDA one kernel, a dependent step fewer in a decode step. Returns
// (normalised, residual + combine), both [T, N].
std::pair<Tensor, Tensor> moe_combine_rms_norm_residual(const Tensor& expert_out, const MoeRouting& routing,
                                                        const Tensor& residual, const Tensor& weight, double eps);

// The experts of a mixture-of-experts layer (SwiGLU, as Qwen3-MoE and Mixtral):
// for each row p of the routing (token token_of[p], expert e by offs),
// out[p] = down[e] @ (silu(g) * u) with [g | u] = gate_up[e] @ x[token_of[p]];
// x [T, H], gate_up [E, 2I, H] (gate rows, then up rows), down [E, H, I], one
// float dtype; returns [T * k, H] in routing order, for moe_combine. The gate|up
// result and the activation are rounded to x's dtype, as the ops in sequence
// (index_select, grouped_mm, silu_and_mul, grouped_mm), which it equals; on CUDA
// with at most one row per expert (decode) it runs as two fused kernels (gather,
// gate|up and activation; down).
// float8_e4m3fn experts take their scales as grouped_mm's b_scale: gate_up_scale
// [E, 2I], down_scale [E, H] (per row, as quantize_fp8_rows gives).
Tensor moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const MoeRouting& routing,
                   const std::optional<Tensor>& gate_up_scale = std::nullopt,
                   const std::optional<Tensor>& down_scale = std::nullopt);

// moe_combine(moe_experts(...), routing): the experts' outputs combined per token,
// [T, H]. On CUDA's decode path the combine is part of the down projection's
// kernel (one dependent step fewer); the bits are those of the two ops.
Tensor moe_experts_combine(const Tensor& x, const Tensor& gate_up, const Tensor& down, const MoeRouting& routing,
                           const std::optional<Tensor>& gate_up_scale = std::nullopt,
                           const std::optional<Tensor>& down_scale = std::nullopt);

// moe_experts_combine's result added to residual ([T, H] like it) and RMS-normalised
// with norm_weight and eps, the 1 / rms left pending (for pending_rms_norm_linear):
// on CUDA's decode path the down projection's kernel makes all of it, so no norm
// kernel waits for it (sq_parts [T, ceil(H / 4)]); elsewhere the ops in sequence
// (sq_parts [T, 1]). sum is rms_norm_residual's sum, bit for bit.
PendingRmsNorm moe_experts_combine_rms_norm(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                                            const MoeRouting& routing, const Tensor& residual,
                                            const Tensor& norm_weight, double eps,
                                            const std::optional<Tensor>& gate_up_scale = std::nullopt,
                                            const std::optional<Tensor>& down_scale = std::nullopt);

// torch.topk: the k largest (or smallest) elements along `dim`, sorted, with
// their int64 indices. NaN counts as larger than every number; among equal
// values the lower index comes first.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

// A token id per row of logits [V] or [B, V] (-> int64 [] or [B]): p =
// softmax(logits / temperature); the kept tokens are the top_k most probable
// (0: all) and, of those, the smallest most-probable prefix whose mass reaches
// top_p (the token that crosses it included, as Hugging Face's top-p); then the
// inverse CDF of the kept tokens, most probable first, at u times their mass, u one
// uniform draw per row (from gen, as rand({B}) would draw it). temperature 0 (or top_k 1) is greedy argmax and draws nothing.
Tensor sample(const Tensor& logits, double temperature = 1.0, int64_t top_k = 0, double top_p = 1.0,
              Generator* gen = nullptr);

// softmax / log_softmax over `dim`, as torch.softmax: float32, float16 or bfloat16
// (computed in float32); `dtype` casts the input first. Rows with +-inf are handled
// as torch does (a row of all -inf gives NaN).
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// torch.nn.functional.scaled_dot_product_attention: q [..., L, E], k [..., S, E],
// v [..., S, Ev] -> [..., L, Ev], batch dims broadcast. attn_mask (bool: true takes
// part; or float: added to the scores) broadcasts to [..., L, S]; is_causal masks
// j > i (top-left aligned); scale defaults to 1/sqrt(E); enable_gqa lets k and v
// have fewer heads (dim -3) than q, each serving Hq/Hkv consecutive q heads. Rows
// with every key masked give 0, as PyTorch's math path. Computed in float32.
// causal_variant LowerRight aligns is_causal's mask to the bottom right, as
// torch.nn.attention.bias.causal_lower_right: query i sees keys j <= i + S - L
// (L new tokens after S - L cached ones; needs L <= S).
enum class CausalVariant { UpperLeft, LowerRight };
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, bool enable_gqa = false,
                                    CausalVariant causal_variant = CausalVariant::UpperLeft);

// One query token per sequence over a KV cache whose filled lengths are on the
// device: q [B, Hq, D], k_cache and v_cache [B, Hkv, capacity, D] (Hq a multiple
// of Hkv, as enable_gqa), seq_lens int32 [B] -> [B, Hq, D]; sequence b attends to
// its first seq_lens[b] keys (clamped to the capacity on CUDA; 0 keys give 0). No
// host synchronisation, so a captured CUDA graph replays it at any length.
Tensor attention_decode_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seq_lens,
                              std::optional<double> scale = std::nullopt);

// One token's attention straight from its q|k|v projection (a decode step): the
// token sits at position seq_len - 1, its q and k heads normalised and rotated and
// its k and v rows written into the caches there (qkv_rotary_cache), then its q heads
// attend to the caches' first seq_len rows (attention_decode_cache). qkv [1, (Hq + 2
// Hkv) D]; caches [Hkv, capacity, D]; seq_len int32 [1] in 1..capacity, read on the
// device -> [1, Hq, D]. On CUDA (float16, bfloat16, D up to 128) one kernel makes q and
// the new row itself, with the bits of the two ops. cache_settled: the work just
// before this call writes none of the caches' other rows (in a decode step, the q|k|v
// projection), so CUDA may read them before that work has finished.
Tensor attention_decode_qkv(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, const Tensor& q_norm,
                            const Tensor& k_norm, double eps, const Tensor& cos, const Tensor& sin,
                            const Tensor& seq_len, const Tensor& k_cache, const Tensor& v_cache,
                            std::optional<double> scale = std::nullopt, bool cache_settled = false);

// ---- shape helpers ----
// The broadcast shape of a and b, or Error naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
std::string shape_str(const Shape& s);

// Operators for readability in C++.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace kiln
