// fp8 / bf16 / fp16 conversions against an independent reference: values
// decoded with ldexp from the format's definition, and encoding by searching
// every code for the nearest value (ties to the even code).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

// value of an e4m3fn / e5m2 code from the format definition
double ref_decode(uint8_t code, int exp_bits, int man_bits, bool has_inf) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int sign = code >> 7;
  const int e = (code >> man_bits) & ((1 << exp_bits) - 1);
  const int m = code & ((1 << man_bits) - 1);
  const int emax = (1 << exp_bits) - 1;
  double v;
  if (has_inf && e == emax) {
    v = m == 0 ? INFINITY : NAN;
  } else if (!has_inf && e == emax && m == (1 << man_bits) - 1) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(m, 1 - bias - man_bits);
  } else {
    v = std::ldexp((1 << man_bits) + m, e - bias - man_bits);
  }
  return sign ? -v : v;
}

// Nearest code by search, ties to the even code. One step past the largest
// finite value sits the overflow code (480 -> 0x7f for e4m3fn, 65536 -> inf
// 0x7c for e5m2): landing there is overflow, whose result depends on the rule.
uint8_t ref_encode(float x, int eb, int mb, bool has_inf, bool saturate) {
  if (std::isnan(x)) return std::signbit(x) ? 0xff : 0x7f;
  const int over_code = has_inf ? 0x7c : 0x7f;
  const double over_value = has_inf ? 65536.0 : 480.0;
  const double ax = std::fabs(static_cast<double>(x));
  int best = over_code;
  double best_d = std::isinf(x) ? 0 : std::fabs(ax - over_value);
  if (!std::isinf(x) && ax <= over_value) {
    for (int c = 0; c < 128; ++c) {
      const double v = ref_decode(c, eb, mb, has_inf);
      if (!std::isfinite(v)) continue;
      const double d = std::fabs(ax - v);
      if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) {
        best_d = d;
        best = c;
      }
    }
  }
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (best == over_code) return sign | (has_inf ? 0x7c : (saturate ? 0x7e : 0x7f));
  return sign | best;
}

std::vector<float> probe_values(int eb, int mb, bool has_inf) {
  std::vector<float> xs;
  std::vector<double> vals;
  for (int c = 0; c < 128; ++c) {
    double v = ref_decode(c, eb, mb, has_inf);
    if (std::isfinite(v)) vals.push_back(v);
  }
  for (size_t i = 0; i < vals.size(); ++i) {
    xs.push_back(static_cast<float>(vals[i]));
    if (i + 1 < vals.size()) {
      const float mid = static_cast<float>((vals[i] + vals[i + 1]) / 2);  // exact tie
      xs.push_back(mid);
      xs.push_back(std::nextafter(mid, 0.f));
      xs.push_back(std::nextafter(mid, INFINITY));
    }
  }
  for (float f : {448.f, 464.f, 465.f, 479.f, 480.f, 500.f, 57344.f, 61440.f, 61441.f, 65536.f, 1e30f,
                  std::numeric_limits<float>::max(), INFINITY, 1e-10f, 0.f})
    xs.push_back(f);
  std::vector<float> all;
  for (float x : xs) {
    all.push_back(x);
    all.push_back(-x);
  }
  return all;
}

}  // namespace

TEST(Float8, E4M3AllCodesDecode) {
  for (int c = 0; c < 256; ++c) {
    const double ref = ref_decode(c, 4, 3, false);
    const float got = bits::e4m3fn_to_f32(c);
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(got)) << c;
    else EXPECT_EQ(got, ref) << "code " << c;
  }
  EXPECT_EQ(bits::e4m3fn_to_f32(0x7e), 448.0f);
}

TEST(Float8, E5M2AllCodesDecode) {
  for (int c = 0; c < 256; ++c) {
    const double ref = ref_decode(c, 5, 2, true);
    const float got = bits::e5m2_to_f32(c);
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(got)) << c;
    else EXPECT_EQ(got, ref) << "code " << c;
  }
}

TEST(Float8, E4M3EncodeRoundTripAndTies) {
  for (bool sat : {true, false})
    for (float x : probe_values(4, 3, false)) {
      const uint8_t got = bits::e4m3fn_from_f32(x, sat);
      const uint8_t ref = ref_encode(x, 4, 3, false, sat);
      EXPECT_EQ(got, ref) << "x=" << x << " saturate=" << sat;
    }
  // every code back to itself
  for (int c = 0; c < 256; ++c) {
    if (std::isnan(bits::e4m3fn_to_f32(c))) continue;
    EXPECT_EQ(bits::e4m3fn_from_f32(bits::e4m3fn_to_f32(c), true), c);
  }
}

