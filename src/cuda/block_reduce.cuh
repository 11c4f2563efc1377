// A float reduced over a whole block (max or sum), the result in every thread.
#pragma once

#include <cuda_runtime.h>

namespace kiln::cuda_backend {

// v combined by op over the block; scratch holds blockDim.x / 32 floats of shared
// memory. Safe to call back to back: the first barrier waits for an earlier
// call's readers.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) r = op(r, scratch[w]);
  return r;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

}  // namespace kiln::cuda_backend
