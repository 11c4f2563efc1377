// CPU reductions over the [M kept, R reduced] view built by the front door.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "core/convert.h"
#include "core/elementwise_math.h"
#include "cpu/loops.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

namespace {

struct Dims {
  std::vector<int64_t> sizes, strides;  // row-major, merged where contiguous
};

Dims merged(const Shape& shape, const Shape& strides, size_t begin, size_t end) {
  Dims d;
  for (size_t i = begin; i < end; ++i) {
    if (shape[i] == 1) continue;
    if (!d.sizes.empty() && d.strides.back() == strides[i] * shape[i]) {
      d.sizes.back() *= shape[i];
      d.strides.back() = strides[i];
    } else {
      d.sizes.push_back(shape[i]);
      d.strides.push_back(strides[i]);
    }
  }
  return d;
}

int64_t offset_of(const Dims& d, int64_t linear) {
  int64_t off = 0;
  for (int64_t i = static_cast<int64_t>(d.sizes.size()) - 1; i >= 0; --i) {
    off += (linear % d.sizes[i]) * d.strides[i];
    linear /= d.sizes[i];
  }
  return off;
}

bool is_unit(const Dims& d) { return d.sizes.empty() || (d.sizes.size() == 1 && d.strides[0] == 1); }

// Column sums of tall inputs by stripes of rows (reduce_typed): at most kStripes stripes
// of at least kStripeMinRows rows, for up to kStripeMaxCols columns (their partial sums
// take stripes * M accumulators).
// Each stripe walks its rows a tile of columns at a time (rows past 1024 columns four
// at a pass), the tile's accumulators held in L1 (16-bit rows are widened into one
// kStageChunk buffer, a quarter of it a row when they go four at a time).
constexpr int64_t kStripes = 32, kStripeMinRows = 64, kStripeMaxCols = 1 << 16, kStripeTile = kStageChunk;

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<detail::compute_t<T>>, double, detail::compute_t<T>>;

// Running state of one output: value and, for max/min, the index of the first extreme.
template <class A>
struct Acc {
  A v;
  int64_t idx = 0;
};

template <class A>
A identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod: return A(1);
    case ReduceOp::Max:
      if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::lowest();
    case ReduceOp::Min:
      if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::max();
    default: return A(0);
  }
}

// max: x beats the current value when larger, or NaN over a number.
template <class A>
bool beats(ReduceOp op, A x, A cur) {
  if (math::is_nan(cur)) return false;
  if (math::is_nan(x)) return true;
  return op == ReduceOp::Max ? x > cur : x < cur;
}

template <class A>
void step(ReduceOp op, Acc<A>& s, A x, int64_t r) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: s.v += x; break;
    case ReduceOp::Prod: s.v *= x; break;
    default:
      if (beats(op, x, s.v) || (r == 0)) {
        s.v = x;
        s.idx = r;
      }
  }
}

// Folds y (the result of a later stretch of the same row) into s.
template <class A>
void merge(ReduceOp op, Acc<A>& s, const Acc<A>& y) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: s.v += y.v; break;
    case ReduceOp::Prod: s.v *= y.v; break;
    default:
      if (beats(op, y.v, s.v)) s = y;  // strictly better: among equals the earlier stretch keeps its index
  }
}

