// Views, strides and copies, checked against index arithmetic done by hand.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {
Tensor iota(const Shape& s) { return arange(0, [&] { int64_t n = 1; for (auto d : s) n *= d; return n; }(), 1, float32).view(s); }
}  // namespace

TEST(Tensor, ContiguousStridesAndSlices) {
  auto t = iota({2, 3, 4});
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  auto s = t.slice(2, 1, {}, 2);  // [:, :, 1::2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  auto v = s.tolist<int>();
  std::vector<int> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 1; k < 4; k += 2) want.push_back(i * 12 + j * 4 + k);
  EXPECT_EQ(v, want);
  EXPECT_EQ(t.select(1, -1).tolist<int>(), (std::vector<int>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(t.narrow(0, 1, 1).storage_offset(), 12);
  EXPECT_THROW(t.select(1, 3), Error);
  EXPECT_THROW(t.narrow(2, 3, 2), Error);
}

TEST(Tensor, TransposePermuteContiguous) {
  auto t = iota({2, 3});
  auto tt = t.t();
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.contiguous().tolist<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  auto p = iota({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.contiguous().tolist<int>()[1], 4);  // p[0,0,1] = t[0,1,0]
  EXPECT_THROW(iota({2, 3}).permute({0, 0}), Error);
}

// Large transposes go through the tiled copy (cpu/copy.cpp): sizes off the tile, small
// and past a few hundred, outer dims around the transposed pair, a slice's offset and
// step, and casts.
TEST(Tensor, TiledTransposeCopies) {
  for (const Shape& shape : {Shape{3, 37, 50}, Shape{2, 300, 530}}) {
    auto t = iota(shape);
    for (const Shape& perm : {Shape{0, 2, 1}, Shape{2, 1, 0}, Shape{1, 2, 0}, Shape{2, 0, 1}}) {
      const auto p = t.permute(perm);
      std::vector<int64_t> idx(3);
      std::vector<double> want;
      const Shape& ps = p.shape();
      for (idx[0] = 0; idx[0] < ps[0]; ++idx[0])
        for (idx[1] = 0; idx[1] < ps[1]; ++idx[1])
          for (idx[2] = 0; idx[2] < ps[2]; ++idx[2]) {
            int64_t src[3];
            for (int d = 0; d < 3; ++d) src[perm[d]] = idx[d];
            want.push_back(static_cast<double>((src[0] * shape[1] + src[1]) * shape[2] + src[2]));
          }
      EXPECT_EQ(p.contiguous().tolist<double>(), want) << perm[0] << perm[1] << perm[2];
      EXPECT_EQ(p.to(int64).tolist<double>(), want);
      EXPECT_EQ(p.to(bfloat16).to(float32).tolist<double>(),
                t.to(bfloat16).to(float32).permute(perm).contiguous().tolist<double>());
    }
  }
  // a strided slice of a transpose: src stride 3 along the rows, offset 2
  auto m = iota({40, 90}).slice(1, 2, {}, 3).t();  // [30, 40], m[i, j] = j * 90 + 2 + 3 * i
  std::vector<double> want;
  for (int i = 0; i < 30; ++i)
    for (int j = 0; j < 40; ++j) want.push_back(j * 90 + 2 + 3 * i);
  EXPECT_EQ(m.contiguous().tolist<double>(), want);
  // copy_ into a transposed destination from a contiguous source
  auto dst = zeros({50, 37}).t();  // [37, 50] with strides {1, 37}
  dst.copy_(iota({37, 50}));
  EXPECT_EQ(dst.contiguous().tolist<double>(), iota({37, 50}).tolist<double>());
}

TEST(Tensor, ViewRulesFollowTorch) {
  auto t = iota({4, 6});
  EXPECT_NO_THROW(t.view({2, 2, 6}));
  EXPECT_NO_THROW(t.view({-1}));
  EXPECT_THROW(t.t().view({24}), Error);           // spans two chunks: torch refuses too
  EXPECT_NO_THROW(t.t().view({6, 2, 2}));          // splits the outer (strided) dim only
  auto r = t.t().reshape({24});                    // reshape copies instead
  EXPECT_EQ(r.tolist<int>()[1], 6);
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.view({-1, -1}), Error);
  auto sliced = t.slice(1, 0, 3);                  // [4, 3] with row stride 6
  EXPECT_NO_THROW(sliced.view({4, 3, 1}));
  EXPECT_THROW(sliced.view({12}), Error);
}

TEST(Tensor, ExpandSqueezeUnsqueeze) {
  auto t = iota({3, 1});
  auto e = t.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.contiguous().tolist<int>()[5], 1);
  EXPECT_THROW(t.expand({3, 2, 2}), Error);
  EXPECT_EQ(t.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{3, 1, 1}));
  EXPECT_THROW(t.unsqueeze(3), Error);
}

