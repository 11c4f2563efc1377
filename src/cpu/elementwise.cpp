// CPU elementwise kernels: Highway for contiguous float32, and for contiguous
// float16/bfloat16 through float32 chunks (widen, Highway, round back); scalar
// loops (which the compiler vectorises for the simple integer cases) otherwise.
#include <algorithm>

#include "core/backend.h"
#include "core/check.h"
#include "core/convert.h"
#include "core/elementwise_math.h"
#include "cpu/loops.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

namespace {
template <class T>
constexpr bool is_half_float = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Calls f with op as a compile-time constant, so that the per-element loops
// below hold no switch and the compiler can vectorise them (4M elements on a Zen 5
// core pair: an int32 add 1.7 -> 0.5-0.7 ms, uint8 3.6 -> 0.15, a float32 compare 2.5 -> 0.4).
template <class Op, Op... kOps, class F>
void with_constant(Op op, F&& f) {
  const bool found = ((op == kOps ? (f(std::integral_constant<Op, kOps>{}), true) : false) || ...);
  KILN_CHECK(found, "elementwise: an op code past the known ones (", static_cast<int>(op), ")");
}

template <class F>
void with_unary_op(UnaryOp op, F&& f) {
  with_constant<UnaryOp, UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt,
                UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Silu, UnaryOp::Gelu, UnaryOp::GeluTanh>(op, f);
}

template <class F>
void with_binary_op(BinaryOp op, F&& f) {
  with_constant<BinaryOp, BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow,
                BinaryOp::Maximum, BinaryOp::Minimum>(op, f);
}

template <class F>
void with_compare_op(CompareOp op, F&& f) {
  with_constant<CompareOp, CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt,
                CompareOp::Ge>(op, f);
}


// out = op(in) over n contiguous 16-bit floats; false when op has no SIMD kernel.
template <class T>
bool unary_half(UnaryOp op, const T* in, T* out, int64_t n) {
  alignas(64) float buf[kStageChunk];
  for (int64_t b = 0; b < n; b += kStageChunk) {
    const int64_t m = std::min(kStageChunk, n - b);
    widen(in + b, buf, m);
    if (!simd::unary_f32(op, buf, buf, static_cast<size_t>(m))) return false;  // decided by op alone: the first chunk
    narrow(buf, out + b, m);
  }
  return true;
}

// out = op(a, b) with a/b contiguous or one broadcast value; false when op has no SIMD kernel.
template <class T>
bool binary_half(BinaryOp op, const T* a, bool a_scalar, const T* b, bool b_scalar, T* out, int64_t n, float alpha) {
  alignas(64) float fa[kStageChunk], fb[kStageChunk];
  const float a0 = static_cast<float>(a[0]), b0 = static_cast<float>(b[0]);
  for (int64_t s = 0; s < n; s += kStageChunk) {
    const int64_t m = std::min(kStageChunk, n - s);
    if (!a_scalar) widen(a + s, fa, m);
    if (!b_scalar) widen(b + s, fb, m);
    if (!simd::binary_f32(op, a_scalar ? &a0 : fa, a_scalar, b_scalar ? &b0 : fb, b_scalar, fa, static_cast<size_t>(m),
                          alpha))
      return false;  // decided by op alone: the first chunk
    narrow(fa, out + s, m);
  }
  return true;
}
}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  const Tensor* ops[2] = {&out, &in};
  const auto L = layout_of(ops);
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = detail::compute_t<T>;
    T* o = out.data<T>();
    const T* x = in.data<T>();
    with_unary_op(op, [&](auto k) {
      const auto f = [](C v) { return T(math::unary<C>(decltype(k)::value, v)); };
      // (the op outside the runs, so that n is the run's own value: a byte-wide store
      // may alias anything captured by reference, which is then reloaded every element)
      for_each_run(L, [&](const int64_t (&off)[2], const int64_t (&st)[2], int64_t n) {
        if constexpr (std::is_same_v<T, float>) {
          if (st[0] == 1 && st[1] == 1 && simd::unary_f32(op, x + off[1], o + off[0], n)) return;
        } else if constexpr (is_half_float<T>) {
          if (st[0] == 1 && st[1] == 1 && unary_half(op, x + off[1], o + off[0], n)) return;
        }
        T* out_run = o + off[0];
        const T* in_run = x + off[1];
        if (st[0] == 1 && st[1] == 1) {  // unit strides spelled out: a loop the compiler vectorises
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(static_cast<C>(in_run[i]));
        } else {
          for (int64_t i = 0; i < n; ++i) out_run[i * st[0]] = f(static_cast<C>(in_run[i * st[1]]));
        }
      });
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
    with_binary_op(op, [&](auto k) {
      for_each_run(L, [&](const int64_t (&off)[3], const int64_t (&st)[3], int64_t n) {
        if constexpr (std::is_same_v<T, float>) {
          if (st[0] == 1 && (st[1] == 1 || st[1] == 0) && (st[2] == 1 || st[2] == 0) &&
              simd::binary_f32(op, x + off[1], st[1] == 0, y + off[2], st[2] == 0, o + off[0], n, al))
            return;
        } else if constexpr (is_half_float<T>) {
          if (st[0] == 1 && (st[1] == 1 || st[1] == 0) && (st[2] == 1 || st[2] == 0) &&
              binary_half(op, x + off[1], st[1] == 0, y + off[2], st[2] == 0, o + off[0], n, al))
            return;
        }
        const auto f = [al](C a, C b) { return T(math::binary<C>(decltype(k)::value, a, b, al)); };
        T* out_run = o + off[0];
        const T *a_run = x + off[1], *b_run = y + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {  // unit strides spelled out: a loop the compiler vectorises
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(static_cast<C>(a_run[i]), static_cast<C>(b_run[i]));
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
          const C bv = static_cast<C>(b_run[0]);
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(static_cast<C>(a_run[i]), bv);
        } else {
          for (int64_t i = 0; i < n; ++i)
            out_run[i * st[0]] = f(static_cast<C>(a_run[i * st[1]]), static_cast<C>(b_run[i * st[2]]));
        }
      });
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
    with_compare_op(op, [&](auto k) {
      const auto f = [](C u, C v) { return math::compare<C>(decltype(k)::value, u, v); };
      for_each_run(L, [&](const int64_t (&off)[3], const int64_t (&st)[3], int64_t n) {
        bool* out_run = o + off[0];
        const T *a_run = x + off[1], *b_run = y + off[2];
        const bool a_unit = st[1] == 1, b_unit = st[2] == 1;
        if (st[0] != 1 || !(a_unit || st[1] == 0) || !(b_unit || st[2] == 0)) {
          for (int64_t i = 0; i < n; ++i)
            out_run[i * st[0]] = f(static_cast<C>(a_run[i * st[1]]), static_cast<C>(b_run[i * st[2]]));
        } else if constexpr (!std::is_same_v<C, T>) {
          // narrow floats: compared in float32 chunks, widened by vector casts where the CPU has them
          alignas(64) float fa[kStageChunk], fb[kStageChunk];
          const float a0 = static_cast<float>(a_run[0]), b0 = static_cast<float>(b_run[0]);
          for (int64_t s = 0; s < n; s += kStageChunk) {
            const int64_t m = std::min(kStageChunk, n - s);
            if (a_unit) widen(a_run + s, fa, m);
            else std::fill(fa, fa + m, a0);
            if (b_unit) widen(b_run + s, fb, m);
            else std::fill(fb, fb + m, b0);
            for (int64_t i = 0; i < m; ++i) out_run[s + i] = f(fa[i], fb[i]);
          }
        } else if (a_unit && b_unit) {  // unit strides spelled out: loops the compiler vectorises
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(a_run[i], b_run[i]);
        } else if (a_unit) {
          const C bv = b_run[0];
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(a_run[i], bv);
        } else {
          const C av = a_run[0];
          for (int64_t i = 0; i < n; ++i) out_run[i] = f(av, b_run[i]);
        }
      });
    });
  });
}

}  // namespace kiln::cpu