// The state over row[0, n), indices counted from `base`. Sums and max/min of
// float types run through Highway (16-bit floats widened in L1-sized chunks);
// max/min with an index then look for the first element equal to the extreme (or
// the first NaN), the one the scalar steps keep (a decode step's argmax over a
// 151936-logit bf16 row: 188 -> 26 us on a 2-core Zen 5 VM).
template <class T, class A>
Acc<A> row_acc(ReduceOp op, const T* row, int64_t n, int64_t base, bool with_index) {
  Acc<A> s{identity<A>(op)};
  s.idx = base;  // the first element's index, kept when no element beats the identity (all -inf, say)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const bool sum = op == ReduceOp::Sum || op == ReduceOp::Mean;
    const bool extreme = (op == ReduceOp::Max || op == ReduceOp::Min) && n > 0;
    if (sum || extreme) {
      // calls f(float32 chunk, its length, its offset) over the row, in order, until f returns true
      auto chunks = [&](auto f) {
        if constexpr (std::is_same_v<T, float>) {
          f(row, n, int64_t{0});
        } else {
          alignas(64) float buf[kStageChunk];
          for (int64_t b = 0; b < n; b += kStageChunk) {
            const int64_t m = std::min(kStageChunk, n - b);
            widen(row + b, buf, m);
            if (f(static_cast<const float*>(buf), m, b)) return;
          }
        }
      };
      chunks([&](const float* p, int64_t m, int64_t) {
        if (sum) {
          s.v += simd::sum_f32(p, static_cast<size_t>(m));
        } else {
          const float e = simd::extreme_f32(op == ReduceOp::Max, p, static_cast<size_t>(m));
          if (beats(op, static_cast<A>(e), s.v)) s.v = e;
        }
        return false;
      });
      if (extreme && with_index)
        chunks([&](const float* p, int64_t m, int64_t b) {
          const auto j = static_cast<int64_t>(simd::find_first_f32(p, static_cast<size_t>(m), static_cast<float>(s.v)));
          if (j < m) s.idx = base + b + j;
          return j < m;
        });
      return s;
    }
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) <= 4) {
    // max / min of integers up to 32 bits: one select per element and no switch, so the
    // loop vectorises (amax of 4M int8: 0.63-0.95 -> 0.24 ms, uint8 1.2 -> 0.08 on a Zen 5
    // core pair); the first index of the extreme by a second pass, as for floats. (64-bit
    // lanes have no SIMD compare in the baseline x86-64 build: a chain of selects there
    // was slower than the well-predicted branch of the steps below. Sums of integers
    // arrive here as int64: the front door widens them.)
    if ((op == ReduceOp::Max || op == ReduceOp::Min) && n > 0) {
      A e = static_cast<A>(row[0]);
      if (op == ReduceOp::Max)
        for (int64_t r = 1; r < n; ++r) e = std::max(e, static_cast<A>(row[r]));
      else
        for (int64_t r = 1; r < n; ++r) e = std::min(e, static_cast<A>(row[r]));
      s.v = e;
      if (with_index)
        for (int64_t r = 0; r < n; ++r)
          if (static_cast<A>(row[r]) == e) {
            s.idx = base + r;
            break;
          }
      return s;
    }
  }
  for (int64_t r = 0; r < n; ++r) step(op, s, static_cast<A>(static_cast<detail::compute_t<T>>(row[r])), base + r);
  return s;
}

