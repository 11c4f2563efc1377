// Batched LU with partial pivoting of small float32 and complex64 matrices (up to
// 64 x 64), one kernel launch for the whole batch, in LAPACK getf2's order of
// operations: the pivots (first largest |re| + |im| in getf2's current row
// order), the zero-pivot info and the "tiny pivot: divide" rule are getf2's.
// Rows in registers (register_lu_kernel) for up to 32 x 32 and for float32 up to
// 64 x 64; complex64 past 32 in shared memory (small_lu_kernel).
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
  static __device__ float abs1(float a) { return fabsf(a); }  // what isamax compares
  static __device__ bool is_zero(float a) { return a == 0.0f; }
  static __device__ bool tiny(float a) { return fabsf(a) < FLT_MIN; }  // 1 / a would overflow: divide
  static __device__ float fast_recip(float a) { return __frcp_rn(a); }
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
  static __device__ float abs1(float2 a) { return fabsf(a.x) + fabsf(a.y); }  // icamax's |re| + |im|
  static __device__ bool is_zero(float2 a) { return a.x == 0.0f && a.y == 0.0f; }
  static __device__ bool tiny(float2 a) {  // |a| < FLT_MIN, with hypot only near the edge
    return fmaxf(fabsf(a.x), fabsf(a.y)) < FLT_MIN && hypotf(a.x, a.y) < FLT_MIN;
  }
  // Smith's reciprocal with two correctly rounded reciprocals in place of divisions
  static __device__ float2 fast_recip(float2 a) {
    if (fabsf(a.x) >= fabsf(a.y)) {
      const float r = a.y * __frcp_rn(a.x), rd = __frcp_rn(a.x + a.y * r);
      return {rd, -r * rd};
    }
    const float r = a.x * __frcp_rn(a.y), rd = __frcp_rn(a.y + a.x * r);
    return {r * rd, -rd};
  }
};

// The rank of a pivot candidate: 0 for rows out of the running, 1 for NaN (never
// chosen over a number, as i?amax's strict comparison never picks it), then the
// magnitude's bits (non-negative floats order as their bit patterns).
template <class T>
__device__ __forceinline__ uint32_t pivot_key(T x, bool live) {
  const float mag = Field<T>::abs1(x);
  return !live ? 0u : mag != mag ? 1u : __float_as_uint(mag) + 2u;
}
__device__ __forceinline__ float shfl_field(float x, int src) { return __shfl_sync(0xffffffffu, x, src); }
__device__ __forceinline__ float2 shfl_field(float2 x, int src) {
  return {__shfl_sync(0xffffffffu, x.x, src), __shfl_sync(0xffffffffu, x.y, src)};
}

