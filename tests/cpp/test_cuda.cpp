// CUDA backend against the CPU backend (itself tested against references),
// and the stream / allocator contract. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

#define REQUIRE_CUDA() \
  if (!cuda::is_available()) GTEST_SKIP() << "CUDA not available: " << cuda::availability().reason

namespace {
void expect_same(const Tensor& gpu, const Tensor& cpu, double tol) {
  ASSERT_EQ(gpu.shape(), cpu.shape());
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  auto g = gpu.tolist<double>(), c = cpu.tolist<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(c[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << i;
      continue;
    }
    ASSERT_NEAR(g[i], c[i], tol * (1 + std::fabs(c[i]))) << "element " << i;
  }
}
}  // namespace

TEST(Cuda, CastsBitExactWithCpu) {
  REQUIRE_CUDA();
  auto codes = arange(256, int64).to(uint8).view(float8_e4m3fn);
  auto f = codes.to(float32);
  auto wide = mul(randn({1 << 16}, float32), 300.0);
  for (bool sat : {true, false}) {
    auto g = wide.cuda().to(float8_e4m3fn, sat).view(uint8).cpu();
    EXPECT_EQ(g.tolist<int>(), wide.to(float8_e4m3fn, sat).view(uint8).tolist<int>());
  }
  for (DType dt : {bfloat16, float16, float8_e5m2, int32})
    EXPECT_EQ(wide.cuda().to(dt).cpu().tolist<double>(), wide.to(dt).tolist<double>()) << dtype_name(dt);
  // float -> unsigned is defined only in range (C and torch leave the rest undefined)
  auto in_range = mul(rand({4096}), 255.0);
  EXPECT_EQ(in_range.cuda().to(uint8).cpu().tolist<int>(), in_range.to(uint8).tolist<int>());
  EXPECT_EQ(codes.cuda().to(float32).cpu().view(int32).tolist<int64_t>(), f.view(int32).tolist<int64_t>());
}

TEST(Cuda, ElementwiseMatchesCpu) {
  REQUIRE_CUDA();
  auto x = randn({37, 129}), y = randn({129});
  auto gx = x.cuda(), gy = y.cuda();
  expect_same(add(gx, gy, 0.5).cpu(), add(x, y, 0.5), 1e-6);
  expect_same(mul(gx.t(), 3).cpu(), mul(x.t(), 3), 1e-6);
  expect_same(div(gx, gy).cpu(), div(x, y), 1e-6);
  for (auto fn : {exp, tanh, sigmoid, silu, abs, neg}) expect_same(fn(gx).cpu(), fn(x), 1e-5);
  expect_same(gelu(gx).cpu(), gelu(x), 1e-5);
  expect_same(lt(gx, gy).cpu().to(int32), lt(x, y).to(int32), 0);
  auto xb = x.to(bfloat16);
  // CUDA's 16-bit silu uses the fast exp/divide: within one bf16 rounding step of the CPU's
  expect_same(silu(xb.cuda()).cpu(), silu(xb), 1.0 / 128);
  auto u = Tensor::from_vector<uint64_t>({0, 1ull << 63, ~0ull}, {3}, uint64).cuda();
  EXPECT_EQ(gt(u, 1).cpu().tolist<bool>(), (std::vector<bool>{false, true, true}));
  expect_same(where(gt(gx, 0), gx, 0.0).cpu(), where(gt(x, 0), x, 0.0), 0);
  EXPECT_EQ(arange(5, {}, Device("cuda")).cpu().tolist<int>(), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Cuda, ReductionsMatchCpu) {
  REQUIRE_CUDA();
  for (Shape s : {Shape{1 << 20}, Shape{64, 5000}, Shape{3000, 7}, Shape{8, 9, 10}}) {
    auto x = randn(s);
    auto g = x.cuda();
    expect_same(sum(g).cpu(), sum(x), 1e-4);
    expect_same(amax(g, {-1}).cpu(), amax(x, {-1}), 0);
    expect_same(sum(g, {0}).cpu(), sum(x, {0}), 1e-4);
    expect_same(mean(g, {-1}, true).cpu(), mean(x, {-1}, true), 1e-4);
    EXPECT_EQ(argmax(g, -1).cpu().tolist<int64_t>(), argmax(x, -1).tolist<int64_t>());
    EXPECT_EQ(argmin(g, 0).cpu().tolist<int64_t>(), argmin(x, 0).tolist<int64_t>());
  }
  auto n = Tensor::from_vector<float>({1, NAN, 5, NAN}, {4}, float32).cuda();
  EXPECT_EQ(argmax(n).item<int64_t>(), 1);
  EXPECT_EQ(sum(arange(100001, {}, Device("cuda"))).item<int64_t>(), 5000050000ll);
}

TEST(Cuda, MatmulMatchesCpu) {
  REQUIRE_CUDA();
  for (DType dt : {float32, bfloat16, float16}) {
    auto a = randn({3, 64, 48}).to(dt), b = randn({48, 80}).to(dt);
    expect_same(matmul(a.cuda(), b.cuda()).cpu().to(float32), matmul(a, b).to(float32), dt == float32 ? 1e-4 : 2e-2);
    expect_same(matmul(a.cuda().transpose(1, 2).contiguous().transpose(1, 2), b.cuda()).cpu().to(float32),
                matmul(a, b).to(float32), dt == float32 ? 1e-4 : 2e-2);
  }
}

TEST(Cuda, RandomMatchesCpuForSameSeed) {
  REQUIRE_CUDA();
  Generator g1(5), g2(5);
  EXPECT_EQ(rand({4099}, float32, Device("cuda"), &g1).cpu().tolist<float>(), rand({4099}, float32, kCPU, &g2).tolist<float>());
  expect_same(randn({4099}, float32, Device("cuda"), &g1).cpu(), randn({4099}, float32, kCPU, &g2), 1e-5);
}

TEST(Cuda, StreamsEventsAndRecordStream) {
  REQUIRE_CUDA();
  const Device dev("cuda");
  Stream side = Stream::create(dev);
  auto big_a = randn({4096, 4096}, float32, dev), big_b = randn({4096, 4096}, float32, dev);
  void* first = nullptr;
  {
    auto x = empty({1 << 20}, float32, dev);  // allocated on the default stream
    first = x.data_ptr();
    StreamGuard guard(side);
    EXPECT_EQ(Stream::current(dev), side);
    side.wait(Stream::default_stream(dev));
    for (int i = 0; i < 8; ++i) matmul(big_a, big_b);  // slow work queued on `side`
    x.record_stream(side);
    add(x, 1);
  }
  EXPECT_EQ(Stream::current(dev), Stream::default_stream(dev));
  EXPECT_FALSE(side.query());  // still busy
  auto y = empty({1 << 20}, float32, dev);
  EXPECT_NE(y.data_ptr(), first) << "memory handed out while another stream still used it";
  side.synchronize();
  auto z = empty({1 << 20}, float32, dev);
  EXPECT_EQ(z.data_ptr(), first) << "block not reused after the stream passed it";
  Event start(dev), end(dev);
  start.record();
  matmul(big_a, big_b);
  end.record();
  end.synchronize();
  EXPECT_GT(start.elapsed_time(end), 0.0f);
  const auto st = memory_stats(dev);
  EXPECT_GE(st.reserved, st.allocated);
  EXPECT_GE(st.peak_allocated, st.allocated);
  empty_cache(dev);
  EXPECT_LT(memory_stats(dev).reserved, st.reserved + 1);
}
