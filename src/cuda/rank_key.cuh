// Rank keys for top-k selection in registers (topk, the MoE router): every
// element becomes one 64-bit key, larger = ranks first: its value's bits made
// monotonic (and complemented for smallest-k) above its complemented index, so
// ties go to the lower index and a comparison is one integer compare. NaN ranks
// above every number (callers that want it last map it to -inf first); -0 equals +0.
#pragma once

#include <cstdint>

namespace kiln::cuda_backend {

// internal linkage: each file that uses them keeps its own copy
namespace {

using RankKey = unsigned long long;  // 0: padding, ranks after every element

__device__ __forceinline__ RankKey rank_key(float v, uint32_t index, bool largest) {
  uint32_t bits = __float_as_uint(v + 0.0f);  // -0 + 0 = +0
  bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;  // monotonic in v (+inf: 0xff800000)
  // NaN above +inf, but not 0xffffffff: a NaN at index 0 would then be ~0, the bound
  // "nothing picked yet" that the first pass of a top-k picks below
  if (isnan(v)) bits = 0xfffffffeu;
  if (!largest) bits = ~bits;
  return (static_cast<RankKey>(bits) << 32) | static_cast<uint32_t>(~index);
}

__device__ __forceinline__ uint32_t key_index(RankKey key) { return ~static_cast<uint32_t>(key); }
__device__ __forceinline__ RankKey key_max(RankKey a, RankKey b) { return a > b ? a : b; }
__device__ __forceinline__ RankKey key_min(RankKey a, RankKey b) { return a < b ? a : b; }

__device__ __forceinline__ RankKey warp_max(RankKey key) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) key = key_max(key, __shfl_xor_sync(0xffffffffu, key, o));
  return key;
}

// The largest of a warp's keys below `prev` (lane l holds key[0..P)), on every
// lane: pass j of a top-k, prev being pass j-1's pick (~0 before the first).
template <int P>
__device__ __forceinline__ RankKey warp_next_key(const RankKey (&key)[P], RankKey prev) {
  RankKey best = 0;
#pragma unroll
  for (int p = 0; p < P; ++p) best = key[p] < prev ? key_max(best, key[p]) : best;
  return warp_max(best);
}

}  // namespace

}  // namespace kiln::cuda_backend