// Right-looking LU with partial pivoting (LAPACK getf2's order of operations) of
// one m x n matrix a block, held column-major in shared memory with pitch 65 (odd,
// so the row-major loads and the column reads avoid bank conflicts; fixed, so the
// update's offsets are immediates). Rows never move: getf2's row order is kept as
// positions (warp 0's lane L holds those of rows L and L + 32; a row swap trades
// two positions), and the rows are written out in that order at the end. So there
// is one barrier a column: in the phase of column j,
//  - warp 0 takes column j + 1 all the way: its rank-1 update from column j, the
//    pivot (the largest |re| + |im| by a warp reduction, then the first position
//    among equals, as i?amax), the swap of two positions and the scaling;
//  - warps 1..6 apply column j's rank-1 update to columns j + 2.., a thread on one
//    physical row (consecutive rows: no bank conflicts) and every third column.
// A zero pivot is skipped, as getf2 does, and recorded in info. H100, 1024 complex
// 64 x 64: 185 us for the kernel this replaced (rows swapped in place, two barriers
// a column: the swap and scaling, then the update), 152 us with one barrier, 141 us
// with six update warps instead of eight (six blocks an SM) and a faster
// reciprocal, 137 us with the fixed pitch, 127.5 us with the two roles in loops
// of their own (ncu, 1024 matrices: 78.2K warp instructions a matrix before, 23%
// of them the update threads' per-column bookkeeping; 67.2K after, and the update
// warps then spend about half their time at the barrier: warp 0's chain of about
// 150 instructions a column is the bound). Tried and slower: the scaling
// deferred to the update threads, which scale their row as they read it while
// warp 0 computes the pivot's reciprocal beside the reductions (branch
// exp/lu-deferred; H100, in one run, 1024 x 64: 160.7 against 127.1 us, 264 x
// 64: 65.4 against 44.4; nor were its factors bit-equal to the kept kernel's);
// the matrix in registers (see register_lu_kernel): fully unrolled, 265 us for
// complex64 (instruction-cache misses); unrolled over 4-column chunks only, 220 us
// (every chunk's code runs, predicated); a row over two threads, 228 us; a blocked
// form with 8-column panels factored by one warp, 237 us. No faster: two rows a
// thread sharing the pivot row's loads (134 against 138), the next batch's loads
// before this one's stores with a branch-free warp 0 (142 against 140). Slower as
// well: 51 column slots, so that 8 blocks fit an SM and 1024 matrices are one wave
// (columns past 51 come in with getf2's updates once columns 0..12 are done; branch
// exp/lu-onewave, held to 32 registers, with spills): 162 against 128 us, 264
// matrices 63.6 against 43.7. The second wave is not what costs: on the H200 one
// full wave (792 matrices) takes 103.8 us and 1024 take 125.5.
// Also slower (H100, in one run against this kernel's 125.8-126.0 us at 1024 x 64):
// the matrix row-major (pitch 66), the update warps taking live rows (a bit mask,
// dead rows skipped at no lane's cost) and lane L columns 2L and 2L + 1 with 16-byte
// accesses, 134-135 us (6 warps; 4: 142, 8: 133), as it counts about as many
// instructions and shared-memory wavefronts as the column walk here; and, in warp
// 0, every lane's reciprocals computed beside the pivot reductions (the winner's
// taken by a shuffle) with the pivot row kept in a register across the barrier,
// 162 us: zero rows take __frcp_rn's slow path. And slower on the H200 (in one run,
// 1024 x 64: 175 against this kernel's 123.5 us): two warps holding the rows in
// registers as register_lu_kernel does, 32 columns at a time (two 32-column panels,
// the second updated from the first by its 32 U rows, one barrier each; branch
// exp/lu-panel, correct on the H100): 115 registers, 8 matrices an SM in one wave.
// Slower too (H100, in one run, 1024 x 64: 134.3-134.7 against 126.8-126.9 us): the
// columns in pairs (branch exp/lu-pairs), warp 0 factoring two columns a phase and
// the update threads applying both with one read and write of each element (40%
// fewer shared-memory wavefronts, half the barriers, the same bits): warp 0's two
// pivots a phase in sequence are the longer chain. And slower (H100, in one run): each
// lane's reciprocal of its own candidate beside the pivot reductions, the winner's
// taken by a shuffle, zero and tiny candidates skipped so that no lane takes
// __frcp_rn's slow path (branch exp/lu-spec-recip, KILN_LU_SPEC=1): 143.1-143.4 against
// 129.9-130.3 us in the same build without it, and 126.8-127.1 for this kernel (whose
// launch bounds ask no minimum of 5 blocks an SM, which that build did). No faster
// (H100, in one run, 126.4-126.5 against 126.5-126.8 us): an eighth warp (warp 4) that
// sits out the column loop (a named barrier of the other seven), so that if warps
// take an SM's schedulers by index mod 4, warp 0's chain shares its scheduler with
// no update warp of its block: contention for issue is not what slows the chain.
// Warp 0 keeps the pivot it published in a register rather than reading it back
// after the barrier: 124.3-124.5 us on the H100 and 121.6-121.9 on the H200 (two
// runs of December 7; no A/B in one run, against 126.8-127.1 and 123.5 in earlier
// ones). Slower (H200, in one run, 152.9-153.1 against 121.6-121.9 us): the update
// threads holding their 22 columns in registers (72 registers, 4 blocks an SM), the
// pivot row's thread storing its row to shared memory for the others under a named
// barrier of the update warps, and only column j + 2 written back each phase:
// fewer shared-memory wavefronts, but a test and branch a column and fewer blocks.
// Branch exp/lu-reg-update enters the column run through a jump table instead (no
// test a column); it was built, not measured, and is lost. Slower (H100, in one run,
// 1024 x 64: 129.8-130.0 against 125.6-125.8 us; 792: 103.5-103.7 against 100.3-100.5;
// 264: 43.0 against 43.4; the same bits): the update threads' columns in runs of four
// with the last run's tail predicated off instead of the loop of single columns, and
// pivot_info read through a shared address held in a register (ncu showed the update
// warps recomputing the array's address each column). ncu of this kernel (H100, 1024
// matrices, under ncu's clocks): shared memory 80% busy (21.9K wavefronts a matrix,
// 20.4K of them the update's), 2.3 instructions issued a cycle an SM (67K a matrix,
// 52.6K the update warps', 9.4K warp 0's), the update warps 32% of their samples at
// the barrier and warp 0 19%, and the update loop at 22 active lanes of 32 (the rows
// used as pivots idle): any gain has to take shared-memory traffic out of the update.
// Taking it out this way was slower (H100, in one run, 1024 x 64: 142.4-142.9 against
// 124.9-125.2 us; 792: 113.0-113.5 against 100.1-100.4; 264: 52.3-52.4 against
// 42.5-42.7; the same bits for 9 shapes from 33 x 33 to 64 x 64 with zero pivots and
// ties, and the GPU LU tests passed): the update warps deferring each even column's
// update and applying it in the next phase with the odd column's (one read and write
// of each element for two columns, the pivot row's entries brought up to date on the
// fly), warp 0 applying the deferred update to its own column, one pivot and one
// barrier a column as here (launch bounds asking six blocks an SM: 40 registers,
// small spills). Presumably the update warps idle in even phases and set the pace of
// odd ones, whose work is longer than a phase's here, so the phases' maxima add up to
// more (not profiled).
constexpr int kLuUpdateWarps = 6, kLuThreads = 32 * (kLuUpdateWarps + 1), kLuPitch = 65;

