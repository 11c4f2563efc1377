// The interface every backend implements. Front doors (src/ops/) check and
// broadcast, allocate outputs, then call exactly one of these. Inputs reach a
// backend already validated: same device, the dtypes the op family supports,
// and shapes equal to the output's (broadcast operands are stride-0 views).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/ops.h"
#include "kiln/tensor.h"

namespace kiln {

enum class UnaryOp : uint8_t { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Silu, Gelu, GeluTanh };
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Maximum, Minimum };
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
enum class ReduceOp : uint8_t { Sum, Mean, Prod, Max, Min };
enum class RandomKind : uint8_t { Uniform, Normal };

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(CompareOp op);
const char* op_name(ReduceOp op);

// A reduction seen as M independent outputs of R inputs each: `in` is a view of
// the input permuted to [kept dims..., reduced dims...]; `out` (and `out_index`
// for the arg ops) are contiguous with M elements.
struct ReduceArgs {
  ReduceOp op;
  Tensor in;
  Tensor out;
  Tensor out_index;  // int64; when defined, Max/Min also write the index of the first extreme
  int64_t num_kept_dims = 0;
  int64_t M = 1, R = 1;
};

// Arguments of the few-rows linear. x [R, K] and out [R, N] have unit inner
// stride; w [N, K] has unit inner stride and x's dtype, or is float8_e4m3fn;
// scale (float32: 1 element, or N for per-row) is defined only for float8;
// bias, when defined, is [N] contiguous in out's dtype.
// With swiglu, w's rows are [gate | up] (N = 2H) and out [R, H] = silu(gate) * up,
// both rounded to out's dtype first.
struct LinearArgs {
  Tensor out, x, weight, scale, bias;
  bool swiglu = false;
  // RMSNorm fused in front (CUDA, one row; rms_norm_linear): the product is of
  // rms_norm(x + residual, norm_weight, eps); x + residual (rounded to x's dtype) goes
  // to residual_out and, when defined, the normalised row to normed_out. residual,
  // residual_out and normed_out are undefined or [1, K] like x; norm_weight is [K].
  Tensor residual, norm_weight, residual_out, normed_out;
  float eps = 0.0f;
  bool norm() const { return norm_weight.defined(); }
  // An RMSNorm left pending (CUDA, one row; pending_rms_norm_linear): x is the row times
  // the norm's weight, and the product is scaled by rsqrt(sum(sq_parts) / K + eps),
  // sq_parts float32 contiguous, the row's partial sums of squares.
  Tensor sq_parts;
  bool pending_norm() const { return sq_parts.defined(); }
  // Floats of shared memory a norm's kernel holds at most (48 KB): the fused norm's row
  // (K) or the pending norm's partial sums.
  static constexpr int64_t kMaxNormFloats = 12288;
  // One scale per output row (else one for the whole weight).
  bool per_row_scale() const { return scale.defined() && scale.numel() == weight.size(0) && weight.size(0) > 1; }
};

// Arguments of scaled_mm: out [M, N] contiguous = (a [M, K] @ bt [N, K]^T)
// * scale_a * scale_b + bias. a and bt are float8_e4m3fn with unit inner stride
// (bt is torch's column-major b seen as rows); scale_a has 1 or M float32
// values, scale_b 1 or N, contiguous; bias, when defined, is [N] in out's dtype.
struct ScaledMmArgs {
  Tensor out, a, bt, scale_a, scale_b, bias;
  bool fast_accum = false;
  // Rowwise: one scale per row of a and per column of b (N >= 16, so scale_b tells).
  bool rowwise() const { return scale_b.numel() != 1; }
};

