// Highway decode dot products: weight rows (float32, bfloat16, float16, e4m3
// decoded in registers) against up to 8 input rows, and attention's keys and
// values (src/cpu/simd.h).
// Highway's foreach_target re-includes this file once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd_dot.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "cpu/simd_loads-inl.h"
#include "cpu/simd.h"
#include "kiln/scalar_types.h"

#include <limits>
#include <type_traits>
#include <utility>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc[r] = dot(w, x + r * x_stride) over k for r < rows (<= 8), one vector
// accumulator per row: each weight vector is loaded (and decoded) once and used
// for every row. load_w(d, i) gives L weights from i as float32; weight(j) one.
template <class LoadW, class WeightAt>
HWY_INLINE void dot_rows(LoadW load_w, WeightAt weight, const float* HWY_RESTRICT x, size_t x_stride, int rows,
                         size_t k, float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  V s[8];
  for (int r = 0; r < 8; ++r) s[r] = hn::Zero(d);
  size_t i = 0;
  if (rows == 1) {  // four independent chains, so FMA latency does not bound the loop
    V s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    for (; i + 4 * L <= k; i += 4 * L) {
      s[0] = hn::MulAdd(load_w(d, i), hn::LoadU(d, x + i), s[0]);
      s1 = hn::MulAdd(load_w(d, i + L), hn::LoadU(d, x + i + L), s1);
      s2 = hn::MulAdd(load_w(d, i + 2 * L), hn::LoadU(d, x + i + 2 * L), s2);
      s3 = hn::MulAdd(load_w(d, i + 3 * L), hn::LoadU(d, x + i + 3 * L), s3);
    }
    s[0] = hn::Add(hn::Add(s[0], s1), hn::Add(s2, s3));
  } else if (rows == 2) {  // two steps of k at once: four chains
    V t0 = hn::Zero(d), t1 = hn::Zero(d);
    for (; i + 2 * L <= k; i += 2 * L) {
      const V w0 = load_w(d, i), w1 = load_w(d, i + L);
      s[0] = hn::MulAdd(w0, hn::LoadU(d, x + i), s[0]);
      s[1] = hn::MulAdd(w0, hn::LoadU(d, x + x_stride + i), s[1]);
      t0 = hn::MulAdd(w1, hn::LoadU(d, x + i + L), t0);
      t1 = hn::MulAdd(w1, hn::LoadU(d, x + x_stride + i + L), t1);
    }
    s[0] = hn::Add(s[0], t0);
    s[1] = hn::Add(s[1], t1);
  }
  for (; i + L <= k; i += L) {
    const V wv = load_w(d, i);
    for (int r = 0; r < rows; ++r) s[r] = hn::MulAdd(wv, hn::LoadU(d, x + r * x_stride + i), s[r]);
  }
  for (int r = 0; r < rows; ++r) {
    float tail = 0.0f;
    for (size_t j = i; j < k; ++j) tail += weight(j) * x[r * x_stride + j];
    acc[r] = hn::GetLane(hn::SumOfLanes(hn::ScalableTag<float>(), s[r])) + tail;
  }
}

void DotRowsF32(const float* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t x_stride, int rows, size_t k,
                float* HWY_RESTRICT acc) {
  dot_rows([w](auto d, size_t i) { return hn::LoadU(d, w + i); }, [w](size_t j) { return w[j]; }, x, x_stride, rows,
           k, acc);
}

// bfloat16 weights, promoted to float32 in registers (no widened copy).
void DotRowsBF16(const uint16_t* HWY_RESTRICT w_bits, const float* HWY_RESTRICT x, size_t x_stride, int rows,
                 size_t k, float* HWY_RESTRICT acc) {
  const auto* w = reinterpret_cast<const hwy::bfloat16_t*>(w_bits);
  dot_rows(bf16_loader(w), [w](size_t j) { return hwy::F32FromBF16(w[j]); }, x, x_stride, rows, k, acc);
}

// float16 weights, promoted to float32 in registers (no widened copy).
void DotRowsF16(const uint16_t* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t x_stride, int rows, size_t k,
                float* HWY_RESTRICT acc) {
  dot_rows(f16_loader(w), [w](size_t j) { return kiln::bits::f16_to_f32(w[j]); }, x, x_stride, rows, k, acc);
}

