// Generic elementwise kernels. Launchers pick, per call:
//  - flat: every operand contiguous (or a broadcast scalar); 16-byte vector
//    loads, kUnroll vectors in flight per thread;
//  - rows: a [rows, cols] layout whose inner dim is contiguous or broadcast for
//    every operand (bias add, per-row scale); vector loads along the row;
//  - strided: anything else, through StridedLayout, with 32-bit index division
//    by precomputed magic numbers when the tensor has fewer than 2^31 elements.
// Op-family files supply the functor.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/layout.h"
#include "cuda/chained_launch.cuh"
#include "cuda/common.h"

namespace kiln::cuda_backend {

inline constexpr int kThreads = 256;
inline constexpr int kUnroll = 2;

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// A kernel parameter array (no over-alignment).
template <class T, int N>
struct Array {
  T v[N];
};

// Elements per vector: 16 bytes of the smaller type, at most 32 bytes of the
// larger (a bf16 -> fp8 cast moves 32 bytes in and 16 out per vector).
template <class A, class B>
constexpr int vec_width() {
  constexpr size_t lo = sizeof(A) < sizeof(B) ? sizeof(A) : sizeof(B);
  constexpr size_t hi = sizeof(A) > sizeof(B) ? sizeof(A) : sizeof(B);
  constexpr size_t v = 16 / lo < 32 / hi ? 16 / lo : 32 / hi;
  return v > 0 ? static_cast<int>(v) : 1;
}

// True when p can be read as Pack<T, V>.
template <class T, int V>
bool pack_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

// Source operand k of a flat kernel: contiguous, or one value everywhere.
template <class I>
struct FlatIn {
  const I* p;
  bool scalar;
};

template <class I, int V>
__device__ __forceinline__ Pack<I, V> load_pack(FlatIn<I> in, int64_t i) {
  Pack<I, V> x;
  if (in.scalar) {
    const I v = in.p[0];
#pragma unroll
    for (int k = 0; k < V; ++k) x.v[k] = v;
  } else {
    x = reinterpret_cast<const Pack<I, V>*>(in.p)[i];
  }
  return x;
}

// out[i] = f(in_0[i], ..., in_{A-1}[i]) over n contiguous elements.
template <int V, class O, class I, class F, int A>
__global__ void __launch_bounds__(kThreads) map_flat(int64_t n, O* __restrict__ out, Array<FlatIn<I>, A> in, F f,
                                                     bool vec) {
  chain_wait();  // a chained launch (the small fills and adds of a decode step)
  chain_release();
  int64_t done = 0;
  if (vec) {
    const int64_t nv = n / V;
    const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * kUnroll;
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < nv;
         base += step) {
      Pack<I, V> x[A][kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * kThreads;
        if (i < nv) {
#pragma unroll
          for (int a = 0; a < A; ++a) x[a][u] = load_pack<I, V>(in.v[a], i);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * kThreads;
        if (i < nv) {
          Pack<O, V> y;
#pragma unroll
          for (int k = 0; k < V; ++k) {
            if constexpr (A == 1) y.v[k] = f(x[0][u].v[k]);
            else y.v[k] = f(x[0][u].v[k], x[1][u].v[k]);
          }
          reinterpret_cast<Pack<O, V>*>(out)[i] = y;
        }
      }
    }
    done = nv * V;
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = done + blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += stride) {
    auto at = [&](int a) { return in.v[a].scalar ? in.v[a].p[0] : in.v[a].p[i]; };
    if constexpr (A == 1) out[i] = f(at(0));
    else out[i] = f(at(0), at(1));
  }
}

// [rows, cols] with each operand's column stride 0 or 1 and any row stride
// (a multiple of V). Grid: x over column vectors, y (and z) over rows.
template <int V, class O, class I, class F, int A>
__global__ void __launch_bounds__(kThreads) map_rows(int64_t rows, int64_t cols, O* __restrict__ out,
                                                     int64_t out_row_stride, Array<const I*, A> in,
                                                     Array<int64_t, A> row_stride, Array<bool, A> col_bcast, F f) {
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // column vector index
  if (cv * V >= cols) return;
  for (int64_t r = blockIdx.y + static_cast<int64_t>(blockIdx.z) * gridDim.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * gridDim.z) {
    Pack<I, V> x[A];
#pragma unroll
    for (int a = 0; a < A; ++a) {
      const I* row = in.v[a] + r * row_stride.v[a];
      x[a] = load_pack<I, V>(FlatIn<I>{row, col_bcast.v[a]}, cv);
    }
    Pack<O, V> y;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if constexpr (A == 1) y.v[k] = f(x[0].v[k]);
      else y.v[k] = f(x[0].v[k], x[1].v[k]);
    }
    reinterpret_cast<Pack<O, V>*>(out + r * out_row_stride)[cv] = y;
  }
}