// Arguments of grouped_mm with offsets (the 3-D x 3-D case is a batched matmul
// and never reaches a backend). offs is int32 [G] on the device, the cumulative
// end of each group along the jagged dim. Either
//  - rows by group (2-D x 3-D): a [T, K], b [G, K, N], out [T, N]: rows
//    offs[g-1]..offs[g] of a times b[g]; rows past offs[G-1] are zero;
//  - k by group (2-D x 2-D): a [M, K], b [K, N], out [G, M, N]: out[g] is
//    a[:, offs[g-1]:offs[g]] @ b[offs[g-1]:offs[g], :].
// a and b share one float dtype, any strides; out is contiguous, a's dtype or float32.
// row_index (int32, optional): row p of the product reads a's row row_index[p]
// (a gather fused in); swiglu: the product's N columns are [gate | up] and out
// [T, N / 2] is silu(gate) * up of them, each rounded to a's dtype first, as
// silu_and_mul of the product (fused in); combine_pos, combine_experts and
// combine_weights ([T', k] int32, int32 and float32, optional: moe_route's
// sorted_pos, experts and weights): out [T', N] is moe_combine of the product's
// rows, out[t] = sum_j combine_weights[t, j] * product row combine_pos[t, j],
// that row being in group combine_experts[t, j] (fused in).
// All three only on CUDA's few-rows path (moe_experts checks when they apply).
struct GroupedMmArgs {
  Tensor out, a, b, offs;
  Tensor b_scale;  // b float8_e4m3fn: its scale as a [G, N] float32 view (zero strides where shared)
  Tensor row_index;
  bool swiglu = false;
  Tensor combine_pos, combine_experts, combine_weights;
  // With the combine, the residual add and RMSNorm after it, the 1 / rms left pending
  // (moe_experts_combine_rms_norm): out = combine + norm_residual ([T, N] like out),
  // norm_scaled = out * norm_weight ([N]), both rounded to out's dtype, and
  // norm_sq_parts float32 [T, ceil(N / kNormPartColumns)] the sums of squares of out's
  // rows over consecutive runs of kNormPartColumns columns.
  Tensor norm_residual, norm_weight, norm_scaled, norm_sq_parts;
  static constexpr int kNormPartColumns = 4;
  bool k_by_group() const { return b.dim() == 2; }
};

// Arguments of moe_route: logits [T, E] contiguous; bias [E] float32 or
// undefined; the outputs of MoeRouting, allocated.
struct MoeRouteArgs {
  Tensor logits, bias;
  MoeRouting r;
  int64_t k = 0;
  bool sigmoid = false, renormalize = true;
};

// Arguments of the one-query attention (decode): q [B, Hq, D], k and v [B, Hkv,
// S, D] with unit inner stride (a KV cache read in place), out [B, Hq, D]
// contiguous, all one float dtype; q head h reads kv head h / (Hq / Hkv).
// out [B, Hq, D] contiguous; q [B, Hq, D], k, v [B, Hkv, S, D] with unit inner
// strides; seq_lens int32 [B] on the device (keys past it unread) or undefined (all S).
struct AttentionDecodeArgs {
  Tensor out, q, k, v;
  double scale = 1.0;
  Tensor seq_lens;
};

// Arguments of the many-query attention (prefill): out [B, Hq, L, D] contiguous;
// q [B, Hq, L, D], k and v [B, Hkv, S, D] with unit inner strides, 16-byte rows,
// one float dtype; q head h reads kv head h / (Hq / Hkv); L, S > 0; scale > 0;
// causal: query i sees keys 0..i (PyTorch's top-left alignment).
struct AttentionPrefillArgs {
  Tensor out, q, k, v;
  double scale = 1.0;
  bool causal = false;
  int64_t causal_offset = 0;  // causal: query i sees keys j <= i + causal_offset (S - L for lower right)
};

// qkv_rotary_cache's arguments, checked: q_out [T, Hq, D] contiguous; qkv rows
// [T, (Hq + 2 Hkv) D] unit inner stride; norms [D] contiguous or undefined; cos,
// sin [capacity, half] contiguous float32; positions int32 [T] contiguous; caches
// [Hkv, capacity, D] with unit inner stride.
struct QkvRotaryCacheArgs {
  Tensor q_out, qkv, q_norm, k_norm, cos, sin, positions, k_cache, v_cache;
  int64_t hq = 0, hkv = 0;
  float eps = 0;
};

