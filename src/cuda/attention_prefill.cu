// CUDA flash attention for many query rows (prefill), on tensor cores: the
// scores never leave registers. A block takes kRows query rows of one head
// (warps of 16 * MT rows each) and walks the keys in steps of kKeys, with the
// next step's K and V rows in flight (cp.async, two stages) while it computes:
// S = Q K^T (mma.m16n8k16, plus one m16n8k8 when the head dim is an odd number
// of 8s, as 40 and 120 are), an online softmax on S in registers (running max
// and sum per row, base-2 exponentials), then O += P V with P reused as the
// A operand straight from the accumulators (the m16n8 C layout of two adjacent
// key tiles is the m16k16 A layout). ldmatrix feeds Q and K as they lie, V
// transposed; shared-memory rows take an odd number of 16-byte chunks so that
// the 8 rows of an ldmatrix land in 8 different banks.
// Causal: query i sees keys 0..i + causal_offset (0: PyTorch's top-left
// alignment; S - L: lower right, a chunk after cached context); causal
// blocks start from the longest (last) query tiles so that short ones fill the
// tail of the grid.
// Measured on the H200 (bench.py --filter prefill, against PyTorch 2.11, which
// runs cuDNN's wgmma flash kernel): 16 heads, 4K x 4K, fp16, causal: d40 120 us
// (torch 106), d64 146 us (104); d40 not causal 225 us (159); 32 q / 8 kv heads,
// 2K x 2K, d128 bf16 causal 160 us (82). Block shapes tried at d40 causal (warps
// x m-tiles x stages, keys a step): 4x2x2 120 us, 3 or 4 stages the same, 8x2x2
// 125, 2x2x2 142, 4x3x2 (spills) 148; with half2 exponentials, 5% slower overall:
// 4x1x2 144, 8x1x2 158, 32 keys a step 170, 128 keys (spills) 276. d128: 8x1x2
// 160 us, 4x1x2 199; d64: 4x2x2 146, 4x1x2 190. The kernel is
// latency-bound (ncu: 2 warps a scheduler, tensor pipe 28% busy). Also tried, on
// the H100 against the kept kernel in one run (d40 causal 116 us, d128 162): a
// software-pipelined walk (step j + 1's scores issued before step j's softmax,
// 3 or 4 stages) 126 at 4x2 (255 registers), 172 at 8x1, 151 at 4x1, d128 183-270;
// 3 blocks an SM at d40 (168 registers, spills) 145; rescaling O only when a row's
// max grows by 2^8, 116 and 164; 3 stages 116 and 163.
// Slower as well, Hopper's wgmma in place of mma.sync (branch exp/prefill-wgmma:
// warpgroups of 64 rows, S = Q K^T and O += P V with Q and P from registers, K and
// V by cp.async in wgmma's no-swizzle layout; H100, in one run against this kernel's
// 113 us at d40 causal and 160 us at d128): 2 warpgroups x 64 keys a step 117 and
// 179 us, 3 x 64 152 and 151, 1 x 64 196 and 253, 2 x 128 317 and 234; with step
// j + 1's Q K^T issued before step j's softmax (3 stages) 2 x 64 169 and 183, 1 x 64
// 200 and 256. Every product's wait is exposed, as here; what makes FlashAttention-3
// fast (TMA loads by a producer warp, the consumer warpgroups' softmax and products
// in ping-pong) is not in it. The variants without the early Q K^T also gave wrong
// results on some shapes (test_gpu_attention_prefill), not yet understood. That
// branch's warp-specialised variant (a TMA producer warp, mbarriers) is the one kept:
// on sm_90, head dims 40, 80, 96 and 128 go to it (attention_prefill_wgmma.cu), d40
// causal 107.8 us against this kernel's 112.5 (H100), 83.8 since it has 4 consumer
// warpgroups at d40; d64 and other GPUs stay here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/attention_prefill.cuh"
#include "cuda/common.h"
#include "cuda/cp_async.cuh"
#include "cuda/mma.cuh"