template <class T>
__global__ void __launch_bounds__(kLuThreads) small_lu_kernel(const T* __restrict__ a, T* __restrict__ lu,
                                                              int32_t* __restrict__ pivots,
                                                              int32_t* __restrict__ info, int m, int n) {
  using F = Field<T>;
  extern __shared__ float2 lu_smem[];
  T* s = reinterpret_cast<T*>(lu_smem);
  __shared__ uint8_t row_at[64];  // position -> physical row, at the end
  // [column parity]: the physical row that became U's row, | kZeroPivot when the pivot was zero
  __shared__ int pivot_info[2];
  constexpr int ld = kLuPitch, kZeroPivot = 0x100;
  const int kmin = m < n ? m : n, t = threadIdx.x, lane = t % 32;
  const int64_t mat = blockIdx.x;
  const T* src = a + mat * m * n;
  // element e = r n + c of the row-major matrices, stepped without a division per element
  const int step_r = kLuThreads / n, step_c = kLuThreads % n;
  {
    int r = t / n, c = t % n;
    for (int e = t; e < m * n; e += kLuThreads) {
      s[c * ld + r] = src[e];
      r += step_r, c += step_c;
      if (c >= n) c -= n, ++r;
    }
  }
  __syncthreads();
  // warp 0: lane L holds the positions of physical rows L and L + 32
  int pos_lo = lane, pos_hi = lane + 32;
  int32_t first_zero = 0;
  const auto take_column = [&](int c, int prev) {  // prev: column c - 1's pivot row, -1 for no update
    T* col = s + c * ld;
    const T* lcol = s + (c - 1) * ld;
    const bool live_lo = lane < m && pos_lo >= c, live_hi = lane + 32 < m && pos_hi >= c;
    T v_lo{}, v_hi{};
    if (prev >= 0) {
      const T u = col[prev];
      if (live_lo) v_lo = F::fms(col[lane], lcol[lane], u);
      if (live_hi) v_hi = F::fms(col[lane + 32], lcol[lane + 32], u);
    } else {
      if (live_lo) v_lo = col[lane];
      if (live_hi) v_hi = col[lane + 32];
    }
    const uint32_t k_lo = pivot_key(v_lo, live_lo), k_hi = pivot_key(v_hi, live_hi);
    const bool hi_wins = k_hi > k_lo || (k_hi == k_lo && pos_hi < pos_lo);
    const uint32_t key = hi_wins ? k_hi : k_lo;
    const uint32_t tag = hi_wins ? pos_hi * 64 + lane + 32 : pos_lo * 64 + lane;
    const uint32_t best = __reduce_max_sync(0xffffffffu, key);
    const uint32_t first = __reduce_min_sync(0xffffffffu, key == best ? tag : 0xffffffffu);
    const int p = static_cast<int>(first % 64), p_pos = static_cast<int>(first / 64);
    T pv;
    {
      const T lo = shfl_field(v_lo, p % 32), hi = shfl_field(v_hi, p % 32);
      pv = p < 32 ? lo : hi;
    }
    const bool zero = F::is_zero(pv);
    int done = p;  // the row at position c from now on
    if (!zero) {   // getf2 swaps positions c and p_pos and scales below c
      if (lane == p) pos_lo = c;
      else if (pos_lo == c) pos_lo = p_pos;
      if (lane + 32 == p) pos_hi = c;
      else if (pos_hi == c) pos_hi = p_pos;
      if (F::tiny(pv)) {
        if (live_lo && pos_lo > c) v_lo = F::div(v_lo, pv);
        if (live_hi && pos_hi > c) v_hi = F::div(v_hi, pv);
      } else {
        const T recip = F::fast_recip(pv);
        if (live_lo && pos_lo > c) v_lo = F::mul(v_lo, recip);
        if (live_hi && pos_hi > c) v_hi = F::mul(v_hi, recip);
      }
    } else {  // no swap: the row already at position c is done
      done = static_cast<int>(__reduce_min_sync(
          0xffffffffu, pos_lo == c && lane < m ? lane : pos_hi == c && lane + 32 < m ? lane + 32 : 64));
      if (lane == 0 && first_zero == 0) first_zero = c + 1;
    }
    if (live_lo) col[lane] = v_lo;
    if (live_hi) col[lane + 32] = v_hi;
    const int published = done | (zero ? kZeroPivot : 0);
    if (lane == 0) {
      pivot_info[c & 1] = published;
      pivots[mat * kmin + c] = p_pos + 1;
    }
    return published;  // warp 0 keeps it: no shared-memory read after the barrier
  };
  // The two roles run their own loops, each with one barrier a column (the same
  // barrier, as many times), so that neither carries the other's state through it.
  if (t < 32) {
    int info_j = take_column(0, -1);
    __syncthreads();
    for (int j = 0; j + 1 < kmin; ++j) {
      info_j = take_column(j + 1, info_j & kZeroPivot ? -1 : info_j);
      __syncthreads();
    }
    __syncthreads();  // the update threads' phase of the last column
    if (lane < m) row_at[pos_lo] = static_cast<uint8_t>(lane);
    if (lane + 32 < m) row_at[pos_hi] = static_cast<uint8_t>(lane + 32);
  } else {
    constexpr int G = kLuUpdateWarps / 2;  // column groups of the update threads
    const int row = (t - 32) % 64, group = (t - 32) / 64;  // the physical row, every G-th column
    bool live = row < m;
    __syncthreads();
    const T* lp = s + row;  // column j's entry of this row
    for (int j = 0; j < kmin; ++j, lp += ld) {
      const int info_j = pivot_info[j & 1], p = info_j & (kZeroPivot - 1);
      if (row == p) live = false;
      if (live && !(info_j & kZeroPivot)) {
        const T l = *lp;
        int c = j + 2 + group;
        T* vp = s + c * ld + row;
        const T* up = s + c * ld + p;
        for (; c + 3 * G < n; c += 4 * G, vp += 4 * G * ld, up += 4 * G * ld) {
          T v[4], u[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) v[q] = vp[q * G * ld], u[q] = up[q * G * ld];
#pragma unroll
          for (int q = 0; q < 4; ++q) vp[q * G * ld] = F::fms(v[q], l, u[q]);
        }
        for (; c < n; c += G, vp += G * ld, up += G * ld) *vp = F::fms(*vp, l, *up);
      }
      __syncthreads();
    }
  }
  __syncthreads();
  T* dst = lu + mat * m * n;
  {
    int r = t / n, c = t % n;
    for (int e = t; e < m * n; e += kLuThreads) {
      dst[e] = s[c * ld + row_at[r]];
      r += step_r, c += step_c;
      if (c >= n) c -= n, ++r;
    }
  }
  if (t == 0) info[mat] = first_zero;
}

