// CUDA flash attention for many query rows (prefill) on Hopper (sm_90a): warpgroup
// tensor-core products (wgmma) fed by the tensor memory accelerator, warp-specialised
// as FlashAttention-3 is (without its ping-pong of two warpgroups' softmax and products).
// A block takes WG x 64 query rows of one head: WG consumer warpgroups and one producer
// warp. Each warpgroup computes S = Q K^T for a step's KN keys with one m64nKNk16 wgmma
// per 16 dims (Q from registers, K from shared memory), the online softmax in registers
// (attention_prefill.cuh, shared with the mma.sync kernel), and O += P V with one
// m64nDk16 wgmma per 16 keys (P from the S accumulators, V read N-major).
//
// Head dims 40, 80, 96, 128 in bfloat16 or float16, 64 keys a step (d64, other dims, older
// GPUs: the mma.sync kernel, attention_prefill.cu). d64 is not here: with 64 keys a step
// (KN = D: the two products of one wgmma shape, as d128 at 128 keys) the results were
// wrong past the first key step on the H100 and the H200, under every ordering switch
// tried (scores from zeros, a wait after each wgmma); not understood. With 128 keys a step
// it is right but spills (52 local-memory instructions in its SASS): 344 us against the
// mma.sync kernel's 138 (H100, d64 4K causal fp16).
// Measured (H100, bench.py, in one run against this kernel switched off, and torch's
// cuDNN): d40 4K causal fp16 107.7-107.9 us (mma.sync 111.6-112.7, torch 107.5-108.0:
// 1.00x), not causal 198.8-199.3 (214.6-215.4, 171.7-171.9), 32q/8kv d128 2K causal bf16
// 125.4 (157.8, 83.0-83.4). d40 then moved from 3 consumer warpgroups and 3 stages to 4
// and 4: 16 heads 4K, in one run (H100, us, warpgroups/keys a step/stages; torch 111.1
// causal, 162.4 not): 3/64/3 110.0 causal, 198.0 not; 4/64/3 92.1, 169.8 (40 bytes of
// spills); 4/64/2 86.8, 158.5; 4/64/4 83.8, 156.8 (bf16 causal 84.3 against 109.0; 94
// registers and no spills, though 17 warps put 5 on one sub-partition); 5/64/3
// 110.5, 210.7 (spills); 4, 5 and 6 warpgroups of 32 keys a step 103.5, 117.4, 137.4
// causal; 128 keys a step (stack frames) 316-355. d80 stays at 3/64/3 (144.1 us causal
// bf16 against 151.2 for 4/32/4 and 374 for 4/64/3, which spills 440 bytes). d128 and d96
// spill (160 and 32 bytes, ptxas -v): 3 consumer warpgroups and the producer are 13 warps, 4
// of them on one SM sub-partition, whose 16K registers cap a thread at 128; 2 warpgroups take
// 159 without spilling (branch exp/ws-d128).
// Earlier, three variants that fed the products from cp.async tiles behind a block-wide
// barrier a step were slower (d128 causal: 151-253 us against the mma.sync kernel's 160).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/attention_prefill.cuh"
#include "cuda/common.h"
#include "cuda/cp_async.cuh"
#include "cuda/tma.cuh"
#include "cuda/tma.h"
#include "cuda/wgmma.cuh"

