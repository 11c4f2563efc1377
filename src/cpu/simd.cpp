// Highway's foreach_target re-includes this file once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include "cpu/simd.h"
#include "kiln/scalar_types.h"

#include <limits>
#include <type_traits>
#include <utility>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class F>
HWY_INLINE void map_unary(const float* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n, F f) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(f(d, hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {
    const size_t rest = n - i;
    const auto m = hn::FirstN(d, rest);
    hn::BlendedStore(f(d, hn::MaskedLoad(m, d, in + i)), m, d, out + i);
  }
}

// P(x) = c[0] + c[1] x + ..., by Horner's rule.
template <class D, size_t N>
HWY_INLINE hn::Vec<D> Polynomial(D d, hn::Vec<D> x, const float (&c)[N]) {
  hn::Vec<D> p = hn::Set(d, c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) p = hn::MulAdd(p, x, hn::Set(d, c[i]));
  return p;
}

// GELU with erf (PyTorch's default): 0.5 x (1 + erf(z)), z = x / sqrt(2). Highway has
// no erf, so: for |z| <= 1, erf(z) = z P(z^2); past it, erfc(a) = exp(-a^2 + K(1/a)) / a
// (a = |z|), and 1 + erf(z) is 2 - erfc(z) or, for negative z, erfc(-z) itself, which
// keeps the negative tail accurate where 1 + erf cancels. P and K are Chebyshev fits
// (made with numpy and scipy's erf and erfcx: P to 1.4e-9 relative on [0, 1], K to 7e-8
// absolute for 1/a in [0.1, 1]; past a = 10, erfc is below 2e-45 and K is held at
// 1/a = 0.1). Against a float64 reference: at most 2.2e-6 relative for x > -5, where the
// rounding of a^2 in the exponent dominates (libm's erff path: 1.1e-5 near x = -2).
// 2 GB/s -> memory speed on this file's 2-core machine (bench "gelu f32").
template <class D>
HWY_INLINE hn::Vec<D> GeluErf(D d, hn::Vec<D> x) {
  using V = hn::Vec<D>;
  static constexpr float kP[] = {1.128379166e+00f, -3.761262691e-01f, 1.128359749e-01f, -2.685432954e-02f,
                                 5.189312812e-03f, -8.018859014e-04f, 7.882500443e-05f};
  static constexpr float kK[] = {-5.723239332e-01f, -1.404001539e-03f, -4.798600473e-01f, -1.592289845e-01f,
                                 1.386744212e+00f,  -2.227301453e+00f, 2.008746767e+00f,  -1.100923737e+00f,
                                 3.422125653e-01f,  -4.626687641e-02f};
  const V one = hn::Set(d, 1.0f), z = hn::Mul(x, hn::Set(d, 0.70710678118654752f)), a = hn::Abs(z);
  const V near = hn::MulAdd(z, Polynomial(d, hn::Mul(z, z), kP), one);  // 1 + erf(z), |z| <= 1
  const V u = hn::Div(one, hn::Max(a, one));
  const V erfc_a = hn::Mul(hn::Exp(d, hn::Sub(Polynomial(d, hn::Max(u, hn::Set(d, 0.1f)), kK), hn::Mul(a, a))), u);
  const V far = hn::IfThenElse(hn::Lt(z, hn::Zero(d)), erfc_a, hn::Sub(hn::Set(d, 2.0f), erfc_a));
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::IfThenElse(hn::Le(a, one), near, far));
}

