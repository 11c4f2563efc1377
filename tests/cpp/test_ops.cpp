// Ops on the CPU against element-by-element references computed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/allocator.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {
std::vector<double> vals(const Tensor& t) { return t.tolist<double>(); }

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
  }
}
}  // namespace

TEST(Elementwise, UnaryMatchesLibm) {
  Generator g(7);
  auto x = randn({1000}, float32, kCPU, &g);
  auto xp = add(abs(x), 0.01);
  const auto xv = vals(x), pv = vals(xp);
  auto ref = [&](const std::vector<double>& in, std::function<double(double)> f) {
    std::vector<double> r;
    for (double v : in) r.push_back(f(v));
    return r;
  };
  expect_close(vals(exp(x)), ref(xv, [](double v) { return std::exp(v); }), 2e-6, 0);
  expect_close(vals(log(xp)), ref(pv, [](double v) { return std::log(v); }), 2e-6, 1e-7);
  expect_close(vals(sqrt(xp)), ref(pv, [](double v) { return std::sqrt(v); }), 1e-6, 0);
  expect_close(vals(rsqrt(xp)), ref(pv, [](double v) { return 1 / std::sqrt(v); }), 1e-6, 0);
  expect_close(vals(tanh(x)), ref(xv, [](double v) { return std::tanh(v); }), 2e-6, 1e-7);
  expect_close(vals(sigmoid(x)), ref(xv, [](double v) { return 1 / (1 + std::exp(-v)); }), 2e-6, 0);
  expect_close(vals(silu(x)), ref(xv, [](double v) { return v / (1 + std::exp(-v)); }), 2e-6, 1e-7);
  expect_close(vals(gelu(x)), ref(xv, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 2e-6, 1e-7);
  expect_close(vals(gelu(x, "tanh")), ref(xv, [](double v) {
                 return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
               }), 2e-6, 1e-7);
  expect_close(vals(neg(x)), ref(xv, [](double v) { return -v; }), 0, 0);
  // bf16 rounds the float32 result once
  auto xb = x.to(bfloat16);
  expect_close(vals(exp(xb)), ref(vals(xb), [](double v) { return std::exp(v); }), 8e-3, 0);
  EXPECT_THROW(gelu(x, "fast"), Error);
  EXPECT_THROW(neg(ones({2}, bool_)), Error);
  EXPECT_EQ(exp(arange(3)).dtype(), float32);
}

// GELU (erf) over a dense sweep, tails included, against 0.5 x erfc(-x / sqrt 2) in
// double (erfc: no cancellation in the negative tail, where 1 + erf would lose it all).
TEST(Elementwise, GeluSweepAndSpecialValues) {
  const int64_t n = 32001;  // -16 .. 16 in steps of 0.001
  const auto x = add(mul(arange(0, n, 1, float32), 0.001), -16.0);
  const auto xv = vals(x), got = vals(gelu(x));
  for (int64_t i = 0; i < n; ++i) {
    const double v = xv[i], want = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    // the exponent's rounding grows with x^2 in the negative tail; values there are tiny
    const double rtol = v > -5 ? 3e-6 : 2e-5;
    EXPECT_NEAR(got[i], want, 1e-37 + rtol * std::fabs(want)) << "x = " << v;
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto special = vals(gelu(Tensor::from_vector<float>({0.0f, inf, -inf, nan, 1e30f, -1e30f}, {6}, float32)));
  EXPECT_EQ(special[0], 0.0);
  EXPECT_EQ(special[1], inf);
  EXPECT_TRUE(std::isnan(special[2]));  // -inf * 0.5 * (1 + erf(-inf)), as PyTorch's formula gives
  EXPECT_TRUE(std::isnan(special[3]));
  EXPECT_EQ(special[4], 1e30f);
  EXPECT_EQ(special[5], 0.0);
}

TEST(Elementwise, BinaryBroadcastAndPromotion) {
  auto a = arange(6).view({2, 3}).to(float32);
  auto b = Tensor::from_vector<float>({10, 20, 30}, {3}, float32);
  EXPECT_EQ(vals(add(a, b)), (std::vector<double>{10, 21, 32, 13, 24, 35}));
  EXPECT_EQ(vals(sub(a, b, 2)), (std::vector<double>{-20, -39, -58, -17, -36, -55}));
  EXPECT_EQ(vals(mul(a.t(), b.view({3, 1}))), (std::vector<double>{0, 30, 20, 80, 60, 150}));
  EXPECT_EQ(div(arange(4), 2).dtype(), float32);
  EXPECT_EQ(vals(div(arange(4), 2)), (std::vector<double>{0, 0.5, 1, 1.5}));
  EXPECT_EQ(mul(arange(3), 0.5).dtype(), float32);
  EXPECT_EQ(add(ones({2}, uint8), ones({2}, int8)).dtype(), int16);
  EXPECT_EQ(add(ones({2}, bfloat16), ones({2}, float16)).dtype(), float32);
  EXPECT_EQ(add(ones({2}, bfloat16), full({}, 1.0, float32)).dtype(), bfloat16);  // 0-d does not promote
  EXPECT_EQ(vals(pow(arange(5), 3)), (std::vector<double>{0, 1, 8, 27, 64}));
  EXPECT_EQ(pow(arange(5), 3).dtype(), int64);
  auto nan = full({1}, NAN);
  EXPECT_TRUE(std::isnan(maximum(nan, ones({1})).item<double>()));
  EXPECT_THROW(add(ones({2, 3}), ones({4})), Error);
  EXPECT_THROW(add(ones({2}, float8_e4m3fn), ones({2}, float8_e4m3fn)), Error);
  EXPECT_THROW(sub(ones({2}, bool_), ones({2}, bool_)), Error);
  // large and odd-sized contiguous runs (SIMD body plus tail, threaded)
  auto big = arange(100003).to(float32);
  auto s = add(big, big, 0.5).tolist<double>();
  for (int64_t i = 0; i < 100003; i += 997) EXPECT_EQ(s[i], 1.5 * i);
}

TEST(Elementwise, UnsignedComparisonsAreRight) {
  auto u = Tensor::from_vector<uint64_t>({0, 1ull << 63, ~0ull}, {3}, uint64);
  EXPECT_EQ(gt(u, 1).tolist<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(lt(u, -1).tolist<bool>(), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(ge(u, -1).tolist<bool>(), (std::vector<bool>{true, true, true}));
  auto u8 = Tensor::from_vector<int>({0, 128, 255}, {3}, uint8);
  EXPECT_EQ(gt(u8, 127).tolist<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(lt(u8, 256).tolist<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(eq(u8, -1).tolist<bool>(), (std::vector<bool>{false, false, false}));
  auto i8 = Tensor::from_vector<int>({-1, 0, 1}, {3}, int8);
  EXPECT_EQ(lt(i8, u8).tolist<bool>(), (std::vector<bool>{true, true, true}));  // int16 compare
  auto u32 = Tensor::from_vector<uint64_t>({0, 3000000000ull}, {2}, uint32);
  EXPECT_EQ(gt(u32, Tensor::from_vector<uint64_t>({1, 5}, {2}, uint32)).tolist<bool>(),
            (std::vector<bool>{false, true}));
}

TEST(Elementwise, WhereAndFill) {
  auto c = Tensor::from_vector<bool>({true, false, true}, {3}, bool_);
  EXPECT_EQ(vals(where(c, arange(3), -1)), (std::vector<double>{0, -1, 2}));
  EXPECT_THROW(where(arange(3), arange(3), arange(3)), Error);
  EXPECT_EQ(vals(full({2}, 7, int16)), (std::vector<double>{7, 7}));
  EXPECT_EQ(vals(arange(1, 2, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(0, 10, 3).numel(), 4);
  EXPECT_THROW(arange(0, 10, 0), Error);
  EXPECT_THROW(arange(5, 0, 1), Error);
}

TEST(Reduce, MatchNaiveLoops) {
  Generator g(3);
  auto x = randn({4, 5, 6}, float32, kCPU, &g);
  const auto v = vals(x);
  auto at = [&](int i, int j, int k) { return v[(i * 5 + j) * 6 + k]; };
  // sum over dims {0, 2}
  std::vector<double> want(5, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) want[j] += at(i, j, k);
  expect_close(vals(sum(x, {0, 2})), want, 1e-5, 1e-5);
  EXPECT_EQ(sum(x, {0, 2}, true).shape(), (Shape{1, 5, 1}));
  // mean over dim 0 (outer: the strided path)
  std::vector<double> m(30, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 30; ++j) m[j] += v[i * 30 + j] / 4;
  expect_close(vals(mean(x, {0})), m, 1e-5, 1e-6);
  // max/argmax over dim 1 of a transposed view
  auto xt = x.transpose(1, 2);  // [4, 6, 5]
  auto [mv, mi] = max(xt, 2);
  auto mvv = vals(mv), miv = vals(mi);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 6; ++k) {
      int best = 0;
      for (int j = 1; j < 5; ++j)
        if (at(i, j, k) > at(i, best, k)) best = j;
      EXPECT_EQ(miv[i * 6 + k], best);
      EXPECT_EQ(mvv[i * 6 + k], at(i, best, k));
    }
  EXPECT_EQ(argmin(x).item<int64_t>(), std::min_element(v.begin(), v.end()) - v.begin());
  EXPECT_EQ(sum(arange(101)).item<int64_t>(), 5050);
  EXPECT_EQ(sum(ones({3}, int8)).dtype(), int64);
  EXPECT_EQ(prod(arange(1, 6)).item<int64_t>(), 120);
  EXPECT_EQ(amax(Tensor::from_vector<int>({3, 250, 7}, {3}, uint8)).item<int>(), 250);
  EXPECT_THROW(mean(arange(3)), Error);
  EXPECT_THROW(sum(x, {3}), Error);
  EXPECT_THROW(sum(x, {1, -2}), Error);
  // first index among ties, NaN wins
  auto t = Tensor::from_vector<float>({1, 5, 5, 2}, {4}, float32);
  EXPECT_EQ(argmax(t).item<int64_t>(), 1);
  auto n = Tensor::from_vector<float>({1, NAN, 5, NAN}, {4}, float32);
  EXPECT_EQ(argmax(n).item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(amax(n).item<double>()));
  // a long row: blocked float32 summation stays accurate
  auto big = ones({1 << 22}, float32);
  EXPECT_EQ(sum(big).item<double>(), static_cast<double>(1 << 22));
}

TEST(Matmul, MatchesTripleLoop) {
  Generator g(11);
  for (DType dt : {float32, bfloat16, float16}) {
    auto a = randn({3, 4, 5}, float32, kCPU, &g).to(dt);
    auto b = randn({5, 2}, float32, kCPU, &g).to(dt);
    auto c = matmul(a, b);
    ASSERT_EQ(c.shape(), (Shape{3, 4, 2}));
    const auto av = vals(a), bv = vals(b), cv = vals(c);
    for (int bi = 0; bi < 3; ++bi)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) {
          double s = 0;
          for (int k = 0; k < 5; ++k) s += av[(bi * 4 + i) * 5 + k] * bv[k * 2 + j];
          EXPECT_NEAR(cv[(bi * 4 + i) * 2 + j], s, dt == float32 ? 1e-5 : 3e-2 * (1 + std::fabs(s)));
        }
  }
  auto a = randn({4, 5}, float32, kCPU, &g);
  auto at = a.t().contiguous().t();  // column-major view
  expect_close(vals(mm(at, a.t())), vals(mm(a, a.t())), 1e-5, 1e-5);
  expect_close(vals(matmul(arange(3).to(float32), arange(6).to(float32).view({3, 2}))), {10, 13}, 0, 1e-6);
  EXPECT_THROW(matmul(ones({2, 3}), ones({2, 3})), Error);
  EXPECT_THROW(matmul(ones({2, 3}), ones({3, 2}, bfloat16)), Error);
  EXPECT_THROW(bmm(ones({2, 2, 3}), ones({3, 3, 2})), Error);
  EXPECT_EQ(vals(matmul(ones({2, 0}), ones({0, 3}))), std::vector<double>(6, 0.0));
}

TEST(Random, SeededAndDistributed) {
  Generator g1(42), g2(42);
  auto a = rand({10000}, float32, kCPU, &g1), b = rand({10000}, float32, kCPU, &g2);
  EXPECT_EQ(a.tolist<float>(), b.tolist<float>());
  EXPECT_NE(rand({10000}, float32, kCPU, &g1).tolist<float>(), a.tolist<float>());  // the counter moved on
  const double mu = mean(a).item<double>();
  EXPECT_NEAR(mu, 0.5, 0.015);
  EXPECT_GE(amin(a).item<double>(), 0.0);
  EXPECT_LT(amax(a).item<double>(), 1.0);
  auto n = randn({100000}, float32, kCPU, &g1);
  EXPECT_NEAR(mean(n).item<double>(), 0.0, 0.02);
  EXPECT_NEAR(mean(mul(n, n)).item<double>(), 1.0, 0.02);
  EXPECT_THROW(rand({2}, int32), Error);
}

// Reduced floats: float(low + (high-low)*u) can round up to `high`; the draw must stay in [low, high)
// with the right mean, as PyTorch's does (it keeps only the type's significand bits).
TEST(Random, ReducedFloatsStayInHalfOpenRange) {
  for (DType dt : {bfloat16, float16}) {
    Generator g(7);
    auto u = rand({1 << 20}, dt, kCPU, &g);
    EXPECT_GE(amin(u).item<double>(), 0.0) << dtype_name(dt);
    EXPECT_LT(amax(u).item<double>(), 1.0) << dtype_name(dt);
    EXPECT_NEAR(mean(u.to(float32)).item<double>(), 0.5, 0.01) << dtype_name(dt);
    auto r = empty({1 << 18}, dt);
    uniform_(r, -3.0, 5.0, &g);
    EXPECT_GE(amin(r).item<double>(), -3.0) << dtype_name(dt);
    EXPECT_LT(amax(r).item<double>(), 5.0) << dtype_name(dt);
    EXPECT_NEAR(mean(r.to(float32)).item<double>(), 1.0, 0.05) << dtype_name(dt);
  }
}

TEST(Memory, CpuAllocationsAreAlignedAndCounted) {
  const auto before = memory_stats(kCPU).allocated;
  {
    auto t = empty({1000}, float32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kCpuAlignment, 0u);
    EXPECT_GE(memory_stats(kCPU).allocated, before + 4000);
  }
  EXPECT_EQ(memory_stats(kCPU).allocated, before);
}

// A request past what the system has available (memory, free swap, kiln's cache) is an
// error, not a grant that the OOM killer ends once its pages are touched.
TEST(Memory, CpuAllocationPastAvailableMemoryIsAnError) {
  const std::optional<size_t> available = cpu_available_bytes();
  if (!available) GTEST_SKIP() << "the system does not say how much memory is available";
  const int64_t floats = static_cast<int64_t>(*available / 4 + (size_t{1} << 30));  // 4 GB past it
  try {
    empty({floats}, float32);  // empty: nothing is touched, even were it granted
    ADD_FAILURE() << "granted " << floats * 4 << " bytes with " << *available << " available";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu allocator: out of memory allocating"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(empty({int64_t{1} << 27}, float32));  // 512 MB, checked and granted
}

// ---- linear: the few-rows kernel and the GEMM path against a double-precision loop ----
namespace {
// Also fills `mag` with sum_k |x w s| per output: the scale of rounding errors.
std::vector<double> linear_reference(const Tensor& x, const Tensor& w, const Tensor* scale, const Tensor* bias,
                                     std::vector<double>* mag = nullptr) {
  const auto xv = x.to(kiln::float32).tolist<double>();
  const auto wv = w.to(kiln::float32).tolist<double>();
  const int64_t K = w.size(1), N = w.size(0), R = x.numel() / K;
  std::vector<double> sv = scale ? scale->tolist<double>() : std::vector<double>{1.0};
  std::vector<double> bv = bias ? bias->to(kiln::float32).tolist<double>() : std::vector<double>(N, 0.0);
  std::vector<double> y(R * N);
  if (mag) mag->assign(R * N, 0.0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) {
        acc += xv[r * K + k] * wv[n * K + k];
        a += std::abs(xv[r * K + k] * wv[n * K + k]);
      }
      const double sc = sv[sv.size() == 1 ? 0 : n];
      y[r * N + n] = acc * sc + bv[n];
      if (mag) (*mag)[r * N + n] = a * std::abs(sc) + std::abs(bv[n]);
    }
  return y;
}
}  // namespace

TEST(Ops, LinearMatchesReference) {
  Generator g(7);
  for (DType dt : {kiln::float32, kiln::bfloat16, kiln::float16}) {
    for (int64_t rows : {1, 3, 8, 13}) {
      for (int64_t K : {64, 200}) {
        const int64_t N = 37;
        Tensor x = randn({rows, K}, kiln::float32, kCPU, &g).to(dt);
        Tensor w = randn({N, K}, kiln::float32, kCPU, &g).to(dt);
        Tensor b = randn({N}, kiln::float32, kCPU, &g).to(dt);
        const auto want = linear_reference(x, w, nullptr, &b);
        const auto got = linear(x.view({1, rows, K}), w, b).to(kiln::float32).tolist<double>();
        const double tol = dt == kiln::float32 ? 1e-4 : 3e-2;
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << dtype_name(dt) << " rows " << rows << " K " << K;
      }
    }
  }
}

TEST(Ops, LinearFp8WeightsWithScales) {
  Generator g(9);
  const int64_t N = 24, K = 96;
  Tensor w8 = (randn({N, K}, kiln::float32, kCPU, &g) * 100).to(kiln::float8_e4m3fn);
  Tensor per_row = rand({N}, kiln::float32, kCPU, &g);
  Tensor per_tensor = full({}, 0.03, kiln::float32);
  for (int64_t rows : {1, 5, 11}) {
    Tensor x = randn({rows, K}, kiln::float32, kCPU, &g).to(kiln::bfloat16);
    for (const Tensor* s : {&per_row, &per_tensor}) {
      std::vector<double> mag;
      const auto want = linear_reference(x, w8, s, nullptr, &mag);
      const auto got = linear(x, w8, std::nullopt, *s).to(kiln::float32).tolist<double>();
      // bf16 output, and on the GEMM path (> 8 rows) weights dequantised to bf16: a few bf16 ulps of the terms
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-2 * mag[i] + 1e-6) << rows;
    }
  }
  Tensor x = randn({2, K}, kiln::float32, kCPU, &g);
  EXPECT_THROW(linear(x, w8), Error);                               // fp8 needs a scale
  EXPECT_THROW(linear(x, w8, std::nullopt, full({3}, 1.0)), Error);  // wrong scale shape
  EXPECT_THROW(linear(x, randn({N, K + 1})), Error);                // in_features mismatch
  EXPECT_THROW(linear(x, randn({N, K}).to(kiln::bfloat16)), Error); // dtype mismatch
  EXPECT_THROW(linear(x, randn({N, K}), randn({N + 1})), Error);    // bias shape
  EXPECT_EQ(linear(zeros({0, K}), randn({N, K})).shape(), (Shape{0, N}));
}

TEST(Ops, LinearFp8DecodesEveryCode) {
  // one weight row per input column order: every finite e4m3 code (subnormals included), and a row with NaN
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) codes.push_back((c & 0x7f) == 0x7f ? 0 : static_cast<uint8_t>(c));
  std::vector<uint8_t> bits(codes);
  bits.insert(bits.end(), codes.rbegin(), codes.rend());
  bits[256 + 5] = 0x7f;  // NaN in the second row
  bits.insert(bits.end(), codes.begin(), codes.end());
  bits[512 + 200] = 0xff;  // and a negative NaN in the third
  Tensor w = Tensor::from_vector(bits, {3, 256}, kiln::uint8).view(kiln::float8_e4m3fn);
  Generator g(3);
  Tensor x = randn({1, 256}, kiln::float32, kCPU, &g);
  Tensor s = full({}, 0.5, kiln::float32);
  const auto got = linear(x, w, std::nullopt, s).tolist<double>();
  const auto xv = x.tolist<double>();
  double want = 0;
  for (int k = 0; k < 256; ++k) want += xv[k] * bits::e4m3fn_to_f32(codes[k]);
  EXPECT_NEAR(got[0], 0.5 * want, 1e-4 * (1 + std::abs(want)));
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_TRUE(std::isnan(got[2]));
}

// ---- softmax / log_softmax against a double-precision reference ----
TEST(Ops, SoftmaxMatchesReference) {
  Generator g(11);
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dt : {kiln::float32, kiln::bfloat16}) {
    Tensor x = (randn({5, 7, 9}, kiln::float32, kCPU, &g) * 5);
    x.select(0, 1).select(0, 2).fill_(-inf);          // a row (dim 2) of all -inf
    x.select(0, 2).select(1, 3).fill_(-inf);          // -inf entries in other rows
    x.select(0, 3).select(0, 0).select(0, 0).fill_(1e30);  // a huge value
    x = x.to(dt);
    for (int64_t dim : {2, 1, 0, -1}) {
      for (bool log : {false, true}) {
        const Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
        ASSERT_EQ(y.shape(), x.shape());
        ASSERT_EQ(y.dtype(), dt);
        const auto xv = x.to(kiln::float32).tolist<double>();
        const auto yv = y.to(kiln::float32).tolist<double>();
        const int64_t d = dim < 0 ? dim + 3 : dim;
        const Shape& sh = x.shape();
        const int64_t stride = d == 2 ? 1 : d == 1 ? 9 : 63;
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t pos = (i / stride) % sh[d];
          const int64_t base = i - pos * stride;
          double mx = -INFINITY;
          for (int64_t j = 0; j < sh[d]; ++j) mx = std::max(mx, xv[base + j * stride]);
          double sum = 0;
          for (int64_t j = 0; j < sh[d]; ++j) sum += std::exp(xv[base + j * stride] - mx);
          const double want = log ? xv[i] - mx - std::log(sum) : std::exp(xv[i] - mx) / sum;
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(yv[i])) << "dim " << dim << " i " << i;
          } else if (std::isinf(want)) {
            ASSERT_EQ(yv[i], want);
          } else {
            const double tol = dt == kiln::float32 ? 1e-5 : 1e-2;
            ASSERT_NEAR(yv[i], want, tol * (1 + std::abs(want))) << "dim " << dim << " i " << i << " log " << log;
          }
        }
      }
    }
  }
  EXPECT_THROW(softmax(zeros({3}, kiln::int32), 0), Error);
  EXPECT_THROW(softmax(zeros({3}), 1), Error);
  EXPECT_EQ(softmax(zeros({0, 4}), 1).shape(), (Shape{0, 4}));
  EXPECT_EQ(softmax(zeros({2, 3}, kiln::float16), 1, kiln::float32).dtype(), kiln::float32);
}

