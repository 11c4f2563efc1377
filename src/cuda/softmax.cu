// CUDA softmax / log_softmax over contiguous rows [M, N], in float32.
//
// Each thread keeps an online (max, sum of exp) pair over its elements, so one
// read of the row gives both; pairs meet by warp shuffles and shared memory.
//  - cached rows: a warp (up to 128 vectors) or a block (up to 2048 vectors) per
//    row, the row held in registers: one read, one write;
//  - rows path, longer rows: 256 threads per row, the row read a second time for
//    the output (from L1/L2);
//  - split path, for few long rows (a vocabulary of logits at decode): each row
//    is cut over many blocks; kernel 1 writes a (max, sum) per block, kernel 2
//    merges the row's pairs in every block and writes that block's outputs.
#include <cmath>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

struct MaxSum {
  float m, s;  // running max, sum of exp(x - m)
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;  // also keeps all -inf rows at (-inf, 0)
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  if (isnan(a.m) || isnan(b.m)) return {NAN, NAN};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}


__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = merge(v, w);
  }
  return v;
}

// Every thread of the group gets the group's pair. TPR = 32 or 256 (blockDim 256).
template <int TPR>
__device__ __forceinline__ MaxSum group_merge(MaxSum v) {
  v = warp_merge(v);
  if constexpr (TPR == 256) {
    __shared__ MaxSum warps[8];
    __shared__ MaxSum total;
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
      MaxSum w = threadIdx.x < 8 ? warps[threadIdx.x] : MaxSum{-INFINITY, 0.0f};
      w = warp_merge(w);
      if (threadIdx.x == 0) total = w;
    }
    __syncthreads();
    v = total;
  }
  return v;
}

// Folds V values into a running pair: the vector's max first, so there is one
// exp per element plus one rescale per vector (not two per element).
template <int V>
__device__ __forceinline__ MaxSum fold(MaxSum acc, const float (&v)[V]) {
  float pm = v[0];
#pragma unroll
  for (int k = 1; k < V; ++k) pm = fmaxf(pm, v[k]);
  bool any_nan = false;
#pragma unroll
  for (int k = 0; k < V; ++k) any_nan |= isnan(v[k]);
  if (any_nan) return {NAN, NAN};
  if (pm == -INFINITY) return acc;  // adds exp(-inf) = 0
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < V; ++k) s += expf(v[k] - pm);
  return merge(acc, MaxSum{pm, s});
}

template <class T, int V>
__device__ __forceinline__ MaxSum scan(const T* x, int64_t begin, int64_t end, int64_t first, int64_t step) {
  MaxSum acc{-INFINITY, 0.0f};
  for (int64_t i = begin + first; i < end; i += step) {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(x + i);
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = static_cast<float>(p.v[k]);
    acc = fold<V>(acc, v);
  }
  return acc;
}

template <class T, int V>
__device__ __forceinline__ void write(const T* x, T* y, int64_t begin, int64_t end, int64_t first, int64_t step,
                                      MaxSum t, bool log) {
  const float inv = 1.0f / t.s, log_sum = logf(t.s);  // (x - max) - log_sum keeps log_sum when max is huge
  for (int64_t i = begin + first; i < end; i += step) {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(x + i);
    Pack<T, V> q;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float v = static_cast<float>(p.v[k]);
      q.v[k] = T(log ? (v - t.m) - log_sum : expf(v - t.m) * inv);
    }
    *reinterpret_cast<Pack<T, V>*>(y + i) = q;
  }
}

template <class T, int V, int TPR>
__global__ void __launch_bounds__(256) softmax_rows_kernel(int64_t M, int64_t N, const T* __restrict__ x,
                                                           T* __restrict__ y, bool log) {
  constexpr int kRowsPerBlock = 256 / TPR;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  const int lane = threadIdx.x % TPR;
  const bool active = m < M;  // inactive threads still join the block-wide merge
  const T* xr = x + (active ? m : 0) * N;
  MaxSum t = active ? scan<T, V>(xr, 0, N, lane * V, TPR * V) : MaxSum{-INFINITY, 0.0f};
  t = group_merge<TPR>(t);
  if (active) write<T, V>(xr, y + m * N, 0, N, lane * V, TPR * V, t, log);
}

// Rows short enough to sit in registers (P vectors per thread): one read from
// memory, the pair from registers, the output written from them.
template <class T, int V, int TPR, int P>
__global__ void __launch_bounds__(256) softmax_cached_kernel(int64_t M, int64_t N, const T* __restrict__ x,
                                                             T* __restrict__ y, bool log) {
  constexpr int kRowsPerBlock = 256 / TPR;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  const int lane = threadIdx.x % TPR;
  const bool active = m < M;
  const T* xr = x + (active ? m : 0) * N;
  float v[P][V];
  MaxSum t{-INFINITY, 0.0f};
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t i = (static_cast<int64_t>(p) * TPR + lane) * V;
    if (active && i < N) {
      const Pack<T, V> q = *reinterpret_cast<const Pack<T, V>*>(xr + i);
#pragma unroll
      for (int k = 0; k < V; ++k) v[p][k] = static_cast<float>(q.v[k]);
      t = fold<V>(t, v[p]);
    }
  }
  t = group_merge<TPR>(t);
  if (!active) return;
  const float inv = 1.0f / t.s, log_sum = logf(t.s);
  T* yr = y + m * N;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t i = (static_cast<int64_t>(p) * TPR + lane) * V;
    if (i < N) {
      Pack<T, V> q;
#pragma unroll
      for (int k = 0; k < V; ++k) q.v[k] = T(log ? (v[p][k] - t.m) - log_sum : expf(v[p][k] - t.m) * inv);
      *reinterpret_cast<Pack<T, V>*>(yr + i) = q;
    }
  }
}

