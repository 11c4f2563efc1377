// CPU elementwise kernels: Highway for contiguous float32, scalar loops
// (which the compiler vectorises for the simple integer cases) otherwise.
#include "core/backend.h"
#include "core/convert.h"
#include "core/elementwise_math.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace kiln::cpu {

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  const Tensor* ops[2] = {&out, &in};
  const auto L = layout_of(ops);
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    T* o = out.data<T>();
    const T* x = in.data<T>();
    for_each_run(L, [&](const int64_t (&off)[2], const int64_t (&st)[2], int64_t n) {
      if constexpr (std::is_same_v<T, float>) {
        if (st[0] == 1 && st[1] == 1 && simd::unary_f32(op, x + off[1], o + off[0], n)) return;
      }
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] = T(math::unary<C>(op, static_cast<C>(x[off[1] + i * st[1]])));
    });
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  const Tensor* ops[3] = {&out, &a, &b};
  const auto L = layout_of(ops);
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    T* o = out.data<T>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    const C al = static_cast<C>(alpha);
    for_each_run(L, [&](const int64_t (&off)[3], const int64_t (&st)[3], int64_t n) {
      if constexpr (std::is_same_v<T, float>) {
        if (st[0] == 1 && (st[1] == 1 || st[1] == 0) && (st[2] == 1 || st[2] == 0) &&
            simd::binary_f32(op, x + off[1], st[1] == 0, y + off[2], st[2] == 0, o + off[0], n, al))
          return;
      }
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] = T(math::binary<C>(op, static_cast<C>(x[off[1] + i * st[1]]),
                                                  static_cast<C>(y[off[2] + i * st[2]]), al));
    });
  });
}

void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const Tensor* ops[3] = {&out, &a, &b};
  const auto L = layout_of(ops);
  detail::dispatch_real(a.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    bool* o = out.data<bool>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for_each_run(L, [&](const int64_t (&off)[3], const int64_t (&st)[3], int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * st[0]] =
            math::compare<C>(op, static_cast<C>(x[off[1] + i * st[1]]), static_cast<C>(y[off[2] + i * st[2]]));
    });
  });
}

}  // namespace kiln::cpu