bool UnaryF32(UnaryOp op, const float* in, float* out, size_t n) {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  switch (op) {
    case UnaryOp::Neg: map_unary(in, out, n, [](D, V v) { return hn::Neg(v); }); return true;
    case UnaryOp::Abs: map_unary(in, out, n, [](D, V v) { return hn::Abs(v); }); return true;
    case UnaryOp::Sqrt: map_unary(in, out, n, [](D, V v) { return hn::Sqrt(v); }); return true;
    case UnaryOp::Rsqrt: map_unary(in, out, n, [](D d, V v) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(v)); }); return true;
    case UnaryOp::Exp: map_unary(in, out, n, [](D d, V v) { return hn::Exp(d, v); }); return true;
    case UnaryOp::Log: map_unary(in, out, n, [](D d, V v) { return hn::Log(d, v); }); return true;
    case UnaryOp::Tanh: map_unary(in, out, n, [](D d, V v) { return hn::Tanh(d, v); }); return true;
    case UnaryOp::Sigmoid:
      map_unary(in, out, n, [](D d, V v) {
        const V one = hn::Set(d, 1.0f);
        return hn::Div(one, hn::Add(one, hn::Exp(d, hn::Neg(v))));
      });
      return true;
    case UnaryOp::Silu:
      map_unary(in, out, n, [](D d, V v) {
        const V one = hn::Set(d, 1.0f);
        return hn::Div(v, hn::Add(one, hn::Exp(d, hn::Neg(v))));
      });
      return true;
    case UnaryOp::GeluTanh:
      map_unary(in, out, n, [](D d, V x) {
        const V inner = hn::Mul(hn::Set(d, 0.7978845608028654f),
                                hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), hn::Mul(x, x)), x, x));
        return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), hn::Tanh(d, inner)));
      });
      return true;
    case UnaryOp::Gelu: map_unary(in, out, n, [](D d, V x) { return GeluErf(d, x); }); return true;
    default: return false;
  }
}

bool BinaryF32(BinaryOp op, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out, size_t n,
               float alpha) {
  if (op != BinaryOp::Add && op != BinaryOp::Sub && op != BinaryOp::Mul && op != BinaryOp::Div) return false;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto va_s = hn::Set(d, a[0]), vb_s = hn::Set(d, b[0]), valpha = hn::Set(d, alpha);
  auto apply = [&](auto x, auto y) {
    switch (op) {
      case BinaryOp::Add: return hn::MulAdd(valpha, y, x);
      case BinaryOp::Sub: return hn::NegMulAdd(valpha, y, x);
      case BinaryOp::Mul: return hn::Mul(x, y);
      default: return hn::Div(x, y);
    }
  };
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto x = a_scalar ? va_s : hn::LoadU(d, a + i);
    const auto y = b_scalar ? vb_s : hn::LoadU(d, b + i);
    hn::StoreU(apply(x, y), d, out + i);
  }
  if (i < n) {
    const size_t rest = n - i;
    const auto m = hn::FirstN(d, rest);
    const auto x = a_scalar ? va_s : hn::MaskedLoad(m, d, a + i);
    const auto y = b_scalar ? vb_s : hn::MaskedLoad(m, d, b + i);
    hn::BlendedStore(apply(x, y), m, d, out + i);
  }
  return true;
}

// Four vector accumulators per block of 4096, blocks summed in double: close to
// pairwise summation accuracy at memory speed.
double SumF32(const float* in, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  double total = 0.0;
  for (size_t base = 0; base < n; base += 4096) {
    const size_t m = std::min<size_t>(4096, n - base);
    const float* p = in + base;
    auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    size_t i = 0;
    for (; i + 4 * L <= m; i += 4 * L) {
      s0 = hn::Add(s0, hn::LoadU(d, p + i));
      s1 = hn::Add(s1, hn::LoadU(d, p + i + L));
      s2 = hn::Add(s2, hn::LoadU(d, p + i + 2 * L));
      s3 = hn::Add(s3, hn::LoadU(d, p + i + 3 * L));
    }
    for (; i + L <= m; i += L) s0 = hn::Add(s0, hn::LoadU(d, p + i));
    if (i < m) s1 = hn::Add(s1, hn::MaskedLoad(hn::FirstN(d, m - i), d, p + i));
    total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)))));
  }
  return total;
}

void AccumulateF64(const float* HWY_RESTRICT in, double* HWY_RESTRICT acc, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // half a vector of floats, one per double lane
  const size_t L = hn::Lanes(dd);
  size_t j = 0;
  for (; j + L <= n; j += L) hn::StoreU(hn::Add(hn::LoadU(dd, acc + j), hn::PromoteTo(dd, hn::LoadU(df, in + j))), dd, acc + j);
  for (; j < n; ++j) acc[j] += static_cast<double>(in[j]);
}

void BoxMullerF32(const float* HWY_RESTRICT u1, const float* HWY_RESTRICT u2, float* HWY_RESTRICT cos_out,
                  float* HWY_RESTRICT sin_out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const auto minus_two = hn::Set(d, -2.0f), two_pi = hn::Set(d, 6.283185307179586f);
  // the tail through the same vector math (masked), so a value does not depend on where its
  // pair falls in a call
  for (size_t j = 0; j < n; j += L) {
    const auto m = hn::FirstN(d, n - j);
    const auto radius = hn::Sqrt(hn::Mul(minus_two, hn::Log(d, hn::IfThenElse(m, hn::MaskedLoad(m, d, u1 + j), hn::Set(d, 1.0f)))));
    const auto angle = hn::Mul(two_pi, hn::MaskedLoad(m, d, u2 + j));
    hn::BlendedStore(hn::Mul(radius, hn::Cos(d, angle)), m, d, cos_out + j);
    hn::BlendedStore(hn::Mul(radius, hn::Sin(d, angle)), m, d, sin_out + j);
  }
}

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