// ---- scaled_dot_product_attention (math path) against a double-precision loop ----
namespace {
// q [B, Hq, L, E], k/v [B, Hkv, S, E]; mask [L, S] bool (or null), causal.
std::vector<double> attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                                        bool causal, double scale) {
  const auto qv = q.to(kiln::float32).tolist<double>(), kv = k.to(kiln::float32).tolist<double>(),
             vv = v.to(kiln::float32).tolist<double>();
  std::vector<bool> mv;
  if (mask) for (bool b : mask->tolist<bool>()) mv.push_back(b);
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), E = q.size(3), Hkv = k.size(1), S = k.size(2),
                Ev = v.size(3);
  std::vector<double> out(B * Hq * L * Ev, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(S);
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          const bool on = causal ? j <= i : (!mask || mv[i * S + j]);
          double d = 0;
          for (int64_t e = 0; e < E; ++e) d += qv[((b * Hq + h) * L + i) * E + e] * kv[((b * Hkv + hk) * S + j) * E + e];
          sc[j] = on ? d * scale : -INFINITY;
          mx = std::max(mx, sc[j]);
        }
        if (mx == -INFINITY) continue;  // every key masked: 0
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < S; ++j)
          for (int64_t e = 0; e < Ev; ++e)
            out[((b * Hq + h) * L + i) * Ev + e] += sc[j] / sum * vv[((b * Hkv + hk) * S + j) * Ev + e];
      }
    }
  return out;
}
}  // namespace

