// CUDA scaled_mm. Decode shapes (see use_rows_kernel): kiln's kernel, fp8
// tensor-core mma straight from global memory, written for the bandwidth of
// reading b once: each block owns 16 columns, its warps split K, partial tiles
// meet in shared memory and the scales, bias and output cast are applied once.
// The rest: cuBLASLt's fp8 GEMM (scaled_mm_lt.cpp). Devices without fp8 mma (before sm_89)
// and layouts the 16-byte loads cannot take use the composed float32 form.
// Slower (H100, in one run, 16 x 4096 x 4096 rowwise: 6.3 us for this kernel): blocks of 64 or
// 32 columns, so that a's chunks are read once for 8 or 4 column tiles, with a cluster of 2 or 4
// blocks splitting K and summing into the first one's shared memory (branch exp/smm-wide):
// 7.8 us at best (32 columns, 8 warps, 2 blocks, 4 steps in flight), 9.9 and 14.0 with 64.
// The kernel is launched chained (cuda/chained_launch.cuh), so that its blocks are resident
// when the kernel before it ends: H100, in one run, 16 x 4096 x 4096 rowwise 6.3 -> 5.9 us,
// 1 x 4096 x 4096 5.4 -> 5.2, 8 x 4096 x 14336 25.3 -> 24.7 (graph-timed, kiln bench). No
// faster there, chained as well (branch exp/combo, KILN_SMM_V): b's first 4 steps loaded
// before the wait (16 x 4096^2 6.8 us), 32 columns and 16 warps a block with 2 or 4 steps
// in flight (8.0, 8.4), 16 columns and 16 warps (not run).
#include "core/backend.h"
#include "core/dispatch.h"
#include "core/vector_rows.h"
#include "cuda/chained_launch.cuh"
#include "cuda/common.h"
#include "cuda/mma.cuh"
#include "cuda/scaled_mm_lt.h"
#include "ops/scaled_mm.h"

namespace kiln::cuda_backend {

namespace {

constexpr int kMaxKernelRows = 16;

// A block owns 8 * NT columns; its WARPS warps split K.
template <class O, int NT, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32)
    scaled_mm_rows_kernel(int M, int64_t N, int64_t K, const Float8_e4m3fn* __restrict__ a, int64_t lda,
                          const Float8_e4m3fn* __restrict__ bt, int64_t ldb, const float* __restrict__ sa,
                          bool sa_rows, const float* __restrict__ sb, bool sb_cols, const O* __restrict__ bias,
                          O* __restrict__ out, int64_t ldo) {
  __shared__ float scratch[WARPS * NT * 4 * 32];
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 8 * NT;
  const int warp = threadIdx.x / 32;
  const MmaOperands<Float8_e4m3fn> op{a, lda, M, bt + n0 * ldb, ldb, static_cast<int>(min64(8 * NT, N - n0)),
                                      K / 16};
  float c[1][NT][4] = {};
  chain_wait();  // a and the scales may come from the kernel before
  chain_release();
  warp_mma_rows<Float8_e4m3fn, 1, NT, U>(op, warp, WARPS, c);
  reduce_warp_tiles<WARPS, 1, NT>(c, scratch);
  if (warp != 0) return;
  for_each_tile_element<1, NT>([&](int, int j, int i) {
    const int r = tile_row(0, i);
    const int64_t n = n0 + tile_col(j, i);
    if (r < M && n < N) {
      float v = c[0][j][i] * sa[sa_rows ? r : 0] * sb[sb_cols ? n : 0];
      if (bias) v += static_cast<float>(bias[n]);
      out[r * ldo + n] = O(v);
    }
  });
}

template <class O, int NT, int WARPS, int U>
void launch_rows(const ScaledMmArgs& s) {
  const int M = static_cast<int>(s.a.size(0));
  const int64_t N = s.bt.size(0), K = s.a.size(1);
  const unsigned blocks = static_cast<unsigned>((N + 8 * NT - 1) / (8 * NT));
  const O* bias = s.bias.defined() ? s.bias.data<O>() : nullptr;
  const bool sa_rows = s.scale_a.numel() > 1, sb_cols = s.scale_b.numel() > 1;
  launch_chained(scaled_mm_rows_kernel<O, NT, WARPS, U>, blocks, WARPS * 32, 0, M, N, K, s.a.data<Float8_e4m3fn>(),
                 s.a.stride(0), s.bt.data<Float8_e4m3fn>(), s.bt.stride(0), s.scale_a.data<float>(), sa_rows,
                 s.scale_b.data<float>(), sb_cols, bias, s.out.data<O>(), s.out.stride(0));
}

// Rowwise scales with up to 16 rows, and a single row with tensorwise scales:
// cuBLASLt is slower there (H200, 4096 x 4096: rowwise 16 rows 13.0 us vs 7.0
// here; tensorwise 1 row 5.6 vs 5.4), while for 2..16 rows with tensorwise
// scales it is faster (5.6 vs 7.5 us at 16 rows). Two 8-column tiles per warp
// share each load of a. Other shapes of the kernel, H100, 16 rows rowwise, in one
// run against this one's 6.1 us: 8 steps in flight 6.2, 8 columns a block 6.5-6.6,
// 4 warps a block 7.1, 32 columns a block 10.5.
bool use_rows_kernel(const ScaledMmArgs& s) { return s.a.size(0) <= kMaxKernelRows && (s.rowwise() || s.a.size(0) == 1); }

bool rows_fit_kernel(const ScaledMmArgs& s) {
  return use_rows_kernel(s) && device_arch() >= mma_min_arch<Float8_e4m3fn>() && rows_vector_aligned(s.a, 1) &&
         rows_vector_aligned(s.bt, 1);
}

}  // namespace

void scaled_mm(const ScaledMmArgs& args) {
  if (rows_fit_kernel(args)) {
    switch (args.out.dtype()) {
      case DType::BFloat16: launch_rows<BFloat16, 2, 8, 4>(args); return;
      case DType::Float16: launch_rows<Half, 2, 8, 4>(args); return;
      default: launch_rows<float, 2, 8, 4>(args); return;
    }
  }
  if (device_arch() >= mma_min_arch<Float8_e4m3fn>() && scaled_mm_lt(args)) return;
  scaled_mm_composed(args);
}

}  // namespace kiln::cuda_backend
