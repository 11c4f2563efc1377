// Batched LU with partial pivoting of small float32 and complex64 matrices (up to
// 64 x 64), one kernel launch for the whole batch, in LAPACK getf2's order of
// operations: the pivots (first largest |re| + |im| in getf2's current row
// order), the zero-pivot info and the "tiny pivot: divide" rule are getf2's.
#include <cfloat>
#include <cstdint>

#include "cuda/common.h"
#include "cuda/linalg_small.h"

namespace kiln::cuda_backend {

namespace {

// float and complex64 (as float2) arithmetic for the LU kernel, in one shape.
template <class T>
struct Field;
template <>
struct Field<float> {
  static __device__ float fms(float acc, float a, float b) { return fmaf(-a, b, acc); }  // acc - a b
  static __device__ float mul(float a, float b) { return a * b; }
  static __device__ float div(float a, float b) { return a / b; }
  static __device__ float recip(float a) { return 1.0f / a; }
  static __device__ float abs1(float a) { return fabsf(a); }  // what isamax compares
  static __device__ float modulus(float a) { return fabsf(a); }
  static __device__ bool is_zero(float a) { return a == 0.0f; }
};
template <>
struct Field<float2> {
  static __device__ float2 fms(float2 acc, float2 a, float2 b) {
    return {fmaf(a.y, b.y, fmaf(-a.x, b.x, acc.x)), fmaf(-a.y, b.x, fmaf(-a.x, b.y, acc.y))};
  }
  static __device__ float2 mul(float2 a, float2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }
  static __device__ float2 div(float2 a, float2 b) {  // Smith's algorithm: no overflow in |b|^2
    if (fabsf(b.x) >= fabsf(b.y)) {
      const float r = b.y / b.x, d = b.x + b.y * r;
      return {(a.x + a.y * r) / d, (a.y - a.x * r) / d};
    }
    const float r = b.x / b.y, d = b.y + b.x * r;
    return {(a.x * r + a.y) / d, (a.y * r - a.x) / d};
  }
  static __device__ float2 recip(float2 a) { return div({1.0f, 0.0f}, a); }
  static __device__ float abs1(float2 a) { return fabsf(a.x) + fabsf(a.y); }  // icamax's |re| + |im|
  static __device__ float modulus(float2 a) { return hypotf(a.x, a.y); }
  static __device__ bool is_zero(float2 a) { return a.x == 0.0f && a.y == 0.0f; }
};

// Warp 0 takes the next column, 8 warps the rest of the trailing matrix.
constexpr int kLuThreads = 32 + 256;

// Right-looking LU with partial pivoting (LAPACK getf2's order of operations) of
// one m x n matrix per block, held column-major in shared memory with pitch m + 1
// (odd, so both the row-major loads and the column reads avoid bank conflicts).
// Two phases per column j, a barrier after each:
//  - rows j and p (the pivot) swap, and column j's multipliers are formed;
//  - the trailing matrix takes its rank-1 update: warp 0 updates column j + 1 and
//    at once finds its pivot (the first largest |re| + |im|, as i?amax), while the
//    other warps update columns j + 2.. (thread t on row j + 1 + t % 64, every
//    fourth column from j + 2 + t / 64), so the pivot search hides behind them.
// A zero pivot is skipped, as getf2 does, and recorded in info. Measured on the
// H200 and kept simple: a blocked form (8-column panels factored by one warp in
// registers, rank-8 tile updates) ran slower, 237 against 182 us for 1024
// complex 64 x 64, as the one-warp panel is serial and its registers spill. So did
// the matrix in registers (a warp per 8 columns, rows left in place and getf2's
// order kept as positions): one barrier a column with look-ahead, 248 us, or one
// per 8-column panel, 238 us; ncu put 64-75% of warp time at the barrier, waiting
// on the one warp's serial pivot search and scaling.
template <class T>
__global__ void __launch_bounds__(kLuThreads) small_lu_kernel(const T* __restrict__ a, T* __restrict__ lu,
                                                              int32_t* __restrict__ pivots, int32_t* __restrict__ info,
                                                              int m, int n) {
  using F = Field<T>;
  extern __shared__ float2 lu_smem[];  // float2: aligned for either T
  T* s = reinterpret_cast<T*>(lu_smem);
  __shared__ int pivot_row;
  __shared__ T pivot_value, pivot_recip;
  __shared__ bool pivot_tiny;  // divide rather than multiply by the reciprocal, which would overflow
  const int ld = m + 1, kmin = m < n ? m : n, t = threadIdx.x, lane = t % 32;
  const int64_t mat = blockIdx.x;
  const T* src = a + mat * m * n;
  for (int e = t; e < m * n; e += kLuThreads) s[(e % n) * ld + e / n] = src[e];
  __syncthreads();
  // warp 0: the pivot of column c, from rows c..m-1 (two a lane)
  const auto find_pivot = [&](int c) {
    const T* col = s + c * ld;
    float best = -1.0f;
    int at = c;
    for (int r = c + lane; r < m; r += 32) {
      const float v = F::abs1(col[r]);
      if (v > best) best = v, at = r;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_down_sync(0xffffffffu, best, o);
      const int oa = __shfl_down_sync(0xffffffffu, at, o);
      if (ob > best || (ob == best && oa < at)) best = ob, at = oa;
    }
    if (lane == 0) {
      const T pv = col[at];
      pivot_row = at;
      pivot_value = pv;
      pivot_tiny = F::modulus(pv) < FLT_MIN;  // getf2 multiplies by the reciprocal unless it would overflow
      if (!F::is_zero(pv)) pivot_recip = F::recip(pv);
      pivots[mat * kmin + c] = at + 1;
    }
  };
  if (t < 32) find_pivot(0);
  __syncthreads();
  int32_t first_zero = 0;
  for (int j = 0; j < kmin; ++j) {
    T* col = s + j * ld;
    const int p = pivot_row;
    const T pv = pivot_value, recip = pivot_recip;
    const bool zero = F::is_zero(pv), tiny = pivot_tiny;
    if (zero) {  // the column below j is zero: nothing to swap, scale or update
      if (t == 0 && first_zero == 0) first_zero = j + 1;
    } else {
      if (t < n && t != j && p != j) {
        const T x = s[t * ld + j];
        s[t * ld + j] = s[t * ld + p];
        s[t * ld + p] = x;
      }
      const int i = j + 1 + (t - 64);  // threads 64.. form the multipliers of rows j + 1..
      if (t >= 64 && i < m) {
        T x = col[i];
        if (i == p) x = col[j], col[j] = pv;  // the old row j arrives at row p
        col[i] = tiny ? F::div(x, pv) : F::mul(x, recip);
      }
    }
    __syncthreads();
    if (t < 32) {
      if (j + 1 < n && !zero) {
        T* next = s + (j + 1) * ld;
        const T u = next[j];
        for (int r = j + 1 + lane; r < m; r += 32) next[r] = F::fms(next[r], col[r], u);
      }
      __syncwarp();
      if (j + 1 < kmin) find_pivot(j + 1);
    } else if (!zero) {
      const int w = t - 32, row = j + 1 + w % 64;
      if (row < m) {
        const T l = col[row];
        int c = j + 2 + w / 64;
        // four columns' loads in flight before their stores
        for (; c + 12 < n; c += 16) {
          T v[4], u[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) v[q] = s[(c + 4 * q) * ld + row], u[q] = s[(c + 4 * q) * ld + j];
#pragma unroll
          for (int q = 0; q < 4; ++q) s[(c + 4 * q) * ld + row] = F::fms(v[q], l, u[q]);
        }
        for (; c < n; c += 4) s[c * ld + row] = F::fms(s[c * ld + row], l, s[c * ld + j]);
      }
    }
    __syncthreads();
  }
  T* dst = lu + mat * m * n;
  for (int e = t; e < m * n; e += kLuThreads) dst[e] = s[(e % n) * ld + e / n];
  if (t == 0) info[mat] = first_zero;
}

// float32 rows in registers, for matrices past 32 rows or columns: thread i of a
// 64-thread group holds row i of its matrix (zero past m or n; the update's work on
// zero columns is wasted but harmless), every index a compile-time constant once the
// column loop is unrolled. Rows stay in their threads; a thread tracks its row's
// position in getf2's order (a row swap exchanges two positions) and writes the row
// there at the end. Per column j, with one barrier:
//  - each warp finds its pivot candidate among the rows not yet used as pivots
//    (redux: the largest magnitude, then the smallest position among ties), and the
//    candidate's thread publishes its row and key in shared memory;
//  - after the barrier every thread picks the better of the two, and the rows
//    below take the multiplier and the rank-1 update in registers, reading the
//    pivot row as 16-byte broadcasts.
// The candidate buffers alternate between even and odd columns, so the next
// column's writers never meet this column's readers. Measured on the H100, 1024
// float32 64 x 64: 133 us in the shared-memory kernel above, 53 us here with a
// matrix a block, 50 us with two (their warps fetch the same instructions in step;
// four: 51, eight: 61). complex64 stays in shared memory: the same kernel for it
// took 265 against 184 us, as its unrolled code (2.3 times the instructions of
// float's) outgrows the instruction cache: ncu, 5.4 cycles a warp stalled on
// instruction fetch per instruction issued, against 1.0 for float32.
constexpr int kRegLuRows = 64, kRegLuMatricesPerSm = 8;  // 64 registers of row a thread

// The rank of a pivot candidate: 0 for rows out of the running, 1 for NaN (never
// chosen over a number, as isamax's strict comparison never picks it), then the
// magnitude's bits (non-negative floats order as their bit patterns).
__device__ __forceinline__ uint32_t pivot_key(float x, bool live) {
  const float mag = fabsf(x);
  return !live ? 0u : mag != mag ? 1u : __float_as_uint(mag) + 2u;
}

// Shared memory of one matrix of the register kernel.
struct RegLuShared {
  static constexpr int kPitch = kRegLuRows + 1, kVecs = kRegLuRows / 4;
  float stage[kRegLuRows * kPitch];  // the matrix coming in and going out
  float4 cand[2][2][kVecs];          // [column parity][warp]: the warp's candidate row
  uint32_t cand_key[2][2], cand_pos[2][2];
};

template <int MPB>
__global__ void __launch_bounds__(kRegLuRows * MPB, kRegLuMatricesPerSm / MPB)
    register_lu_kernel(const float* __restrict__ a, float* __restrict__ lu, int32_t* __restrict__ pivots,
                       int32_t* __restrict__ info, int64_t batch, int m, int n) {
  constexpr int N = kRegLuRows, kPitch = RegLuShared::kPitch, kVecs = RegLuShared::kVecs;
  extern __shared__ float4 reg_lu_smem[];
  const int i = threadIdx.x % N, warp = i / 32, kmin = m < n ? m : n;
  const int64_t mat = static_cast<int64_t>(blockIdx.x) * MPB + threadIdx.x / N;
  const bool real = mat < batch;  // a block's tail matrices past the batch still meet its barriers
  RegLuShared& sh = reinterpret_cast<RegLuShared*>(reg_lu_smem)[threadIdx.x / N];
  const float* src = a + mat * m * n;
#pragma unroll 16
  for (int row = 0; row < N; ++row) sh.stage[row * kPitch + i] = real && row < m && i < n ? src[row * n + i] : 0.0f;
  __syncthreads();
  float r[N];
#pragma unroll
  for (int k = 0; k < N; ++k) r[k] = sh.stage[i * kPitch + k];
  int pos = i;                // where this row stands in getf2's order
  bool live = real && i < m;  // a row of the matrix not yet used as a pivot
  int32_t first_zero = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (j >= kmin) break;
    const int par = j & 1;
    const uint32_t key = pivot_key(r[j], live);
    const uint32_t best = __reduce_max_sync(0xffffffffu, key);
    const uint32_t first = __reduce_min_sync(0xffffffffu, key == best ? static_cast<uint32_t>(pos) : 0xffffffffu);
    if (key == best && static_cast<uint32_t>(pos) == first) {
#pragma unroll
      for (int v = j / 4; v < kVecs; ++v)
        sh.cand[par][warp][v] = make_float4(r[4 * v], r[4 * v + 1], r[4 * v + 2], r[4 * v + 3]);
      sh.cand_key[par][warp] = best;
      sh.cand_pos[par][warp] = first;
    }
    __syncthreads();
    const uint32_t k0 = sh.cand_key[par][0], k1 = sh.cand_key[par][1];
    const int w = k1 > k0 || (k1 == k0 && sh.cand_pos[par][1] < sh.cand_pos[par][0]) ? 1 : 0;
    const int p = static_cast<int>(sh.cand_pos[par][w]);
    const float* prow = reinterpret_cast<const float*>(sh.cand[par][w]);
    if (live && pos == p) {
      live = false;  // this row is U's row j now
      pos = j;
    } else if (live && pos == j) {
      pos = p;  // getf2 swaps it with the pivot row
    }
    if (real && i == 0) pivots[mat * kmin + j] = p + 1;
    const float pv = prow[j];
    if (pv == 0.0f) {  // the column below j is zero: nothing to scale or update
      if (first_zero == 0) first_zero = j + 1;
    } else if (live) {
      const float l = fabsf(pv) < FLT_MIN ? r[j] / pv : r[j] * (1.0f / pv);  // getf2: divide if 1 / pv overflows
      r[j] = l;
#pragma unroll
      for (int v = (j + 1) / 4; v < kVecs; ++v) {
        const float4 u = reinterpret_cast<const float4*>(prow)[v];
        const float e[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (4 * v + q > j) r[4 * v + q] = fmaf(-l, e[q], r[4 * v + q]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) sh.stage[pos * kPitch + k] = r[k];
  __syncthreads();
  if (!real) return;
  float* dst = lu + mat * m * n;
  if (i < n)
#pragma unroll 4
    for (int row = 0; row < m; ++row) dst[row * n + i] = sh.stage[row * kPitch + i];
  if (i == 0) info[mat] = first_zero;
}

template <int MPB>
void launch_register_lu(const float* a, float* lu, int32_t* pivots, int32_t* info, int64_t batch, int m, int n) {
  const auto kernel = register_lu_kernel<MPB>;
  constexpr size_t smem = MPB * sizeof(RegLuShared);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>((batch + MPB - 1) / MPB), kRegLuRows * MPB, smem, current_stream()>>>(
      a, lu, pivots, info, batch, m, n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void small_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  const int64_t batch = a.size(0);
  const int m = static_cast<int>(a.size(1)), n = static_cast<int>(a.size(2));
  KILN_CHECK(m >= 1 && m <= 64 && n >= 1 && n <= 64, "small_lu_factor: m and n must be 1 to 64, got ", m, " x ", n);
  if (batch == 0) return;
  cudaStream_t s = current_stream();
  const bool complex = a.dtype() == DType::Complex64;
  if (!complex && (m > 32 || n > 32))  // rows in registers, two matrices a block (see register_lu_kernel)
    return launch_register_lu<2>(a.data<float>(), lu.data<float>(), pivots.data<int32_t>(), info.data<int32_t>(),
                                 batch, m, n);
  const size_t smem = static_cast<size_t>(m + 1) * n * (complex ? 8 : 4);
  const unsigned grid = static_cast<unsigned>(batch);
  if (complex)
    small_lu_kernel<float2><<<grid, kLuThreads, smem, s>>>(static_cast<const float2*>(a.data_ptr()),
                                                           static_cast<float2*>(lu.data_ptr()),
                                                           pivots.data<int32_t>(), info.data<int32_t>(), m, n);
  else
    small_lu_kernel<float><<<grid, kLuThreads, smem, s>>>(a.data<float>(), lu.data<float>(), pivots.data<int32_t>(),
                                                          info.data<int32_t>(), m, n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
