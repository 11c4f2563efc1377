// Batched inverses of 1x1..4x4 float32 matrices, one matrix per thread. The
// matrix and its inverse live in registers (every index is a compile-time
// constant after unrolling); rows are swapped by selects, so the pivot is the
// first largest magnitude in its column, as LAPACK's partial pivoting picks.
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
  const float* src = a + first * kElems;
  for (int e = threadIdx.x; e < count * kElems; e += kThreads) stage[(e / kElems) * kPitch + e % kElems] = src[e];
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
    if (first_zero != 0) atomicOr(any_singular, 1);  // rare: the host reads this one word
  }
  __syncthreads();
  float* dst = out + first * kElems;
  for (int e = threadIdx.x; e < count * kElems; e += kThreads) dst[e] = stage[(e / kElems) * kPitch + e % kElems];
}

// Column-oriented substitution: at step t the warp settles row j (the owner lane
// divides by A[j][j] and broadcasts the row of X), and every lane removes
// A[i][j] * x_j from the rows i still to come. Lane l holds rows l and l + 32.
template <bool UPPER, bool UNIT>
__global__ void __launch_bounds__(32) small_trsm_kernel(const float* __restrict__ a, float* __restrict__ x, int n, int k) {
  // at[j * p + i] = A[i][j], p = n + 1: a column is contiguous, so lanes read it without bank
  // conflicts, and the odd pitch keeps the transposing stores free of them too
  extern __shared__ float at[];
  const int p = n + 1;
  const int64_t sys = blockIdx.x;
  const int lane = threadIdx.x;
  const float* as = a + sys * n * n;
  float* xs = x + sys * n * k;
  for (int e = lane; e < n * n; e += 32) at[(e % n) * p + e / n] = as[e];
  __syncwarp();
  for (int c0 = 0; c0 < k; c0 += 8) {
    const int kc = k - c0 < 8 ? k - c0 : 8;
    float b[2][8];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = lane + 32 * rr;
#pragma unroll
      for (int r = 0; r < 8; ++r) b[rr][r] = row < n && r < kc ? xs[row * k + c0 + r] : 0.0f;
    }
    for (int t = 0; t < n; ++t) {
      const int j = UPPER ? n - 1 - t : t, owner = j % 32, slot = j / 32;
      const float inv_d = UNIT ? 1.0f : 1.0f / at[j * p + j];
      float xj[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) xj[r] = __shfl_sync(0xffffffffu, (slot ? b[1][r] : b[0][r]) * inv_d, owner);
      if (lane == owner) {
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          if (slot == 0) b[0][r] = xj[r];
          else b[1][r] = xj[r];
        }
      }
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int row = lane + 32 * rr;
        const bool later = row < n && (UPPER ? row < j : row > j);
        const float l = later ? at[j * p + row] : 0.0f;
#pragma unroll
        for (int r = 0; r < 8; ++r) b[rr][r] = fmaf(-l, xj[r], b[rr][r]);
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = lane + 32 * rr;
#pragma unroll
      for (int r = 0; r < 8; ++r)
        if (row < n && r < kc) xs[row * k + c0 + r] = b[rr][r];
    }
  }
}

}  // namespace

void small_triangular_solve(const Tensor& a, const Tensor& x, bool upper, bool unit) {
  const int64_t batch = a.size(0);
  const int n = static_cast<int>(a.size(1)), k = static_cast<int>(x.size(2));
  KILN_CHECK(n >= 1 && n <= 64, "small_triangular_solve: n must be 1 to 64, got ", n);
  if (batch == 0 || k == 0) return;
  const size_t smem = static_cast<size_t>(n) * (n + 1) * sizeof(float);
  const auto kernel = upper ? (unit ? small_trsm_kernel<true, true> : small_trsm_kernel<true, false>)
                            : (unit ? small_trsm_kernel<false, true> : small_trsm_kernel<false, false>);
  kernel<<<static_cast<unsigned>(batch), 32, smem, current_stream()>>>(a.data<float>(), x.data<float>(), n, k);
  KILN_CUDA_CHECK_LAUNCH();
}

void small_inverse(const Tensor& out, const Tensor& a, const Tensor& info, const Tensor& any_singular) {
  const int64_t batch = a.size(0), n = a.size(1);
  cudaStream_t s = current_stream();
  KILN_CUDA_CHECK(cudaMemsetAsync(any_singular.data_ptr(), 0, sizeof(int32_t), s));
  if (batch == 0) return;
  const unsigned grid = grid_all(batch, kThreads);
  const float* src = a.data<float>();
  float* dst = out.data<float>();
  int32_t *inf = info.data<int32_t>(), *flag = any_singular.data<int32_t>();
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