// load_w for dot_rows / axpy_rows over bfloat16 weights: promoted in registers (no widened copy).
HWY_INLINE auto bf16_loader(const hwy::bfloat16_t* HWY_RESTRICT w) {
  return [w](auto d, size_t i) {
    const hn::Rebind<hwy::bfloat16_t, decltype(d)> dbf;
    return hn::PromoteTo(d, hn::LoadU(dbf, w + i));
  };
}

// Highway's float16 conversions are IEEE (nearest even, inf, NaN) only through
// F16C (AVX2 targets and up); its fallback for older targets truncates and
// mishandles inf and NaN, so those targets convert lane by lane with kiln::bits.
#undef KILN_SIMD_F16C  // this file is compiled once per target
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
#define KILN_SIMD_F16C 1
#endif

// load_w for dot_rows over float16 weights: promoted in registers.
HWY_INLINE auto f16_loader(const uint16_t* HWY_RESTRICT w) {
  return [w](auto d, size_t i) {
#ifdef KILN_SIMD_F16C
    const hn::Rebind<hwy::float16_t, decltype(d)> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w + i)));
#else
    HWY_ALIGN float f[hn::MaxLanes(d)];
    for (size_t j = 0; j < hn::Lanes(d); ++j) f[j] = kiln::bits::f16_to_f32(w[i + j]);
    return hn::Load(d, f);
#endif
  };
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
    for (size_t k = 0; k < KG; ++k) {
      const auto weight = row(s + k).second;
      for (int r = 0; r < R; ++r) {
        float tail = 0.0f;
        for (size_t j = i; j < dim; ++j) tail += weight(j) * q[r * dim + j];
        scores[r * score_stride + s + k] = hn::GetLane(hn::SumOfLanes(d, acc[k][r])) + tail;
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

// float8_e4m3fn codes (L of them from p) decoded in registers with integer ops:
// normals move their 7 magnitude bits under float's exponent and add the bias
// difference (120); subnormals (exponent 0) are m * 2^-9; 0x7f/0xff are NaN. No
// float subnormal is ever formed (on x86 those cost a microcode assist each).
template <class D>
HWY_INLINE hn::Vec<D> load_e4m3(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const auto b = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(d8, p)));
  const auto mag = hn::And(b, hn::Set(di, 0x7f));
  const auto normal = hn::BitCast(d, hn::Add(hn::ShiftLeft<20>(mag), hn::Set(di, 120 << 23)));
  const auto sub = hn::Mul(hn::ConvertTo(d, mag), hn::Set(d, 0.001953125f));  // 2^-9
  auto v = hn::IfThenElse(hn::RebindMask(d, hn::Lt(mag, hn::Set(di, 8))), sub, normal);
  v = hn::IfThenElse(hn::RebindMask(d, hn::Eq(mag, hn::Set(di, 0x7f))),
                     hn::Set(d, std::numeric_limits<float>::quiet_NaN()), v);
  return hn::Or(v, hn::BitCast(d, hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)))));  // sign, NaN's too
}

// L float8_e5m2 codes from p as their exact float32 (a NaN made quiet, as kiln::bits).
template <class D>
HWY_INLINE hn::Vec<D> load_e5m2(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const auto b = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(hn::Rebind<uint8_t, D>(), p)));
  const auto mag = hn::And(b, hn::Set(di, 0x7f));
  const auto normal = hn::BitCast(d, hn::Add(hn::ShiftLeft<21>(mag), hn::Set(di, 112 << 23)));
  const auto sub = hn::Mul(hn::ConvertTo(d, mag), hn::Set(d, 1.52587890625e-05f));  // 2^-16
  const auto inf_nan = hn::Or(hn::ShiftLeft<21>(mag), hn::Set(di, 0x7f800000));
  const auto quiet = hn::IfThenElseZero(hn::Gt(mag, hn::Set(di, 0x7c)), hn::Set(di, 0x400000));
  auto v = hn::IfThenElse(hn::RebindMask(d, hn::Lt(mag, hn::Set(di, 4))), sub, normal);
  v = hn::IfThenElse(hn::RebindMask(d, hn::Gt(mag, hn::Set(di, 0x7b))), hn::BitCast(d, hn::Or(inf_nan, quiet)), v);
  return hn::Or(v, hn::BitCast(d, hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)))));
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