// Division by a fixed 32-bit divisor with a multiply and a shift (Granlund &
// Montgomery); valid for dividends below 2^31.
struct FastDivmod {
  uint32_t d = 1, mul = 0, shift = 0;
  FastDivmod() = default;
  explicit FastDivmod(uint32_t divisor) : d(divisor) {
    while ((1u << shift) < d) ++shift;
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, mul) + n) >> shift; }
};

template <int N>
struct Layout32 {
  int ndim;
  uint32_t numel;
  FastDivmod sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  __device__ __forceinline__ void offsets(uint32_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      uint32_t idx = i;
      if (d != ndim - 1) {
        const uint32_t q = sizes[d].div(i);
        idx = i - q * sizes[d].d;
        i = q;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(idx) * strides[k][d];
    }
  }
};

template <int N>
Layout32<N> to_layout32(const StridedLayout<N>& L) {
  Layout32<N> r{};
  r.ndim = L.ndim;
  r.numel = static_cast<uint32_t>(L.numel);
  for (int d = 0; d < L.ndim; ++d) {
    r.sizes[d] = FastDivmod(static_cast<uint32_t>(L.sizes[d]));
    for (int k = 0; k < N; ++k) r.strides[k][d] = L.strides[k][d];
  }
  return r;
}

// Operand 0 of L is the output; operands 1.. are the inputs.
template <class Lay, class O, class I, class F, int A>
__global__ void __launch_bounds__(kThreads) map_strided(Lay L, O* out, Array<const I*, A> in, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < L.numel; i += stride) {
    int64_t off[A + 1];
    L.offsets(static_cast<decltype(L.numel)>(i), off);
    if constexpr (A == 1) out[off[0]] = f(in.v[0][off[1]]);
    else out[off[0]] = f(in.v[0][off[1]], in.v[1][off[2]]);
  }
}

template <int N>
StridedLayout<N> layout_or_throw(const Tensor* const (&ops)[N]) {
  StridedLayout<N> L;
  KILN_CHECK(make_layout(ops[0]->shape(), ops, L),
             "cuda: tensors with more than 16 dims that cannot be merged are not supported");
  return L;
}

