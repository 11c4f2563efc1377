// CUDA unary, binary and comparison ops; the math is core/elementwise_math.h.
#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {
template <class T>
struct UnaryFn {
  UnaryOp op;
  __device__ T operator()(T x) const {
    using C = detail::compute_t<T>;
    return T(math::unary<C>(op, static_cast<C>(x)));
  }
};
template <class T>
struct BinaryFn {
  BinaryOp op;
  detail::compute_t<T> alpha;
  __device__ T operator()(T a, T b) const {
    using C = detail::compute_t<T>;
    return T(math::binary<C>(op, static_cast<C>(a), static_cast<C>(b), alpha));
  }
};
template <class T>
struct CompareFn {
  CompareOp op;
  __device__ bool operator()(T a, T b) const {
    using C = detail::compute_t<T>;
    return math::compare<C>(op, static_cast<C>(a), static_cast<C>(b));
  }
};
}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map1<T, T>(out, in, UnaryFn<T>{op});
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  detail::dispatch_arith(out.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map2<T, T>(out, a, b, BinaryFn<T>{op, static_cast<detail::compute_t<T>>(alpha)});
  });
}

void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  detail::dispatch_real(a.dtype(), op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map2<bool, T>(out, a, b, CompareFn<T>{op});
  });
}

}  // namespace kiln::cuda_backend