// Rows in registers: thread i of an N-thread group (N = 32 or 64) holds row i of its
// matrix (zero past m or n; the update's work on zero columns is wasted but
// harmless), every index a compile-time constant once the column loop is unrolled.
// Rows stay in their threads; a thread tracks its row's position in getf2's order
// (a row swap exchanges two positions) and writes the row there at the end. Per
// column j, with one barrier (a warp's own for N = 32):
//  - each warp finds its pivot candidate among the rows not yet used as pivots
//    (redux: the largest magnitude, then the smallest position among ties), and the
//    candidate's thread publishes its row and key in shared memory;
//  - after the barrier every thread picks the better of the two, and the rows
//    below take the multiplier and the rank-1 update in registers, reading the
//    pivot row as 16-byte broadcasts.
// The candidate buffers alternate between even and odd columns, so the next
// column's writers never meet this column's readers. Used for float32 up to 64 and
// complex64 up to 32. Measured on the H100, 1024 float32 64 x 64: 133 us in the
// shared-memory kernel of the time (two barriers a column), 53 us here with a
// matrix a block, 50 us with two (their warps fetch the same instructions in step;
// four: 51, eight: 61). complex64 64 x 64 stays in shared memory: this kernel took
// 265 us against that kernel's 184, as its unrolled code (2.3 times the
// instructions of float's) outgrows the instruction cache: ncu, 5.4 cycles a warp
// stalled on instruction fetch per instruction issued, against 1.0 for float32.

