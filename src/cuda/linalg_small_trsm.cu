// Batched triangular solves of small float32 systems (n <= 64), a system per warp
// or, for n of 16 and 32, a right-hand side column per thread.
#include <type_traits>

#include "cuda/common.h"
#include "cuda/cp_async.cuh"
#include "cuda/linalg_small.h"

namespace kiln::cuda_backend {

namespace {

// Where row r of a triangle packed by rows starts in shared memory, so that
// A[r][c] sits at row_start(r) + c: the lower triangle keeps columns 0..r of
// each row, the upper r..n-1 (the packed 64 x 64 triangle takes 8.3 KB; with the
// rest, 16 systems share an SM). Lanes reading one column from consecutive rows
// hit distinct banks: the triangular numbers r (r + 1) / 2 of 32 consecutive
// rows are distinct modulo 32.
template <bool UPPER>
__device__ __forceinline__ int row_start(int r, int n) {
  return UPPER ? r * n - r * (r - 1) / 2 - r : r * (r + 1) / 2;
}

// Eight floats from / to 16-byte aligned memory, as two 16-byte accesses.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 lo = reinterpret_cast<const float4*>(p)[0], hi = reinterpret_cast<const float4*>(p)[1];
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// The inverse of 4 x 4 diagonal block p of the triangle (rows past n: identity),
// its rows stored as four float4s.
template <bool UPPER, bool UNIT>
__device__ __forceinline__ void invert_diagonal_block(const float* tri, int n, int p, float4* out) {
  float L[4][4], M[4][4];
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int row = 4 * p + q, col = 4 * p + c;
      const bool inside = row < n && col < n && (UPPER ? c >= q : c <= q);
      L[q][c] = q == c && (UNIT || !inside) ? 1.0f
                : inside                    ? tri[row_start<UPPER>(row, n) + col]
                                            : 0.0f;
      M[q][c] = 0.0f;
    }
#pragma unroll
  for (int cc = 0; cc < 4; ++cc) {
    const int c = UPPER ? 3 - cc : cc;
    M[c][c] = 1.0f / L[c][c];
#pragma unroll
    for (int rr = 1; rr < 4 - cc; ++rr) {
      const int r = UPPER ? c - rr : c + rr;  // rows of column c below (lower) or above (upper) the diagonal
      float acc = 0.0f;
#pragma unroll
      for (int t = 0; t < 4; ++t)
        if (UPPER ? (t > r && t <= c) : (t >= c && t < r)) acc = fmaf(L[r][t], M[t][c], acc);
      M[r][c] = -acc / L[r][r];
    }
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) out[q] = make_float4(M[q][0], M[q][1], M[q][2], M[q][3]);
}

// One panel of the blocked substitution (see small_trsm_kernel): the owner lanes
// publish rows j0..j0+3 of B to X, lane (q, r) = (lane / 8, lane % 8) forms x[q][r] with
// the panel's inverted diagonal block, and every lane's rows take the rank-4 update
// with entry(rr, j0, t), its row rr's entry in column j0 + t of the triangle (0
// where the row takes none). Row kSkip of each lane (-1: none) is all solved.
template <int kRows, int kOwnerRow, int kSkip, class Entry>
__device__ __forceinline__ void substitute_panel(float* X, const float4* block_inv, float (&b)[kRows][8], int p,
                                                 int lane, int q, int r, Entry entry) {
  const int j0 = 4 * p, own = lane - (j0 & 31);
  if (own >= 0 && own < 4) store8(X + (j0 + own) * 8, b[kOwnerRow]);  // rows past n publish their zeros
  __syncwarp();
  const float4 m = block_inv[4 * p + q];
  const float xq = fmaf(m.x, X[j0 * 8 + r], fmaf(m.y, X[(j0 + 1) * 8 + r], fmaf(m.z, X[(j0 + 2) * 8 + r],
                                                                                  m.w * X[(j0 + 3) * 8 + r])));
  __syncwarp();
  X[(j0 + q) * 8 + r] = xq;
  __syncwarp();
  float xv[4][8];
#pragma unroll
  for (int t = 0; t < 4; ++t) load8(X + (j0 + t) * 8, xv[t]);
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    if (rr == kSkip) continue;
    float l[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) l[t] = entry(rr, j0, t);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      b[rr][e] = fmaf(-l[0], xv[0][e], fmaf(-l[1], xv[1][e], fmaf(-l[2], xv[2][e], fmaf(-l[3], xv[3][e], b[rr][e]))));
  }
}