namespace kiln::cuda_backend {

namespace {

// A block's shape: W warps of MT m-tiles (16 query rows each), steps of KEYS
// keys, ST stages of K and V rows in shared memory (ST - 1 steps in flight),
// MINB the launch bounds' minimum of blocks an SM (0: none given).
template <int W, int MT, int ST, int KEYS = 64, int MINB = 0>
struct PrefillShape {
  static_assert(KEYS == 32 || KEYS == 64 || KEYS == 128, "PrefillShape: 32, 64 or 128 keys a step");
  static constexpr int kMTiles = MT, kStages = ST, kKeys = KEYS, kRows = W * 16 * MT, kThreads = W * 32;
  static constexpr int kMinBlocks = MINB;
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    return static_cast<size_t>(kRows + 2 * ST * KEYS) * smem_row<D>() * sizeof(T);
  }
};

template <class T, int D, class Shape>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks) flash_prefill_kernel(const PrefillParams p) {
  constexpr int C = D / 8, LD = smem_row<D>(), kSteps16 = D / 16;
  constexpr int MT = Shape::kMTiles, kRows = Shape::kRows, ST = Shape::kStages, kThreads = Shape::kThreads;
  constexpr int kKeys = Shape::kKeys, NK = kKeys / 8;
  constexpr bool kTail8 = C % 2 == 1;  // a last 8 dims for the m16n8k8 mma
  extern __shared__ __align__(16) unsigned char prefill_smem[];
  T* sq = reinterpret_cast<T*>(prefill_smem);
  T* sk = sq + kRows * LD;      // ST stages of kKeys rows
  T* sv = sk + ST * kKeys * LD;  // ST stages of kKeys rows
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int tile = p.causal ? p.q_tiles - 1 - static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.y);
  const int bh = blockIdx.x, b = bh / p.hq, h = bh % p.hq, hk = h / p.group;
  const int64_t q0 = static_cast<int64_t>(tile) * kRows;
  const T* qb = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
  const T* kb = static_cast<const T*>(p.k) + b * p.ks[0] + hk * p.ks[1];
  const T* vb = static_cast<const T*>(p.v) + b * p.vs[0] + hk * p.vs[1];
  const int64_t key_end = p.causal ? min64(p.S, q0 + kRows + p.causal_offset) : p.S;
  const int steps = static_cast<int>((key_end + kKeys - 1) / kKeys);

  // Commit groups: Q with step 0, then one per step (empty past the last), so
  // that waiting for all but the newest ST - 2 groups means step j has landed.
  const auto stage_step = [&](int step) {
    if (step < steps) {
      const int64_t r0 = static_cast<int64_t>(step) * kKeys;
      stage_rows<T, D, kThreads>(sk + (step % ST) * kKeys * LD, kb, p.ks[2], r0, kKeys, p.S);
      stage_rows<T, D, kThreads>(sv + (step % ST) * kKeys * LD, vb, p.vs[2], r0, kKeys, p.S);
    }
    cp_async_commit();
  };
  stage_rows<T, D, kThreads>(sq, qb, p.qs[2], q0, kRows, p.L);
#pragma unroll
  for (int step = 0; step < ST - 1; ++step) stage_step(step);
  cp_async_wait<ST - 2>();
  __syncthreads();

  // Q's A fragments, held for the whole walk.
  uint32_t qf[MT][kSteps16][4], qt[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const T* row = sq + (warp * 16 * MT + m * 16 + lane % 16) * LD;
#pragma unroll
    for (int s = 0; s < kSteps16; ++s) ldmatrix<4>(qf[m][s], row + s * 16 + (lane / 16) * 8);
    if constexpr (kTail8) ldmatrix<2>(qt[m], row + (C - 1) * 8);
  }

  float o[MT][C][4], row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int d = 0; d < C; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[m][d][i] = 0.0f;
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }
  const int64_t warp_row0 = q0 + warp * 16 * MT;

  for (int j = 0; j < steps; ++j) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // step j has landed, and every warp is done with step j - 1's stage
    stage_step(j + ST - 1);
    const int st = j % ST;
    const T* ks = sk + st * kKeys * LD;
    const T* vs = sv + st * kKeys * LD;
    const int64_t k0 = static_cast<int64_t>(j) * kKeys;
    // Under causal, a warp whose rows all precede the step's keys has nothing to add.
    if (!p.causal || k0 <= warp_row0 + 16 * MT - 1 + p.causal_offset) {

      // S = Q K^T for the step's kKeys keys: NK tiles of 8 keys.
      float s[MT][NK][4];
#pragma unroll
      for (int n = 0; n < NK; ++n) {
        uint32_t kf[C];
        const T* key_row = ks + (n * 8 + lane % 8) * LD;
#pragma unroll
        for (int c0 = 0; c0 < C; c0 += 4) {
          // lane's matrix lane / 8 is dims 8 (c0 + lane / 8) ..; lanes past the last chunk repeat it
          const int cc = ::min(c0 + lane / 8, C - 1);
          if (C - c0 >= 4) ldmatrix<4>(kf + c0, key_row + cc * 8);
          else if (C - c0 >= 2) ldmatrix<2>(kf + c0, key_row + cc * 8);
          if ((C - c0) % 2 == 1 && C - c0 < 4) ldmatrix<1>(kf + C - 1, key_row + (C - 1) * 8);
        }
#pragma unroll
        for (int m = 0; m < MT; ++m) {
#pragma unroll
          for (int i = 0; i < 4; ++i) s[m][n][i] = 0.0f;
#pragma unroll
          for (int s16 = 0; s16 < kSteps16; ++s16)
            mma_16x8<T>(s[m][n], qf[m][s16][0], qf[m][s16][1], qf[m][s16][2], qf[m][s16][3], kf[2 * s16],
                        kf[2 * s16 + 1]);
          if constexpr (kTail8) mma_16x8x8<T>(s[m][n], qt[m][0], qt[m][1], kf[C - 1]);
        }
      }

      mask_step<MT, NK>(s, p, k0, warp_row0);

      // Online softmax; P comes out rounded to T and packed as the PV mma's A operand.
      uint32_t pk[MT][NK][2];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const float alpha = softmax_row<T, NK>(s[m], hr, row_max[m][hr], row_sum[m][hr], p.scale_log2, pk[m]);
#pragma unroll
          for (int d = 0; d < C; ++d) {
            o[m][d][2 * hr] *= alpha;
            o[m][d][2 * hr + 1] *= alpha;
          }
        }

      // O += P V: P's A fragment of 16 keys is two adjacent 8-key tiles of S.