// Shared memory of one matrix of the register kernel.
template <class T, int N>
struct RegLuShared {
  static constexpr int kPitch = N + 1, kWarps = N / 32, kVecs = N * sizeof(T) / sizeof(float4);
  T stage[N * kPitch];                      // the matrix coming in and going out
  float4 cand[2][kWarps][kVecs];            // [column parity][warp]: the warp's candidate row
  uint32_t cand_key[2][kWarps], cand_pos[2][kWarps];
};

template <class T, int N, int MPB, int kMinBlocks>
__global__ void __launch_bounds__(N * MPB, kMinBlocks)
    register_lu_kernel(const T* __restrict__ a, T* __restrict__ lu, int32_t* __restrict__ pivots,
                       int32_t* __restrict__ info, int64_t batch, int m, int n) {
  using F = Field<T>;
  using Sh = RegLuShared<T, N>;
  constexpr int kPitch = Sh::kPitch, kWarps = Sh::kWarps, kVecs = Sh::kVecs, kPerVec = sizeof(float4) / sizeof(T);
  extern __shared__ float4 reg_lu_smem[];
  const int i = threadIdx.x % N, warp = i / 32, kmin = m < n ? m : n;
  const int64_t mat = static_cast<int64_t>(blockIdx.x) * MPB + threadIdx.x / N;
  const bool real = mat < batch;  // a block's tail matrices past the batch still meet its barriers
  Sh& sh = reinterpret_cast<Sh*>(reg_lu_smem)[threadIdx.x / N];
  // a matrix of one warp needs no block barrier
  const auto matrix_sync = [] {
    if constexpr (kWarps == 1) __syncwarp();
    else __syncthreads();
  };
  const T* src = a + mat * m * n;
#pragma unroll 16
  for (int row = 0; row < N; ++row) sh.stage[row * kPitch + i] = real && row < m && i < n ? src[row * n + i] : T{};
  matrix_sync();
  T r[N];
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
      for (int v = j / kPerVec; v < kVecs; ++v) {
        if constexpr (kPerVec == 4)
          sh.cand[par][warp][v] = make_float4(r[4 * v], r[4 * v + 1], r[4 * v + 2], r[4 * v + 3]);
        else
          sh.cand[par][warp][v] = make_float4(r[2 * v].x, r[2 * v].y, r[2 * v + 1].x, r[2 * v + 1].y);
      }
      sh.cand_key[par][warp] = best;
      sh.cand_pos[par][warp] = first;
    }
    matrix_sync();
    int w = 0;
    if constexpr (kWarps == 2) {
      const uint32_t k0 = sh.cand_key[par][0], k1 = sh.cand_key[par][1];
      w = k1 > k0 || (k1 == k0 && sh.cand_pos[par][1] < sh.cand_pos[par][0]) ? 1 : 0;
    }
    const int p = static_cast<int>(sh.cand_pos[par][w]);
    const float4* prow = sh.cand[par][w];
    if (live && pos == p) {
      live = false;  // this row is U's row j now
      pos = j;
    } else if (live && pos == j) {
      pos = p;  // getf2 swaps it with the pivot row
    }
    if (real && i == 0) pivots[mat * kmin + j] = p + 1;
    const T pv = reinterpret_cast<const T*>(prow)[j];
    if (F::is_zero(pv)) {  // the column below j is zero: nothing to scale or update
      if (first_zero == 0) first_zero = j + 1;
    } else if (live) {
      const T l = F::tiny(pv) ? F::div(r[j], pv) : F::mul(r[j], F::fast_recip(pv));  // getf2's rule
      r[j] = l;
#pragma unroll
      for (int v = (j + 1) / kPerVec; v < kVecs; ++v) {
        const float4 u4 = prow[v];
        T u[kPerVec];
        if constexpr (kPerVec == 4) {
          u[0] = u4.x, u[1] = u4.y, u[2] = u4.z, u[3] = u4.w;
        } else {
          u[0] = {u4.x, u4.y}, u[1] = {u4.z, u4.w};
        }
#pragma unroll
        for (int q = 0; q < kPerVec; ++q)
          if (kPerVec * v + q > j) r[kPerVec * v + q] = F::fms(r[kPerVec * v + q], l, u[q]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) sh.stage[pos * kPitch + k] = r[k];
  matrix_sync();
  if (!real) return;
  T* dst = lu + mat * m * n;
  if (i < n)
#pragma unroll 4
    for (int row = 0; row < m; ++row) dst[row * n + i] = sh.stage[row * kPitch + i];
  if (i == 0) info[mat] = first_zero;
}

template <class T, int N, int MPB, int kMinBlocks>
void launch_register_lu(const T* a, T* lu, int32_t* pivots, int32_t* info, int64_t batch, int m, int n) {
  const auto kernel = register_lu_kernel<T, N, MPB, kMinBlocks>;
  constexpr size_t smem = MPB * sizeof(RegLuShared<T, N>);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>((batch + MPB - 1) / MPB), N * MPB, smem, current_stream()>>>(a, lu, pivots, info,
                                                                                          batch, m, n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void small_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  const int64_t batch = a.size(0);
  const int m = static_cast<int>(a.size(1)), n = static_cast<int>(a.size(2));
  KILN_CHECK(m >= 1 && m <= 64 && n >= 1 && n <= 64, "small_lu_factor: m and n must be 1 to 64, got ", m, " x ", n);
  if (batch == 0) return;
  const bool complex = a.dtype() == DType::Complex64;
  if (m <= 32 && n <= 32) {  // a warp a matrix, rows in registers
    if (complex)
      return launch_register_lu<float2, 32, 4, 4>(static_cast<const float2*>(a.data_ptr()),
                                                  static_cast<float2*>(lu.data_ptr()), pivots.data<int32_t>(),
                                                  info.data<int32_t>(), batch, m, n);
    return launch_register_lu<float, 32, 4, 8>(a.data<float>(), lu.data<float>(), pivots.data<int32_t>(),
                                               info.data<int32_t>(), batch, m, n);
  }
  if (!complex)  // past 32: two matrices a block
    return launch_register_lu<float, 64, 2, 4>(a.data<float>(), lu.data<float>(), pivots.data<int32_t>(),
                                               info.data<int32_t>(), batch, m, n);
  // complex64 past 32 in shared memory: see small_lu_kernel for why not registers
  const size_t smem = static_cast<size_t>(kLuPitch) * n * sizeof(float2);
  small_lu_kernel<float2><<<static_cast<unsigned>(batch), kLuThreads, smem, current_stream()>>>(
      static_cast<const float2*>(a.data_ptr()), static_cast<float2*>(lu.data_ptr()), pivots.data<int32_t>(),
      info.data<int32_t>(), m, n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
