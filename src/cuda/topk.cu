// CUDA topk over contiguous rows [M, N], float dtypes.
//
// The total order is (value, NaN highest; then lower index). Rows up to 1024
// (MoE router logits: 8..512 experts): k <= 8 takes k passes, pass j picking the
// best element that ranks strictly below pass j-1's pick, so no element needs a
// "taken" flag, with the row in a warp's registers and a pass a few shuffles;
// larger k sorts the row in shared memory. Longer rows use a block that re-reads
// the row (from L2) each pass.
#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

struct Cand {
  float v;
  int64_t i;  // -1: none
};

// True when a ranks before b.
__device__ __forceinline__ bool ranks_before(Cand a, Cand b, bool largest) {
  if (b.i < 0) return a.i >= 0;
  if (a.i < 0) return false;
  const bool na = isnan(a.v), nb = isnan(b.v);
  if (na || nb) {
    if (na && nb) return a.i < b.i;
    return largest ? na : nb;
  }
  if (a.v != b.v) return largest ? a.v > b.v : a.v < b.v;
  return a.i < b.i;
}

__device__ __forceinline__ Cand pick(Cand a, Cand b, bool largest) { return ranks_before(b, a, largest) ? b : a; }

__device__ __forceinline__ Cand warp_best(Cand c, bool largest) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Cand other{__shfl_xor_sync(0xffffffffu, c.v, o), __shfl_xor_sync(0xffffffffu, c.i, o)};
    c = pick(c, other, largest);
  }
  return c;
}

// A warp per row; lane l holds elements l, l + 32, ... (P of them).
template <class T, int P>
__global__ void __launch_bounds__(256) topk_warp_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ x,
                                                        T* __restrict__ vo, int64_t* __restrict__ io, bool largest) {
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (m >= M) return;  // whole warps leave together
  const T* row = x + m * N;
  float v[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int64_t e = p * 32 + lane;
    v[p] = e < N ? static_cast<float>(row[e]) : 0.0f;
  }
  Cand prev{0.0f, -1};
  for (int64_t j = 0; j < K; ++j) {
    Cand best{0.0f, -1};
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const Cand c{v[p], p * 32 + lane};
      if (c.i < N && (prev.i < 0 || ranks_before(prev, c, largest))) best = pick(best, c, largest);
    }
    best = warp_best(best, largest);
    if (lane == 0) {
      vo[m * K + j] = row[best.i];
      io[m * K + j] = best.i;
    }
    prev = best;
  }
}

// A block per row, k > 8 and rows up to 1024: the row is bitonic-sorted in
// shared memory (best first, padding last) and the first k are written, so the
// cost is log^2(N) block steps whatever k is, instead of k dependent passes.
constexpr int kBitonicMax = 1024;

template <class T>
__global__ void __launch_bounds__(256) topk_bitonic_kernel(int64_t N, int64_t K, const T* __restrict__ x,
                                                           T* __restrict__ vo, int64_t* __restrict__ io,
                                                           bool largest) {
  __shared__ float key[kBitonicMax];
  __shared__ int32_t idx[kBitonicMax];
  const int64_t m = blockIdx.x;
  const T* row = x + m * N;
  int np = 1;
  while (np < N) np <<= 1;
  for (int e = threadIdx.x; e < np; e += blockDim.x) {
    key[e] = e < N ? static_cast<float>(row[e]) : 0.0f;
    idx[e] = e < N ? e : -1;  // ranks after every element
  }
  __syncthreads();
  for (int size = 2; size <= np; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int t = threadIdx.x; t < np / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (stride - 1)), j = i + stride;
        const Cand a{key[i], idx[i]}, b{key[j], idx[j]};
        const bool best_first = (i & size) == 0;
        if (best_first ? ranks_before(b, a, largest) : ranks_before(a, b, largest)) {
          key[i] = b.v, idx[i] = static_cast<int32_t>(b.i);
          key[j] = a.v, idx[j] = static_cast<int32_t>(a.i);
        }
      }
      __syncthreads();
    }
  }
  for (int64_t j = threadIdx.x; j < K; j += blockDim.x) {
    vo[m * K + j] = row[idx[j]];
    io[m * K + j] = idx[j];
  }
}

// A block per row for long rows.
template <class T>
__global__ void __launch_bounds__(256) topk_block_kernel(int64_t N, int64_t K, const T* __restrict__ x,
                                                         T* __restrict__ vo, int64_t* __restrict__ io, bool largest) {
  const int64_t m = blockIdx.x;
  const T* row = x + m * N;
  __shared__ Cand warps[8];
  __shared__ Cand chosen;
  Cand prev{0.0f, -1};
  for (int64_t j = 0; j < K; ++j) {
    Cand best{0.0f, -1};
    for (int64_t e = threadIdx.x; e < N; e += 256) {
      const Cand c{static_cast<float>(row[e]), e};
      if (prev.i < 0 || ranks_before(prev, c, largest)) best = pick(best, c, largest);
    }
    best = warp_best(best, largest);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x < 32) {
      Cand w = threadIdx.x < 8 ? warps[threadIdx.x] : Cand{0.0f, -1};
      w = warp_best(w, largest);
      if (threadIdx.x == 0) {
        chosen = w;
        vo[m * K + j] = row[w.i];
        io[m * K + j] = w.i;
      }
    }
    __syncthreads();
    prev = chosen;
  }
}

}  // namespace

void topk_rows(const Tensor& values, const Tensor& indices, const Tensor& in, bool largest) {
  const int64_t M = in.size(0), N = in.size(1), K = values.size(1);
  detail::dispatch_float(in.dtype(), "topk (CUDA)", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    cudaStream_t s = current_stream();
    const unsigned warp_blocks = static_cast<unsigned>((M + 7) / 8);
    if (N <= kBitonicMax && K > 8) {
      KILN_CHECK(M <= 0x7fffffff, "topk: too many rows (", M, ")");
      topk_bitonic_kernel<T><<<static_cast<unsigned>(M), 256, 0, s>>>(N, K, x, vo, io, largest);
    } else if (N <= 1024) {
      if (N <= 32) topk_warp_kernel<T, 1><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else if (N <= 128) topk_warp_kernel<T, 4><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else if (N <= 512) topk_warp_kernel<T, 16><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else topk_warp_kernel<T, 32><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
    } else {
      KILN_CHECK(M <= 0x7fffffff, "topk: too many rows (", M, ")");
      topk_block_kernel<T><<<static_cast<unsigned>(M), 256, 0, s>>>(N, K, x, vo, io, largest);
    }
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda_backend