TEST(Ops, AttentionMathPathMatchesReference) {
  Generator g(21);
  const int64_t B = 2, Hq = 4, Hkv = 2, L = 5, S = 7, E = 8, Ev = 6;
  Tensor q = randn({B, Hq, L, E}, kiln::float32, kCPU, &g), k = randn({B, Hkv, S, E}, kiln::float32, kCPU, &g),
         v = randn({B, Hkv, S, Ev}, kiln::float32, kCPU, &g);
  Tensor mask = gt(rand({L, S}, kiln::float32, kCPU, &g), 0.3);
  mask.select(0, 2).fill_(false);  // a query that sees no key
  auto check = [](const Tensor& got, const std::vector<double>& want, double tol) {
    const auto gv = got.to(kiln::float32).tolist<double>();
    ASSERT_EQ(gv.size(), want.size());
    for (size_t i = 0; i < gv.size(); ++i) ASSERT_NEAR(gv[i], want[i], tol) << i;
  };
  const double sc = 1.0 / std::sqrt(8.0);
  check(scaled_dot_product_attention(q, k, v, std::nullopt, false, std::nullopt, true),
        attention_reference(q, k, v, nullptr, false, sc), 1e-5);
  check(scaled_dot_product_attention(q, k, v, std::nullopt, true, 0.5, true),
        attention_reference(q, k, v, nullptr, true, 0.5), 1e-5);
  check(scaled_dot_product_attention(q, k, v, mask, false, std::nullopt, true),
        attention_reference(q, k, v, &mask, false, sc), 1e-5);
  // a float mask of 0 / -inf is the same as the bool mask; bf16 inputs
  Tensor fmask = where(mask, 0.0, full({}, -INFINITY));
  check(scaled_dot_product_attention(q.to(kiln::bfloat16), k.to(kiln::bfloat16), v.to(kiln::bfloat16), fmask, false,
                                     std::nullopt, true),
        attention_reference(q.to(kiln::bfloat16), k.to(kiln::bfloat16), v.to(kiln::bfloat16), &mask, false, sc), 2e-2);
  // broadcasting: k, v with batch 1 serve both batches of q
  Tensor k1 = k.narrow(0, 0, 1), v1 = v.narrow(0, 0, 1);
  const auto want = attention_reference(q, k1.expand({B, Hkv, S, E}).contiguous(), v1.expand({B, Hkv, S, Ev}).contiguous(),
                                        nullptr, false, sc);
  check(scaled_dot_product_attention(q, k1, v1, std::nullopt, false, std::nullopt, true), want, 1e-5);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v), Error);  // 4 vs 2 heads without enable_gqa
  EXPECT_THROW(scaled_dot_product_attention(q, k.narrow(3, 0, 4), v, std::nullopt, false, std::nullopt, true), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, mask, true, std::nullopt, true), Error);
}