// acc[r * acc_stride + j] += p[r] * w[j] for r < rows, j < k: the transpose of
// dot_rows (attention's weighted sum of values), each w vector loaded once.
template <class LoadW, class WeightAt>
HWY_INLINE void axpy_rows(LoadW load_w, WeightAt weight, const float* HWY_RESTRICT p, int rows, size_t k,
                          float* HWY_RESTRICT acc, size_t acc_stride) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= k; i += L) {
    const auto wv = load_w(d, i);
    for (int r = 0; r < rows; ++r) {
      float* a = acc + r * acc_stride + i;
      hn::StoreU(hn::MulAdd(hn::Set(d, p[r]), wv, hn::LoadU(d, a)), d, a);
    }
  }
  for (; i < k; ++i)
    for (int r = 0; r < rows; ++r) acc[r * acc_stride + i] += p[r] * weight(i);
}

#if HWY_TARGET != HWY_SCALAR
// out[0..3] = the four lanes of v's 128-bit blocks added together.
template <class D>
HWY_INLINE void fold_blocks(D d, hn::Vec<D> v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    fold_blocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}
#endif

// out[0..3] = the sums of the lanes of a, b, c and e: pairs interleaved and added
// (each 128-bit block then holds its part of the four sums), then the blocks folded,
// about a third of the operations of four SumOfLanes.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void sums_of_four(D d, V a, V b, V c, V e, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(a), out[1] = hn::GetLane(b), out[2] = hn::GetLane(c), out[3] = hn::GetLane(e);
#else
  const V ab = hn::Add(hn::InterleaveLower(d, a, b), hn::InterleaveUpper(d, a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  const V ce = hn::Add(hn::InterleaveLower(d, c, e), hn::InterleaveUpper(d, c, e));
  const hn::RepartitionToWide<hn::RebindToUnsigned<D>> d64;  // pairs of lanes as one
  const auto ab64 = hn::BitCast(d64, ab), ce64 = hn::BitCast(d64, ce);
  const V sums = hn::Add(hn::BitCast(d, hn::InterleaveLower(d64, ab64, ce64)),
                         hn::BitCast(d, hn::InterleaveUpper(d64, ab64, ce64)));  // a b c e, each block's part
  fold_blocks(d, sums, out);
#endif
}

// Attention's two steps over `len` rows of a K or V cache, `stride` elements
// apart, in one call: called a row at a time, the calls cost more than a row's
// arithmetic (head_dim 128: 413 us for 2048 keys of 8 KV heads, 20 GB/s).
// KG keys at a time against R query rows (R * KG = 8 accumulators): each q vector
// is loaded once for the group's keys.
template <int R, class LoadRow, class PrefetchRow>
HWY_INLINE void dot_keys_rows(LoadRow row, PrefetchRow prefetch, size_t len, const float* HWY_RESTRICT q, size_t dim,
                              float* HWY_RESTRICT scores, size_t score_stride) {
  constexpr size_t KG = R >= 8 ? 1 : 8 / R;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using V = hn::Vec<decltype(d)>;
  size_t s = 0;
  for (; s + KG <= len; s += KG) {
    for (size_t k = 0; k < KG; ++k) prefetch(s + k);
    V acc[KG][R];
    for (size_t k = 0; k < KG; ++k)
      for (int r = 0; r < R; ++r) acc[k][r] = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= dim; i += L) {
      V qv[R];
      for (int r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q + r * dim + i);
      for (size_t k = 0; k < KG; ++k) {
        const V kv = row(s + k).first(d, i);
        for (int r = 0; r < R; ++r) acc[k][r] = hn::MulAdd(kv, qv[r], acc[k][r]);
      }
    }
    // the KG * R sums four at a time (the last four padded with zeros), not one
    // SumOfLanes each: kiln bench's "attn decode bf16 2048 cached" (Qwen3-0.6B's heads,
    // 2 query rows a KV head) 92-103 -> 81-84 us on a 2-core Zen 5 VM, alternated three
    // times (134-151 -> 117-127 in a slower hour); cold, in a 2048-context decode step,
    // no change within the noise (6.7-7.3 ms a token against 6.7-6.9, bench-decode
    // --profile): there the cache rows' reads set the pace
    constexpr size_t kSums = KG * R, kPadded = (kSums + 3) / 4 * 4;
    float sums[kPadded];
    for (size_t g = 0; g < kSums; g += 4) {
      const auto at = [&](size_t x) { return x < kSums ? acc[x / R][x % R] : hn::Zero(d); };
      sums_of_four(d, at(g), at(g + 1), at(g + 2), at(g + 3), sums + g);
    }
    for (size_t k = 0; k < KG; ++k) {
      const auto weight = row(s + k).second;
      for (int r = 0; r < R; ++r) {
        float tail = 0.0f;
        for (size_t j = i; j < dim; ++j) tail += weight(j) * q[r * dim + j];
        scores[r * score_stride + s + k] = sums[k * R + r] + tail;
      }
    }
  }
  float acc[8];
  for (; s < len; ++s) {  // the last keys, one at a time
    const auto [load_w, weight] = row(s);
    dot_rows(load_w, weight, q, dim, R, dim, acc);
    for (int r = 0; r < R; ++r) scores[r * score_stride + s] = acc[r];
  }
}

