// Generic elementwise kernels: a flat path with 16-byte vector loads for
// contiguous operands (and broadcast scalars), and a strided path through
// StridedLayout. Launchers pick one; op-family files supply the functor.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/layout.h"
#include "cuda/common.h"

namespace kiln::cuda_backend {

inline constexpr int kThreads = 256;

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <class A, class B>
constexpr int vec_width() {
  constexpr size_t w = sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B);
  return static_cast<int>(16 / w) > 0 ? static_cast<int>(16 / w) : 1;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// out[i] = f(in[i]) for contiguous operands.
template <int V, class O, class I, class F>
__global__ void map1_flat(int64_t n, O* __restrict__ out, const I* __restrict__ in, F f, bool vec) {
  const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t i = tid; i < nv; i += stride) {
      const Pack<I, V> x = reinterpret_cast<const Pack<I, V>*>(in)[i];
      Pack<O, V> y;
#pragma unroll
      for (int k = 0; k < V; ++k) y.v[k] = f(x.v[k]);
      reinterpret_cast<Pack<O, V>*>(out)[i] = y;
    }
    done = nv * V;
  }
  for (int64_t i = done + tid; i < n; i += stride) out[i] = f(in[i]);
}

// out[i] = f(a[i], b[i]); a_scalar/b_scalar: that operand is a[0] / b[0] everywhere.
template <int V, class O, class I, class F>
__global__ void map2_flat(int64_t n, O* __restrict__ out, const I* __restrict__ a, bool a_scalar,
                          const I* __restrict__ b, bool b_scalar, F f, bool vec) {
  const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const I a0 = a[0], b0 = b[0];
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / V;
    for (int64_t i = tid; i < nv; i += stride) {
      Pack<I, V> x, y;
      if (a_scalar) {
#pragma unroll
        for (int k = 0; k < V; ++k) x.v[k] = a0;
      } else {
        x = reinterpret_cast<const Pack<I, V>*>(a)[i];
      }
      if (b_scalar) {
#pragma unroll
        for (int k = 0; k < V; ++k) y.v[k] = b0;
      } else {
        y = reinterpret_cast<const Pack<I, V>*>(b)[i];
      }
      Pack<O, V> z;
#pragma unroll
      for (int k = 0; k < V; ++k) z.v[k] = f(x.v[k], y.v[k]);
      reinterpret_cast<Pack<O, V>*>(out)[i] = z;
    }
    done = nv * V;
  }
  for (int64_t i = done + tid; i < n; i += stride) out[i] = f(a_scalar ? a0 : a[i], b_scalar ? b0 : b[i]);
}

template <class O, class I, class F>
__global__ void map1_strided(StridedLayout<2> L, O* out, const I* in, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < L.numel; i += stride) {
    int64_t off[2];
    L.offsets(i, off);
    out[off[0]] = f(in[off[1]]);
  }
}

template <class O, class I, class F>
__global__ void map2_strided(StridedLayout<3> L, O* out, const I* a, const I* b, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < L.numel; i += stride) {
    int64_t off[3];
    L.offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <int N>
StridedLayout<N> layout_or_throw(const Tensor* const (&ops)[N]) {
  StridedLayout<N> L;
  KILN_CHECK(make_layout(ops[0]->shape(), ops, L),
             "cuda: tensors with more than 16 dims that cannot be merged are not supported");
  return L;
}

// Launches f over out = f(in), picking the flat or strided kernel.
template <class O, class I, class F>
void launch_map1(const Tensor& out, const Tensor& in, F f) {
  const Tensor* ops[2] = {&out, &in};
  const auto L = layout_or_throw(ops);
  O* o = static_cast<O*>(out.data_ptr());
  const I* x = static_cast<const I*>(in.data_ptr());
  cudaStream_t s = current_stream();
  if (L.is_flat() && !L.is_scalar_operand(1) && !L.is_scalar_operand(0)) {
    constexpr int V = vec_width<O, I>();
    const bool vec = aligned16(o) && aligned16(x);
    map1_flat<V><<<grid_for(L.numel / (vec ? V : 1), kThreads), kThreads, 0, s>>>(L.numel, o, x, f, vec);
  } else {
    map1_strided<<<grid_for(L.numel, kThreads), kThreads, 0, s>>>(L, o, x, f);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <class O, class I, class F>
void launch_map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const Tensor* ops[3] = {&out, &a, &b};
  const auto L = layout_or_throw(ops);
  O* o = static_cast<O*>(out.data_ptr());
  const I* x = static_cast<const I*>(a.data_ptr());
  const I* y = static_cast<const I*>(b.data_ptr());
  cudaStream_t s = current_stream();
  if (L.is_flat() && !L.is_scalar_operand(0)) {
    constexpr int V = vec_width<O, I>();
    const bool xs = L.is_scalar_operand(1), ys = L.is_scalar_operand(2);
    const bool vec = aligned16(o) && (xs || aligned16(x)) && (ys || aligned16(y));
    map2_flat<V><<<grid_for(L.numel / (vec ? V : 1), kThreads), kThreads, 0, s>>>(L.numel, o, x, xs, y, ys, f, vec);
  } else {
    map2_strided<<<grid_for(L.numel, kThreads), kThreads, 0, s>>>(L, o, x, y, f);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