// Blocked substitution, a warp per system, eight columns of B at a time: lane l
// holds rows l and, when TWO_ROWS, l + 32 of B. The rows go in panels of four
// (from the top for a lower triangle, from the bottom for an upper one). For a
// panel the owner lanes publish their rows as they stand to shared memory, lane
// (q, r) = (l / 8, l % 8) forms x[q][r] from them with the panel's inverted
// diagonal block (made once, at the start), and every lane takes the rank-4
// update of its rows still to come; a slot's rows drop out once the substitution
// has passed them all (4096 systems of 64, 8 columns, H200: 31.2 -> 29.4 us). On
// the H200 the kernel is bound by instruction issue (ncu, 4096 systems of 64: 3.6K
// instructions a warp against 5.8K for a row-at-a-time substitution); two warps a
// system, four columns each, ran slower (32.4 us). A's triangle comes in as
// 16-byte loads (vec_a: n / 4 a power of two, 16-byte aligned), B's rows too when
// vec_b (k % 4 == 0, aligned). X is written apart from B, so B needs no copy.
// NFIX = 64 compiles the commonest size with n fixed: its panel loops unrolled,
// and the triangle copied float by float with cp.async, all of it in flight at
// once and no registers held (H100, 4096 systems, 8 columns: 33.1 us with n at run
// time, 31.3 fixed with the 16-byte loads, 28.3 with cp.async; capped at 96
// registers for 18 warps an SM, 28.6). Also tried on the H100 and not kept: 8 loads
// in flight a lane instead of 16 at 18 or 20 warps an SM, 33.4-33.5; only the 544
// 16-byte chunks that meet the triangle, 17 a lane at once, their offsets from a
// table, 40.5; rows padded to whole 16-byte chunks, so that the triangle comes in
// as 544 16-byte cp.async and a panel row's four entries are one 16-byte load
// (branch exp/trsm-chunks), 32.7-32.9 against 28.3-28.5; the substitution on the fp64
// tensor cores (mma.m8n8k4: B as eight 8 x 8 accumulator tiles, a panel's X made by one
// mma with the block inverse and each later tile's rank-4 update by one more, the
// panel's rows moved between layouts by shuffles), H100 in one run 33.6 against 27.8, and as a
// persistent kernel with each warp's next system prefetched into shared memory, 36.6
// (10 warps an SM): ncu counted about 4K warp instructions a system, no fewer than
// here, as the mma's conversions, shuffles and addresses took the FMAs' place.
// Persistent again, with this substitution (branch exp/trsm64-persistent): lane l
// holding rows l and 63 - l of the triangle in registers (65 slots, fixed indices),
// the next system's triangle and B staged by cp.async while the current one is
// solved: correct, and slower on the H100, 37.3-37.6 against 27.7-27.8 us. ncu
// (H100, 4096 systems of 64, 8 columns) says why: this kernel is bound by each
// warp's latency, not by memory or issue: 3.5 warps a scheduler, one instruction a
// warp every 5.9 cycles, DRAM 55% busy, 3.05K instructions a system; the persistent
// one needed 168 registers (10.4 warps an SM) and issued as slowly. Slower as well
// (H100, in one run, 28.4 us for this kernel; the same bits): no triangle in shared
// memory (3 KB a system, so 24 or 32 warps an SM), each lane loading its two rows'
// entries of a panel from global memory as one 16-byte load a row, two panels ahead,
// 38.0 us at 24 warps, 40.6 at 32 (64 registers, small spills), and 44.3 and 45.7
// with an L2 bulk prefetch of each row's part of the triangle first (presumably the
// loads, two panels ahead, still wait on the panels' chain; not profiled). ncu (H100,
// December 7) counts 3.05K instructions a system, about 1.4K of them the staging loop
// of the triangle's 4-byte cp.async (address arithmetic and predicates a copy), yet
// staging it with each copy one instruction, both addresses a lane base plus an
// immediate (rows and halves unrolled at compile time, a compare only where some lanes
// have no element), was no faster: 28.8-28.9 against 28.4-28.5 us, the same bits.
// Slower too (H100, in one run, 29.3-29.4 against 28.0-28.1 us, the same bits): the
// triangle staged as four cp.async groups of 16 columns, the block the panels need
// first coming first, each block's panels waiting for its group alone, and the 4 x 4
// inverses computed from global memory meanwhile, so the substitution starts when 43%
// of the triangle has come. Where the staging waits (ncu: 43% of the samples, 13% on
// the wait itself) is not what sets the pace. Nor does staging by all warps of an SM
// at once crowd the memory: with 16 warps a block, a block an SM (persistent, each
// warp solving systems in turn, the same bits), 4096 systems took 32.6 us against
// 27.9 here, and 35.5 and 47.1 when the warps went in 2 or 4 cohorts, each cohort
// staging its first triangle only once the one before had its own, so that one
// cohort substitutes while the next stages (H100, in one run, two rounds; 8192
// systems: 58.4, 60.4, 71.0 against 47.0). Here 512 systems (about 4 warps an SM)
// take 6.4 us and 2048 (one wave of 16 warps an SM) 12.1. Slower as well (H100, in
// one run, alternated; the same bits for lower triangles): a persistent warp a block
// with the triangle packed by columns, so that the four columns a panel's update has
// read are dead and the next system's same columns are staged into their place by
// cp.async while this system is solved (one buffer, 16 warps an SM, the staging
// overlapped; an upper triangle taken in reversed order as a lower one; 128
// registers): 4096 systems 41.8-42.1 against 27.8-27.9 us, 2048 18.4 against 12.1,
// 8192 75.9-76.0 against 47.0-47.1, 512 8.1-8.2 against 6.4 (commit 2429b9a). Slower
// too (H100, in one run, alternated twice; commit 4231d09, KILN_TRSM_PANEL8): panels of
// eight rows for n = 64, half the chain of publish, X, publish X and read X a system
// with as many FMAs, each panel's 8 x 8 inverse built once from its two 4 x 4 ones
// (lane (q, r) forming x[q][r] and x[q + 4][r]; 1 KB more shared memory a warp, still
// 16 warps an SM; 128 registers, no spills; correct, 2e-7 to 6e-7 from fp64 as here):
// 4096 systems 30.9 against 28.0 us, 2048 13.8 against 12.2-12.3, 8192 51.8 against
// 47.2, 512 7.5 against 6.6, upper 4096 31.5 against 28.1.
template <bool UPPER, bool UNIT, bool TWO_ROWS, int NFIX = 0>
__global__ void __launch_bounds__(32, 16) small_trsm_kernel(const float* __restrict__ a, const float* __restrict__ bsrc,
                                                        float* __restrict__ x, int n_arg, int k, bool vec_a, bool vec_b) {
  const int n = NFIX ? NFIX : n_arg;
  constexpr int kRows = TWO_ROWS ? 2 : 1;
  extern __shared__ float4 trsm_smem[];
  const int panels = (n + 3) / 4;
  float4* block_inv = trsm_smem;                                      // [panels][4] rows of 4 x 4 inverses
  float* X = reinterpret_cast<float*>(trsm_smem + 4 * panels);        // [4 panels][8]: rows of B, then of X
  float* tri = X + 32 * panels;                                       // the triangle, packed by rows
  const int64_t sys = blockIdx.x;
  const int lane = threadIdx.x;
  const float* as = a + sys * n * n;
  const float* bs = bsrc + sys * n * k;
  float* xs = x + sys * n * k;
  float b[kRows][8];
  const auto load_b = [&](int c0, int kc) {
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      const int row = lane + 32 * rr;
      const float* src = bs + row * k + c0;
      if (row < n && vec_b && kc == 8) {
        load8(src, b[rr]);
      } else {
#pragma unroll
        for (int r = 0; r < 8; ++r) b[rr][r] = row < n && r < kc ? src[r] : 0.0f;  // rows past n stay zero
      }
    }
  };
  load_b(0, k < 8 ? k : 8);  // in flight while A's triangle arrives
  if constexpr (NFIX == 64) {
    // every float of the triangle straight into shared memory (4-byte cp.async, no
    // registers held), all 2080 in flight at once
#pragma unroll 4
    for (int r = 0; r < 64; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = (UPPER ? r : 0) + lane + 32 * h;
        if (UPPER ? c < 64 : c <= r) cp_async4(tri + row_start<UPPER>(r, 64) + c, as + r * 64 + c);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
  } else if (vec_a) {
    // the n / 4 (a power of two) 16-byte chunks of each row that meet the triangle, read
    // by consecutive lanes (coalesced), kBatch of them in flight per lane: measured on
    // the H200, handing each lane whole rows instead (balanced, but one row per lane)
    // was slower at full occupancy, 36 against 29 us for 4096 64 x 64 systems
    constexpr int kBatch = 16;
    const int per_row = n / 4, shift = __ffs(per_row) - 1, chunks = n * per_row;
    const auto meets = [&](int r, int c) { return UPPER ? c + 3 >= r : c <= r; };
    for (int base = 0; base < chunks; base += 32 * kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int e = base + lane + 32 * u, r = e >> shift, c = 4 * (e & (per_row - 1));
        if (e < chunks && meets(r, c)) v[u] = __ldg(reinterpret_cast<const float4*>(as + r * n + c));
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int e = base + lane + 32 * u, r = e >> shift, c = 4 * (e & (per_row - 1));
        if (e >= chunks || !meets(r, c)) continue;
        float* dst = tri + row_start<UPPER>(r, n) + c;
        const float f[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (UPPER ? c + i >= r : c + i <= r) dst[i] = f[i];
      }
    }
  } else {
    for (int r = 0; r < n; ++r) {
      const int c_begin = UPPER ? r : 0, c_end = UPPER ? n : r + 1;
      float* dst = tri + row_start<UPPER>(r, n);
      for (int c = c_begin + lane; c < c_end; c += 32) dst[c] = as[r * n + c];
    }
  }
  __syncwarp();
  for (int p = lane; p < panels; p += 32) invert_diagonal_block<UPPER, UNIT>(tri, n, p, block_inv + 4 * p);
  __syncwarp();
  const int q = lane / 8, r = lane % 8;  // this lane's entry of a panel's X
  int starts[kRows];                     // where this lane's rows start in the triangle
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) starts[rr] = row_start<UPPER>(lane + 32 * rr, n);
  // panel p, with its owners' slot (0: rows 0..31, 1: rows 32..63) known at compile time
  const auto panel = [&](int p, auto slot_tag) {
    constexpr int slot = decltype(slot_tag)::value;
    // the other slot's rows are all solved once the substitution has passed them
    constexpr int skip = !TWO_ROWS ? -1 : UPPER ? (slot == 0 ? 1 : -1) : (slot == 1 ? 0 : -1);
    substitute_panel<kRows, slot, skip>(X, block_inv, b, p, lane, q, r, [&](int rr, int j0, int t) {
      const int row = lane + 32 * rr, c = j0 + t;
      const bool later = row < n && (UPPER ? row < j0 : row >= j0 + 4);
      return later && c < n ? tri[starts[rr] + c] : 0.0f;
    });
  };
  using Slot0 = std::integral_constant<int, 0>;
  using Slot1 = std::integral_constant<int, TWO_ROWS ? 1 : 0>;
  const int first = panels < 8 ? panels : 8;  // panels owned by slot 0
  for (int c0 = 0; c0 < k; c0 += 8) {
    const int kc = k - c0 < 8 ? k - c0 : 8;
    if (c0 > 0) load_b(c0, kc);
    if (!UPPER) {
#pragma unroll
      for (int p = 0; p < first; ++p) panel(p, Slot0{});
      if constexpr (TWO_ROWS)
#pragma unroll
        for (int p = 8; p < panels; ++p) panel(p, Slot1{});
    } else {
      if constexpr (TWO_ROWS)
#pragma unroll
        for (int p = panels - 1; p >= 8; --p) panel(p, Slot1{});
#pragma unroll
      for (int p = first - 1; p >= 0; --p) panel(p, Slot0{});
    }
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) {
      const int row = lane + 32 * rr;
      if (row >= n) continue;
      const float* src = X + row * 8;
      float* dst = xs + row * k + c0;
      if (vec_b && kc == 8) {
        float v[8];
        load8(src, v);
        store8(dst, v);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (e < kc) dst[e] = src[e];
      }
    }
    __syncwarp();  // X is read before the next columns overwrite it
  }
}