// ---- casts: the rules of kiln::bits (scalar_types.h) in integer lanes, bit for bit ----
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;

// float32 bits -> bfloat16 bits in the low half of each lane (nearest even, NaN 0x7fc0).
HWY_INLINE hn::Vec<DI> bf16_codes(hn::Vec<DU> x) {
  const DU du;
  const DI di;
  const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u)))));
  const auto mag = hn::BitCast(di, hn::And(x, hn::Set(du, 0x7fffffffu)));
  return hn::IfThenElse(hn::Gt(mag, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7fc0), hn::BitCast(di, rounded));
}

// float32 bits -> the codes of a float8 with M mantissa bits and exponent bias
// kBias, in the low byte of each lane, nearest even; magnitudes above the float32
// bits `over` give `over_code`, NaN gives 0x7f.
template <int M, int kBias>
HWY_INLINE hn::Vec<DI> f8_codes(hn::Vec<DU> x, int32_t over, int32_t over_code) {
  constexpr int kShift = 23 - M, kUnitExp = 1 - kBias - M;  // the subnormal unit is 2^kUnitExp
  const DF df;
  const DI di;
  const auto sign = hn::And(hn::BitCast(di, hn::ShiftRight<24>(x)), hn::Set(di, 0x80));
  const auto a = hn::BitCast(di, hn::And(x, hn::Set(DU(), 0x7fffffffu)));
  // below the smallest normal: adding 2^(23 + kUnitExp) lets the FPU round to the subnormal unit
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, static_cast<float>(1 << (23 + kUnitExp))))),
                           hn::Set(di, (127 + 23 + kUnitExp) << 23));
  const auto odd = hn::And(hn::ShiftRight<kShift>(a), hn::Set(di, 1));
  const auto normal =
      hn::ShiftRight<kShift>(hn::Add(hn::Add(a, hn::Set(di, -((127 - kBias) << 23) + (1 << (kShift - 1)) - 1)), odd));
  auto code = hn::IfThenElse(hn::Lt(a, hn::Set(di, (128 - kBias) << 23)), sub, normal);
  code = hn::IfThenElse(hn::Gt(a, hn::Set(di, over)), hn::Set(di, over_code), code);
  code = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7f), code);  // NaN
  return hn::Or(code, sign);
}

// e4m3fn: past 464 (the midpoint above 448), 448 when saturating, else NaN
HWY_INLINE hn::Vec<DI> e4m3_codes(hn::Vec<DU> x, bool saturate) {
  return f8_codes<3, 7>(x, 0x43e80000, saturate ? 0x7e : 0x7f);
}
// e5m2: from 2^16 (past 57344 + half a step) on, inf
HWY_INLINE hn::Vec<DI> e5m2_codes(hn::Vec<DU> x) { return f8_codes<2, 15>(x, (143 << 23) - 1, 0x7c); }

HWY_INLINE hn::Vec<DU> load_f32_bits(const float* p) { return hn::BitCast(DU(), hn::LoadU(DF(), p)); }
HWY_INLINE hn::Vec<DU> load_bf16_bits(const uint16_t* p) {
  return hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(hn::Rebind<uint16_t, DU>(), p)));
}
HWY_INLINE void store_u16(hn::Vec<DI> codes, uint16_t* p) { hn::StoreU(hn::DemoteTo(hn::Rebind<uint16_t, DI>(), codes), hn::Rebind<uint16_t, DI>(), p); }
HWY_INLINE void store_u8(hn::Vec<DI> codes, uint8_t* p) { hn::StoreU(hn::DemoteTo(hn::Rebind<uint8_t, DI>(), codes), hn::Rebind<uint8_t, DI>(), p); }

// Whole vectors through `vec(i)`, the rest through `one(i)`.
template <class Vec, class One>
HWY_INLINE void cast_loop(size_t n, Vec vec, One one) {
  const size_t L = hn::Lanes(DF());
  size_t i = 0;
  for (; i + L <= n; i += L) vec(i);
  for (; i < n; ++i) one(i);
}

