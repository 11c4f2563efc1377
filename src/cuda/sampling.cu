// CUDA sampling: one CUB radix sort of all rows at once, on 64-bit keys (row
// above, the complement of the probability's bits below: the rows stay apart and
// each comes out by decreasing probability, ties, as the sort is stable, lower
// id first), then a block per row scans the sorted row
// for the top-k / top-p prefix and its mass, and scans again for the inverse
// CDF at u times that mass. Both scans stop at the first tile past what they
// need, which for peaked distributions is the first. No host synchronisation.
#include <cub/cub.cuh>

#include "core/backend.h"
#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

constexpr int kPickThreads = 1024;

// probabilities are >= 0, so their bits order as unsigned integers
__global__ void sort_keys_kernel(const float* __restrict__ probs, uint64_t* keys, int32_t* ids, int64_t B, int64_t V) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= B * V) return;
  keys[e] = (static_cast<uint64_t>(e / V) << 32) | (0xffffffffu - __float_as_uint(probs[e]));
  ids[e] = static_cast<int32_t>(e % V);
}

__device__ __forceinline__ float prob_of(uint64_t key) {
  return __uint_as_float(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffu));
}

__global__ void __launch_bounds__(kPickThreads)
    pick_kernel(int64_t* out, const uint64_t* __restrict__ sorted, const int32_t* __restrict__ ids,
                const float* __restrict__ u, int64_t V, int64_t top_k, float top_p) {
  using Scan = cub::BlockScan<float, kPickThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int64_t kept_n;
  __shared__ float kept_mass;
  __shared__ int64_t first_past;
  const int64_t b = blockIdx.x;
  const uint64_t* s = sorted + b * V;
  // pass 1: a token is kept while the mass before it is below top_p (and it is in the top k)
  float carry = 0.0f;
  int64_t n = 0;
  for (int64_t base = 0; base < top_k; base += kPickThreads) {
    const int64_t j = base + threadIdx.x;
    const float v = j < top_k ? prob_of(s[j]) : 0.0f;
    float incl, tile;
    Scan(scan).InclusiveSum(v, incl, tile);
    const bool kept = j < top_k && (top_p >= 1.0f || carry + (incl - v) < top_p);
    // kept is a prefix of the tile: its length
    const int tile_kept = __syncthreads_count(kept);
    n += tile_kept;
    if (tile_kept < kPickThreads) {
      if (tile_kept > 0 && threadIdx.x == tile_kept - 1) kept_mass = carry + incl;
      if (tile_kept == 0 && threadIdx.x == 0) kept_mass = carry;
      break;
    }
    carry += tile;
    if (base + kPickThreads >= top_k && threadIdx.x == 0) kept_mass = carry;
  }
  if (threadIdx.x == 0) kept_n = n;
  __syncthreads();
  n = kept_n;
  const float r = u[b] * kept_mass;
  // pass 2: the first kept token whose inclusive mass passes r (the last kept one if rounding leaves none)
  carry = 0.0f;
  if (threadIdx.x == 0) first_past = n - 1;
  __syncthreads();
  for (int64_t base = 0; base < n; base += kPickThreads) {
    const int64_t j = base + threadIdx.x;
    const float v = j < n ? prob_of(s[j]) : 0.0f;
    float incl, tile;
    Scan(scan).InclusiveSum(v, incl, tile);
    const bool past = j < n && carry + incl > r;
    const int tile_not_past = __syncthreads_count(j < n && !past);
    if (j < n && past && static_cast<int>(threadIdx.x) == tile_not_past) first_past = j;
    if (tile_not_past < kPickThreads) break;  // (a tile with a crossing, or the last one)
    carry += tile;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[b] = ids[b * V + first_past];
}

}  // namespace

void sample_rows(const Tensor& out, const Tensor& probs, const Tensor& u, int64_t top_k, float top_p) {
  const int64_t B = probs.size(0), V = probs.size(1);
  KILN_CHECK(B * V < (int64_t{1} << 31), "sample: batch * vocab ", B * V, " exceeds 2^31 elements");
  cudaStream_t stream = current_stream();
  const Device dev = probs.device();
  Tensor keys = Tensor::empty({B, V}, DType::UInt64, dev), sorted = Tensor::empty({B, V}, DType::UInt64, dev);
  Tensor ids = Tensor::empty({B, V}, DType::Int32, dev), sorted_ids = Tensor::empty({B, V}, DType::Int32, dev);
  sort_keys_kernel<<<grid_all(B * V, 256), 256, 0, stream>>>(probs.data<float>(), keys.data<uint64_t>(),
                                                            ids.data<int32_t>(), B, V);
  KILN_CUDA_CHECK_LAUNCH();
  int row_bits = 0;
  while ((int64_t{1} << row_bits) < B) ++row_bits;
  const uint64_t* keys_in = keys.data<uint64_t>();
  uint64_t* keys_out = sorted.data<uint64_t>();
  const int32_t* ids_in = ids.data<int32_t>();
  int32_t* ids_out = sorted_ids.data<int32_t>();
  const int n = static_cast<int>(B * V);
  size_t bytes = 0;
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, ids_in, ids_out, n, 0,
                                                  32 + row_bits, stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::UInt8, dev);
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), bytes, keys_in, keys_out, ids_in, ids_out, n, 0,
                                                  32 + row_bits, stream));
  pick_kernel<<<static_cast<unsigned>(B), kPickThreads, 0, stream>>>(out.data<int64_t>(), keys_out, ids_out,
                                                                     u.data<float>(), V, top_k, top_p);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
