// CUDA grouped_mm for many rows a group (prefill): 64-row tensor-core tiles, the
// k slices brought into shared memory by cp.async or, on Hopper, by the tensor
// memory accelerator (which also reads fp8 weights as they are).
#include "cuda/cp_async.cuh"
#include "cuda/grouped_mm.cuh"
#include "cuda/tma.cuh"
#include "cuda/tma.h"

namespace kiln::cuda_backend {

namespace {

// ---- prefill: a 64 x (TW * NTW * 8) tile per block; k streams through a ring
// of kTileStages stages in shared memory (cp.async), each stage SUB slices of 64
// bytes of k. A slice is 64 rows x 4 chunks of a and TW * NTW * 8 rows x 4 chunks
// of b; lane (g, t) reads chunk t of 8 consecutive rows, 512 contiguous bytes per
// warp, so the reads are free of bank conflicts. Each of the TW warps owns NTW * 8
// columns and only the 16-row tiles that hold rows of its group (an expert of a
// 512-token prefill has about 32). Rows past the group's end and columns past N
// are not loaded: they feed only outputs that are never stored. k past K is
// loaded as zeros, since it feeds every output.
constexpr int kTileRows = 64;
// The TMA kernel's boxes of a: one m-tile of rows (kernel and launcher agree on it).
constexpr int kABoxRows = 16;
static_assert(kABoxRows == 16, "a box of a is one mma m-tile of rows");

// A tile kernel's block: columns n0 .. n0 + tile_cols of the (group, 64-row chunk)
// pair of its slot (column blocks fastest in blockIdx.x); slot 0's blocks also zero
// the rows past the last group. False: the slot is past the last chunk.
template <class O>
__device__ __forceinline__ bool tile_block_chunk(const int32_t* __restrict__ offs, int G, int64_t rows, int64_t N,
                                                 int tile_cols, O* __restrict__ out, int64_t ldo, int64_t& n0,
                                                 GroupChunk& gc) {
  const unsigned col_blocks = static_cast<unsigned>((N + tile_cols - 1) / tile_cols);
  n0 = static_cast<int64_t>(blockIdx.x % col_blocks) * tile_cols;
  const int64_t slot = blockIdx.x / col_blocks;
  if (slot == 0) zero_tail_rows(offs, G, rows, N, n0, tile_cols, out, ldo);
  return find_group_chunk(offs, G, rows, kTileRows, slot, gc);
}

// Eight fp8 e4m3fn weights -> eight T (exact: every e4m3 value is a bfloat16 and
// a float16), in the order of the 16-byte chunk of T they stand in for.
template <class T>
__device__ __forceinline__ uint4 widen_fp8x8(uint2 v) {
  uint32_t w[4];
  const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pairs[i]));
    if constexpr (std::is_same_v<T, BFloat16>) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
      w[i] = pack2<T>(f.x, f.y);
    } else {
      w[i] = h2;
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One 64-byte k slice of a block's tile from shared memory, where rows of a and
// b lie densely (4 chunks a row): the warp's NTW column tiles of b against the
// first mtiles 16-row tiles of a. fp8 weights W lie 32 bytes a row (the same k),
// widened to T as they are read.
template <class T, int NTW, class W = T>
__device__ __forceinline__ void mma_tile_slice(float (&c)[4][NTW][4], const uint4* sa, const void* sb, int warp,
                                               int mtiles) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  uint4 bv[NTW];
#pragma unroll
  for (int n = 0; n < NTW; ++n) {
    const int at = (warp * NTW * 8 + n * 8 + g) * 4 + t;
    if constexpr (std::is_same_v<W, T>) bv[n] = static_cast<const uint4*>(sb)[at];
    else bv[n] = widen_fp8x8<T>(static_cast<const uint2*>(sb)[at]);
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    if (m >= mtiles) break;
    const uint4 lo = sa[(m * 16 + g) * 4 + t], hi = sa[(m * 16 + 8 + g) * 4 + t];
#pragma unroll
    for (int n = 0; n < NTW; ++n) mma_chunk<T>(c[m][n], lo, hi, bv[n]);
  }
}



template <int TW, int NTW, int SUB>
constexpr size_t tile_stage_chunks() {
  return static_cast<size_t>(SUB) * (kTileRows + TW * NTW * 8) * 4;
}