template <class T>
void reduce_typed(const ReduceArgs& args) {
  using A = acc_t<T>;
  const ReduceOp op = args.op;
  const size_t nk = static_cast<size_t>(args.num_kept_dims);
  Tensor in = args.in;
  Dims kept = merged(in.shape(), in.strides(), 0, nk);
  Dims red = merged(in.shape(), in.strides(), nk, in.shape().size());
  if (!is_unit(red) && !(is_unit(kept) && args.M > 1)) {
    in = in.contiguous();
    kept = merged(in.shape(), in.strides(), 0, nk);
    red = merged(in.shape(), in.strides(), nk, in.shape().size());
  }
  const T* x = in.data<T>();
  T* out = args.out.data<T>();
  int64_t* out_idx = args.out_index.defined() ? args.out_index.data<int64_t>() : nullptr;
  const int64_t M = args.M, R = args.R;
  const double scale = op == ReduceOp::Mean ? 1.0 / static_cast<double>(R) : 1.0;
  auto finish = [&](int64_t m, const Acc<A>& s) {
    A v = s.v;
    if (op == ReduceOp::Mean) v = static_cast<A>(static_cast<double>(v) * scale);
    if constexpr (std::is_floating_point_v<A>) out[m] = T(static_cast<float>(v));
    else out[m] = static_cast<T>(v);
    if (out_idx) out_idx[m] = s.idx;
  };
  if (is_unit(red)) {  // each output reduces one contiguous row
    constexpr int64_t kStretch = 1 << 16;
    if (M < 4 && R >= 4 * kStretch) {
      // few long rows (a full reduction): threads take stretches of the row, merged in
      // order (the same result however they are shared); balanced, as the decode linear
      // (src/cpu/loops.h), since a sum past the caches is a stream that a slow core holds up
      for (int64_t m = 0; m < M; ++m) {
        const T* row = x + offset_of(kept, m);
        const int64_t parts = (R + kStretch - 1) / kStretch;
        std::vector<Acc<A>> acc(static_cast<size_t>(parts));
        parallel_for_balanced(parts, 1, [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c)
            acc[c] = row_acc<T, A>(op, row + c * kStretch, std::min(kStretch, R - c * kStretch), c * kStretch,
                                   out_idx != nullptr);
        });
        Acc<A> s = acc[0];
        for (int64_t c = 1; c < parts; ++c) merge(op, s, acc[c]);
        finish(m, s);
      }
      return;
    }
    parallel_for(M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m) finish(m, row_acc<T, A>(op, x + offset_of(kept, m), R, 0, out_idx != nullptr));
    });
    return;
  }
  // kept dims contiguous: stream over the reduced index, a slice of M at a time
  if constexpr (std::is_floating_point_v<detail::compute_t<T>>) {
    if ((op == ReduceOp::Sum || op == ReduceOp::Mean) && M <= kStripeMaxCols && R >= 2 * kStripeMinRows) {
      // tall ([4096, 4096] or [65536, 256] over dim 0): threads take stripes of rows and
      // add each row into their stripe's column sums with a Highway kernel. Before, they
      // split the columns (one thread only, for 256 of them) and added in the baseline
      // build's SSE2 loop. In one process on this file's 2-core machine: [4096, 4096]
      // 5.2-5.9 -> 4.2-4.3 ms, [65536, 256] 4.8-5.3 -> 1.5, bfloat16 [4096, 4096] 4.0 ->
      // 2.5-2.9, [256, 65536] 4.3-4.5 -> 3.9-4.0. The stripes depend on R alone and are
      // added in order, so the result does not depend on the number of threads.
      static_assert(std::is_same_v<A, double>, "float types sum in double (accumulate_f64)");
      const int64_t stripes = std::min<int64_t>(kStripes, R / kStripeMinRows);
      // Rows longer than kFourRowsPast elements go four at a time (accumulate4_f64): a
      // stripe then reads a tile of each row, not whole rows in sequence, and one row at a
      // time keeps too few loads in flight. Shorter rows are read in sequence, and one at a
      // time is faster. Standalone, on a 2-core Zen 5 VM, float32 one row / four rows a
      // pass: [4096, 4096] 3.6 / 1.6 ms, [8192, 2048] 1.95 / 1.60, [16384, 1024] 1.27 /
      // 1.62, [65536, 256] 1.24 / 1.67. 16-bit rows four at a time are widened into one
      // staging buffer, so their tile is a quarter of it.
      constexpr int64_t kFourRowsPast = 1024;
      const bool four_rows = M > kFourRowsPast;
      const int64_t tile = std::is_same_v<T, float> || !four_rows ? kStripeTile : kStageChunk / 4;
      std::vector<A> part(static_cast<size_t>(stripes * M), A(0));
      parallel_for_balanced(stripes, 1, [&](int64_t sb, int64_t se) {
        alignas(64) float buf[kStageChunk];
        const auto row = [&](int64_t r, int64_t c, int g, int64_t len) -> const float* {
          const T* in = x + offset_of(red, r) + c;
          if constexpr (std::is_same_v<T, float>) {
            return in;
          } else {
            widen(in, buf + g * tile, len);
            return buf + g * tile;
          }
        };
        for (int64_t st = sb; st < se; ++st) {
          const int64_t r0 = st * R / stripes, r1 = (st + 1) * R / stripes;
          // column tiles whose accumulators stay in L1 across the stripe's rows
          for (int64_t c = 0; c < M; c += tile) {
            const int64_t len = std::min(tile, M - c);
            const auto n = static_cast<size_t>(len);
            A* sums = part.data() + st * M + c;
            int64_t r = r0;
            for (; four_rows && r + 4 <= r1; r += 4)
              simd::accumulate4_f64(row(r, c, 0, len), row(r + 1, c, 1, len), row(r + 2, c, 2, len),
                                    row(r + 3, c, 3, len), sums, n);
            for (; r < r1; ++r) simd::accumulate_f64(row(r, c, 0, len), sums, n);
          }
        }
      });
      for (int64_t m = 0; m < M; ++m) {
        A v = part[static_cast<size_t>(m)];
        for (int64_t st = 1; st < stripes; ++st) v += part[static_cast<size_t>(st * M + m)];
        finish(m, Acc<A>{v});
      }
      return;
    }
    if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
      // sums of floats: each slice widened by the vector casts, then one add per column
      // with no switch, which vectorises ([64, 65536] over dim 0, float16: 2.6 -> 0.7 ms)
      parallel_for(M, 1024, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; c += kStageChunk) {
          const int64_t len = std::min(kStageChunk, e - c);
          alignas(64) float buf[kStageChunk];
          std::vector<A> sums(static_cast<size_t>(len), A(0));
          for (int64_t r = 0; r < R; ++r) {
            widen(x + offset_of(red, r) + c, buf, len);
            for (int64_t j = 0; j < len; ++j) sums[j] += static_cast<A>(buf[j]);
          }
          for (int64_t j = 0; j < len; ++j) finish(c + j, Acc<A>{sums[j]});
        }
      });
      return;
    }
  }
  parallel_for(M, 1024, [&](int64_t b, int64_t e) {
    std::vector<Acc<A>> acc(e - b, Acc<A>{identity<A>(op)});
    for (int64_t r = 0; r < R; ++r) {
      const T* slice = x + offset_of(red, r);
      for (int64_t m = b; m < e; ++m)
        step(op, acc[m - b], static_cast<A>(static_cast<detail::compute_t<T>>(slice[m])), r);
    }
    for (int64_t m = b; m < e; ++m) finish(m, acc[m - b]);
  });
}

}  // namespace

void reduce(const ReduceArgs& args) {
  detail::dispatch_arith(args.in.dtype(), op_name(args.op), [&](auto tag) {
    reduce_typed<typename decltype(tag)::type>(args);
  });
}

}  // namespace kiln::cpu
