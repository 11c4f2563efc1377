// scaled_dot_product_attention: the decode kernel for one query token reading a
// KV cache in place, the flash kernel for many query rows (CUDA), and the math
// path, composed of kiln's own ops, so it runs on every device and is the
// reference the fused kernels are tested against.
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "core/vector_rows.h"
#include "ops/common.h"
#if KILN_WITH_CUDA
#include "cuda/attention_decode.h"
#endif

namespace kiln {

namespace {
// k or v [..., Hkv, S, E] -> [..., Hkv * groups, S, E]: kv head h serves q heads h*groups .. h*groups+groups-1.
Tensor repeat_heads(const Tensor& t, int64_t groups) {
  Shape expanded = t.shape();
  expanded.insert(expanded.end() - 2, groups);
  Shape merged = t.shape();
  merged[merged.size() - 3] *= groups;
  return t.unsqueeze(-3).expand(expanded).reshape(merged);
}

// What both fused kernels read: 4-D q [B, Hq, L, D] and k, v [B, Hkv, S, D] of
// one batch size and head dim, at least one key, Hq a multiple of Hkv (heads
// shared only with enable_gqa), 16-byte rows of unit stride.
bool fused_layout_fits(const Tensor& q, const Tensor& k, const Tensor& v, bool enable_gqa) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  const int64_t hq = q.size(1), hkv = k.size(1);
  if (k.size(2) == 0 || k.size(3) != q.size(3) || v.size(3) != q.size(3)) return false;
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || v.size(1) != hkv || hkv == 0 || hq % hkv != 0) return false;
  if (hq != hkv && !enable_gqa) return false;
  return rows_vector_aligned(q, 3) && rows_vector_aligned(k, 3) && rows_vector_aligned(v, 3);
}

// One query token per head, no mask, up to 8 query heads per kv head, a head dim
// of 8s up to 256: the decode kernel's case.
bool decode_kernel_applies(const Tensor& q, const Tensor& k, const Tensor& v, bool masked, bool is_causal,
                           bool enable_gqa) {
  if (masked || !fused_layout_fits(q, k, v, enable_gqa) || q.size(2) != 1) return false;
  const int64_t S = k.size(2), D = q.size(3);
  if ((is_causal && S != 1) || D % 8 != 0 || D > 256) return false;
  return q.size(1) / k.size(1) <= 8 && !(q.dtype() == DType::Float32 && q.is_cuda());
}