// Blocks in column-block-fastest order, so that the column blocks of a row chunk
// run together and its rows of a come from L2 after the first read.
template <class T, class O, int TW, int NTW, int SUB, int kTileStages>
__global__ void __launch_bounds__(TW * 32)
    grouped_tile_kernel(const T* __restrict__ a, int64_t lda, int64_t rows, const T* __restrict__ b, int64_t ldg,
                        int64_t ldb, int64_t N, int64_t K, const int32_t* __restrict__ offs, int G,
                        O* __restrict__ out, int64_t ldo, ColumnScale scale) {
  constexpr int kTileCols = TW * NTW * 8, kThreads = TW * 32;
  static_assert(kThreads == kTileRows * 4 && kTileCols % kTileRows == 0, "one a chunk per thread per slice");
  extern __shared__ uint4 tile_smem[];
  int64_t n0;
  GroupChunk gc;
  if (!tile_block_chunk(offs, G, rows, N, kTileCols, out, ldo, n0, gc)) return;  // same answer for the whole block
  const int64_t chunks = K * static_cast<int64_t>(sizeof(T)) / 16;
  const int64_t stages = (chunks + 4 * SUB - 1) / (4 * SUB);
  const int ncols = static_cast<int>(min64(kTileCols, N - n0));

  // This thread's copies: chunk q of a row r and of b rows r + j * 64.
  const int r = threadIdx.x / 4, q = threadIdx.x % 4;
  const uint4* a_src = reinterpret_cast<const uint4*>(a + (gc.row0 + r) * lda) + q;
  const uint4* b_src = reinterpret_cast<const uint4*>(b + gc.g * ldg + (n0 + r) * ldb) + q;
  const int64_t b_step = kTileRows * ldb * static_cast<int64_t>(sizeof(T)) / 16;
  auto stage_a = [&](int st, int u) { return tile_smem + st * tile_stage_chunks<TW, NTW, SUB>() + u * kTileRows * 4; };
  auto stage_b = [&](int st, int u) {
    return tile_smem + st * tile_stage_chunks<TW, NTW, SUB>() + SUB * kTileRows * 4 + u * kTileCols * 4;
  };
  auto load_stage = [&](int64_t s) {
    const int st = static_cast<int>(s % kTileStages);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      const int64_t chunk = (s * SUB + u) * 4 + q;
      const bool in_k = chunk < chunks;
      const int64_t at = in_k ? chunk - q : 0;  // a zero-filled copy still needs a valid address
      if (r < gc.rows) cp_async16(stage_a(st, u) + threadIdx.x, a_src + at, in_k);
#pragma unroll
      for (int j = 0; j < kTileCols / kTileRows; ++j)
        if (r + j * kTileRows < ncols) cp_async16(stage_b(st, u) + threadIdx.x + j * kThreads, b_src + j * b_step + at, in_k);
    }
  };
#pragma unroll
  for (int s0 = 0; s0 < kTileStages - 1; ++s0) {
    if (s0 < stages) load_stage(s0);
    cp_async_commit();
  }
  const int warp = threadIdx.x / 32;
  const int mtiles = (gc.rows + 15) / 16;
  float c[4][NTW][4] = {};
  for (int64_t s = 0; s < stages; ++s) {
    cp_async_wait<kTileStages - 2>();
    __syncthreads();  // stage s is in; every warp is done with the stage about to be refilled
    if (s + kTileStages - 1 < stages) load_stage(s + kTileStages - 1);
    cp_async_commit();
    const int st = static_cast<int>(s % kTileStages);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      const uint4* sa = stage_a(st, u);
      const uint4* sb = stage_b(st, u);
      mma_tile_slice<T, NTW>(c, sa, sb, warp, mtiles);
    }
  }
  store_tile<O, 4, NTW>(c, gc, n0 + warp * NTW * 8, N, out, ldo, scale);
}