// The strided kernel indexes in 32 bits; a layout of 2^31 elements or more is
// cut along its outermost dim into launches that each stay below that.
template <int N, class O, class I, class F, int A>
void launch_strided(StridedLayout<N> L, O* out, Array<const I*, A> in, F f, cudaStream_t s) {
  constexpr int64_t kMax = int64_t{1} << 31;
  if (L.numel < kMax) {
    map_strided<<<grid_for(L.numel, kThreads), kThreads, 0, s>>>(to_layout32(L), out, in, f);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  const int outer = L.ndim - 1;
  const int64_t inner = L.numel / L.sizes[outer];
  StridedLayout<N> sub = L;
  const int64_t per = std::max<int64_t>(1, (kMax - 1) / inner);
  for (int64_t o0 = 0; o0 < L.sizes[outer]; o0 += per) {
    const int64_t n = std::min(per, L.sizes[outer] - o0);
    sub.sizes[outer] = n;
    sub.numel = inner * n;
    if (n == 1) sub.ndim = outer;  // the chunk is one slice: drop the dim (recurse further if still too big)
    Array<const I*, A> in_o = in;
    for (int a = 0; a < A; ++a) in_o.v[a] += o0 * L.strides[a + 1][outer];
    launch_strided(sub, out + o0 * L.strides[0][outer], in_o, f, s);
    sub.ndim = L.ndim;
  }
}

// out = f(inputs...), every input of type I and the shape of out (broadcasts are
// stride-0 views).
template <class O, class I, int A, class F>
void launch_map(const Tensor& out, const Tensor* const (&inputs)[A], F f) {
  const Tensor* ops[A + 1];
  ops[0] = &out;
  for (int a = 0; a < A; ++a) ops[a + 1] = inputs[a];
  const auto L = layout_or_throw(ops);
  if (L.numel == 0) return;
  O* o = static_cast<O*>(out.data_ptr());
  Array<const I*, A> p;
  for (int a = 0; a < A; ++a) p.v[a] = static_cast<const I*>(inputs[a]->data_ptr());
  cudaStream_t s = current_stream();
  constexpr int V = vec_width<O, I>();

  if (L.is_flat() && !L.is_scalar_operand(0)) {
    Array<FlatIn<I>, A> in;
    bool vec = pack_aligned<O, V>(o);
    for (int a = 0; a < A; ++a) {
      in.v[a] = FlatIn<I>{p.v[a], L.is_scalar_operand(a + 1)};
      vec = vec && (in.v[a].scalar || pack_aligned<I, V>(p.v[a]));
    }
    const int64_t items = vec ? (L.numel / V + kUnroll - 1) / kUnroll : L.numel;
    launch_chained(map_flat<V, O, I, F, A>, grid_all(items, kThreads), kThreads, 0, L.numel, o, in, f, vec);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  // rows: dim 0 (innermost) contiguous or broadcast everywhere, output contiguous in it
  if (L.ndim == 2 && L.strides[0][0] == 1 && L.sizes[0] % V == 0 && pack_aligned<O, V>(o) &&
      L.strides[0][1] % V == 0) {
    bool ok = true;
    Array<int64_t, A> rs;
    Array<bool, A> bc;
    for (int a = 0; a < A; ++a) {
      const int64_t cs = L.strides[a + 1][0];
      rs.v[a] = L.strides[a + 1][1];
      bc.v[a] = cs == 0;
      ok = ok && (cs == 0 || (cs == 1 && pack_aligned<I, V>(p.v[a]) && rs.v[a] % V == 0));
    }
    if (ok) {
      const int64_t rows = L.sizes[1], cols = L.sizes[0];
      const unsigned gx = static_cast<unsigned>((cols / V + kThreads - 1) / kThreads);
      const int64_t want_y = std::max<int64_t>(1, static_cast<int64_t>(sm_count()) * 16 / gx);
      const int64_t gy_total = std::min<int64_t>(rows, want_y);
      const unsigned gy = static_cast<unsigned>(std::min<int64_t>(gy_total, 65535));
      const unsigned gz = static_cast<unsigned>(std::min<int64_t>((gy_total + gy - 1) / gy, 65535));
      map_rows<V><<<dim3(gx, gy, gz), kThreads, 0, s>>>(rows, cols, o, L.strides[0][1], p, rs, bc, f);
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  launch_strided(L, o, p, f, s);
}
template <class O, class I, class F>
void launch_map1(const Tensor& out, const Tensor& in, F f) {
  const Tensor* inputs[1] = {&in};
  launch_map<O, I>(out, inputs, f);
}

template <class O, class I, class F>
void launch_map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const Tensor* inputs[2] = {&a, &b};
  launch_map<O, I>(out, inputs, f);
}

// out = f(in) for contiguous out and in of the same shape: the flat kernel only
// (casts, whose many dtype pairs would otherwise multiply build time).
template <class O, class I, class F>
void launch_flat1(const Tensor& out, const Tensor& in, F f) {
  KILN_CHECK(out.is_contiguous() && in.is_contiguous() && out.numel() == in.numel(),
             "launch_flat1: needs contiguous operands of one size");
  const int64_t n = out.numel();
  if (n == 0) return;
  O* o = static_cast<O*>(out.data_ptr());
  const I* x = static_cast<const I*>(in.data_ptr());
  constexpr int V = vec_width<O, I>();
  const bool vec = pack_aligned<O, V>(o) && pack_aligned<I, V>(x);
  Array<FlatIn<I>, 1> args{{FlatIn<I>{x, false}}};
  const int64_t items = vec ? (n / V + kUnroll - 1) / kUnroll : n;
  launch_chained(map_flat<V, O, I, F, 1>, grid_all(items, kThreads), kThreads, 0, n, o, args, f, vec);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
