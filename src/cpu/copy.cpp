// CPU copy/cast, fill, arange, where.
#include <algorithm>
#include <cstring>

#include "core/backend.h"
#include "core/convert.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace kiln::cpu {

namespace {
template <class F>
void dispatch_any(DType dt, const char* op, F&& f) {
  if (dt == DType::Complex64) {
    f(detail::TypeTag<std::complex<float>>{});
    return;
  }
  detail::dispatch_real(dt, op, f);
}

// A copy whose source runs contiguously along another dim than the destination
// does (a transposed view made contiguous) goes tile by tile: a tile's source
// lines stay in L1 while its rows are written. Run by run, every source element
// of a run is on a line of its own (2048 x 2048 float32: 2.5 GB/s). Tried: threads
// taking blocks of 256 x 256 elements instead of tiles along whole rows (fewer pages a
// thread at a time); alternated on a 2-core Zen 5 VM, float32: 4096 x 4096 9.6-11.0 ->
// 7.5-7.6 ms, but 4000 x 3000 6.1-6.2 -> 6.8 and 2048 x 2048 1.5-1.8 -> 1.6-1.7 (kiln's
// large blocks are huge pages, so the TLB is not what the tiles miss).
constexpr int64_t kTile = 16;

// The dim j > 0 along which the source is contiguous while the destination is
// along dim 0; 0 when the copy is not such a transpose.
int transposed_dim(const StridedLayout<2>& L) {
  if (L.ndim < 2 || L.strides[0][0] != 1 || L.strides[1][0] == 1 || L.sizes[0] < kTile / 4) return 0;
  for (int d = 1; d < L.ndim; ++d)
    if (L.strides[1][d] == 1 && L.sizes[d] >= kTile / 4) return d;
  return 0;
}

template <class D, class S>
void copy_tiles(const StridedLayout<2>& L, int j, D* dst, const S* src, bool saturate) {
  const int64_t n0 = L.sizes[0], nj = L.sizes[j], t0 = (n0 + kTile - 1) / kTile, tj = (nj + kTile - 1) / kTile;
  const int64_t tiles = L.numel / (n0 * nj) * t0 * tj, dst_j = L.strides[0][j], src_0 = L.strides[1][0];
  parallel_for(tiles, std::max<int64_t>(1, kParallelGrain / (kTile * kTile)), [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      // consecutive tiles go along the source's rows (dim j), so each of a tile's kTile
      // source rows is read sequentially across tiles, which the prefetchers follow; along
      // dim 0, every tile read its lines kTile rows apart from the last (kiln bench
      // "transpose copy f32", 4096 x 4096, alternated: 15.3-15.4 -> 10.4-10.8 ms)
      const int64_t a0 = t % tj * kTile, i0 = t / tj % t0 * kTile;
      int64_t rest = t / (t0 * tj), od = 0, os = 0;
      for (int d = 1; d < L.ndim; ++d) {
        if (d == j) continue;
        const int64_t idx = rest % L.sizes[d];
        rest /= L.sizes[d];
        od += idx * L.strides[0][d];
        os += idx * L.strides[1][d];
      }
      const int64_t i1 = std::min(n0, i0 + kTile), a1 = std::min(nj, a0 + kTile);
      for (int64_t a = a0; a < a1; ++a) {
        D* d = dst + od + a * dst_j;
        const S* s = src + os + a;
        for (int64_t i = i0; i < i1; ++i) d[i] = detail::convert<D>(s[i * src_0], saturate);
      }
    }
  });
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src, bool saturate) {
  const Tensor* ops[2] = {&dst, &src};
  const auto L = layout_of(ops);
  char* d0 = static_cast<char*>(dst.data_ptr());
  const char* s0 = static_cast<const char*>(src.data_ptr());
  dispatch_any(dst.dtype(), "copy", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch_any(src.dtype(), "copy", [&](auto stag) {
      using S = typename decltype(stag)::type;
      D* d = reinterpret_cast<D*>(d0);
      const S* s = reinterpret_cast<const S*>(s0);
      if (const int j = transposed_dim(L)) return copy_tiles(L, j, d, s, saturate);
      for_each_run(L, [&](const int64_t (&off)[2], const int64_t (&st)[2], int64_t n) {
        D* dp = d + off[0];
        const S* sp = s + off[1];
        if constexpr (std::is_same_v<D, S>) {
          if (st[0] == 1 && st[1] == 1) {
            std::memcpy(dp, sp, n * sizeof(D));
            return;
          }
        }
        // the casts of model weights and activations run through Highway
        if (st[0] == 1 && st[1] == 1 && simd::cast_run(dst.dtype(), dp, src.dtype(), sp, n, saturate)) return;
        const bool sat = saturate;
        if (st[0] == 1 && st[1] == 1)  // unit strides spelled out: a loop the compiler vectorises
          for (int64_t i = 0; i < n; ++i) dp[i] = detail::convert<D>(sp[i], sat);
        else
          for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = detail::convert<D>(sp[i * st[1]], sat);
      });
    });
  });
}

void fill(const Tensor& dst, const Scalar& value) {
  const Tensor* ops[1] = {&dst};
  const auto L = layout_of(ops);
  dispatch_any(dst.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = detail::scalar_to<T>(value);
    T* d = dst.data<T>();
    for_each_run(L, [&](const int64_t (&off)[1], const int64_t (&st)[1], int64_t n) {
      T* p = d + off[0];
      if (st[0] == 1) std::fill(p, p + n, v);
      else
        for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
}

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  detail::dispatch_arith(out.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    const int64_t n = out.numel();
    if constexpr (std::is_integral_v<T>) {
      const int64_t a = start.to_int64(), s = step.to_int64();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(a + i * s);
    } else {
      const double a = start.to_double(), s = step.to_double();
      for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(a + static_cast<double>(i) * s));
    }
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor* ops[4] = {&out, &cond, &a, &b};
  const auto L = layout_of(ops);
  dispatch_any(out.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = out.data<T>();
    const bool* c = cond.data<bool>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for_each_run(L, [&](const int64_t (&off)[4], const int64_t (&st)[4], int64_t n) {
      T* out_run = o + off[0];
      const bool* c_run = c + off[1];
      const T *x_run = x + off[2], *y_run = y + off[3];
      const int64_t so = st[0], sc = st[1], sx = st[2], sy = st[3];
      if constexpr (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
        if (so == 1 && sc == 1 && (sx == 1 || sx == 0) && (sy == 1 || sy == 0)) {
          // a select by bit mask over both sides: no branch on the condition, which a random
          // mask mispredicts half the time (4M float32: 9.2 -> 1.4 ms), and the compiler vectorises it
          using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                                       std::conditional_t<sizeof(T) == 2, uint16_t,
                                                          std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
          for (int64_t i = 0; i < n; ++i) {
            U a, b;  // the bits, through memcpy (no aliasing of T as U)
            std::memcpy(&a, x_run + i * sx, sizeof(U));  // a side may be one broadcast value
            std::memcpy(&b, y_run + i * sy, sizeof(U));
            const U mask = static_cast<U>(static_cast<U>(0) - static_cast<U>(c_run[i]));
            const U r = static_cast<U>((a & mask) | (b & static_cast<U>(~mask)));
            std::memcpy(out_run + i, &r, sizeof(U));
          }
          return;
        }
      }
      for (int64_t i = 0; i < n; ++i) out_run[i * so] = c_run[i * sc] ? x_run[i * sx] : y_run[i * sy];
    });
  });
}

}  // namespace kiln::cpu