// ---- topk against a full sort ----
TEST(Ops, TopkMatchesSort) {
  Generator g(5);
  for (int64_t n : {1, 7, 128, 1000}) {
    Tensor x = randn({6, n}, kiln::float32, kCPU, &g);
    if (n > 4) {
      x.select(0, 1).narrow(0, 0, 3).fill_(0.25);  // ties: the lower index first
      x.select(0, 2).select(0, 1).fill_(NAN);      // NaN ranks above every number
    }
    for (bool largest : {true, false}) {
      const int64_t k = std::min<int64_t>(n, 8);
      auto [v, i] = topk(x, k, -1, largest);
      ASSERT_EQ(v.shape(), (Shape{6, k}));
      const auto xv = x.tolist<float>();
      const auto vv = v.tolist<float>();
      const auto iv = i.tolist<int64_t>();
      for (int64_t r = 0; r < 6; ++r) {
        std::vector<int64_t> order(n);
        for (int64_t j = 0; j < n; ++j) order[j] = j;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const float fa = xv[r * n + a], fb = xv[r * n + b];
          if (std::isnan(fa) || std::isnan(fb)) return largest ? std::isnan(fa) && !std::isnan(fb)
                                                               : std::isnan(fb) && !std::isnan(fa);
          return largest ? fa > fb : fa < fb;
        });
        for (int64_t j = 0; j < k; ++j) {
          ASSERT_EQ(iv[r * k + j], order[j]) << "n " << n << " row " << r << " j " << j << " largest " << largest;
          const float want = xv[r * n + order[j]];
          if (std::isnan(want)) ASSERT_TRUE(std::isnan(vv[r * k + j]));
          else ASSERT_EQ(vv[r * k + j], want);
        }
      }
    }
  }
  // another dim, and bad k
  Tensor x = randn({5, 3}, kiln::float32, kCPU, &g);
  auto [v0, i0] = topk(x, 2, 0);
  EXPECT_EQ(v0.shape(), (Shape{2, 3}));
  EXPECT_THROW(topk(x, 4, 1), Error);
  EXPECT_THROW(topk(x, -1, 1), Error);
}