TEST(Float8, E4M3OverflowRules) {
  EXPECT_EQ(bits::e4m3fn_from_f32(INFINITY, true), 0x7e);
  EXPECT_EQ(bits::e4m3fn_from_f32(-INFINITY, true), 0xfe);
  EXPECT_EQ(bits::e4m3fn_from_f32(1e6f, true), 0x7e);
  EXPECT_EQ(bits::e4m3fn_from_f32(464.f, false), 0x7e);  // tie to even: 448
  EXPECT_EQ(bits::e4m3fn_from_f32(465.f, false), 0x7f);  // NaN in the old rule
  EXPECT_EQ(bits::e4m3fn_from_f32(INFINITY, false), 0x7f);
  EXPECT_TRUE(std::isnan(bits::e4m3fn_to_f32(bits::e4m3fn_from_f32(NAN, true))));
}

TEST(Float8, E5M2EncodeKeepsInfinity) {
  for (float x : probe_values(5, 2, true)) EXPECT_EQ(bits::e5m2_from_f32(x), ref_encode(x, 5, 2, true, false)) << x;
  EXPECT_EQ(bits::e5m2_from_f32(INFINITY), 0x7c);
  EXPECT_EQ(bits::e5m2_from_f32(1e6f), 0x7c);
}

TEST(HalfTypes, MatchNearestEvenOnRandomFloats) {
  // bf16: truncation plus rounding checked against the exact neighbours in double
  uint32_t s = 12345;
  for (int i = 0; i < 200000; ++i) {
    s = s * 1664525u + 1013904223u;
    float x;
    uint32_t u = s;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    const uint16_t b = bits::bf16_from_f32(x);
    const double lo = bits::bf16_to_f32(u >> 16);
    // one step past the largest finite value is infinity, which rounding treats as 2^128
    double hi = bits::bf16_to_f32((u >> 16) + 1);
    if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), hi);
    const double ax = x;
    const uint16_t lo_code = u >> 16;
    const double dlo = std::fabs(ax - lo), dhi = std::fabs(hi - ax);
    const uint16_t want = (dlo < dhi || (dlo == dhi && (lo_code & 1) == 0)) ? lo_code : lo_code + 1;
    ASSERT_EQ(b, want) << x;
    // float16 against _Float16 (the compiler's IEEE conversion)
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(bits::f16_from_f32(x), hb) << x;
    ASSERT_EQ(bits::f16_to_f32(hb), static_cast<float>(h));
  }
}

TEST(DType, PromotionFollowsTorch) {
  EXPECT_EQ(promote_types(uint8, int8), int16);
  EXPECT_EQ(promote_types(bfloat16, float16), float32);
  EXPECT_EQ(promote_types(int64, float16), float16);
  EXPECT_EQ(promote_types(bool_, int32), int32);
  EXPECT_THROW(promote_types(float8_e4m3fn, float32), Error);
  EXPECT_THROW(promote_types(uint32, int32), Error);
  EXPECT_EQ(dtype_from_name("torch.bfloat16"), bfloat16);
  EXPECT_THROW(dtype_from_name("float64x"), Error);
}

TEST(DType, TensorCastsSaturateOption) {
  auto t = Tensor::from_vector<float>({500.f, -INFINITY, NAN, 1.0f}, {4}, float32);
  auto sat = t.to(float8_e4m3fn, true).view(uint8).tolist<int>();
  auto nosat = t.to(float8_e4m3fn, false).view(uint8).tolist<int>();
  EXPECT_EQ(sat, (std::vector<int>{0x7e, 0xfe, 0x7f, 0x38}));
  EXPECT_EQ(nosat, (std::vector<int>{0x7f, 0xff, 0x7f, 0x38}));
}