bool CastRun(DType dst, void* HWY_RESTRICT out, DType src, const void* HWY_RESTRICT in, size_t n, bool saturate) {
  namespace kb = kiln::bits;
  const auto* f32 = static_cast<const float*>(in);
  const auto* u16 = static_cast<const uint16_t*>(in);
  const auto* u8 = static_cast<const uint8_t*>(in);
  if (dst == DType::BFloat16 && src == DType::Float32) {
    auto* o = static_cast<uint16_t*>(out);
    cast_loop(n, [&](size_t i) { store_u16(bf16_codes(load_f32_bits(f32 + i)), o + i); },
              [&](size_t i) { o[i] = kb::bf16_from_f32(f32[i]); });
  } else if (dst == DType::Float32 && src == DType::BFloat16) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(hn::BitCast(DF(), load_bf16_bits(u16 + i)), DF(), o + i); },
              [&](size_t i) { o[i] = kb::bf16_to_f32(u16[i]); });
  } else if (dst == DType::Float8_e4m3fn && src == DType::Float32) {
    auto* o = static_cast<uint8_t*>(out);
    cast_loop(n, [&](size_t i) { store_u8(e4m3_codes(load_f32_bits(f32 + i), saturate), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_from_f32(f32[i], saturate); });
  } else if (dst == DType::Float8_e4m3fn && src == DType::BFloat16) {
    auto* o = static_cast<uint8_t*>(out);
    cast_loop(n, [&](size_t i) { store_u8(e4m3_codes(load_bf16_bits(u16 + i), saturate), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_from_f32(kb::bf16_to_f32(u16[i]), saturate); });
  } else if (dst == DType::Float32 && src == DType::Float8_e4m3fn) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(load_e4m3(DF(), u8 + i), DF(), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_to_f32(u8[i]); });
  } else if (dst == DType::BFloat16 && src == DType::Float8_e4m3fn) {
    auto* o = static_cast<uint16_t*>(out);
    cast_loop(n, [&](size_t i) { store_u16(bf16_codes(hn::BitCast(DU(), load_e4m3(DF(), u8 + i))), o + i); },
              [&](size_t i) { o[i] = kb::bf16_from_f32(kb::e4m3fn_to_f32(u8[i])); });
  } else if (dst == DType::Float8_e5m2 && (src == DType::Float32 || src == DType::BFloat16)) {
    auto* o = static_cast<uint8_t*>(out);
    if (src == DType::Float32)
      cast_loop(n, [&](size_t i) { store_u8(e5m2_codes(load_f32_bits(f32 + i)), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_from_f32(f32[i]); });
    else
      cast_loop(n, [&](size_t i) { store_u8(e5m2_codes(load_bf16_bits(u16 + i)), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_from_f32(kb::bf16_to_f32(u16[i])); });
  } else if (src == DType::Float8_e5m2 && (dst == DType::Float32 || dst == DType::BFloat16)) {
    if (dst == DType::Float32) {
      auto* o = static_cast<float*>(out);
      cast_loop(n, [&](size_t i) { hn::StoreU(load_e5m2(DF(), u8 + i), DF(), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_to_f32(u8[i]); });
    } else {
      auto* o = static_cast<uint16_t*>(out);
      cast_loop(n, [&](size_t i) { store_u16(bf16_codes(hn::BitCast(DU(), load_e5m2(DF(), u8 + i))), o + i); },
                [&](size_t i) { o[i] = kb::bf16_from_f32(kb::e5m2_to_f32(u8[i])); });
    }
#ifdef KILN_SIMD_F16C
  } else if (dst == DType::Float32 && src == DType::Float16) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(f16_loader(u16)(DF(), i), DF(), o + i); },
              [&](size_t i) { o[i] = kb::f16_to_f32(u16[i]); });
  } else if (dst == DType::Float16 && src == DType::Float32) {
    auto* o = static_cast<uint16_t*>(out);
    const hn::Rebind<hwy::float16_t, DF> dh;
    cast_loop(n, [&](size_t i) {
                auto v = hn::LoadU(DF(), f32 + i);
                // a NaN becomes the quiet NaN of its sign first, as kiln::bits gives (sign | 0x7e00)
                v = hn::IfThenElse(hn::IsNaN(v), hn::CopySign(hn::Set(DF(), std::numeric_limits<float>::quiet_NaN()), v), v);
                hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(o + i));
              },
              [&](size_t i) { o[i] = kb::f16_from_f32(f32[i]); });