// Substitution with a thread per right-hand side column, for n of exactly N (16 or
// 32; A 16-byte aligned): the column's N values stay in registers and the loop over
// rows is unrolled at compile time. A block holds `systems` systems (8 threads a
// column group each); their triangles arrive first, all at once, as 16-byte
// cp.async chunks into shared memory (a system's pitch is padded by 16 bytes, so
// the four systems of a warp read row chunks from distinct banks). Read straight
// from global memory row by row instead, the loads sat on the substitution's
// dependent chain: 11.8 against 8.3 us for 4096 systems of 32 with 8 columns on
// the H200 (16: 5.9 against 4.6). Rows from the top for a lower triangle, from the
// bottom for an upper one; the dot product of a row runs in four partial sums.
template <int N, bool UPPER, bool UNIT>
__global__ void __launch_bounds__(256) column_trsm_kernel(const float* __restrict__ a, const float* __restrict__ bsrc,
                                                           float* __restrict__ x, int64_t batch, int k, int groups,
                                                           int systems) {
  constexpr int kChunks = N / 4, kPitch = N * kChunks + 1;  // in float4s
  extern __shared__ float4 column_trsm_smem[];
  const int per_sys = groups * 8;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * systems;
  for (int e = threadIdx.x; e < systems * N * kChunks; e += blockDim.x) {
    const int ls = e / (N * kChunks), i = e / kChunks % N, q = e % kChunks;
    const bool meets = UPPER ? 4 * q + 3 >= i : 4 * q <= i;
    if (meets && first + ls < batch)
      cp_async16(column_trsm_smem + ls * kPitch + i * kChunks + q, a + (first + ls) * N * N + i * N + 4 * q, true);
  }
  cp_async_commit();
  const int ls = threadIdx.x / per_sys, c = threadIdx.x % per_sys;
  const int64_t sys = first + ls;
  const bool solves = ls < systems && sys < batch && c < k;
  const float* bs = bsrc + sys * N * k + c;
  float v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = solves ? bs[i * k] : 0.0f;  // in flight with the triangles
  cp_async_wait<0>();
  __syncthreads();
  if (!solves) return;
  const float4* as = column_trsm_smem + ls * kPitch;
#pragma unroll
  for (int ii = 0; ii < N; ++ii) {
    const int i = UPPER ? N - 1 - ii : ii;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float diag = 1.0f;
#pragma unroll
    for (int q = 0; q < kChunks; ++q) {
      if (UPPER ? 4 * q + 3 < i : 4 * q > i) continue;  // the chunk misses the triangle (known at compile time)
      const float4 r = as[i * kChunks + q];
      const float e[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int j = 4 * q + t;
        if (j == i)
          diag = e[t];
        else if (UPPER ? j > i : j < i)
          acc[q & 3] = fmaf(e[t], v[j], acc[q & 3]);
      }
    }
    const float rest = v[i] - ((acc[0] + acc[1]) + (acc[2] + acc[3]));
    v[i] = UNIT ? rest : rest / diag;
  }
  float* xs = x + sys * N * k + c;
#pragma unroll
  for (int i = 0; i < N; ++i) xs[i * k] = v[i];
}

