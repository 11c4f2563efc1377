// CUDA unary, binary and comparison ops; the math is core/elementwise_math.h.
// For float32/float16/bfloat16 the op is a template argument, so each kernel
// holds only its own math (no per-element switch); integer dtypes, rarer and
// cheap, share one kernel per dtype with the op read at run time.
#include <utility>

#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {
template <class T>
constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class T, class Op>
struct UnaryFn {
  Op op;  // UnaryOp, or std::integral_constant<UnaryOp, ...>
  __device__ T operator()(T x) const {
    using C = detail::compute_t<T>;
    if constexpr (is_16bit_float_v<T> && !std::is_same_v<Op, UnaryOp>) {
      // Rounding to 16 bits hides the fast intrinsics' last bits (2^-21 relative):
      // sigmoid and silu stay memory-bound instead of waiting on the full-precision divide.
      const float v = static_cast<float>(x);
      if constexpr (Op::value == UnaryOp::Sigmoid) return T(__fdividef(1.0f, 1.0f + __expf(-v)));
      if constexpr (Op::value == UnaryOp::Silu) return T(__fdividef(v, 1.0f + __expf(-v)));
    }
    return T(math::unary<C>(static_cast<UnaryOp>(op), static_cast<C>(x)));
  }
};
template <class T, class Op>
struct BinaryFn {
  Op op;
  detail::compute_t<T> alpha;
  __device__ T operator()(T a, T b) const {
    using C = detail::compute_t<T>;
    return T(math::binary<C>(static_cast<BinaryOp>(op), static_cast<C>(a), static_cast<C>(b), alpha));
  }
};
template <class T, class Op>
struct CompareFn {
  Op op;
  __device__ bool operator()(T a, T b) const {
    using C = detail::compute_t<T>;
    return math::compare<C>(static_cast<CompareOp>(op), static_cast<C>(a), static_cast<C>(b));
  }
};

static_assert(static_cast<int>(UnaryOp::GeluTanh) == 10 && static_cast<int>(BinaryOp::Minimum) == 6,
              "with_constant below covers every op: update the counts");

template <class T>
constexpr bool is_float_v = std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Calls f(std::integral_constant<E, e>) for the runtime value `e` of an enum with `count` values.
template <class E, int... I, class F>
void with_constant(E e, std::integer_sequence<int, I...>, F&& f) {
  ((static_cast<int>(e) == I ? (f(std::integral_constant<E, static_cast<E>(I)>{}), 0) : 0), ...);
}
}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      with_constant(op, std::make_integer_sequence<int, 11>{}, [&](auto c) {
        launch_map1<T, T>(out, in, UnaryFn<T, decltype(c)>{c});
      });
    } else {
      launch_map1<T, T>(out, in, UnaryFn<T, UnaryOp>{op});
    }
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto al = static_cast<detail::compute_t<T>>(alpha);
    if constexpr (is_float_v<T>) {
      with_constant(op, std::make_integer_sequence<int, 7>{}, [&](auto c) {
        launch_map2<T, T>(out, a, b, BinaryFn<T, decltype(c)>{c, al});
      });
    } else {
      launch_map2<T, T>(out, a, b, BinaryFn<T, BinaryOp>{op, al});
    }
  });
}

void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  detail::dispatch_real(a.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map2<bool, T>(out, a, b, CompareFn<T, CompareOp>{op});
  });
}

}  // namespace kiln::cuda_backend
