// The routing of one token (a decode step) by one block, an expert a thread, so
// that nothing runs k passes in a row: each thread's rank is the count of keys
// above its own (all of them in shared memory, compared in parallel); ranks below
// k are the choices, in order, and a ballot of the choices places them (one row
// per chosen expert, in expert order). The weights are summed in the order of the
// picks, as moe.cu's route_token does. Apart from moe.cu's kernel so that a kernel
// that makes the logits itself can route with it.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/rank_key.cuh"

namespace kiln::cuda_backend {

inline constexpr int kMaxRouteExperts = 1024;

struct RouteOneTokenSmem {
  RankKey keys[kMaxRouteExperts];  // read two at a time: 16-byte aligned where declared
  float partial[kMaxRouteExperts / 32], picked[32];
  uint32_t chosen_bits[kMaxRouteExperts / 32];
};

// Thread e < E brings expert e's logit; the block (whole warps, at least E threads,
// at most kMaxRouteExperts) ranks them. Writes MoeRouting's weights, experts, offs,
// sorted_pos and token_of for token 0.
__device__ __forceinline__ void route_one_token(float logit, int E, int k, bool sigmoid,
                                                const float* __restrict__ bias, bool renormalize,
                                                float* __restrict__ w_out, int32_t* __restrict__ e_out,
                                                int32_t* __restrict__ offs, int32_t* __restrict__ sorted_pos,
                                                int32_t* __restrict__ token_of, RouteOneTokenSmem& s) {
  const int e = threadIdx.x, lane = e % 32, warp = e / 32;
  const bool in = e < E;
  const float kNegInf = -INFINITY;
  float p = in ? logit : kNegInf;
  if (sigmoid) {
    p = 1.0f / (1.0f + expf(-p));
  } else {
    const float m = block_reduce(p, MaxOp{}, s.partial);
    p = in ? expf(p - m) : 0.0f;
    p /= block_reduce(p, SumOp{}, s.partial);
  }
  float sel = in && bias ? p + bias[e] : p;
  if (isnan(sel)) sel = kNegInf;  // NaN chosen last, as on the CPU
  const RankKey key = in ? rank_key(sel, static_cast<uint32_t>(e), true) : 0;
  s.keys[e] = key;
  __syncthreads();
  int rank = 0;  // keys are distinct (the index is in them)
  for (int j = 0; j < static_cast<int>(blockDim.x); j += 2) {
    const ulonglong2 two = *reinterpret_cast<const ulonglong2*>(s.keys + j);
    rank += (two.x > key) + (two.y > key);
  }
  const bool chosen = in && rank < k;
  if (chosen) s.picked[rank] = p;
  const uint32_t bits = __ballot_sync(0xffffffffu, chosen);
  if (lane == 0) s.chosen_bits[warp] = bits;
  __syncthreads();
  int before = 0;  // chosen experts below this warp's
  for (int w = 0; w < warp; ++w) before += __popc(s.chosen_bits[w]);
  const int pos = before + __popc(bits & ((1u << lane) - 1u));
  if (in) offs[e] = pos + (chosen ? 1 : 0);
  if (chosen) {
    float total = 0.0f;
    for (int i = 0; i < k; ++i) total += s.picked[i];
    w_out[rank] = renormalize && total > 0.0f ? p / total : p;
    e_out[rank] = e;
    sorted_pos[rank] = pos;
    token_of[pos] = 0;
  }
}

}  // namespace kiln::cuda_backend