// The largest k the column kernel takes (a block holds all of one system's columns).
constexpr int kColumnTrsmMaxK = 256;

template <int N>
void launch_column_trsm(const Tensor& a, const Tensor& b, const Tensor& x, bool upper, bool unit) {
  const int64_t batch = a.size(0);
  const int k = static_cast<int>(x.size(2)), groups = (k + 7) / 8, per_sys = groups * 8;
  const int systems = per_sys >= 128 ? 1 : 128 / per_sys;
  const unsigned grid = static_cast<unsigned>((batch + systems - 1) / systems);
  const size_t smem = static_cast<size_t>(systems) * (N * N / 4 + 1) * 16;
  using Kernel = void (*)(const float*, const float*, float*, int64_t, int, int, int);
  const Kernel kernel = upper ? (unit ? column_trsm_kernel<N, true, true> : column_trsm_kernel<N, true, false>)
                              : (unit ? column_trsm_kernel<N, false, true> : column_trsm_kernel<N, false, false>);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<grid, systems * per_sys, smem, current_stream()>>>(a.data<float>(), b.data<float>(), x.data<float>(), batch,
                                                              k, groups, systems);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void small_triangular_solve(const Tensor& a, const Tensor& b, const Tensor& x, bool upper, bool unit) {
  const int64_t batch = a.size(0);
  const int n = static_cast<int>(a.size(1)), k = static_cast<int>(x.size(2));
  KILN_CHECK(n >= 1 && n <= 64, "small_triangular_solve: n must be 1 to 64, got ", n);
  if (batch == 0 || k == 0) return;
  // a thread per column for 16 and 32; at 64 its 2080 row loads a thread made it
  // twice the warp kernel's time (H200, 4096 systems, 8 columns, before the column
  // kernel staged A in shared memory: 16: 5.9 against 9.6 us, 32: 11.8 against
  // 12.2, 64: 63.0 against 30.9)
  if (aligned16(a.data_ptr()) && k <= kColumnTrsmMaxK) {
    if (n == 16) return launch_column_trsm<16>(a, b, x, upper, unit);
    if (n == 32) return launch_column_trsm<32>(a, b, x, upper, unit);
  }
  const int panels = (n + 3) / 4;  // 4 x 4 inverses, X's rows, then the packed triangle
  const size_t smem = (static_cast<size_t>(panels) * (16 + 32) + static_cast<size_t>(n) * (n + 1) / 2) * sizeof(float);
  using Kernel = void (*)(const float*, const float*, float*, int, int, bool, bool);
  const auto pick = [&](auto two_rows) -> Kernel {
    constexpr bool T = decltype(two_rows)::value;
    return upper ? (unit ? small_trsm_kernel<true, true, T> : small_trsm_kernel<true, false, T>)
                 : (unit ? small_trsm_kernel<false, true, T> : small_trsm_kernel<false, false, T>);
  };
  Kernel kernel = n > 32 ? pick(std::true_type{}) : pick(std::false_type{});
  if (n == 64)  // n known at compile time: panel loops unrolled, their indices constants
    kernel = upper ? (unit ? small_trsm_kernel<true, true, true, 64> : small_trsm_kernel<true, false, true, 64>)
                   : (unit ? small_trsm_kernel<false, true, true, 64> : small_trsm_kernel<false, false, true, 64>);
  const bool vec_a = n % 4 == 0 && ((n / 4) & (n / 4 - 1)) == 0 && aligned16(a.data_ptr());
  const bool vec_b = k % 4 == 0 && aligned16(b.data_ptr()) && aligned16(x.data_ptr());
  kernel<<<static_cast<unsigned>(batch), 32, smem, current_stream()>>>(a.data<float>(), b.data<float>(), x.data<float>(),
                                                                        n, k, vec_a, vec_b);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