#endif
  } else {
    return false;
  }
  return true;
}

// max (is_max) or min of in[0, n); NaN when any element is NaN, as torch.amax.
float ExtremeF32(bool is_max, const float* HWY_RESTRICT in, size_t n) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const float init = is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  auto e0 = hn::Set(d, init), e1 = e0;
  auto nan = hn::Zero(d);  // all-ones lanes where a NaN was seen
  auto fold = [&](auto& e, auto v) {
    e = is_max ? hn::Max(e, v) : hn::Min(e, v);
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));  // (Ne is an ordered compare)
  };
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    fold(e0, hn::LoadU(d, in + i));
    fold(e1, hn::LoadU(d, in + i + L));
  }
  for (; i + L <= n; i += L) fold(e0, hn::LoadU(d, in + i));
  auto e = is_max ? hn::Max(e0, e1) : hn::Min(e0, e1);
  float r = hn::GetLane(is_max ? hn::MaxOfLanes(d, e) : hn::MinOfLanes(d, e));
  const bool any_nan = !hn::AllTrue(d, hn::Eq(nan, hn::Zero(d)));
  for (; i < n; ++i) {
    if (in[i] != in[i]) return std::numeric_limits<float>::quiet_NaN();
    r = is_max ? std::max(r, in[i]) : std::min(r, in[i]);
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : r;
}

// The index of the first element of in[0, n) equal to value (the first NaN when
// value is NaN); n when there is none.
size_t FindFirstF32(const float* HWY_RESTRICT in, size_t n, float value) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const bool nan = value != value;
  const auto v = hn::Set(d, value);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto x = hn::LoadU(d, in + i);
    const intptr_t j = hn::FindFirstTrue(d, nan ? hn::IsNaN(x) : hn::Eq(x, v));
    if (j >= 0) return i + static_cast<size_t>(j);
  }
  for (; i < n; ++i)
    if (nan ? in[i] != in[i] : in[i] == value) return i;
  return n;
}

}  // namespace kiln::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::simd {
HWY_EXPORT(UnaryF32);
HWY_EXPORT(BinaryF32);
HWY_EXPORT(SumF32);
HWY_EXPORT(AccumulateF64);
HWY_EXPORT(BoxMullerF32);
HWY_EXPORT(DotRowsF32);
HWY_EXPORT(DotRowsBF16);
HWY_EXPORT(DotRowsF16);
HWY_EXPORT(DotRowsE4M3);
HWY_EXPORT(DotKeysF32);
HWY_EXPORT(DotKeysBF16);
HWY_EXPORT(AxpyValuesF32);
HWY_EXPORT(AxpyValuesBF16);
HWY_EXPORT(CastRun);
HWY_EXPORT(ExtremeF32);
HWY_EXPORT(FindFirstF32);

bool unary_f32(UnaryOp op, const float* in, float* out, size_t n) {
  return HWY_DYNAMIC_DISPATCH(UnaryF32)(op, in, out, n);
}
bool binary_f32(BinaryOp op, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out, size_t n,
                float alpha) {
  return HWY_DYNAMIC_DISPATCH(BinaryF32)(op, a, a_scalar, b, b_scalar, out, n, alpha);
}
double sum_f32(const float* in, size_t n) { return HWY_DYNAMIC_DISPATCH(SumF32)(in, n); }
void accumulate_f64(const float* in, double* acc, size_t n) { HWY_DYNAMIC_DISPATCH(AccumulateF64)(in, acc, n); }
void box_muller_f32(const float* u1, const float* u2, float* cos_out, float* sin_out, size_t n) {
  HWY_DYNAMIC_DISPATCH(BoxMullerF32)(u1, u2, cos_out, sin_out, n);
}
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
bool cast_run(DType dst, void* out, DType src, const void* in, size_t n, bool saturate) {
  return HWY_DYNAMIC_DISPATCH(CastRun)(dst, out, src, in, n, saturate);
}
float extreme_f32(bool is_max, const float* in, size_t n) { return HWY_DYNAMIC_DISPATCH(ExtremeF32)(is_max, in, n); }
size_t find_first_f32(const float* in, size_t n, float value) {
  return HWY_DYNAMIC_DISPATCH(FindFirstF32)(in, n, value);
}
}  // namespace kiln::cpu::simd
#endif