// Blocks of 2 MB and more start on a 2 MB boundary, so that transparent huge pages can
// back them (the advice itself may be refused, so only the alignment is certain).
TEST(Memory, LargeCpuBlocksAreHugePageAligned) {
  if (!cpu_huge_pages_advised()) GTEST_SKIP() << "KILN_CPU_HUGE_PAGES=0";
  for (int64_t n : {int64_t{1} << 19, (int64_t{3} << 19) + 5}) {  // 2 MB, and 6 MB + 20 bytes
    Tensor t = Tensor::empty({n}, kiln::float32);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % (uintptr_t{2} << 20), 0u) << n;
  }
  Tensor small = Tensor::empty({1000}, kiln::float32);  // small blocks keep their 64-byte alignment
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data_ptr()) % kCpuAlignment, 0u);
  // reserved counts the whole 2 MB pages the system gave: 2 MB + 4 bytes is two pages' 4 MB
  empty_cache(kCPU);
  const size_t reserved = memory_stats(kCPU).reserved;
  {
    Tensor t = Tensor::empty({(int64_t{1} << 19) + 1}, kiln::float32);
    EXPECT_EQ(memory_stats(kCPU).reserved, reserved + (size_t{4} << 20));
  }
  empty_cache(kCPU);
  EXPECT_EQ(memory_stats(kCPU).reserved, reserved);
}