// Contiguous casts run through Highway (cpu/simd_cast.cpp); element for element they must give
// the scalar rules' bits (checked above against the exact reference), whole vectors and tails.
TEST(DType, VectorisedCastsMatchScalarRules) {
  std::vector<float> xs = probe_values(4, 3, false);
  for (float v : probe_values(5, 2, true)) xs.push_back(v);  // e5m2's codes, midpoints and neighbours
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1e-40f, 3.4e38f, -3.4e38f}) xs.push_back(v);
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) {  // a sweep over every exponent, both signs
    float f;
    const uint32_t b = static_cast<uint32_t>(u);
    std::memcpy(&f, &b, 4);
    xs.push_back(f);
  }
  xs.push_back(1.5f);  // an odd count leaves a tail for the scalar loop
  auto x = Tensor::from_vector<float>(xs, {static_cast<int64_t>(xs.size())}, float32);
  for (bool sat : {true, false}) {
    const auto e4 = x.to(float8_e4m3fn, sat).view(uint8).tolist<int>();
    for (size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(e4[i], bits::e4m3fn_from_f32(xs[i], sat)) << "x=" << xs[i] << " saturate=" << sat;
  }
  const auto bf = x.to(bfloat16).view(int16).tolist<int>();
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(static_cast<uint16_t>(bf[i]), bits::bf16_from_f32(xs[i])) << "x=" << xs[i];

  // every bfloat16 code: to float32 and to e4m3
  std::vector<int16_t> codes(1 << 16);
  for (int c = 0; c < (1 << 16); ++c) codes[c] = static_cast<int16_t>(c);
  auto b16 = Tensor::from_vector<int16_t>(codes, {1 << 16}, int16).view(bfloat16);
  const auto f = b16.to(float32).view(int32).tolist<int64_t>();
  for (bool sat : {true, false}) {
    const auto e4 = b16.to(float8_e4m3fn, sat).view(uint8).tolist<int>();
    for (int c = 0; c < (1 << 16); ++c)
      ASSERT_EQ(e4[c], bits::e4m3fn_from_f32(bits::bf16_to_f32(c), sat)) << "bf16 code " << c << " saturate=" << sat;
  }
  for (int c = 0; c < (1 << 16); ++c) ASSERT_EQ(static_cast<uint32_t>(f[c]), static_cast<uint32_t>(c) << 16) << c;

  // every e4m3 code, three times over so that vectors and the tail both see each
  std::vector<uint8_t> e(3 * 256 + 5);
  for (size_t i = 0; i < e.size(); ++i) e[i] = static_cast<uint8_t>(i * 7 + i / 256);
  auto e8 = Tensor::from_vector<uint8_t>(e, {static_cast<int64_t>(e.size())}, uint8).view(float8_e4m3fn);
  const auto ef = e8.to(float32).view(int32).tolist<int64_t>();
  const auto eb = e8.to(bfloat16).view(int16).tolist<int>();
  for (size_t i = 0; i < e.size(); ++i) {
    const float want = bits::e4m3fn_to_f32(e[i]);  // NaN keeps its sign, as on the GPU
    ASSERT_EQ(static_cast<uint32_t>(ef[i]), bits::f32_bits(want)) << int(e[i]);
    ASSERT_EQ(static_cast<uint16_t>(eb[i]), bits::bf16_from_f32(want)) << int(e[i]);
  }

  // float8_e5m2 from float32 and bfloat16, and every e5m2 code back (three times over, with a tail)
  const auto e5 = x.to(float8_e5m2).view(uint8).tolist<int>();
  const auto e5b = x.to(bfloat16).to(float8_e5m2).view(uint8).tolist<int>();
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(e5[i], bits::e5m2_from_f32(xs[i])) << "x=" << xs[i];
    ASSERT_EQ(e5b[i], bits::e5m2_from_f32(bits::bf16_to_f32(bits::bf16_from_f32(xs[i])))) << "x=" << xs[i];
  }
  auto e52 = Tensor::from_vector<uint8_t>(e, {static_cast<int64_t>(e.size())}, uint8).view(float8_e5m2);
  const auto e5f = e52.to(float32).view(int32).tolist<int64_t>();
  const auto e5bf = e52.to(bfloat16).view(int16).tolist<int>();
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_EQ(static_cast<uint32_t>(e5f[i]), bits::f32_bits(bits::e5m2_to_f32(e[i]))) << int(e[i]);
    ASSERT_EQ(static_cast<uint16_t>(e5bf[i]), bits::bf16_from_f32(bits::e5m2_to_f32(e[i]))) << int(e[i]);
  }

  // float16 both ways (F16C on x86): the sweep's floats, NaN payloads among them
  const auto h = x.to(float16).view(int16).tolist<int>();
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(static_cast<uint16_t>(h[i]), bits::f16_from_f32(xs[i])) << "x=" << xs[i];
  // and every float16 code, signalling NaNs included, with a tail
  std::vector<int16_t> hcodes((1 << 16) + 5);
  for (size_t c = 0; c < hcodes.size(); ++c) hcodes[c] = static_cast<int16_t>(c);
  const auto hf = Tensor::from_vector<int16_t>(hcodes, {static_cast<int64_t>(hcodes.size())}, int16)
                      .view(float16).to(float32).view(int32).tolist<int64_t>();
  for (size_t c = 0; c < hcodes.size(); ++c)
    ASSERT_EQ(static_cast<uint32_t>(hf[c]), bits::f32_bits(bits::f16_to_f32(static_cast<uint16_t>(hcodes[c])))) << c;
}

