// Batched inverses of 1x1..4x4 float32 matrices, one matrix per thread (the small
// triangular solves are in linalg_small_trsm.cu). The matrix and its inverse live in
// registers (every index is a compile-time constant after unrolling); rows are swapped
// by selects, so the pivot is the first largest magnitude in its column, as LAPACK's
// partial pivoting picks.

#include "cuda/common.h"
#include "cuda/linalg_small.h"

namespace kiln::cuda_backend {

namespace {

constexpr int kThreads = 256;

// The block's 256 matrices pass through shared memory, so global memory is read
// and written in whole coalesced lines (a matrix per thread straight from global
// memory would touch 32 lines per warp load); rows of N*N + 1 floats keep each
// thread's reads free of bank conflicts.
template <int N>
__global__ void __launch_bounds__(kThreads) small_inverse_kernel(const float* __restrict__ a, float* __restrict__ out,
                                                                 int32_t* __restrict__ info, int32_t* any_singular,
                                                                 int64_t batch) {
  constexpr int kElems = N * N, kPitch = N * N + 1;
  __shared__ float stage[kThreads * kPitch];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads;
  const int count = batch - first < kThreads ? static_cast<int>(batch - first) : kThreads;
  const auto staged = [](int e) { return (e / kElems) * kPitch + e % kElems; };  // element e of the block
  // a full block's 256 matrices are kBlockVecs float4s, kVecs a thread
  constexpr int kBlockVecs = kElems * kThreads / 4, kVecs = (kElems + 3) / 4;
  const float* src = a + first * kElems;
  if (count == kThreads && aligned16(src)) {
    float4 v[kVecs];  // all loaded before any is stored
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int q = threadIdx.x + u * kThreads;
      if (q < kBlockVecs) v[u] = reinterpret_cast<const float4*>(src)[q];
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int q = threadIdx.x + u * kThreads;
      if (q >= kBlockVecs) continue;
      const float f[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) stage[staged(4 * q + i)] = f[i];
    }
  } else {
    for (int e = threadIdx.x; e < count * kElems; e += kThreads) stage[staged(e)] = src[e];
  }
  __syncthreads();
  const int t = threadIdx.x;
  const bool mine = t < count;
  float m[N][N], v[N][N];
#pragma unroll
  for (int r = 0; r < N; ++r)
#pragma unroll
    for (int c = 0; c < N; ++c) m[r][c] = mine ? stage[t * kPitch + r * N + c] : (r == c ? 1.0f : 0.0f);
#pragma unroll
  for (int r = 0; r < N; ++r)
#pragma unroll
    for (int c = 0; c < N; ++c) v[r][c] = r == c ? 1.0f : 0.0f;
  int32_t first_zero = 0;
#pragma unroll
  for (int c = 0; c < N; ++c) {
#pragma unroll
    for (int r = c + 1; r < N; ++r) {
      const bool swap = fabsf(m[r][c]) > fabsf(m[c][c]);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float mc = m[c][k], mr = m[r][k], vc = v[c][k], vr = v[r][k];
        m[c][k] = swap ? mr : mc, m[r][k] = swap ? mc : mr;
        v[c][k] = swap ? vr : vc, v[r][k] = swap ? vc : vr;
      }
    }
    if (m[c][c] == 0.0f && first_zero == 0) first_zero = c + 1;
    const float inv_p = 1.0f / m[c][c];
#pragma unroll
    for (int k = 0; k < N; ++k) m[c][k] *= inv_p, v[c][k] *= inv_p;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      if (r == c) continue;
      const float f = m[r][c];
#pragma unroll
      for (int k = 0; k < N; ++k) m[r][k] = fmaf(-f, m[c][k], m[r][k]), v[r][k] = fmaf(-f, v[c][k], v[r][k]);
    }
  }
  __syncthreads();  // every thread has read its matrix
  if (mine) {
#pragma unroll
    for (int r = 0; r < N; ++r)
#pragma unroll
      for (int c = 0; c < N; ++c) stage[t * kPitch + r * N + c] = v[r][c];
    info[first + t] = first_zero;
    if (first_zero != 0) *any_singular = 1;  // rare: a word of host memory (a store, not a PCIe atomic)
  }
  __syncthreads();
  float* dst = out + first * kElems;
  if (count == kThreads && aligned16(dst)) {
    for (int q = threadIdx.x; q < kBlockVecs; q += kThreads)
      reinterpret_cast<float4*>(dst)[q] = make_float4(stage[staged(4 * q)], stage[staged(4 * q + 1)],
                                                      stage[staged(4 * q + 2)], stage[staged(4 * q + 3)]);
  } else {
    for (int e = threadIdx.x; e < count * kElems; e += kThreads) dst[e] = stage[staged(e)];
  }
}

}  // namespace

void small_inverse(const Tensor& out, const Tensor& a, const Tensor& info, int32_t* any_singular) {
  const int64_t batch = a.size(0), n = a.size(1);
  cudaStream_t s = current_stream();
  if (batch == 0) return;
  const unsigned grid = grid_all(batch, kThreads);
  const float* src = a.data<float>();
  float* dst = out.data<float>();
  int32_t *inf = info.data<int32_t>(), *flag = any_singular;
  switch (n) {
    case 1: small_inverse_kernel<1><<<grid, kThreads, 0, s>>>(src, dst, inf, flag, batch); break;
    case 2: small_inverse_kernel<2><<<grid, kThreads, 0, s>>>(src, dst, inf, flag, batch); break;
    case 3: small_inverse_kernel<3><<<grid, kThreads, 0, s>>>(src, dst, inf, flag, batch); break;
    case 4: small_inverse_kernel<4><<<grid, kThreads, 0, s>>>(src, dst, inf, flag, batch); break;
    default: KILN_CHECK(false, "small_inverse: n must be 1 to 4, got ", n);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