// Many query rows on CUDA, no mask tensor, fp16 or bf16, a head dim the flash
// kernel has, scale > 0: the prefill kernel's case (attention_prefill.cu).
bool prefill_kernel_applies(const Tensor& q, const Tensor& k, const Tensor& v, bool masked, double scale,
                            bool enable_gqa) {
  if (!q.is_cuda() || masked || !(scale > 0) || !fused_layout_fits(q, k, v, enable_gqa) || q.size(2) == 0) return false;
  if (q.dtype() != DType::BFloat16 && q.dtype() != DType::Float16) return false;
  const int64_t D = q.size(3);
  return D == 40 || D == 64 || D == 80 || D == 96 || D == 128;
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k_in, const Tensor& v_in,
                                    const std::optional<Tensor>& attn_mask, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa, CausalVariant causal_variant) {
  constexpr const char* op = "scaled_dot_product_attention";
  check_defined(op, q, k_in);
  check_defined(op, v_in);
  check_same_device(op, q, k_in);
  check_same_device(op, q, v_in);
  KILN_CHECK(q.dtype() == k_in.dtype() && q.dtype() == v_in.dtype(), op, ": q, k and v must have one dtype, got ",
             dtype_name(q.dtype()), ", ", dtype_name(k_in.dtype()), ", ", dtype_name(v_in.dtype()));
  check_compute_float(op, q);
  KILN_CHECK(q.dim() >= 2 && k_in.dim() >= 2 && v_in.dim() >= 2, op, ": q, k, v need at least 2 dims, got ",
             q.shape(), ", ", k_in.shape(), ", ", v_in.shape());
  const int64_t L = q.size(-2), E = q.size(-1), S = k_in.size(-2);
  KILN_CHECK(k_in.size(-1) == E, op, ": q's last dim ", E, " and k's ", k_in.size(-1), " differ (shapes ", q.shape(),
             " and ", k_in.shape(), ")");
  KILN_CHECK(v_in.size(-2) == S, op, ": k has ", S, " keys but v has ", v_in.size(-2), " (shapes ", k_in.shape(),
             " and ", v_in.shape(), ")");
  KILN_CHECK(!(is_causal && given(attn_mask)), op,
             ": give attn_mask or is_causal, not both");
  const bool masked = given(attn_mask);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  int64_t causal_offset = 0;  // query i sees keys j <= i + causal_offset
  if (is_causal && causal_variant == CausalVariant::LowerRight) {
    KILN_CHECK(L <= S, op, ": a lower-right causal mask needs no more queries than keys, got ", L, " queries and ", S,
               " keys");
    causal_offset = S - L;
    if (L == 1) is_causal = false;  // the one query sees every key
  }
  if (decode_kernel_applies(q, k_in, v_in, masked, is_causal, enable_gqa)) {
    AttentionDecodeArgs a{Tensor::empty({q.size(0), q.size(1), E}, q.dtype(), q.device()), q.squeeze(2), k_in, v_in,
                          s, Tensor{}};
    KILN_ON_DEVICE(q.device(), attention_decode, a);
    return a.out.view(q.shape());
  }
  if (prefill_kernel_applies(q, k_in, v_in, masked, s, enable_gqa)) {
    AttentionPrefillArgs a{Tensor::empty(q.shape(), q.dtype(), q.device()), q, k_in, v_in, s, is_causal,
                           causal_offset};
    KILN_ON_DEVICE(q.device(), attention_prefill, a);
    return a.out;
  }
  Tensor k = k_in, v = v_in;
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && q.size(-3) != k.size(-3)) {
    const int64_t hq = q.size(-3), hkv = k.size(-3);
    KILN_CHECK(hkv > 0 && hq % hkv == 0 && v.dim() >= 3 && v.size(-3) == hkv, op, ": with enable_gqa, q's heads (",
               hq, ") must be a multiple of k's and v's (", hkv, ", ", v.dim() >= 3 ? v.size(-3) : 0, ")");
    k = repeat_heads(k, hq / hkv);
    v = repeat_heads(v, hq / hkv);
  }
  // scores [..., L, S] in float32
  Tensor scores = mul(matmul(q.to(DType::Float32), k.to(DType::Float32).transpose(-2, -1)), s);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (is_causal) {
    const Tensor rows = arange(L, DType::Int64, q.device()).unsqueeze(1);
    const Tensor cols = arange(S, DType::Int64, q.device()).unsqueeze(0);
    scores = where(ge(add(rows, causal_offset), cols), scores, neg_inf);
  } else if (given(attn_mask)) {
    const Tensor& m = *attn_mask;
    check_same_device(op, q, m);
    const Shape want = broadcast_shapes(m.shape(), scores.shape());
    KILN_CHECK(want == scores.shape(), op, ": attn_mask of shape ", m.shape(), " does not broadcast to the scores' ",
               scores.shape());
    if (m.dtype() == DType::Bool) {
      scores = where(m, scores, neg_inf);
    } else {
      KILN_CHECK(is_floating_point(m.dtype()), op, ": attn_mask must be bool or a float dtype, got ",
                 dtype_name(m.dtype()));
      scores = add(scores, m.to(DType::Float32));
    }
  }
  Tensor p = softmax(scores, -1);
  // a row with every key masked: 0, not NaN (PyTorch's math path, safe softmax)
  p = where(eq(amax(scores, {-1}, true), neg_inf), 0.0, p);
  return matmul(p, v.to(DType::Float32)).to(q.dtype());
}

namespace {
// What the decode kernels take: float16 or bfloat16, and float32 on the CPU.
void check_decode_dtype(const char* op, const Tensor& t) {
  KILN_CHECK(t.dtype() == DType::BFloat16 || t.dtype() == DType::Float16 || (!t.is_cuda() && t.dtype() == DType::Float32),
             op, ": dtype must be bfloat16 or float16 (float32 on the CPU), got ", t.dtype());
}
}  // namespace