#pragma unroll
      for (int d = 0; d < C; ++d) {
        uint32_t vf[NK];  // V^T fragments: matrix i is keys 8i .. 8i + 7 of dims 8d ..
#pragma unroll
        for (int k32 = 0; k32 < kKeys / 32; ++k32) ldmatrix<4, true>(vf + 4 * k32, vs + (k32 * 32 + lane) * LD + d * 8);
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int kk = 0; kk < kKeys / 16; ++kk)
            mma_16x8<T>(o[m][d], pk[m][2 * kk][0], pk[m][2 * kk][1], pk[m][2 * kk + 1][0], pk[m][2 * kk + 1][1],
                      vf[2 * kk], vf[2 * kk + 1]);
      }
    }
  }

  T* ob = static_cast<T*>(p.out) + static_cast<int64_t>(bh) * p.L * D;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int64_t row = warp_row0 + m * 16 + g + hr * 8;
      const float total = quad_sum(row_sum[m][hr]);
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      if (row >= p.L) continue;
#pragma unroll
      for (int d = 0; d < C; ++d)
        *reinterpret_cast<uint32_t*>(ob + row * D + d * 8 + 2 * t) =
            pack2<T>(o[m][d][2 * hr] * inv, o[m][d][2 * hr + 1] * inv);
    }
}

template <class T, int D, class Shape>
void launch_prefill(const AttentionPrefillArgs& a) {
  constexpr int kRows = Shape::kRows;
  const PrefillParams p = prefill_params(a, kRows);
  const auto kernel = flash_prefill_kernel<T, D, Shape>;
  constexpr size_t smem = Shape::template smem_bytes<T, D>();
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  const unsigned heads = static_cast<unsigned>(a.q.size(0) * a.q.size(1));
  kernel<<<dim3(heads, static_cast<unsigned>(p.q_tiles)), Shape::kThreads, smem, current_stream()>>>(p);
  KILN_CUDA_CHECK_LAUNCH();
}

template <class T>
void prefill_dim(const AttentionPrefillArgs& a) {
  switch (a.q.size(3)) {
    // 32 rows a warp for narrow heads, 8 warps of 16 rows for wide ones (whose 32
    // rows would spill); see the file comment for the shapes measured. d40 names a
    // minimum of 1 block an SM, which lets ptxas take 216 registers instead of 189
    // (2 blocks an SM either way): H100, in one run against the bound left out, 4K
    // causal 116 against 123 us, not causal 224 against 238.
    case 40: return launch_prefill<T, 40, PrefillShape<4, 2, 2, 64, 1>>(a);
    case 64: return launch_prefill<T, 64, PrefillShape<4, 2, 2>>(a);
    case 80: return launch_prefill<T, 80, PrefillShape<8, 1, 2>>(a);
    case 96: return launch_prefill<T, 96, PrefillShape<8, 1, 2>>(a);
    case 128: return launch_prefill<T, 128, PrefillShape<8, 1, 2>>(a);
    default: KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the CUDA prefill kernel has head dims 40, 64, 80, 96 "
                                  "and 128, got ", a.q.size(3));
  }
}

}  // namespace

void attention_prefill(const AttentionPrefillArgs& a) {
  if (attention_prefill_wgmma(a)) return;
  if (device_arch() < 80) KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the CUDA prefill kernel needs sm_80 or newer");
  switch (a.q.dtype()) {
    case DType::BFloat16: return prefill_dim<BFloat16>(a);
    case DType::Float16: return prefill_dim<Half>(a);
    default: KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the CUDA prefill kernel takes float16 or bfloat16");
  }
}

}  // namespace kiln::cuda_backend
