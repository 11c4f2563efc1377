// CUDA one-query attention (decode) for head dims up to 128, on tensor cores,
// split over the context and merged (flash-decoding); the KV cache is read in place.
//
// A warp takes 16 keys a step and computes both products transposed, so that the
// G <= 8 query heads are the 8 columns of each mma.m16n8k16 tile and no tile row is
// padding: S^T = K Q^T (rows: the 16 keys) and O^T += V^T P^T (rows: 16 dims).
// Each warp streams its steps' K and V rows into a ring of up to kStages slots in shared
// memory (cp.async, no registers held by loads in flight). Lane (g, t) = (lane / 4,
// lane % 4) then reads, for every 32-dim block s of the head dim, chunk 4s + t (16
// bytes) of key rows g and g + 8. A dot product does not care about the order of its
// terms, so the K chunks are the A fragments of S^T as they are (see mma.cuh);
// movmatrix transposes the V words into the A fragments of V^T and the scores into
// the B fragments of P^T. Word j of a V chunk, transposed, covers dims 8 (g / 2) +
// 2j + g % 2 of the block, which is where the output tile's rows land. Warps take
// interleaved steps of the block's chunk of keys and merge in shared memory; with
// more than one chunk a merge kernel (attention_merge.cuh) combines them. For
// attention_decode_qkv the kernel also makes q and the token's cache row (QKV below).
// On the H200 (32 q / 8 kv heads, d80, bf16): 4K context 6.8 us, 32K 25.6 us (77% of copy).
#include <cstdlib>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/attention_decode.h"
#include "cuda/attention_merge.cuh"
#include "cuda/common.h"
#include "cuda/cp_async.cuh"
#include "cuda/head_rotation.cuh"
#include "cuda/mma.cuh"