// f(std::integral_constant<int, R>{}) for rows = R, 1..8: the attention kernels
// hold R rows' sums in registers, so R is a compile-time count.
template <class F>
HWY_INLINE void with_row_count(int rows, F&& f) {
  switch (rows) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

template <class LoadRow, class PrefetchRow>
HWY_INLINE void dot_keys(LoadRow row, PrefetchRow prefetch, size_t len, const float* HWY_RESTRICT q, int rows,
                         size_t dim, float* HWY_RESTRICT scores, size_t score_stride) {
  with_row_count(rows, [&](auto r) {
    dot_keys_rows<decltype(r)::value>(row, prefetch, len, q, dim, scores, score_stride);
  });
}

// R rows' sums held in registers through all `len` value rows, C vectors of
// dim at a time (R * C = 16 accumulators); what is left of dim, as axpy_rows.
template <int R, class LoadRow, class PrefetchRow>
HWY_INLINE void axpy_values_rows(LoadRow row, PrefetchRow prefetch, size_t len, const float* HWY_RESTRICT p,
                                 size_t p_stride, size_t dim, float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  constexpr size_t C = 16 / R;
  using V = hn::Vec<decltype(d)>;
  size_t j0 = 0;
  for (; j0 + C * L <= dim; j0 += C * L) {
    V a[R][C];
    for (int r = 0; r < R; ++r)
      for (size_t c = 0; c < C; ++c) a[r][c] = hn::LoadU(d, acc + r * dim + j0 + c * L);
    for (size_t s = 0; s < len; ++s) {
      if (j0 == 0) prefetch(s);
      const auto load_w = row(s).first;
      V w[C];
      for (size_t c = 0; c < C; ++c) w[c] = load_w(d, j0 + c * L);
      for (int r = 0; r < R; ++r) {
        const V pr = hn::Set(d, p[r * p_stride + s]);
        for (size_t c = 0; c < C; ++c) a[r][c] = hn::MulAdd(pr, w[c], a[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (size_t c = 0; c < C; ++c) hn::StoreU(a[r][c], d, acc + r * dim + j0 + c * L);
  }
  if (j0 == dim) return;
  float ps[R];
  for (size_t s = 0; s < len; ++s) {
    const auto [load_w, weight] = row(s);
    for (int r = 0; r < R; ++r) ps[r] = p[r * p_stride + s];
    axpy_rows([&](auto dd, size_t i) { return load_w(dd, j0 + i); }, [&](size_t j) { return weight(j0 + j); }, ps, R,
              dim - j0, acc + j0, dim);
  }
}

template <class LoadRow, class PrefetchRow>
HWY_INLINE void axpy_values(LoadRow row, PrefetchRow prefetch, size_t len, const float* HWY_RESTRICT p,
                            size_t p_stride, int rows, size_t dim, float* HWY_RESTRICT acc) {
  with_row_count(rows, [&](auto r) {
    axpy_values_rows<decltype(r)::value>(row, prefetch, len, p, p_stride, dim, acc);
  });
}

HWY_INLINE auto f32_row(const float* HWY_RESTRICT base, size_t stride) {
  return [base, stride](size_t s) {
    const float* w = base + s * stride;
    return std::make_pair([w](auto d, size_t i) { return hn::LoadU(d, w + i); }, [w](size_t j) { return w[j]; });
  };
}

HWY_INLINE auto bf16_row(const uint16_t* HWY_RESTRICT base, size_t stride) {
  return [base, stride](size_t s) {
    const auto* w = reinterpret_cast<const hwy::bfloat16_t*>(base + s * stride);
    return std::make_pair(bf16_loader(w), [w](size_t j) { return hwy::F32FromBF16(w[j]); });
  };
}

// Asks (non-temporal) for the lines of cache row s `ahead` bytes past it, as the
// kernels reach row s; nothing when ahead is 0.
HWY_INLINE auto bf16_row_prefetch(const uint16_t* base, size_t stride, size_t dim, size_t ahead) {
  return [=](size_t s) {
    if (ahead == 0) return;
    const char* p = reinterpret_cast<const char*>(base + s * stride) + ahead;
    for (size_t o = 0; o < dim * sizeof(uint16_t); o += 64) __builtin_prefetch(p + o, 0, 0);
  };
}
constexpr auto kNoPrefetch = [](size_t) {};

void DotKeysF32(const float* HWY_RESTRICT k, size_t k_stride, size_t len, const float* HWY_RESTRICT q, int rows,
                size_t dim, float* HWY_RESTRICT scores, size_t score_stride) {
  dot_keys(f32_row(k, k_stride), kNoPrefetch, len, q, rows, dim, scores, score_stride);
}
void DotKeysBF16(const uint16_t* HWY_RESTRICT k, size_t k_stride, size_t len, const float* HWY_RESTRICT q, int rows,
                 size_t dim, float* HWY_RESTRICT scores, size_t score_stride, size_t prefetch_ahead) {
  dot_keys(bf16_row(k, k_stride), bf16_row_prefetch(k, k_stride, dim, prefetch_ahead), len, q, rows, dim, scores,
           score_stride);
}
void AxpyValuesF32(const float* HWY_RESTRICT v, size_t v_stride, size_t len, const float* HWY_RESTRICT p,
                   size_t p_stride, int rows, size_t dim, float* HWY_RESTRICT acc) {
  axpy_values(f32_row(v, v_stride), kNoPrefetch, len, p, p_stride, rows, dim, acc);
}
void AxpyValuesBF16(const uint16_t* HWY_RESTRICT v, size_t v_stride, size_t len, const float* HWY_RESTRICT p,
                    size_t p_stride, int rows, size_t dim, float* HWY_RESTRICT acc, size_t prefetch_ahead) {
  axpy_values(bf16_row(v, v_stride), bf16_row_prefetch(v, v_stride, dim, prefetch_ahead), len, p, p_stride, rows,
              dim, acc);
}

// dot_rows over e4m3 codes decoded one by one to their exact float32 (NaN included).
HWY_INLINE void dot_rows_e4m3_exact(const uint8_t* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t x_stride,
                                    int rows, size_t k, float* HWY_RESTRICT acc) {
  dot_rows([w](auto d, size_t j) { return load_e4m3(d, w + j); },
           [w](size_t j) { return kiln::bits::e4m3fn_to_f32(w[j]); }, x, x_stride, rows, k, acc);
}

// The decode path: an e4m3 code's bits placed under float16's (s eeee mmm ->
// s 0eeee mmm0000000) are its value times 2^-8, subnormals included, so three
// integer ops on 32 codes and the hardware half -> float conversion decode it;
// the 2^8 goes back on the sums (exact). float16 0x3f80 is no NaN, but it is the
// largest magnitude any code reaches only for the NaN codes (0x7f, 0xff), so a
// running max spots them and such rows are redone exactly.
void DotRowsE4M3(const uint8_t* HWY_RESTRICT w, const float* HWY_RESTRICT x, size_t x_stride, int rows, size_t k,
                 float* HWY_RESTRICT acc) {
#if HWY_TARGET == HWY_SCALAR  // one lane: no halves to split
  dot_rows_e4m3_exact(w, x, x_stride, rows, k, acc);
#else
  const hn::ScalableTag<float> df;
  const hn::Repartition<int16_t, decltype(df)> d16;  // 2 L lanes
  const hn::Rebind<uint8_t, decltype(d16)> d8;
  const hn::Repartition<hwy::float16_t, decltype(df)> dh;
  const hn::Half<decltype(dh)> dhh;
  const size_t L = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  V s[8][2];
  for (int r = 0; r < 8; ++r) s[r][0] = s[r][1] = hn::Zero(df);
  auto top = hn::Zero(d16);
  // 2 L codes from w + i as two float vectors (each 2^-8 times its value)
  auto decode = [&](size_t i, V& w0, V& w1) {
    const auto b = hn::BitCast(d16, hn::PromoteTo(hn::RebindToUnsigned<decltype(d16)>(), hn::LoadU(d8, w + i)));
    // code in the high byte, arithmetic shift by one, bit 14 (a sign copy) cleared
    const auto h = hn::And(hn::ShiftRight<1>(hn::ShiftLeft<8>(b)), hn::Set(d16, static_cast<int16_t>(0xbfff)));
    top = hn::Max(top, hn::And(h, hn::Set(d16, 0x7fff)));
    const auto hv = hn::BitCast(dh, h);
    w0 = hn::PromoteTo(df, hn::LowerHalf(dhh, hv));
    w1 = hn::PromoteTo(df, hn::UpperHalf(dhh, hv));
  };
  size_t i = 0;
  if (rows == 1) {  // four chains (s[1] is free), so FMA latency does not bound the loop
    for (; i + 4 * L <= k; i += 4 * L) {
      V w0, w1, w2, w3;
      decode(i, w0, w1);
      decode(i + 2 * L, w2, w3);
      s[0][0] = hn::MulAdd(w0, hn::LoadU(df, x + i), s[0][0]);
      s[0][1] = hn::MulAdd(w1, hn::LoadU(df, x + i + L), s[0][1]);
      s[1][0] = hn::MulAdd(w2, hn::LoadU(df, x + i + 2 * L), s[1][0]);
      s[1][1] = hn::MulAdd(w3, hn::LoadU(df, x + i + 3 * L), s[1][1]);
    }
    s[0][0] = hn::Add(s[0][0], s[1][0]);
    s[0][1] = hn::Add(s[0][1], s[1][1]);
  }
  for (; i + 2 * L <= k; i += 2 * L) {
    V w0, w1;
    decode(i, w0, w1);
    for (int r = 0; r < rows; ++r) {
      s[r][0] = hn::MulAdd(w0, hn::LoadU(df, x + r * x_stride + i), s[r][0]);
      s[r][1] = hn::MulAdd(w1, hn::LoadU(df, x + r * x_stride + i + L), s[r][1]);
    }
  }
  if (hn::GetLane(hn::MaxOfLanes(d16, top)) >= 0x3f80) {  // a NaN code
    dot_rows_e4m3_exact(w, x, x_stride, rows, k, acc);
    return;
  }
  for (int r = 0; r < rows; ++r) {
    float tail = 0.0f;
    for (size_t j = i; j < k; ++j) tail += kiln::bits::e4m3fn_to_f32(w[j]) * x[r * x_stride + j];
    acc[r] = hn::GetLane(hn::SumOfLanes(df, hn::Add(s[r][0], s[r][1]))) * 256.0f + tail;
  }
#endif
}

}  // namespace kiln::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::simd {
HWY_EXPORT(DotRowsF32);
HWY_EXPORT(DotRowsBF16);
HWY_EXPORT(DotRowsF16);
HWY_EXPORT(DotRowsE4M3);
HWY_EXPORT(DotKeysF32);
HWY_EXPORT(DotKeysBF16);
HWY_EXPORT(AxpyValuesF32);
HWY_EXPORT(AxpyValuesBF16);

void dot_rows_f32(const float* w, const float* x, size_t x_stride, int rows, size_t k, float* acc) {
  HWY_DYNAMIC_DISPATCH(DotRowsF32)(w, x, x_stride, rows, k, acc);
}
void dot_rows_bf16(const uint16_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc) {
  HWY_DYNAMIC_DISPATCH(DotRowsBF16)(w, x, x_stride, rows, k, acc);
}
void dot_rows_f16(const uint16_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc) {
  HWY_DYNAMIC_DISPATCH(DotRowsF16)(w, x, x_stride, rows, k, acc);
}
void dot_rows_e4m3(const uint8_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc) {
  HWY_DYNAMIC_DISPATCH(DotRowsE4M3)(w, x, x_stride, rows, k, acc);
}
void dot_keys_f32(const float* k, size_t k_stride, size_t len, const float* q, int rows, size_t dim, float* scores,
                  size_t score_stride) {
  HWY_DYNAMIC_DISPATCH(DotKeysF32)(k, k_stride, len, q, rows, dim, scores, score_stride);
}
void dot_keys_bf16(const uint16_t* k, size_t k_stride, size_t len, const float* q, int rows, size_t dim, float* scores,
                   size_t score_stride, size_t prefetch_ahead) {
  HWY_DYNAMIC_DISPATCH(DotKeysBF16)(k, k_stride, len, q, rows, dim, scores, score_stride, prefetch_ahead);
}
void axpy_values_f32(const float* v, size_t v_stride, size_t len, const float* p, size_t p_stride, int rows,
                     size_t dim, float* acc) {
  HWY_DYNAMIC_DISPATCH(AxpyValuesF32)(v, v_stride, len, p, p_stride, rows, dim, acc);
}
void axpy_values_bf16(const uint16_t* v, size_t v_stride, size_t len, const float* p, size_t p_stride, int rows,
                      size_t dim, float* acc, size_t prefetch_ahead) {
  HWY_DYNAMIC_DISPATCH(AxpyValuesBF16)(v, v_stride, len, p, p_stride, rows, dim, acc, prefetch_ahead);
}
}  // namespace kiln::cpu::simd
#endif