#define KILN_BACKEND_KERNELS                                                                        \
  /* dst and src: same shape, any dtypes, possibly overlapping nothing */                           \
  void copy(const Tensor& dst, const Tensor& src, bool saturate);                                   \
  void fill(const Tensor& dst, const Scalar& value);                                                \
  /* out contiguous; in same dtype as out */                                                        \
  void unary(UnaryOp op, const Tensor& out, const Tensor& in);                                      \
  /* out = op(a, alpha*b) for Add/Sub, else op(a, b); a, b, out same dtype */                      \
  void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);      \
  /* out bool; a, b same dtype */                                                                   \
  void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b);                  \
  void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);              \
  void reduce(const ReduceArgs& args);                                                              \
  void arange(const Tensor& out, const Scalar& start, const Scalar& step);                          \
  void random(RandomKind kind, const Tensor& out, double a, double b, uint64_t seed, uint64_t offset); \
  /* out [B, M, N] contiguous = a [B, M, K] x b [B, K, N]; any strides on a and b */               \
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b);                                 \
  /* the few-rows (decode) linear: out [R, N] = x [R, K] w[N, K]^T * scale + bias, see LinearArgs */ \
  void linear_rows(const LinearArgs& args);                                                         \
  /* out, in [M, N] contiguous, one float dtype: softmax (or log_softmax) of each row */          \
  void softmax_rows(const Tensor& out, const Tensor& in, bool log);                                 \
  /* in [M, N] contiguous; values [M, k] (in's dtype) and indices [M, k] int64, best first */       \
  void topk_rows(const Tensor& values, const Tensor& indices, const Tensor& in, bool largest);        \
  void scaled_mm(const ScaledMmArgs& args);                                                         \
  void grouped_mm(const GroupedMmArgs& args);                                                       \
  /* out [R, inner] = in [S, inner] rows at index [R] (int32/int64); rows contiguous */              \
  void index_select_rows(const Tensor& out, const Tensor& in, const Tensor& index);                 \
  void moe_route(const MoeRouteArgs& args);                                                         \
  /* out [T, N], y [T*k, N] contiguous, same float dtype; weights/sorted_pos as MoeRouting */      \
  void moe_combine(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos); \
  void attention_decode(const AttentionDecodeArgs& args);                                            \
  void attention_prefill(const AttentionPrefillArgs& args);                                          \
  /* rows [M, N] contiguous; weight [N] or undefined; residual_out/residual defined for the fused add */ \
  void rms_norm_rows(const Tensor& out, const Tensor& x, const Tensor& residual, const Tensor& residual_out, \
                     const Tensor& weight, float eps);                                               \
  /* rms_norm_rows of moe_combine(y, weights, sorted_pos) with the residual add: out, residual, */  \
  /* residual_out [T, N]; y [T*k, N]; weights, sorted_pos [T, k] (moe_combine's arguments) */       \
  void rms_norm_combine_rows(const Tensor& out, const Tensor& y, const Tensor& weights, const Tensor& sorted_pos, \
                             const Tensor& residual, const Tensor& residual_out, const Tensor& weight, float eps); \
  /* rows [M, N] contiguous; weight, bias [N] or undefined */                                      \
  void layer_norm_rows(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps); \
  /* out int64 [B]; probs float32 [B, V] contiguous; u float32 [B]; 1 <= top_k <= V */           \
  void sample_rows(const Tensor& out, const Tensor& probs, const Tensor& u, int64_t top_k, float top_p); \
  /* out [M, H], x [M, 2H] contiguous */                                                          \
  void silu_and_mul_rows(const Tensor& out, const Tensor& x);                                       \
  /* out and x [T, H, D] (out contiguous, x unit inner stride); cos, sin [T, R/2] float32 contiguous */ \
  void rotary(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved); \
  void qkv_rotary_cache(const QkvRotaryCacheArgs& args);

namespace cpu {
KILN_BACKEND_KERNELS
}  // namespace cpu

namespace cuda_backend {
KILN_BACKEND_KERNELS
// Makes device `index` current for the calling thread while alive.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};
// Raw copies between host and device memory (contiguous bytes) on the current stream.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);
// One word of pinned host memory per host thread, mapped (kernels write it at the
// same address): a kernel raises it for a rare condition, and the host reads it
// once the stream is synchronised, with no memset or copy queued on the stream.
int32_t* host_flag();
}  // namespace cuda_backend

#undef KILN_BACKEND_KERNELS

// Runs backend kernel `fn` on the backend of `dev` (its CUDA device made current).
#define KILN_ON_DEVICE(dev, fn, ...)                       \
  do {                                                     \
    if ((dev).is_cpu()) {                                  \
      ::kiln::cpu::fn(__VA_ARGS__);                        \
    } else {                                               \
      ::kiln::cuda_backend::DeviceGuard guard_((dev).index); \
      ::kiln::cuda_backend::fn(__VA_ARGS__);               \
    }                                                      \
  } while (0)

}  // namespace kiln