namespace kiln::cuda_backend {

namespace {

// An accumulator tile float[n][4] as wgmma's flat list of 4n registers.
template <int N>
__device__ __forceinline__ float (&as_flat(float (&a)[N][4]))[4 * N] {
  return reinterpret_cast<float(&)[4 * N]>(a);
}

// Warp-specialised (FlashAttention-3's structure, without its ping-pong): WG consumer
// warpgroups and one producer warp. The producer's lane 0 brings each step's K and V
// tiles in with TMA (one box of 8 dims x KN keys per 16-byte chunk, so that a
// chunk's keys lie densely: core matrix (8 keys, chunk c) at c * KN * 16 + (keys / 8) * 128;
// boxes past D or S read zeros), signalling a stage's full mbarrier; the consumers wait
// on it, compute, and release the stage on its empty mbarrier. No block-wide barrier a
// step, so the warpgroups drift apart and one's softmax overlaps the other's products.
template <class T, int D, int WG, int KN, int ST>
__global__ void __launch_bounds__(WG * 128 + 32)
    flash_prefill_ws_kernel(const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                            const PrefillParams p) {
#if __CUDA_ARCH__ >= 900
  constexpr int C = D / 8, KS = (D + 15) / 16, CP = 2 * KS, NK = KN / 8, kRows = WG * 64, LD = smem_row<D>();
  constexpr int kChunkBytes = KN * 16, kTile = CP * kChunkBytes;  // a K or V stage (V uses C of the CP chunks)
  constexpr uint32_t kStageTx = (CP + C) * kChunkBytes;
  constexpr int kConsumers = WG * 128;
  extern __shared__ __align__(128) unsigned char prefill_smem[];
  constexpr size_t kQBytes = (static_cast<size_t>(kRows) * LD * sizeof(T) + 127) / 128 * 128;
  T* sq = reinterpret_cast<T*>(prefill_smem);
  unsigned char* sk = prefill_smem + kQBytes;  // ST K tiles, then ST V tiles
  unsigned char* sv = sk + ST * kTile;
  uint64_t* full = reinterpret_cast<uint64_t*>(sv + ST * kTile);
  uint64_t* empty = full + ST;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int tile = p.causal ? p.q_tiles - 1 - static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.y);
  const int bh = blockIdx.x, b = bh / p.hq, h = bh % p.hq, hk = h / p.group;
  const int64_t q0 = static_cast<int64_t>(tile) * kRows;
  const T* qb = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
  const int64_t key_end = p.causal ? min64(p.S, q0 + kRows + p.causal_offset) : p.S;
  const int steps = static_cast<int>((key_end + KN - 1) / KN);

  if (threadIdx.x == 0) {
    for (int st = 0; st < ST; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], WG * 4);  // a consumer warp's lane 0 each
    }
    mbar_init_fence();
  }
  stage_rows<T, D, kConsumers + 32>(sq, qb, p.qs[2], q0, kRows, p.L);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  if (warp == WG * 4) {  // the producer
    if (lane == 0) {
      tma_prefetch_map(map_k);
      tma_prefetch_map(map_v);
      const int kv = b * (p.hq / p.group) + hk;  // the folded (batch, kv head) coordinate
      for (int j = 0; j < steps; ++j) {
        const int st = j % ST;
        if (j >= ST) mbar_wait(&empty[st], static_cast<uint32_t>((j / ST - 1) & 1));
        mbar_arrive_expect_tx(&full[st], kStageTx);
        for (int c = 0; c < CP; ++c)
          tma_load_3d(sk + st * kTile + c * kChunkBytes, map_k, 8 * c, j * KN, kv, &full[st]);
        for (int c = 0; c < C; ++c) tma_load_3d(sv + st * kTile + c * kChunkBytes, map_v, 8 * c, j * KN, kv, &full[st]);
      }
    }
    return;
  }

  uint32_t qf[KS][4];
  {
    const T* row = sq + (warp * 16 + lane % 16) * LD;
#pragma unroll
    for (int s = 0; s < C / 2; ++s) ldmatrix<4>(qf[s], row + s * 16 + (lane / 16) * 8);
    if constexpr (C % 2 == 1) {
      ldmatrix<2>(qf[KS - 1], row + (C - 1) * 8);
      qf[KS - 1][2] = qf[KS - 1][3] = 0u;
    }
  }
  float o[C][4], row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < C; ++d)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[d][i] = 0.0f;
  const int64_t warp_row0 = q0 + warp * 16, group_row0 = q0 + (warp / 4) * 64;
  const int group_steps =
      p.causal ? static_cast<int>(min64(steps, (group_row0 + 64 + p.causal_offset + KN - 1) / KN)) : steps;
  const uint32_t k_base = smem_addr(sk), v_base = smem_addr(sv);

  for (int j = 0; j < steps; ++j) {
    const int st = j % ST;
    mbar_wait(&full[st], static_cast<uint32_t>((j / ST) & 1));
    if (j < group_steps) {
      float s[NK][4];
      uint32_t pk[NK][2];
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {  // K-major: k (dims) steps kChunkBytes a chunk, n (keys) 128 bytes a group
        const uint64_t desc = wgmma_desc(k_base + st * kTile + 2 * ks * kChunkBytes, kChunkBytes, 128);
        wgmma_rs<KN, T, false>(as_flat(s), qf[ks], desc, ks > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(as_flat(s));
      mask_step<1, NK>(reinterpret_cast<float(&)[1][NK][4]>(s), p, static_cast<int64_t>(j) * KN, warp_row0);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float alpha = softmax_row<T, NK>(s, hr, row_max[hr], row_sum[hr], p.scale_log2, pk);
#pragma unroll
        for (int d = 0; d < C; ++d) {
          o[d][2 * hr] *= alpha;
          o[d][2 * hr + 1] *= alpha;
        }
      }
      wgmma_fence_operands(as_flat(o));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KN / 16; ++kk) {  // N-major: k (keys) steps 128 bytes a group, n (dims) kChunkBytes a chunk
        const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
        wgmma_rs<D, T, true>(as_flat(o), a, wgmma_desc(v_base + st * kTile + kk * 256, 128, kChunkBytes), true);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(as_flat(o));
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[st]);
  }

  T* ob = static_cast<T*>(p.out) + static_cast<int64_t>(bh) * p.L * D;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int64_t row = warp_row0 + g + hr * 8;
    const float total = quad_sum(row_sum[hr]);
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    if (row >= p.L) continue;
#pragma unroll
    for (int d = 0; d < C; ++d)
      *reinterpret_cast<uint32_t*>(ob + row * D + d * 8 + 2 * t) = pack2<T>(o[d][2 * hr] * inv, o[d][2 * hr + 1] * inv);
  }