namespace kiln::cuda_backend {

namespace {

// 8 warps a block: on the H100, in one run against 4 warps, 32q/8kv d80 4K 7.0 vs 7.8 us, 32K 37.0 vs
// 37.4, 32q/4kv d128 32K 30.6 vs 33.0, ctx 128 5.0 vs 5.9; on the H200 d80 4K 7.5 -> 6.8 us, 32K 29.2 ->
// 25.6. 16 warps (2 stages, so that the ring fits) were slower again (H100, in one run, d80 4K 8.1-8.5
// against 6.9-7.25 us, 32K 36.8-37.9 against 36.2-36.6). Splitting the context in clusters of up to 16
// blocks merged through distributed shared memory, with no merge kernel, was slower at every context
// (H100: 4K 8.7-13.0 us, 32K 45-50): too few blocks.
// Also slower on the H100 (32q/8kv d80, 4K: 8.7 us as kept): the merge done by each head's last block
// to finish (an atomic counter, no merge kernel) 11.6 us, and again in December with the merge spread
// over the block (4 dims a thread, the splits over thread groups, all loads in flight at once; branch
// exp/dec-lastblock): 10.6-11.1 against 8.4-9.2 us, 30B bf16 decode at 2048 context 275 against 303
// tok/s; 2 stages, so 2 blocks fit an SM, 10.5 us;
// 8 or 24 splits instead of the wave's 16, 9.3 and 8.7 us (and again in December: 8, 24 or 32 splits
// 8.4, 6.9 and 8.8 us against 6.9, and at 32K 41.7, 40.1 and 37.8 against 37.3). In a model's
// decode step (H100, Qwen3-30B-A3B bf16, 128 context, against the kept kernels in one run): split 0
// writing the output itself when the length read on the device is all its own, the other splits
// returning at once and the merge kernel returning after reading the length, 293.3-294.4 against
// 297.6-298.1 tok/s (and 290-291 against 294-295 at 2048 context, where only the merge's read of the
// length differs). No faster either (branch exp/decode-short-bucket): a one-token graph per bucket of
// cache rows, the short bucket's attention given only that many rows and one split, so that its graph
// has no merge kernel at all: H100, 30B bf16 at 128 context, 298.4 and 297.4 tok/s against 297.7 and
// 292.7 with the one graph (fp8 404.7 and 399.3 against 403.1 and 394.3), within the noise; at 400
// positions a bucket of 512 or 1024 rows in one split, 5 to 8% slower, and at 900 one of 1024, 13 to
// 18% (each warp then takes several block steps). Also slower (H100,
// in one run): the K and V rows of each warp's first 4 (or 8) steps asked into L2 (prefetch.global.L2)
// before the wait, so that the copies after it would hit L2: d80 4K 8.0 (8.0) against 6.7 us without, 32K 38.9
// (43.9) against 35.9; and no change in the 30B bf16 decode, 304.6-305.8 against 304.3-305.0 tok/s.
constexpr int kMmaWarps = 8, kMmaKeys = 16, kStages = 3;  // 2 and 4 stages measured no faster

__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ uint32_t word(const uint4& u, int j) { return j == 0 ? u.x : j == 1 ? u.y : j == 2 ? u.z : u.w; }

// Max and sum over the 8 lanes of one t (the keys of a tile column).
__device__ __forceinline__ float max_over_g(float x) {
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float sum_over_g(float x) {
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Shared memory of the partial kernel: per warp, kStages slots of 16 K rows and
// 16 V rows of NB * 64 bytes. The 8 lanes of one phase of a 16-byte load read
// chunks 4s + t of rows g and g + 1; they hit distinct banks when odd rows sit 64
// bytes over from even ones: an odd NB's pitch does that, an even NB's rows swap
// the halves of every 128 bytes in odd rows.
template <int NB>
constexpr size_t mma_decode_smem() {
  return static_cast<size_t>(kMmaWarps) * kStages * 2 * kMmaKeys * NB * 64;
}
template <int NB>
__device__ __forceinline__ int swizzled_chunk(int row, int c) {
  return NB % 2 == 0 ? c ^ ((row & 1) << 2) : c;
}

// QKV (attention_decode_qkv): the kernel makes q itself from the token's q|k|v row,
// and the block whose chunk holds the new row (seq_lens - 1) makes that row of the
// caches and writes it there: the per-head norms and rotation of qkv_rotary_cache
// (head_rotation.cuh, the same bits), its q heads a warp each, the k and v heads by
// the next warps. The new row is never copied from the cache: its slot row is
// filled from shared memory once the step's copies have landed. With `settled`,
// no earlier work still writes the other rows, so their copies go out before the
// chained wait, while the q|k|v projection before this kernel finishes.
template <class T>
struct DecodeQkv {
  const T* qkv;     // [(Hq + 2 Hkv) D]: q heads, k heads, v heads
  const T* q_norm;  // [D] or null
  const T* k_norm;
  const float* cos;  // [capacity, half]
  const float* sin;
  int half;
  float eps;
  bool settled;
  T* k_cache;  // the caches the kernel reads, for the new row
  T* v_cache;
};

template <class T, int NB, bool QKV>
__global__ void __launch_bounds__(kMmaWarps * 32)
    decode_partial_mma_kernel(const T* __restrict__ q, int64_t qsb, int64_t qsh, const T* __restrict__ k, int64_t ksb,
                              int64_t ksh, int64_t kss, const T* __restrict__ v, int64_t vsb, int64_t vsh,
                              int64_t vss, int Hkv, int G, int64_t S, const int32_t* __restrict__ seq_lens, int D,
                              float scale_log2, int64_t chunk, int splits, int ring, int chunk_round,
                              float* __restrict__ part_acc, float2* __restrict__ part_ml, T* __restrict__ out,
                              DecodeQkv<T> fq) {
  constexpr int kDim = NB * 32, kPitch = NB * 64;
  constexpr int kSlot = 2 * kMmaKeys * kPitch;        // bytes of one stage: K rows, then V rows
  constexpr int64_t kStride = kMmaWarps * kMmaKeys;  // keys of one step of the block
  static_assert(8 * kDim * sizeof(float) <= kSlot, "a warp's output fits in one slot of its ring");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float sm_m[kMmaWarps][8], sm_l[kMmaWarps][8];
  // QKV: the block's q heads and the new k and v rows (as T), and each warp's rotation scratch
  constexpr int kQkvDim = QKV ? kDim : 8;
  __shared__ __align__(16) T sm_q[8][kQkvDim], sm_new[2][kQkvDim];
  __shared__ float sm_rot[kMmaWarps][kQkvDim];
  const int bh = blockIdx.x, split = blockIdx.y, b = bh / Hkv, hk = bh % Hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int chunks = D / 8;
  // idx / chunks as (idx * inv_chunks) >> 16: exact for idx < 16 * chunks <= 256
  const int inv_chunks = (65536 + chunks - 1) / chunks;
  // This split's keys [s_begin, s_end) and this warp's steps: step i takes keys first + i * kStride ...
  // into slot i % ring, keys past the end as zeros. With seq_lens, from the filled length on the device
  // (a replayed graph), the chunks covering it evenly, in whole multiples of chunk_round keys.
  int64_t s_begin, s_end, first, steps;
  int64_t new_row = -1;  // QKV: the token's own row, made here
  const auto bounds = [&](int32_t len) {
    int64_t s = S, c = chunk;
    if (seq_lens) {
      s = len < 0 ? 0 : (len < S ? len : S);
      c = ((s + splits - 1) / splits + chunk_round - 1) / chunk_round * chunk_round;
    }
    s_begin = split * c;
    s_end = s < s_begin + c ? s : s_begin + c;
    first = s_begin + warp * kMmaKeys;
    steps = first < s_end ? (s_end - first + kStride - 1) / kStride : 0;
    if (QKV) new_row = static_cast<int64_t>(len) - 1;
  };
  // The length is read before the wait, so that the copies start right after it: a model's comes from a
  // host copy ahead of the step, and only a chained kernel just before could still be writing it, which
  // the read after the copies are issued catches (H100, in one run, alternated against the read after the
  // wait: 30B bf16 decode at 128 context 301.2-302.5 against 297.3-300.3 tok/s; bench.py 32q/8kv d80 4K
  // 6.9 against 7.2 us, 32q/4kv d128 ctx 128 5.0 against 5.2, as the bounds without seq_lens come before
  // the wait too).
  const int32_t early_len = seq_lens ? __ldcg(seq_lens + b) : 0;
  bounds(early_len);
  const T* kb = k + b * ksb + hk * ksh;
  const T* vb = v + b * vsb + hk * vsh;
  unsigned char* ring_base = smem + warp * ring * kSlot;
  const auto issue = [&](int64_t i) {
    if (i < steps) {
      const int64_t s0 = first + i * kStride;
      unsigned char* slot = ring_base + (i % ring) * kSlot;
      for (int idx = lane; idx < kMmaKeys * chunks; idx += 32) {
        const int r = (idx * inv_chunks) >> 16, c = idx - r * chunks;
        const bool ok = s0 + r < s_end && (!QKV || s0 + r != new_row);
        const int64_t key = ok ? s0 + r : 0;
        const int sc = swizzled_chunk<NB>(r, c);  // rows r and 16 + r have one parity
        cp_async16(slot + r * kPitch + sc * 16, kb + key * kss + c * 8, ok);
        cp_async16(slot + (kMmaKeys + r) * kPitch + sc * 16, vb + key * vss + c * 8, ok);
      }
    }
    cp_async_commit();  // one group per step, empty or not, so cp_async_wait counts steps
  };
  const bool early_copies = QKV && fq.settled;
  if (early_copies)
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) issue(i);
  chain_wait();  // q and the cache row of this token come from the kernel before
  chain_release();  // the merge (or the next kernel) may start; it waits for this grid's results

  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 qf[NB];  // head g (heads >= G read as zero), chunk 4s + t: the B fragments of Q^T
  if constexpr (!QKV) {
#pragma unroll
    for (int s = 0; s < NB; ++s) {
      const int c = 4 * s + t;
      qf[s] = g < G && c < chunks ? *reinterpret_cast<const uint4*>(q + b * qsb + (hk * G + g) * qsh + c * 8) : zero;
    }
  }
  // QKV: warp w takes heads w and w + 8 of the block's q heads (0..G-1), k head (G) and v
  // head (G + 1); loaded here, with the early length's rotation, beside its re-read
  constexpr int kHeadsPerWarp = QKV ? 2 : 1;  // G + 2 <= 10 heads over 8 warps
  float hx[kHeadsPerWarp][NB], hw[kHeadsPerWarp][NB], cr[NB], sr[NB];
  const auto head_index = [&](int item) {  // in qkv: q heads Hkv G, then k heads Hkv, then v heads
    return item < G ? hk * G + item : item == G ? Hkv * G + hk : Hkv * G + Hkv + hk;
  };
  const auto head_norm = [&](int item) { return item < G ? fq.q_norm : item == G ? fq.k_norm : nullptr; };
  const auto rotation_at = [&](int64_t row) {  // (a bad length stops the kernel below)
    const int64_t pos = row < 0 ? 0 : row < S ? row : S - 1;
    load_rotation(fq.cos + pos * fq.half, fq.sin + pos * fq.half, fq.half, lane, cr, sr);
  };
  if constexpr (QKV) {
#pragma unroll
    for (int u = 0; u < kHeadsPerWarp; ++u) {
      const int item = warp + kMmaWarps * u;
      if (item < G + 2) {
        load_head(fq.qkv + static_cast<int64_t>(head_index(item)) * D, D, lane, hx[u]);
        if (const T* w = head_norm(item)) load_head(w, D, lane, hw[u]);
      }
    }
    rotation_at(new_row);
  }
  // o[s][p]: rows dims 32s + 8 (g / 2) + 2 (2p) + g % 2 (regs 0, 1) and the same + 2 (regs 2, 3),
  // columns heads 2t and 2t + 1 (even and odd regs)
  float o[NB][2][4];
#pragma unroll
  for (int s = 0; s < NB; ++s)
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[s][p][i] = 0.0f;
  // heads 2t and 2t + 1: running max (log2 units) and this lane's share of the sum
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  if (!early_copies)
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) issue(i);
  if (seq_lens) {
    const int32_t len = __ldcg(seq_lens + b);  // past L1, which the read before the wait may have filled
    if (len != early_len) {  // rare: drop the copies (rows below the capacity, so all readable) and start again
      cp_async_wait<0>();
      __syncwarp();
      bounds(len);
#pragma unroll
      for (int i = 0; i < kStages - 1; ++i) issue(i);
      if (QKV) rotation_at(new_row);
    }
    // a length past the capacity, or none, has no row for the token: stop, as a bad position would
    if (QKV && (len < 1 || len > S)) __trap();
  }
  if constexpr (QKV) {
    const bool owner = s_begin <= new_row && new_row < s_end, has_keys = s_begin < s_end;
#pragma unroll
    for (int u = 0; u < kHeadsPerWarp; ++u) {
      const int item = warp + kMmaWarps * u;
      if (item >= G + 2 || (item < G ? !has_keys : !owner)) continue;
      if (item == G + 1) {  // v: copied as it is
        store_head<T>(hx[u], D, lane, fq.v_cache + b * vsb + hk * vsh + new_row * vss);
        store_head<T>(hx[u], D, lane, sm_new[1]);
        continue;
      }
      if (head_norm(item)) rms_norm_head<T>(hx[u], hw[u], D, fq.eps);
      float y[NB];
      __syncwarp();  // the scratch's reads for the warp's head before
      rotate_head(hx[u], cr, sr, fq.half, D, lane, sm_rot[warp], y);
      if (item < G) {
        store_head<T>(y, D, lane, sm_q[item]);
      } else {
        store_head<T>(y, D, lane, fq.k_cache + b * ksb + hk * ksh + new_row * kss);
        store_head<T>(y, D, lane, sm_new[0]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < NB; ++s) {
      const int c = 4 * s + t;
      qf[s] = g < G && c < chunks ? *reinterpret_cast<const uint4*>(sm_q[g] + c * 8) : zero;
    }
  }
  for (int64_t i = 0; i < steps; ++i) {
    cp_async_wait<kStages - 2>();  // this lane's copies of step i have landed
    __syncwarp();               // and every lane's; the slot of step i - 1 is free
    issue(i + kStages - 1);
    const int64_t s0 = first + i * kStride;
    unsigned char* slot = ring_base + (i % ring) * kSlot;
    if (QKV && s0 <= new_row && new_row < s0 + kMmaKeys) {  // the token's row, from shared memory
      const int r = static_cast<int>(new_row - s0);
      for (int c = lane; c < chunks; c += 32) {
        const int sc = swizzled_chunk<NB>(r, c);
        *reinterpret_cast<uint4*>(slot + r * kPitch + sc * 16) = *reinterpret_cast<const uint4*>(sm_new[0] + c * 8);
        *reinterpret_cast<uint4*>(slot + (kMmaKeys + r) * kPitch + sc * 16) =
            *reinterpret_cast<const uint4*>(sm_new[1] + c * 8);
      }
      __syncwarp();
    }
    const auto row_chunk = [&](int r, int c) {
      return c < chunks ? *reinterpret_cast<const uint4*>(slot + r * kPitch + swizzled_chunk<NB>(r, c) * 16) : zero;
    };
    float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // S^T: keys s0 + g (regs 0, 1) and s0 + g + 8 (regs 2, 3)
#pragma unroll
    for (int s = 0; s < NB; ++s) mma_chunk<T>(sc, row_chunk(g, 4 * s + t), row_chunk(g + 8, 4 * s + t), qf[s]);
    float p[4], alpha[2];
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = s0 + g + (j / 2) * 8 < s_end ? sc[j] * scale_log2 : -INFINITY;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mn = fmaxf(m[h], max_over_g(fmaxf(p[h], p[h + 2])));
      alpha[h] = mn == -INFINITY ? 1.0f : exp2f(m[h] - mn);  // no key yet: nothing to rescale
      m[h] = mn;
      p[h] = p[h] == -INFINITY ? 0.0f : exp2f(p[h] - mn);  // masked keys weigh 0, not NaN
      p[h + 2] = p[h + 2] == -INFINITY ? 0.0f : exp2f(p[h + 2] - mn);
      l[h] = l[h] * alpha[h] + p[h] + p[h + 2];
    }
    // P^T's B fragments: head g, keys 2t, 2t + 1 (b0) and 8 + 2t, 9 + 2t (b1)
    const uint32_t b0 = transpose8x8(pack2<T>(p[0], p[1])), b1 = transpose8x8(pack2<T>(p[2], p[3]));
#pragma unroll
    for (int s = 0; s < NB; ++s) {
      const uint4 vlo = row_chunk(kMmaKeys + g, 4 * s + t), vhi = row_chunk(kMmaKeys + g + 8, 4 * s + t);
#pragma unroll
      for (int pr = 0; pr < 2; ++pr) {
#pragma unroll
        for (int j = 0; j < 4; ++j) o[s][pr][j] *= alpha[j % 2];
        mma_16x8<T>(o[s][pr], transpose8x8(word(vlo, 2 * pr)), transpose8x8(word(vlo, 2 * pr + 1)),
                    transpose8x8(word(vhi, 2 * pr)), transpose8x8(word(vhi, 2 * pr + 1)), b0, b1);
      }
    }
  }
  cp_async_wait<0>();
  __syncwarp();  // the ring is done with: this warp's outputs go where its stages were
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = sum_over_g(l[h]);
  const auto sm_o = [&](int w, int h, int d) -> float& {
    return reinterpret_cast<float*>(smem + w * ring * kSlot)[h * kDim + d];
  };
#pragma unroll
  for (int s = 0; s < NB; ++s)
#pragma unroll
    for (int pr = 0; pr < 2; ++pr)
#pragma unroll
      for (int j = 0; j < 4; ++j) sm_o(warp, 2 * t + j % 2, 32 * s + 8 * (g / 2) + 2 * (2 * pr + j / 2) + g % 2) = o[s][pr][j];
  if (g == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sm_m[warp][2 * t + h] = m[h];
      sm_l[warp][2 * t + h] = l[h];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kMmaWarps * 32) {
    const int h = idx / D, d = idx % D;
    float mx = sm_m[0][h];
#pragma unroll
    for (int w = 1; w < kMmaWarps; ++w) mx = fmaxf(mx, sm_m[w][h]);
    float acc = 0.0f, sum = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float wt = exp2f(sm_m[w][h] - mx);
        acc += sm_o(w, h, d) * wt;
        sum += sm_l[w][h] * wt;
      }
    }
    const int64_t row = (static_cast<int64_t>(b) * Hkv * G + hk * G + h) * splits + split;
    if (out != nullptr) {  // the only split: the result itself (no keys at all: 0, as a fully masked row)
      out[row * D + d] = T(sum > 0.0f ? acc / sum : 0.0f);
      continue;
    }
    part_acc[row * D + d] = acc;
    if (d == 0) part_ml[row] = make_float2(mx, sum);
  }
}

// fq: null, or the q|k|v row the kernel makes q and the new cache row from (a.q undefined then)
template <class T, int NB>
void launch_decode_mma(const AttentionDecodeArgs& a, const DecodeQkv<T>* fq) {
  const int64_t B = a.out.size(0), Hq = a.out.size(1), D = a.out.size(2), Hkv = a.k.size(1), S = a.k.size(2);
  constexpr int64_t kKeysPerBlockStep = kMmaWarps * kMmaKeys;
  // one full wave of blocks
  const auto kernel = fq ? decode_partial_mma_kernel<T, NB, true> : decode_partial_mma_kernel<T, NB, false>;
  constexpr size_t smem = mma_decode_smem<NB>();
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  const int64_t wave = resident_blocks(reinterpret_cast<const void*>(kernel), kMmaWarps * 32, smem);
  const int64_t want = std::max<int64_t>(1, wave / (B * Hkv));
  // no chunk shorter than one step of the block's warps, and no floor beyond that: on the H200 a floor
  // of 2, 4 or 8 steps a warp was as fast or slower at every context (ctx 128, 32q/4kv d128: 6.2 us
  // with none, 6.8 with 4), as a warp's serial steps cost more than the merge of more splits
  const int64_t splits0 = std::max<int64_t>(1, std::min(want, (S + kKeysPerBlockStep - 1) / kKeysPerBlockStep));
  const int64_t chunk = ((S + splits0 - 1) / splits0 + kKeysPerBlockStep - 1) / kKeysPerBlockStep * kKeysPerBlockStep;
  const int splits = static_cast<int>((S + chunk - 1) / chunk);
  // A warp's ring needs no more slots than the steps it can take (the chunk the device computes
  // from the filled length is never longer than this one). With up to one block step (128 keys) a split, as
  // for Qwen3-30B-A3B's 4 kv heads up to 2432 positions, that is one slot and a third of the
  // shared memory: H100, that model's bf16 decode at 128 context, in one run against the full
  // ring, 297.4-297.7 tok/s against 291.9-293.1. The kernel alone (bench.py, profile) times
  // the same, so the gain is in the chained graph, presumably its blocks becoming resident
  // beside the kernel before it sooner.
  const int ring = static_cast<int>(std::min<int64_t>(kStages, std::max<int64_t>(1, chunk / kKeysPerBlockStep)));
  // With the length on the device, its chunks are rounded to a block step's keys, or (KILN_DECODE_CHUNK_KEYS,
  // a multiple of 16 up to 128: an experiment, to be measured) fewer, so that a short context spreads over
  // more blocks (a block's warps past its chunk take no step)
  static const int chunk_round = [] {
    const char* v = std::getenv("KILN_DECODE_CHUNK_KEYS");
    const int keys = v ? std::atoi(v) : 0;
    return keys >= kMmaKeys && keys <= kKeysPerBlockStep && keys % kMmaKeys == 0 ? keys
                                                                                 : static_cast<int>(kKeysPerBlockStep);
  }();
  const size_t ring_smem = smem / kStages * ring;
  Tensor part_acc, part_ml;
  if (splits > 1) {
    part_acc = Tensor::empty({B * Hq * splits * D}, DType::Float32, a.out.device());
    part_ml = Tensor::empty({B * Hq * splits * 2}, DType::Float32, a.out.device());
  }
  const dim3 grid(static_cast<unsigned>(B * Hkv), static_cast<unsigned>(splits));
  launch_chained(
      kernel, grid, kMmaWarps * 32, ring_smem, fq ? nullptr : a.q.data<T>(), fq ? 0 : a.q.stride(0),
      fq ? 0 : a.q.stride(1), a.k.data<T>(), a.k.stride(0), a.k.stride(1), a.k.stride(2),
      a.v.data<T>(), a.v.stride(0), a.v.stride(1), a.v.stride(2), static_cast<int>(Hkv), static_cast<int>(Hq / Hkv),
      S, a.seq_lens.defined() ? a.seq_lens.data<int32_t>() : nullptr, static_cast<int>(D),
      static_cast<float>(a.scale) * kLog2e, chunk, splits, ring, chunk_round,
      splits > 1 ? part_acc.data<float>() : nullptr,
      splits > 1 ? reinterpret_cast<float2*>(part_ml.data<float>()) : nullptr, splits > 1 ? nullptr : a.out.data<T>(),
      fq ? *fq : DecodeQkv<T>{});
  KILN_CUDA_CHECK_LAUNCH();
  if (splits == 1) return;
  // chained: the merge's blocks are set up while the partial kernel runs and wait for its
  // results, which saves the gap between the two
  launch_decode_merge<T>(part_acc.data<float>(), reinterpret_cast<const float2*>(part_ml.data<float>()), splits,
                         static_cast<int>(D), B * Hq, a.out.data<T>());
}

template <class T>
void launch_decode_mma_dim(const AttentionDecodeArgs& a, const DecodeQkv<T>* fq) {
  const int64_t D = a.out.size(2);
  if (D <= 32) launch_decode_mma<T, 1>(a, fq);
  else if (D <= 64) launch_decode_mma<T, 2>(a, fq);
  else if (D <= 96) launch_decode_mma<T, 3>(a, fq);
  else launch_decode_mma<T, 4>(a, fq);
}

}  // namespace

void attention_decode_mma(const AttentionDecodeArgs& a) {
  if (a.out.dtype() == DType::BFloat16) launch_decode_mma_dim<BFloat16>(a, nullptr);
  else launch_decode_mma_dim<Half>(a, nullptr);
}

void attention_decode_qkv(const AttentionDecodeQkvArgs& a) {
  auto typed = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    const DecodeQkv<T> fq{a.qkv.data<T>(), ptr(a.q_norm), ptr(a.k_norm), a.cos.data<float>(), a.sin.data<float>(),
                          static_cast<int>(a.cos.size(1)), a.eps, a.settled, a.attn.k.data<T>(), a.attn.v.data<T>()};
    launch_decode_mma_dim<T>(a.attn, &fq);
  };
  if (a.qkv.dtype() == DType::BFloat16) typed(detail::TypeTag<BFloat16>{});
  else typed(detail::TypeTag<Half>{});
}

}  // namespace kiln::cuda_backend