// Kernel 1 of the split path: the (max, sum) of chunk blockIdx.x of row blockIdx.y.
template <class T, int V>
__global__ void __launch_bounds__(256) softmax_partial_kernel(int64_t N, int64_t chunk, const T* __restrict__ x,
                                                              MaxSum* __restrict__ parts) {
  const int64_t row = blockIdx.y, begin = blockIdx.x * chunk, end = ::min(N, begin + chunk);
  MaxSum t = scan<T, V>(x + row * N, begin, end, threadIdx.x * V, 256 * V);
  t = group_merge<256>(t);
  if (threadIdx.x == 0) parts[row * gridDim.x + blockIdx.x] = t;
}

// Kernel 2: every block merges all pairs of its row, then writes its chunk.
template <class T, int V>
__global__ void __launch_bounds__(256) softmax_finish_kernel(int64_t N, int64_t chunk, const T* __restrict__ x,
                                                             T* __restrict__ y, const MaxSum* __restrict__ parts,
                                                             bool log) {
  const int64_t row = blockIdx.y, begin = blockIdx.x * chunk, end = ::min(N, begin + chunk);
  MaxSum t{-INFINITY, 0.0f};
  for (unsigned s = threadIdx.x; s < gridDim.x; s += 256) t = merge(t, parts[row * gridDim.x + s]);
  t = group_merge<256>(t);
  write<T, V>(x + row * N, y + row * N, begin, end, threadIdx.x * V, 256 * V, t, log);
}

template <class T, int V>
void launch(const Tensor& out, const Tensor& in, bool log) {
  const int64_t M = in.size(0), N = in.size(1);
  const T* x = in.data<T>();
  T* y = out.data<T>();
  cudaStream_t s = current_stream();
  const int64_t sms = sm_count();
  // Split a row when the rows alone leave most SMs idle and each chunk still has work.
  const int64_t want_blocks = sms * 2;
  if (M < want_blocks && N >= 8192) {
    int64_t splits = std::min<int64_t>((want_blocks + M - 1) / M, N / 2048);
    int64_t chunk = (N + splits - 1) / splits;
    chunk = (chunk + V - 1) / V * V;
    splits = (N + chunk - 1) / chunk;
    if (splits > 1 && M <= 65535) {
      Tensor buf = Tensor::empty({static_cast<int64_t>(M * splits * sizeof(MaxSum))}, DType::UInt8, in.device());
      auto* parts = static_cast<MaxSum*>(buf.data_ptr());
      const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(M));
      softmax_partial_kernel<T, V><<<grid, 256, 0, s>>>(N, chunk, x, parts);
      KILN_CUDA_CHECK_LAUNCH();
      softmax_finish_kernel<T, V><<<grid, 256, 0, s>>>(N, chunk, x, y, parts, log);
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  // up to 8 vectors a thread: the row lives in registers
  const int64_t per_warp = 32 * V, per_block = 256 * V;
  const unsigned warp_blocks = static_cast<unsigned>((M + 7) / 8);
  if (N <= 4 * per_warp) {
    if (N <= per_warp) softmax_cached_kernel<T, V, 32, 1><<<warp_blocks, 256, 0, s>>>(M, N, x, y, log);
    else if (N <= 2 * per_warp) softmax_cached_kernel<T, V, 32, 2><<<warp_blocks, 256, 0, s>>>(M, N, x, y, log);
    else softmax_cached_kernel<T, V, 32, 4><<<warp_blocks, 256, 0, s>>>(M, N, x, y, log);
  } else if (N <= 8 * per_block) {
    if (N <= 2 * per_block) softmax_cached_kernel<T, V, 256, 2><<<static_cast<unsigned>(M), 256, 0, s>>>(M, N, x, y, log);
    else if (N <= 4 * per_block) softmax_cached_kernel<T, V, 256, 4><<<static_cast<unsigned>(M), 256, 0, s>>>(M, N, x, y, log);
    else softmax_cached_kernel<T, V, 256, 8><<<static_cast<unsigned>(M), 256, 0, s>>>(M, N, x, y, log);
  } else if (N <= 4096) {
    softmax_rows_kernel<T, V, 32><<<warp_blocks, 256, 0, s>>>(M, N, x, y, log);
  } else {
    softmax_rows_kernel<T, V, 256><<<static_cast<unsigned>(M), 256, 0, s>>>(M, N, x, y, log);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void softmax_rows(const Tensor& out, const Tensor& in, bool log) {
  detail::dispatch_float(in.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int V = 16 / sizeof(T);
    const int64_t N = in.size(1);
    const bool vec = N % V == 0 && aligned16(in.data_ptr()) && aligned16(out.data_ptr());
    if (vec) launch<T, V>(out, in, log);
    else launch<T, 1>(out, in, log);
  });
}

}  // namespace kiln::cuda_backend