Tensor attention_decode_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& seq_lens,
                              std::optional<double> scale) {
  constexpr const char* op = "attention_decode_cache";
  check_defined(op, q, k_cache);
  check_defined(op, v_cache, seq_lens);
  check_same_device(op, q, k_cache);
  check_same_device(op, q, v_cache);
  check_same_device(op, q, seq_lens);
  KILN_CHECK(q.dtype() == k_cache.dtype() && q.dtype() == v_cache.dtype(), op,
             ": q, k_cache and v_cache must have one dtype, got ", q.dtype(), ", ", k_cache.dtype(), ", ",
             v_cache.dtype());
  check_decode_dtype(op, q);
  KILN_CHECK(q.dim() == 3 && k_cache.dim() == 4 && v_cache.shape() == k_cache.shape() && k_cache.size(0) == q.size(0) &&
                 k_cache.size(3) == q.size(2) && k_cache.size(1) > 0 && q.size(1) % k_cache.size(1) == 0 &&
                 q.size(1) / k_cache.size(1) <= 8,
             op, ": q must be [B, Hq, D] and the caches [B, Hkv, capacity, D] with Hq a multiple of Hkv (at most 8 q "
             "heads per kv head), got ", q.shape(), ", ", k_cache.shape(), " and ", v_cache.shape());
  const int64_t D = q.size(2);
  KILN_CHECK(D % 8 == 0 && D <= 256 && rows_vector_aligned(q, 2) && rows_vector_aligned(k_cache, 3) &&
                 rows_vector_aligned(v_cache, 3),
             op, ": head_dim must be a multiple of 8 up to 256 with 16-byte aligned rows of unit stride, got ", D);
  KILN_CHECK(seq_lens.dtype() == DType::Int32 && seq_lens.dim() == 1 && seq_lens.size(0) == q.size(0), op,
             ": seq_lens must be int32 [", q.size(0), "], got ", seq_lens.dtype(), " ", seq_lens.shape());
  check_host_range(op, "seq_lens", seq_lens, k_cache.size(2), true);
  AttentionDecodeArgs a{Tensor::empty(q.shape(), q.dtype(), q.device()), q, k_cache, v_cache,
                        scale.value_or(1.0 / std::sqrt(static_cast<double>(D))), seq_lens.contiguous()};
  if (a.out.numel() > 0 && k_cache.size(2) > 0) KILN_ON_DEVICE(q.device(), attention_decode, a);
  else if (a.out.numel() > 0) a.out.zero_();
  return a.out;
}

Tensor attention_decode_qkv(const Tensor& qkv, int64_t hq, int64_t hkv, const Tensor& q_norm, const Tensor& k_norm,
                            double eps, const Tensor& cos, const Tensor& sin, const Tensor& seq_len,
                            const Tensor& k_cache, const Tensor& v_cache, std::optional<double> scale,
                            bool cache_settled) {
  constexpr const char* op = "attention_decode_qkv";
  check_defined(op, seq_len);
  const int64_t D = check_qkv_rotary_operands(op, qkv, hq, hkv, q_norm, k_norm, cos, sin, k_cache, v_cache);
  check_same_device(op, qkv, seq_len);
  check_decode_dtype(op, qkv);
  KILN_CHECK(qkv.size(0) == 1, op, ": qkv must be one token's row [1, ", qkv.size(1), "], got shape ", qkv.shape());
  KILN_CHECK(hq % hkv == 0 && hq / hkv <= 8, op, ": num_heads (", hq, ") must be a multiple of num_kv_heads (", hkv,
             ") with at most 8 q heads per kv head");
  KILN_CHECK(D % 8 == 0 && D <= 256 && rows_vector_aligned(k_cache, 2) && rows_vector_aligned(v_cache, 2), op,
             ": head_dim must be a multiple of 8 up to 256 with 16-byte aligned cache rows of unit stride, got ", D);
  KILN_CHECK(seq_len.dtype() == DType::Int32 && seq_len.dim() == 1 && seq_len.size(0) == 1, op,
             ": seq_len must be int32 [1], got ", seq_len.dtype(), " ", seq_len.shape());
  const int64_t capacity = k_cache.size(1);
  KILN_CHECK(capacity > 0, op, ": the caches have no rows (capacity 0): the token has no place in them");
  if (!seq_len.is_cuda()) {  // on CUDA the kernels stop on a bad length (no host read)
    const int64_t len = seq_len.contiguous().data<int32_t>()[0];
    KILN_CHECK(len >= 1 && len <= capacity, op, ": seq_len must lie in [1, ", capacity, "], got ", len);
  }
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
#if KILN_WITH_CUDA
  if (qkv.is_cuda() && D <= cuda_backend::kMmaMaxDim) {  // one kernel (attention_mma.cu)
    cuda_backend::AttentionDecodeQkvArgs a;
    a.attn = AttentionDecodeArgs{Tensor::empty({1, hq, D}, qkv.dtype(), qkv.device()), Tensor(),
                                 k_cache.unsqueeze(0), v_cache.unsqueeze(0), s, seq_len.contiguous()};
    a.qkv = qkv.stride(1) == 1 ? qkv : qkv.contiguous();
    a.q_norm = q_norm.defined() ? q_norm.contiguous() : q_norm;
    a.k_norm = k_norm.defined() ? k_norm.contiguous() : k_norm;
    a.cos = cos.contiguous();
    a.sin = sin.contiguous();
    a.eps = static_cast<float>(eps);
    a.settled = cache_settled;
    cuda_backend::DeviceGuard guard(qkv.device().index);
    cuda_backend::attention_decode_qkv(a);
    return a.attn.out;
  }
#endif
  const Tensor q = qkv_rotary_cache(qkv, hq, hkv, q_norm, k_norm, eps, cos, sin, sub(seq_len, 1), k_cache, v_cache);
  return attention_decode_cache(q, k_cache.unsqueeze(0), v_cache.unsqueeze(0), seq_len, s);
}

}  // namespace kiln