// float16 NaN widens to a quiet NaN that keeps sign and payload, as F16C and PyTorch give
TEST(HalfTypes, Float16NaNWidensQuiet) {
  EXPECT_EQ(bits::f32_bits(bits::f16_to_f32(0x7c01)), 0x7fc02000u);  // signalling -> quiet
  EXPECT_EQ(bits::f32_bits(bits::f16_to_f32(0xfe00)), 0xffc00000u);  // quiet stays quiet
  EXPECT_EQ(bits::f32_bits(bits::f16_to_f32(0x7c00)), 0x7f800000u);  // inf stays inf
  EXPECT_EQ(bits::f16_from_f32(bits::f16_to_f32(0x7c01)), 0x7e00);   // and narrows to the canonical NaN
}

// amax/amin of floats run through Highway: NaN anywhere wins, +-inf and -0 behave as torch's
TEST(DType, VectorisedExtremesMatchLoop) {
  for (int n : {1, 7, 8, 33, 1000, 70000}) {
    std::vector<float> v(n);
    uint32_t s = 99u + n;
    for (auto& x : v) {
      s = s * 1664525u + 1013904223u;
      x = static_cast<float>(static_cast<int32_t>(s)) * 1e-7f;
    }
    auto t = Tensor::from_vector<float>(v, {n}, float32);
    EXPECT_EQ(amax(t).item<float>(), *std::max_element(v.begin(), v.end())) << n;
    EXPECT_EQ(amin(t).item<float>(), *std::min_element(v.begin(), v.end())) << n;
    EXPECT_EQ(amax(t.to(bfloat16)).item<float>(), bits::bf16_to_f32(bits::bf16_from_f32(*std::max_element(v.begin(), v.end())))) << n;
    v[n / 2] = INFINITY;
    EXPECT_EQ(amax(Tensor::from_vector<float>(v, {n}, float32)).item<float>(), INFINITY) << n;
    v[n - 1] = NAN;
    EXPECT_TRUE(std::isnan(amax(Tensor::from_vector<float>(v, {n}, float32)).item<float>())) << n;
    EXPECT_TRUE(std::isnan(amin(Tensor::from_vector<float>(v, {n}, float32).to(bfloat16)).item<float>())) << n;
  }
}

// dtype_of is dtype_traits read backwards, for every dtype (a wrong or missing
// entry fails the build here), and ignores const.
template <int... I>
constexpr bool dtype_of_inverts_traits(std::integer_sequence<int, I...>) {
  return ((dtype_of<typename dtype_traits<static_cast<DType>(I)>::type>() == static_cast<DType>(I)) && ...);
}
static_assert(dtype_of_inverts_traits(std::make_integer_sequence<int, kNumDTypes>{}));
static_assert(dtype_of<const float>() == DType::Float32 && dtype_of<int64_t>() == DType::Int64 &&
              dtype_of<BFloat16>() == DType::BFloat16 && dtype_of<std::complex<float>>() == DType::Complex64);

TEST(DType, DtypeOfNamesTheTensorDtype) {
  EXPECT_EQ(Tensor::from_vector(std::vector<float>{1, 2}, {2}, dtype_of<float>(), kCPU).dtype(), DType::Float32);
  EXPECT_EQ(dtype_of<Float8_e5m2>(), DType::Float8_e5m2);
  EXPECT_EQ(dtype_of<uint16_t>(), DType::UInt16);
}