#else
  __trap();  // the launcher checks the architecture first
#endif
}

// The warp-specialised kernel, where K and V fold into 3-D tensor maps (batch and kv
// head as one coordinate) with 16-byte aligned rows; false where they do not.
template <class T, int D, int WG, int KN, int ST>
bool launch_ws(const AttentionPrefillArgs& a) {
  const Tensor& k = a.k;
  const Tensor& v = a.v;
  const int64_t B = k.size(0), Hkv = k.size(1), S = k.size(2);
  const bool folds = B <= 1 || (k.stride(0) == Hkv * k.stride(1) && v.stride(0) == Hkv * v.stride(1));
  if (!folds || B * Hkv >= (int64_t{1} << 31) || S >= (int64_t{1} << 31))
    return false;
  const uint64_t isz = sizeof(T);
  const uint64_t dims[3] = {static_cast<uint64_t>(D), static_cast<uint64_t>(S), static_cast<uint64_t>(B * Hkv)};
  const uint64_t k_strides[2] = {static_cast<uint64_t>(k.stride(2)) * isz, static_cast<uint64_t>(k.stride(1)) * isz};
  const uint64_t v_strides[2] = {static_cast<uint64_t>(v.stride(2)) * isz, static_cast<uint64_t>(v.stride(1)) * isz};
  if (!tensor_map_fits(k.data_ptr(), 3, k_strides) || !tensor_map_fits(v.data_ptr(), 3, v_strides)) return false;
  const uint32_t box[3] = {8, KN, 1};
  const CUtensorMap map_k = tensor_map(k.dtype(), 3, k.data_ptr(), dims, k_strides, box);
  const CUtensorMap map_v = tensor_map(v.dtype(), 3, v.data_ptr(), dims, v_strides, box);
  constexpr int kRows = WG * 64, CP = 2 * ((D + 15) / 16);
  const PrefillParams p = prefill_params(a, kRows);
  const auto kernel = flash_prefill_ws_kernel<T, D, WG, KN, ST>;
  const size_t smem = (static_cast<size_t>(kRows) * smem_row<D>() * sizeof(T) + 127) / 128 * 128 +
                      2 * ST * static_cast<size_t>(CP) * KN * 16 + 2 * ST * sizeof(uint64_t);
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  const unsigned heads = static_cast<unsigned>(a.q.size(0) * a.q.size(1));
  kernel<<<dim3(heads, static_cast<unsigned>(p.q_tiles)), WG * 128 + 32, smem, current_stream()>>>(map_k, map_v, p);
  KILN_CUDA_CHECK_LAUNCH();
  return true;
}

template <class T>
bool ws_dim(const AttentionPrefillArgs& a) {
  switch (a.q.size(3)) {
    // d40: 4 consumer warpgroups and 4 stages (H100, in one run, 16 heads 4K fp16: causal 83.8 us
    // against 110.0-110.3 with 3 and 3; see the file comment)
    case 40: return launch_ws<T, 40, 4, 64, 4>(a);
    case 80: return launch_ws<T, 80, 3, 64, 3>(a);
    case 96: return launch_ws<T, 96, 3, 64, 3>(a);
    case 128: return launch_ws<T, 128, 3, 64, 3>(a);
    default: return false;
  }
}

}  // namespace

bool attention_prefill_wgmma(const AttentionPrefillArgs& a) {
  if (device_arch() != 90) return false;  // sm_90a code only
  switch (a.q.dtype()) {
    case DType::BFloat16: return ws_dim<BFloat16>(a);
    case DType::Float16: return ws_dim<Half>(a);
    default: return false;
  }
}

}  // namespace kiln::cuda_backend