// Sizes whose element count, byte count or reach wraps past int64 would size a buffer too
// short for the shape (2^62 x 4 elements wrapped to 0): each is refused, naming the op.
TEST(Tensor, SizesPastInt64AreRefused) {
  const int64_t big = int64_t{1} << 62, half = int64_t{1} << 32;
  const auto refuses = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refuses([&] { Tensor::empty({big, 4}, float32, kCPU); }, "empty: shape [4611686018427387904, 4] has more elements");
  refuses([&] { zeros({half, half}); }, "more elements than an int64 can count");
  refuses([&] { Tensor::empty({big / 2, 2}, float32, kCPU); }, "elements of 4 bytes are more bytes");
  refuses([&] { zeros({0}).view({half, half}); }, "view: shape [4294967296, 4294967296] has more elements");
  refuses([&] { iota({6}).reshape({big, 4, -1}); }, "reshape: shape");
  refuses([&] { iota({1, 1}).expand({half, half}); }, "expand: shape");
  refuses([&] { iota({4}).as_strided({5}, {big}); }, "as_strided: shape [5] with strides [4611686018427387904] reaches");
  refuses([&] { iota({4}).as_strided({2}, {1}, INT64_MAX); }, "as_strided: offset");
  refuses([&] { Tensor::empty_strided({3, 3}, {big, 2}, float32, kCPU); }, "empty_strided: shape [3, 3] with strides");
  refuses([&] { Tensor::empty_strided({2}, {-1}, float32, kCPU); }, "negative strides");
  // what stays allowed: any sizes beside a zero (no elements), and a large expand that fits
  EXPECT_EQ(Tensor::empty({big, 4, 0}, float32, kCPU).numel(), 0);
  EXPECT_EQ(zeros({0}).view({half, half, 0}).numel(), 0);
  EXPECT_EQ(iota({1, 1}).expand({half / 2, half / 2}).numel(), (half / 2) * (half / 2));
  EXPECT_EQ(iota({4}).as_strided({2}, {2}).tolist<int>(), (std::vector<int>{0, 2}));
}

TEST(Tensor, ZeroSizeAndZeroDim) {
  auto z = zeros({0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(sum(z, {0}).tolist<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(add(z, ones({3})).shape(), (Shape{0, 3}));
  auto s = full({}, 2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 2.5f);
  EXPECT_EQ(mul(s, iota({2})).tolist<float>(), (std::vector<float>{0, 2.5}));
  EXPECT_THROW(amax(z, {0}), Error);
  EXPECT_THROW(z.item(), Error);
}

TEST(Tensor, CopyBroadcastsAndCasts) {
  auto dst = empty({2, 3}, int32);
  dst.copy_(Tensor::from_vector<float>({1.7f, -2.2f, 3.5f}, {3}, float32));
  EXPECT_EQ(dst.tolist<int>(), (std::vector<int>{1, -2, 3, 1, -2, 3}));
  auto strided = zeros({3, 4}).slice(1, 0, {}, 2);
  strided.copy_(ones({3, 2}));
  EXPECT_EQ(sum(strided.contiguous()).item<float>(), 6.0f);
  EXPECT_THROW(dst.copy_(ones({4})), Error);
  // overlapping self-copy behaves as if through a temporary
  auto a = iota({5});
  a.slice(0, 1).copy_(a.slice(0, 0, 4));
  EXPECT_EQ(a.tolist<int>(), (std::vector<int>{0, 0, 1, 2, 3}));
}

TEST(Tensor, BadDevicesAndMissingCuda) {
  EXPECT_THROW(Device("gpu"), Error);
  EXPECT_THROW(Device("cuda:x"), Error);
  EXPECT_EQ(Device("cuda:3").index, 3);
  if (!cuda::is_available()) {
    EXPECT_FALSE(cuda::availability().reason.empty());
    EXPECT_THROW(zeros({2}, float32, Device("cuda")), Error);
  }
}
