// CPU copy/cast, fill, arange, where.
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
        for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = detail::convert<D>(sp[i * st[1]], saturate);
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
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] = c[off[1] + i * st[1]] ? x[off[2] + i * st[2]] : y[off[3] + i * st[3]];
    });
  });
}

}  // namespace kiln::cpu