template <class T, class O, int TW, int NTW, int SUB, int kTileStages>
void launch_grouped_tile(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1), N = s.b.size(2);
  const int G = static_cast<int>(s.offs.size(0));
  constexpr int kTileCols = TW * NTW * 8;
  const int64_t slots = (rows + kTileRows - 1) / kTileRows + std::min<int64_t>(G, rows);
  const int64_t blocks = std::max<int64_t>(slots, 1) * ((N + kTileCols - 1) / kTileCols);
  KILN_CHECK(blocks < (int64_t{1} << 31), "grouped_mm: ", rows, " rows x ", N, " columns is more tiles than one launch takes");
  const auto kernel = grouped_tile_kernel<T, O, TW, NTW, SUB, kTileStages>;
  const size_t smem = kTileStages * tile_stage_chunks<TW, NTW, SUB>() * sizeof(uint4);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>(blocks), TW * 32, smem, current_stream()>>>(
      s.a.data<T>(), s.a.stride(0), rows, s.b.data<T>(), s.b.stride(0), s.b.stride(2), N, K, s.offs.data<int32_t>(),
      G, s.out.data<O>(), s.out.stride(0), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

// ---- prefill on Hopper: the same 64 x (TW * NTW * 8) tiles, with the k slices
// brought in by the tensor memory accelerator. One producer warp issues, per
// stage, SUB boxes of 64 bytes of k for the 64 rows of a and the tile's columns
// of b, into a ring of ST stages; the TW consumer warps wait on the stage's
// "full" barrier and, when done with it, arrive on its "empty" one. No thread
// spends instructions on addresses, and no barrier holds all warps together.
// Boxes land densely (64-byte rows), which is the layout the cp.async kernel
// reads. Rows and k outside the tensors read as zeros; rows of a that belong to
// the next group feed only outputs that are never stored. fp8 weights W come in
// as boxes of the same k (32 bytes a row, half the bytes) and are widened to T
// in registers: no dequantised copy of the experts.
template <class T, class W, class O, int TW, int NTW, int SUB, int ST>
__global__ void __launch_bounds__((TW + 1) * 32)
    grouped_tma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       int64_t rows, int64_t N, int64_t K, const int32_t* __restrict__ offs, int G,
                       O* __restrict__ out, int64_t ldo, ColumnScale scale) {
#if __CUDA_ARCH__ >= 900
  constexpr int kTileCols = TW * NTW * 8, kSliceElems = 64 / sizeof(T);
  constexpr uint32_t kABytes = kTileRows * 64, kABoxBytes = kABoxRows * 64,
                     kBBytes = kTileCols * kSliceElems * sizeof(W), kStageBytes = SUB * (kABytes + kBBytes);
  extern __shared__ __align__(128) unsigned char tma_smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(tma_smem + ST * kStageBytes);
  uint64_t* empty = full + ST;
  int64_t n0;
  GroupChunk gc;
  if (!tile_block_chunk(offs, G, rows, N, kTileCols, out, ldo, n0, gc)) return;  // same answer for the whole block
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int st = 0; st < ST; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], TW);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const int64_t slices = (K + kSliceElems - 1) / kSliceElems, stages = (slices + SUB - 1) / SUB;
  const int mtiles = (gc.rows + kABoxRows - 1) / kABoxRows;  // m-tiles of 16 rows, one box each
  // a's rows come in boxes of one m-tile, only those that hold rows of the group: a 64-row
  // box read about twice the rows of an expert's 32 (H200, 512 tokens, against 64-row boxes:
  // bf16 227 -> 217 us, fp8 weights 200 -> 186; H100: bf16 unchanged at 95% of copy)
  if (warp == TW) {  // the producer
    if (lane == 0) {
      tma_prefetch_map(map_a);
      tma_prefetch_map(map_b);
      for (int64_t s = 0; s < stages; ++s) {
        const int st = static_cast<int>(s % ST);
        if (s >= ST) mbar_wait(&empty[st], static_cast<uint32_t>((s / ST - 1) & 1));
        const int subs = static_cast<int>(min64(SUB, slices - s * SUB));
        mbar_arrive_expect_tx(&full[st], subs * (mtiles * kABoxBytes + kBBytes));
        unsigned char* stage = tma_smem + st * kStageBytes;
        for (int u = 0; u < subs; ++u) {
          const int k0 = static_cast<int>((s * SUB + u) * kSliceElems);
          for (int m = 0; m < mtiles; ++m)
            tma_load_2d(stage + u * kABytes + m * kABoxBytes, map_a, k0, static_cast<int>(gc.row0) + m * kABoxRows,
                        &full[st]);
          tma_load_3d(stage + SUB * kABytes + u * kBBytes, map_b, k0, static_cast<int>(n0), gc.g, &full[st]);
        }
      }
    }
    return;
  }
  float c[4][NTW][4] = {};
  for (int64_t s = 0; s < stages; ++s) {
    const int st = static_cast<int>(s % ST);
    mbar_wait(&full[st], static_cast<uint32_t>((s / ST) & 1));
    const int subs = static_cast<int>(min64(SUB, slices - s * SUB));
    const uint4* stage = reinterpret_cast<const uint4*>(tma_smem + st * kStageBytes);
#pragma unroll
    for (int u = 0; u < SUB; ++u) {
      if (u >= subs) break;
      const uint4* sa = stage + u * (kABytes / 16);
      const uint4* sb = stage + SUB * (kABytes / 16) + u * (kBBytes / 16);
      mma_tile_slice<T, NTW, W>(c, sa, sb, warp, mtiles);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
  }
  store_tile<O, 4, NTW>(c, gc, n0 + warp * NTW * 8, N, out, ldo, scale);
#else
  __trap();  // launchers check the architecture first
#endif
}

