// Highway kernels over contiguous float32 runs: unary and binary maps, sums,
// Box-Muller, max/min and search (src/cpu/simd.h).
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

void Accumulate4F64(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, const float* HWY_RESTRICT c,
                    const float* HWY_RESTRICT d, double* HWY_RESTRICT acc, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t L = hn::Lanes(dd);
  const auto wide = [&](const float* p, size_t j) { return hn::PromoteTo(dd, hn::LoadU(df, p + j)); };
  size_t j = 0;
  for (; j + L <= n; j += L) {
    const auto s = hn::Add(hn::Add(wide(a, j), wide(b, j)), hn::Add(wide(c, j), wide(d, j)));
    hn::StoreU(hn::Add(hn::LoadU(dd, acc + j), s), dd, acc + j);
  }
  for (; j < n; ++j) {
    const auto w = [&](const float* p) { return static_cast<double>(p[j]); };
    acc[j] += (w(a) + w(b)) + (w(c) + w(d));
  }
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

// max (is_max) or min of in[0, n); NaN when any element is NaN, as torch.amax.
float ExtremeF32(bool is_max, const float* HWY_RESTRICT in, size_t n) {
  const hn::ScalableTag<float> d;
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
  const hn::ScalableTag<float> d;
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
HWY_EXPORT(Accumulate4F64);
HWY_EXPORT(BoxMullerF32);
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
void accumulate4_f64(const float* a, const float* b, const float* c, const float* d, double* acc, size_t n) {
  HWY_DYNAMIC_DISPATCH(Accumulate4F64)(a, b, c, d, acc, n);
}
void box_muller_f32(const float* u1, const float* u2, float* cos_out, float* sin_out, size_t n) {
  HWY_DYNAMIC_DISPATCH(BoxMullerF32)(u1, u2, cos_out, sin_out, n);
}
float extreme_f32(bool is_max, const float* in, size_t n) { return HWY_DYNAMIC_DISPATCH(ExtremeF32)(is_max, in, n); }
size_t find_first_f32(const float* in, size_t n, float value) {
  return HWY_DYNAMIC_DISPATCH(FindFirstF32)(in, n, value);
}
}  // namespace kiln::cpu::simd
#endif