TEST(Memory, CpuCacheReusesLargeBlocks) {
  empty_cache(kCPU);
  const auto base = memory_stats(kCPU);
  { Tensor a = Tensor::empty({1 << 21}, kiln::float32); }  // 8 MiB, back to the cache
  const auto after_one = memory_stats(kCPU);
  EXPECT_EQ(after_one.allocated, base.allocated);
  EXPECT_EQ(after_one.reserved, base.reserved + (size_t{8} << 20));
  { Tensor b = Tensor::empty({1 << 21}, kiln::float32); }  // same size: no new system allocation
  EXPECT_EQ(memory_stats(kCPU).num_system_allocs, after_one.num_system_allocs);
  empty_cache(kCPU);
  EXPECT_EQ(memory_stats(kCPU).reserved, base.reserved);
}

// argmax / argmin of 16-bit rows (a decode step's logits): the first extreme, or
// the first NaN, as a scalar scan finds it, across the float32 staging chunks.
TEST(Ops, ArgExtremeOfHalfRows) {
  Generator g(5);
  const int64_t n = 151936;
  for (DType dt : {kiln::bfloat16, kiln::float16}) {
    Tensor x = randn({2, n}, kiln::float32, kCPU, &g).to(dt);  // many ties after rounding
    const auto v = x.tolist<double>();
    for (int64_t r = 0; r < 2; ++r) {
      int64_t amax_i = 0, amin_i = 0;
      for (int64_t i = 1; i < n; ++i) {
        if (v[r * n + i] > v[r * n + amax_i]) amax_i = i;
        if (v[r * n + i] < v[r * n + amin_i]) amin_i = i;
      }
      EXPECT_EQ(argmax(x.select(0, r)).item<int64_t>(), amax_i) << dtype_name(dt);
      EXPECT_EQ(argmin(x.select(0, r)).item<int64_t>(), amin_i) << dtype_name(dt);
    }
    // a tie of the largest value in two chunks: the first; then a NaN after both wins
    Tensor t = full({n}, -1.0, dt);
    t.narrow(0, 4097, 1).fill_(3.0);
    t.narrow(0, 100000, 1).fill_(3.0);
    EXPECT_EQ(argmax(t).item<int64_t>(), 4097);
    t.narrow(0, 120000, 1).fill_(NAN);
    EXPECT_EQ(argmax(t).item<int64_t>(), 120000);
    EXPECT_EQ(argmin(t).item<int64_t>(), 120000);
    EXPECT_EQ(argmax(full({n}, -INFINITY, dt)).item<int64_t>(), 0);
    EXPECT_EQ(argmin(full({3}, INFINITY, dt)).item<int64_t>(), 0);
    const auto [mv, mi] = max(x, 1);
    EXPECT_EQ(mi.tolist<int64_t>(), (std::vector<int64_t>{argmax(x.select(0, 0)).item<int64_t>(),
                                                          argmax(x.select(0, 1)).item<int64_t>()}));
  }
}