// Whether a and b can be described by tensor maps (Hopper, 16-byte aligned rows).
bool fits_tma(const GroupedMmArgs& s) {
  const uint64_t isz = s.a.itemsize(), bsz = s.b.itemsize();
  const uint64_t sa[1] = {static_cast<uint64_t>(s.a.stride(0)) * isz};
  const uint64_t sb[2] = {static_cast<uint64_t>(s.b.stride(2)) * bsz, static_cast<uint64_t>(s.b.stride(0)) * bsz};
  // == 90: only the sm_90a build has the kernel; other cards run the compute_80 PTX
  return device_arch() == 90 && s.a.size(0) < (int64_t{1} << 31) && s.b.size(0) < (int64_t{1} << 31) &&
         tensor_map_fits(s.a.data_ptr(), 2, sa) && tensor_map_fits(s.b.data_ptr(), 3, sb);
}

template <class T, class W, class O, int TW, int NTW, int SUB, int ST>
void launch_grouped_tma(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), K = s.a.size(1), N = s.b.size(2);
  const int G = static_cast<int>(s.offs.size(0));
  constexpr int kTileCols = TW * NTW * 8;
  const uint64_t isz = sizeof(T), bsz = sizeof(W);
  const uint64_t a_dims[2] = {static_cast<uint64_t>(K), static_cast<uint64_t>(rows)};
  const uint64_t a_strides[1] = {static_cast<uint64_t>(s.a.stride(0)) * isz};
  const uint32_t a_box[2] = {64 / sizeof(T), kABoxRows};
  const uint64_t b_dims[3] = {static_cast<uint64_t>(K), static_cast<uint64_t>(N), static_cast<uint64_t>(G)};
  const uint64_t b_strides[2] = {static_cast<uint64_t>(s.b.stride(2)) * bsz, static_cast<uint64_t>(s.b.stride(0)) * bsz};
  const uint32_t b_box[3] = {64 / sizeof(T), kTileCols, 1};  // the same k as a's box
  const CUtensorMap map_a = tensor_map(s.a.dtype(), 2, s.a.data_ptr(), a_dims, a_strides, a_box);
  const CUtensorMap map_b = tensor_map(s.b.dtype(), 3, s.b.data_ptr(), b_dims, b_strides, b_box);
  const int64_t slots = (rows + kTileRows - 1) / kTileRows + std::min<int64_t>(G, rows);
  const int64_t blocks = std::max<int64_t>(slots, 1) * ((N + kTileCols - 1) / kTileCols);
  KILN_CHECK(blocks < (int64_t{1} << 31), "grouped_mm: ", rows, " rows x ", N, " columns is more tiles than one launch takes");
  const auto kernel = grouped_tma_kernel<T, W, O, TW, NTW, SUB, ST>;
  const size_t smem = static_cast<size_t>(ST) * SUB * (kTileRows * 64 + kTileCols * 64 / sizeof(T) * sizeof(W)) +
                      2 * ST * sizeof(uint64_t);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  kernel<<<static_cast<unsigned>(blocks), (TW + 1) * 32, smem, current_stream()>>>(
      map_a, map_b, rows, N, K, s.offs.data<int32_t>(), G, s.out.data<O>(), s.out.stride(0), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool grouped_tiles_fit_tma(const GroupedMmArgs& s) { return fits_tma(s); }

// Measured on the H200 (bench.py, 128 experts, 2048 -> 1536): decode (1 token,
// top-8) 20 us with 4 warps x 4 steps in flight. Prefill (512 tokens): 227 us
// (217 with a's boxes of one m-tile) for the TMA kernel with 4 consumer warps x
// 4 column groups, 2 k-steps of 64 B per stage and 4 stages (8 x 2 x 2 x 4: 235
// us; 8 x 4 x 1 x 4: 233 us); 251 us for the cp.async tile kernel, which serves
// where TMA cannot (no sm_90, odd strides); PyTorch's CUTLASS grouped GEMM 260 us.
// Also tried on the TMA kernel: 4 x 4 x 2 x 3 (228 us), x 2 x 6 (255), x 4 x 2
// (226), x 1 x 8 (229), 8 x 4 x 1 x 4 (234). fp8 weights, the same tiles: 200 us.
void grouped_tiles(const GroupedMmArgs& s) {
  dispatch_grouped_half(s, [&](auto t, auto w, auto o) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    using O = typename decltype(o)::type;
    if (fits_tma(s)) return launch_grouped_tma<T, W, O, 4, 4, 2, 4>(s);
    KILN_CHECK((std::is_same_v<W, T>), "grouped_tiles: fp8 weights need the TMA kernel (sm_90, 16-byte aligned rows)");
    if constexpr (std::is_same_v<W, T>) launch_grouped_tile<T, O, 8, 2, 2, 3>(s);
  });
}

}  // namespace kiln::cuda_backend
