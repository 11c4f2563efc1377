// CUDA topk over contiguous rows [M, N], float dtypes.
//
// The total order is (value, NaN highest, -0 equal to +0; then lower index).
// Every element becomes one 64-bit rank key (rank_key.cuh), so a comparison is
// one integer compare. Rows up to 1024 (MoE router logits: 8..512 experts) sit
// in a warp's registers: k <= 8 takes k passes, pass j picking the largest key
// below pass j-1's pick, so no element needs a "taken" flag and a pass is a few
// shuffles; larger k bitonic-sorts the row across the warp. Longer rows use a
// block that re-reads the row (from L2) each pass.
#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/map.cuh"
#include "cuda/rank_key.cuh"

namespace kiln::cuda_backend {

namespace {

// A warp per row, k <= 8; lane l holds elements l, l + 32, ... (P of them).
template <class T, int P>
__global__ void __launch_bounds__(256) topk_warp_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ x,
                                                        T* __restrict__ vo, int64_t* __restrict__ io, bool largest) {
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (m >= M) return;  // whole warps leave together
  const T* row = x + m * N;
  RankKey key[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = p * 32 + lane;
    key[p] = e < N ? rank_key(static_cast<float>(row[e]), e, largest) : 0;
  }
  RankKey prev = ~0ull;
  for (int64_t j = 0; j < K; ++j) {
    const RankKey best = warp_next_key(key, prev);
    if (lane == 0) {
      const uint32_t i = key_index(best);
      vo[m * K + j] = row[i];
      io[m * K + j] = i;
    }
    prev = best;
  }
}

// One compare-exchange step of the bitonic network (descending keys), with
// (size, stride) known at compile time so every register index is static. Lane
// l holds elements l P .. l P + P - 1: strides below P compare within a lane,
// larger ones pair lane l with lane l ^ (stride / P).
template <int P, int Size, int Stride>
__device__ __forceinline__ void bitonic_step(RankKey (&key)[P], int lane) {
  if constexpr (Stride < P) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (p & Stride) continue;
      const int q = p | Stride;
      const bool descending = ((lane * P + p) & Size) == 0;
      const RankKey hi = key_max(key[p], key[q]), lo = key_min(key[p], key[q]);
      key[p] = descending ? hi : lo;
      key[q] = descending ? lo : hi;
    }
  } else {
    constexpr int lane_stride = Stride / P;
    const bool keep_max = ((lane & lane_stride) == 0) == (((lane * P) & Size) == 0);
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const RankKey other = __shfl_xor_sync(0xffffffffu, key[p], lane_stride);
      key[p] = keep_max ? key_max(key[p], other) : key_min(key[p], other);
    }
  }
  if constexpr (Stride > 1) bitonic_step<P, Size, Stride / 2>(key, lane);
}

template <int P, int Size = 2>
__device__ __forceinline__ void bitonic_sort(RankKey (&key)[P], int lane) {
  bitonic_step<P, Size, Size / 2>(key, lane);
  if constexpr (Size < 32 * P) bitonic_sort<P, Size * 2>(key, lane);
}

// A warp per row, k > 8 and rows up to 1024: the row is sorted in the warp's
// registers (best first, padding last) and the first k are written, so the cost
// is log^2(32 P) steps whatever k is, instead of k dependent passes.
constexpr int kWarpRowMax = 1024;

template <class T, int P>
__global__ void __launch_bounds__(256) topk_warp_sort_kernel(int64_t M, int64_t N, int64_t K,
                                                             const T* __restrict__ x, T* __restrict__ vo,
                                                             int64_t* __restrict__ io, bool largest) {
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (m >= M) return;  // whole warps leave together
  const T* row = x + m * N;
  RankKey key[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = lane * P + p;
    key[p] = e < N ? rank_key(static_cast<float>(row[e]), e, largest) : 0;
  }
  bitonic_sort<P>(key, lane);
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = lane * P + p;
    if (e < K) {
      const uint32_t i = key_index(key[p]);
      vo[m * K + e] = row[i];
      io[m * K + e] = i;
    }
  }
}

// A block per row for long rows.
template <class T>
__global__ void __launch_bounds__(256) topk_block_kernel(int64_t N, int64_t K, const T* __restrict__ x,
                                                         T* __restrict__ vo, int64_t* __restrict__ io, bool largest) {
  const int64_t m = blockIdx.x;
  const T* row = x + m * N;
  __shared__ RankKey warps[8];
  __shared__ RankKey chosen;
  RankKey prev = ~0ull;
  for (int64_t j = 0; j < K; ++j) {
    RankKey best = 0;
    for (int64_t e = threadIdx.x; e < N; e += 256) {
      const RankKey c = rank_key(static_cast<float>(row[e]), static_cast<uint32_t>(e), largest);
      best = c < prev ? key_max(best, c) : best;
    }
    best = warp_max(best);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x < 32) {
      const RankKey w = warp_max(threadIdx.x < 8 ? warps[threadIdx.x] : 0);
      if (threadIdx.x == 0) {
        chosen = w;
        const uint32_t i = key_index(w);
        vo[m * K + j] = row[i];
        io[m * K + j] = i;
      }
    }
    __syncthreads();
    prev = chosen;
  }
}

}  // namespace

void topk_rows(const Tensor& values, const Tensor& indices, const Tensor& in, bool largest) {
  const int64_t M = in.size(0), N = in.size(1), K = values.size(1);
  // the rank key holds an index in 32 bits, with ~0 kept for padding
  KILN_CHECK(N < 0xffffffffll, "topk (CUDA): rows of ", N, " elements are too long (at most 2^32 - 2)");
  detail::dispatch_float(in.dtype(), "topk (CUDA)", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    cudaStream_t s = current_stream();
    const unsigned warp_blocks = static_cast<unsigned>((M + 7) / 8);
    if (N <= kWarpRowMax && K > 8) {
      if (N <= 64) topk_warp_sort_kernel<T, 2><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else if (N <= 128) topk_warp_sort_kernel<T, 4><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else if (N <= 256) topk_warp_sort_kernel<T, 8><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else if (N <= 512) topk_warp_sort_kernel<T, 16><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
      else topk_warp_sort_kernel<T, 32><<<warp_blocks, 256, 0, s>>>(M, N, K, x, vo, io, largest);
    } else if (N <= kWarpRowMax) {
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