// Full reductions of long rows split across threads: the merged result equals one pass.
TEST(Ops, LongRowReductionsMergeInOrder) {
  Generator g(17);
  const int64_t n = (1 << 20) + 12345;
  Tensor x = randn({n}, kiln::float32, kCPU, &g);
  const auto xv = x.tolist<double>();
  double sum = 0, mx = -INFINITY;
  int64_t arg = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += xv[i];
    if (xv[i] > mx) mx = xv[i], arg = i;
  }
  EXPECT_NEAR(kiln::sum(x).item<double>(), sum, 1e-6 * n);
  EXPECT_NEAR(mean(x.to(kiln::bfloat16)).item<double>(), sum / n, 2e-2);
  EXPECT_EQ(amax(x).item<double>(), mx);
  EXPECT_EQ(argmax(x).item<int64_t>(), arg);
  // ties across stretches: the first index wins; a NaN anywhere wins
  Tensor t = full({n}, 1.0);
  t.narrow(0, 300000, 1).fill_(5.0);
  t.narrow(0, 900000, 1).fill_(5.0);
  EXPECT_EQ(argmax(t).item<int64_t>(), 300000);
  t.narrow(0, 700000, 1).fill_(NAN);
  EXPECT_EQ(argmax(t).item<int64_t>(), 700000);
  EXPECT_TRUE(std::isnan(amax(t).item<double>()));
  Tensor ninf = full({n}, -INFINITY);
  EXPECT_EQ(argmax(ninf).item<int64_t>(), 0);
  EXPECT_EQ(argmin(full({n}, 2.0)).item<int64_t>(), 0);
}

// moe_experts_combine checks that the routing's weights cover token_of's rows:
// a combine over another routing's weights would read past the expert rows.
TEST(Ops, MoeExpertsCombineRejectsAMismatchedRouting) {
  Generator g(5);
  const int64_t E = 8, H = 16, I = 24, k = 2;
  const Tensor x = randn({3, H}, kiln::float32, kCPU, &g);
  const Tensor gate_up = randn({E, 2 * I, H}, kiln::float32, kCPU, &g), down = randn({E, H, I}, kiln::float32, kCPU, &g);
  MoeRouting r = moe_route(randn({3, E}, kiln::float32, kCPU, &g), k);
  const MoeRouting shorter = moe_route(randn({2, E}, kiln::float32, kCPU, &g), k);
  const Tensor ok = moe_experts_combine(x, gate_up, down, r);
  EXPECT_EQ(ok.shape(), (Shape{3, H}));
  r.weights = shorter.weights;
  r.sorted_pos = shorter.sorted_pos;
  try {
    moe_experts_combine(x, gate_up, down, r);
    ADD_FAILURE() << "no error for weights [2, 2] against 6 rows";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("T * k = 6 rows"), std::string::npos) << e.what();
  }
}
