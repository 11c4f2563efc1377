// CUDA one-query attention (decode), split over the context and merged
// (flash-decoding): the KV cache is read in place, once per kv head for up to
// 4 of its query heads (a kv head serving 8 takes two blocks, the second
// mostly reading from L2).
//
// Partial kernel: a block takes one kv head and a chunk of keys. A group of GS
// lanes (GS = D / 8 rounded up to a power of two) holds one key row: lane c loads
// 16 bytes of it (8 elements), keeps the same 8 dims of the G queries and of G
// running outputs in registers, and a key's score is a GS-lane xor-shuffle sum.
// Each group takes 4 consecutive keys at a time (their K and V loads in
// flight together) with one online-softmax rescale per 4 keys. The groups of a
// block meet through shuffles and shared memory and write (max, sum, output) of
// their chunk. Merge kernel: one block per query head combines the chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/common.h"
#include "cuda/mma.cuh"

namespace kiln::cuda_backend {

namespace {

constexpr int kWarps = 4, kKeysPerStep = 4, kMaxDim = 256;
constexpr float kLog2e = 1.4426950408889634f;

template <class T>
__device__ __forceinline__ void widen8(const uint4& u, float* f) {
  const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = static_cast<float>(e[i]);
}

// Merges running softmax state (m, l, acc) with another's, all in log2 units.
template <int G>
__device__ __forceinline__ void merge_state(float (&m)[G], float (&l)[G], float (&acc)[G][8], const float* om,
                                            const float* ol, const float (*oacc)[8]) {
#pragma unroll
  for (int h = 0; h < G; ++h) {
    const float mn = fmaxf(m[h], om[h]);
    if (mn == -INFINITY) continue;
    const float a = exp2f(m[h] - mn), b = exp2f(om[h] - mn);
    l[h] = l[h] * a + ol[h] * b;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[h][i] = acc[h][i] * a + oacc[h][i] * b;
    m[h] = mn;
  }
}

template <class T, int GS, int G>
__global__ void __launch_bounds__(kWarps * 32)
    decode_partial_kernel(const T* __restrict__ q, int64_t qsb, int64_t qsh, const T* __restrict__ k, int64_t ksb,
                          int64_t ksh, int64_t kss, const T* __restrict__ v, int64_t vsb, int64_t vsh, int64_t vss,
                          int Hkv, int g_total, int hsplit, int64_t S, const int32_t* __restrict__ seq_lens, int D,
                          float scale_log2, int64_t chunk, int splits, float* __restrict__ part_acc,
                          float2* __restrict__ part_ml) {
  constexpr int kRowsPerWarp = 32 / GS, kSlots = kWarps * kRowsPerWarp;
  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G], sm_acc[kWarps][G][kMaxDim];
  // block x: (batch, kv head, which G of the kv head's g_total query heads)
  const int bh = blockIdx.x / hsplit, sub = blockIdx.x % hsplit, split = blockIdx.y;
  const int b = bh / Hkv, hk = bh % Hkv;
  const int h0 = hk * g_total + sub * G, g_real = ::min(G, g_total - sub * G);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = lane % GS, slot = warp * kRowsPerWarp + lane / GS;
  const bool active = c * 8 < D;
  if (seq_lens) {  // the filled length lives on the device (a replayed graph): chunks cover it evenly
    const int64_t len = seq_lens[b];
    S = len < 0 ? 0 : (len < S ? len : S);
    chunk = ((S + splits - 1) / splits + kKeysPerStep - 1) / kKeysPerStep * kKeysPerStep;
  }
  const int64_t s_begin = split * chunk, s_end = (S < s_begin + chunk ? S : s_begin + chunk);

  float qf[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    uint4 u = make_uint4(0, 0, 0, 0);
    if (active && h < g_real) u = *reinterpret_cast<const uint4*>(q + b * qsb + (h0 + h) * qsh + c * 8);
    widen8<T>(u, qf[h]);
#pragma unroll
    for (int i = 0; i < 8; ++i) qf[h][i] *= scale_log2;
  }
  const T* kb = k + b * ksb + hk * ksh + c * 8;
  const T* vb = v + b * vsb + hk * vsh + c * 8;
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[h][i] = 0.0f;
  }
  // Every lane runs the same rounds (the score sums shuffle across the warp); keys past the chunk are masked.
  for (int64_t round = s_begin; round < s_end; round += kSlots * kKeysPerStep) {
    const int64_t s0 = round + static_cast<int64_t>(slot) * kKeysPerStep;
    uint4 ku[kKeysPerStep], vu[kKeysPerStep];
#pragma unroll
    for (int j = 0; j < kKeysPerStep; ++j) {
      const bool ok = active && s0 + j < s_end;
      ku[j] = ok ? __ldg(reinterpret_cast<const uint4*>(kb + (s0 + j) * kss)) : make_uint4(0, 0, 0, 0);
      vu[j] = ok ? __ldg(reinterpret_cast<const uint4*>(vb + (s0 + j) * vss)) : make_uint4(0, 0, 0, 0);
    }
    float sc[kKeysPerStep][G];
#pragma unroll
    for (int j = 0; j < kKeysPerStep; ++j) {
      float kf[8];
      widen8<T>(ku[j], kf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) d = fmaf(qf[h][i], kf[i], d);
#pragma unroll
        for (int o = GS / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        sc[j][h] = s0 + j < s_end ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float mn = m[h];
#pragma unroll
      for (int j = 0; j < kKeysPerStep; ++j) mn = fmaxf(mn, sc[j][h]);
      const float alpha = mn == -INFINITY ? 1.0f : exp2f(m[h] - mn);  // no key yet: nothing to rescale
      l[h] *= alpha;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[h][i] *= alpha;
      m[h] = mn;
    }
#pragma unroll
    for (int j = 0; j < kKeysPerStep; ++j) {
      float vf[8];
      widen8<T>(vu[j], vf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        const float p = sc[j][h] == -INFINITY ? 0.0f : exp2f(sc[j][h] - m[h]);  // masked keys weigh 0, not NaN
        l[h] += p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[h][i] = fmaf(p, vf[i], acc[h][i]);
      }
    }
  }
  // the rows of a warp, then the warps of the block
#pragma unroll
  for (int o = GS; o < 32; o <<= 1) {
    float om[G], ol[G], oacc[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      om[h] = __shfl_xor_sync(0xffffffffu, m[h], o);
      ol[h] = __shfl_xor_sync(0xffffffffu, l[h], o);
#pragma unroll
      for (int i = 0; i < 8; ++i) oacc[h][i] = __shfl_xor_sync(0xffffffffu, acc[h][i], o);
    }
    merge_state<G>(m, l, acc, om, ol, oacc);
  }
  if (lane < GS) {
#pragma unroll
    for (int h = 0; h < G; ++h) {
      if (c == 0) {
        sm_m[warp][h] = m[h];
        sm_l[warp][h] = l[h];
      }
      if (active)
#pragma unroll
        for (int i = 0; i < 8; ++i) sm_acc[warp][h][c * 8 + i] = acc[h][i];
    }
  }
  __syncthreads();
  if (warp != 0 || lane >= GS) return;
  for (int w = 1; w < kWarps; ++w) {
    float oacc[G][8];
#pragma unroll
    for (int h = 0; h < G; ++h)
#pragma unroll
      for (int i = 0; i < 8; ++i) oacc[h][i] = active ? sm_acc[w][h][c * 8 + i] : 0.0f;
    merge_state<G>(m, l, acc, sm_m[w], sm_l[w], oacc);
  }
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (h >= g_real) break;
    const int64_t row = (static_cast<int64_t>(b) * Hkv * g_total + h0 + h) * splits + split;
    if (active)
#pragma unroll
      for (int i = 0; i < 8; ++i) part_acc[row * D + c * 8 + i] = acc[h][i];
    if (c == 0) part_ml[row] = make_float2(m[h], l[h]);
  }
}

// ---- tensor-core partial kernel (head dims up to 128) ----
//
// A warp takes 16 keys a step and computes both products transposed, so that the
// G <= 8 query heads are the 8 columns of each mma.m16n8k16 tile and no tile row is
// padding: S^T = K Q^T (rows: the 16 keys) and O^T += V^T P^T (rows: 16 dims).
// Lane (g, t) = (lane / 4, lane % 4) loads, for every 32-dim block s of the head
// dim, chunk 4s + t (16 bytes) of key rows g and g + 8, of K and of V, straight
// into registers. A dot product does not care about the order of its terms, so
// the K chunks are the A fragments of S^T as they come (see mma.cuh); movmatrix
// transposes the V words into the A fragments of V^T and the scores into the B
// fragments of P^T. Word j of a V chunk, transposed, covers dims 8 (g / 2) + 2j +
// g % 2 of the block, which is where the output tile's rows land. Warps take
// interleaved steps of the block's chunk of keys and merge in shared memory.
constexpr int kMmaWarps = 4, kMmaKeys = 16, kStages = 3;

__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
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

__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

template <class T, int NB>
__global__ void __launch_bounds__(kMmaWarps * 32)
    decode_partial_mma_kernel(const T* __restrict__ q, int64_t qsb, int64_t qsh, const T* __restrict__ k, int64_t ksb,
                              int64_t ksh, int64_t kss, const T* __restrict__ v, int64_t vsb, int64_t vsh,
                              int64_t vss, int Hkv, int G, int64_t S, const int32_t* __restrict__ seq_lens, int D,
                              float scale_log2, int64_t chunk, int splits, float* __restrict__ part_acc,
                              float2* __restrict__ part_ml, T* __restrict__ out) {
  constexpr int kDim = NB * 32, kPitch = NB * 64;
  constexpr int kSlot = 2 * kMmaKeys * kPitch;        // bytes of one stage: K rows, then V rows
  constexpr int64_t kStride = kMmaWarps * kMmaKeys;  // keys of one step of the block
  static_assert(8 * kDim * sizeof(float) <= kStages * kSlot, "a warp's output fits in its stages");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float sm_m[kMmaWarps][8], sm_l[kMmaWarps][8];
  const int bh = blockIdx.x, split = blockIdx.y, b = bh / Hkv, hk = bh % Hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int chunks = D / 8;
  if (seq_lens) {  // the filled length lives on the device (a replayed graph): chunks cover it evenly
    const int64_t len = seq_lens[b];
    S = len < 0 ? 0 : (len < S ? len : S);
    chunk = ((S + splits - 1) / splits + kStride - 1) / kStride * kStride;
  }
  const int64_t s_begin = split * chunk, s_end = (S < s_begin + chunk ? S : s_begin + chunk);
  unsigned char* ring = smem + warp * kStages * kSlot;

  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 qf[NB];  // head g (heads >= G read as zero), chunk 4s + t: the B fragments of Q^T
#pragma unroll
  for (int s = 0; s < NB; ++s) {
    const int c = 4 * s + t;
    qf[s] = g < G && c < chunks ? *reinterpret_cast<const uint4*>(q + b * qsb + (hk * G + g) * qsh + c * 8) : zero;
  }
  const T* kb = k + b * ksb + hk * ksh;
  const T* vb = v + b * vsb + hk * vsh;
  // step i of this warp: keys first + i * kStride ...; its rows go to slot i % kStages, keys past the end as zeros
  const int64_t first = s_begin + warp * kMmaKeys;
  const int64_t steps = first < s_end ? (s_end - first + kStride - 1) / kStride : 0;
  const auto issue = [&](int64_t i) {
    if (i < steps) {
      const int64_t s0 = first + i * kStride;
      unsigned char* slot = ring + (i % kStages) * kSlot;
      for (int idx = lane; idx < kMmaKeys * chunks; idx += 32) {
        const int r = idx / chunks, c = idx % chunks;
        const bool ok = s0 + r < s_end;
        const int64_t key = ok ? s0 + r : 0;
        const int sc = swizzled_chunk<NB>(r, c);  // rows r and 16 + r have one parity
        copy16_async(slot + r * kPitch + sc * 16, kb + key * kss + c * 8, ok);
        copy16_async(slot + (kMmaKeys + r) * kPitch + sc * 16, vb + key * vss + c * 8, ok);
      }
    }
    commit_async();  // one group per step, empty or not, so wait_async counts steps
  };
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

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  for (int64_t i = 0; i < steps; ++i) {
    wait_async<kStages - 2>();  // this lane's copies of step i have landed
    __syncwarp();               // and every lane's; the slot of step i - 1 is free
    issue(i + kStages - 1);
    const int64_t s0 = first + i * kStride;
    const unsigned char* slot = ring + (i % kStages) * kSlot;
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
  wait_async<0>();
  __syncwarp();  // the ring is done with: this warp's outputs go where its stages were
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = sum_over_g(l[h]);
  const auto sm_o = [&](int w, int h, int d) -> float& {
    return reinterpret_cast<float*>(smem + w * kStages * kSlot)[h * kDim + d];
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

// One block per query head: 32 x 8 threads, x over dims, y over chunks. Each y
// folds its chunks in one pass with a running maximum, so the (max, sum) pairs
// and the outputs of the chunks are read together, then shared memory joins the 8.
template <class T>
__global__ void __launch_bounds__(256) decode_merge_kernel(const float* __restrict__ part_acc,
                                                           const float2* __restrict__ part_ml, int splits, int D,
                                                           T* __restrict__ out) {
  constexpr int kPerLane = kMaxDim / 32;
  __shared__ float red[8][kMaxDim + 1];
  __shared__ float red_max[8];
  const int64_t head = blockIdx.x;
  const int x = threadIdx.x, y = threadIdx.y;
  const float2* ml = part_ml + head * splits;
  float mx = -INFINITY, den = 0.0f, num[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) num[j] = 0.0f;
#pragma unroll 4
  for (int i = y; i < splits; i += 8) {
    const float2 p = ml[i];
    const float* acc = part_acc + (head * splits + i) * D;
    float a[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) a[j] = j * 32 + x < D ? acc[j * 32 + x] : 0.0f;
    if (p.x == -INFINITY) continue;  // an empty chunk (its sums are 0 too)
    if (p.x > mx) {
      const float r = exp2f(mx - p.x);
      den *= r;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) num[j] *= r;
      mx = p.x;
    }
    const float w = exp2f(p.x - mx);
    den += p.y * w;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) num[j] += a[j] * w;
  }
  if (x == 0) red_max[y] = mx;
  __syncthreads();
  float total_max = red_max[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) total_max = fmaxf(total_max, red_max[i]);
  const float w = mx == -INFINITY ? 0.0f : exp2f(mx - total_max);
  if (x == 0) red[y][kMaxDim] = den * w;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (j * 32 + x < D) red[y][j * 32 + x] = num[j] * w;
  __syncthreads();
  if (y != 0) return;
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) total += red[i][kMaxDim];
  for (int d = x; d < D; d += 32) {
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) v += red[i][d];
    out[head * D + d] = T(total > 0.0f ? v / total : 0.0f);  // no keys at all: 0, as a fully masked row
  }
}

template <class T, int GS, int G>
void launch_decode(const AttentionDecodeArgs& a) {
  const int64_t B = a.q.size(0), Hq = a.q.size(1), D = a.q.size(2), Hkv = a.k.size(1), S = a.k.size(2);
  constexpr int kKeysPerRound = kWarps * (32 / GS) * kKeysPerStep;
  // One full wave of blocks (the kernel holds G queries and outputs in registers, so
  // fewer blocks fit an SM as G grows: 3 per SM at G = 4), and no chunk shorter than
  // one round of the block. A partial second wave would cost as much as the first.
  const int g_total = static_cast<int>(Hq / Hkv), hsplit = (g_total + G - 1) / G;  // blocks per kv head
  const int64_t wave = resident_blocks(reinterpret_cast<const void*>(decode_partial_kernel<T, GS, G>), kWarps * 32);
  const int64_t want = std::max<int64_t>(1, wave / (B * Hkv * hsplit));
  const int64_t splits0 = std::max<int64_t>(1, std::min(want, (S + kKeysPerRound - 1) / kKeysPerRound));
  const int64_t chunk = ((S + splits0 - 1) / splits0 + kKeysPerStep - 1) / kKeysPerStep * kKeysPerStep;
  const int splits = static_cast<int>((S + chunk - 1) / chunk);
  Tensor part_acc = Tensor::empty({B * Hq * splits * D}, DType::Float32, a.out.device());
  Tensor part_ml = Tensor::empty({B * Hq * splits * 2}, DType::Float32, a.out.device());
  const dim3 grid(static_cast<unsigned>(B * Hkv * hsplit), static_cast<unsigned>(splits));
  decode_partial_kernel<T, GS, G><<<grid, kWarps * 32, 0, current_stream()>>>(
      a.q.data<T>(), a.q.stride(0), a.q.stride(1), a.k.data<T>(), a.k.stride(0), a.k.stride(1), a.k.stride(2),
      a.v.data<T>(), a.v.stride(0), a.v.stride(1), a.v.stride(2), static_cast<int>(Hkv), g_total, hsplit,
      S, a.seq_lens.defined() ? a.seq_lens.data<int32_t>() : nullptr, static_cast<int>(D),
      static_cast<float>(a.scale) * kLog2e, chunk, splits, part_acc.data<float>(),
      reinterpret_cast<float2*>(part_ml.data<float>()));
  KILN_CUDA_CHECK_LAUNCH();
  decode_merge_kernel<T><<<static_cast<unsigned>(B * Hq), dim3(32, 8), 0, current_stream()>>>(part_acc.data<float>(),
                                               reinterpret_cast<const float2*>(part_ml.data<float>()), splits,
                                               static_cast<int>(D), a.out.data<T>());
  KILN_CUDA_CHECK_LAUNCH();
}

template <class T, int NB>
void launch_decode_mma(const AttentionDecodeArgs& a) {
  const int64_t B = a.q.size(0), Hq = a.q.size(1), D = a.q.size(2), Hkv = a.k.size(1), S = a.k.size(2);
  constexpr int64_t kKeysPerBlockStep = kMmaWarps * kMmaKeys;
  // one full wave of blocks, no chunk shorter than one step of the block's warps
  const auto kernel = decode_partial_mma_kernel<T, NB>;
  constexpr size_t smem = mma_decode_smem<NB>();
  static const bool opted_in = [&] {  // past the default 48 KB of dynamic shared memory
    KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)opted_in;
  const int64_t wave = resident_blocks(reinterpret_cast<const void*>(kernel), kMmaWarps * 32, smem);
  const int64_t want = std::max<int64_t>(1, wave / (B * Hkv));
  const int64_t splits0 = std::max<int64_t>(1, std::min(want, (S + kKeysPerBlockStep - 1) / kKeysPerBlockStep));
  const int64_t chunk = ((S + splits0 - 1) / splits0 + kKeysPerBlockStep - 1) / kKeysPerBlockStep * kKeysPerBlockStep;
  const int splits = static_cast<int>((S + chunk - 1) / chunk);
  Tensor part_acc, part_ml;
  if (splits > 1) {
    part_acc = Tensor::empty({B * Hq * splits * D}, DType::Float32, a.out.device());
    part_ml = Tensor::empty({B * Hq * splits * 2}, DType::Float32, a.out.device());
  }
  const dim3 grid(static_cast<unsigned>(B * Hkv), static_cast<unsigned>(splits));
  kernel<<<grid, kMmaWarps * 32, smem, current_stream()>>>(
      a.q.data<T>(), a.q.stride(0), a.q.stride(1), a.k.data<T>(), a.k.stride(0), a.k.stride(1), a.k.stride(2),
      a.v.data<T>(), a.v.stride(0), a.v.stride(1), a.v.stride(2), static_cast<int>(Hkv), static_cast<int>(Hq / Hkv),
      S, a.seq_lens.defined() ? a.seq_lens.data<int32_t>() : nullptr, static_cast<int>(D),
      static_cast<float>(a.scale) * kLog2e, chunk, splits, splits > 1 ? part_acc.data<float>() : nullptr,
      splits > 1 ? reinterpret_cast<float2*>(part_ml.data<float>()) : nullptr, splits > 1 ? nullptr : a.out.data<T>());
  KILN_CUDA_CHECK_LAUNCH();
  if (splits == 1) return;
  decode_merge_kernel<T><<<static_cast<unsigned>(B * Hq), dim3(32, 8), 0, current_stream()>>>(
      part_acc.data<float>(), reinterpret_cast<const float2*>(part_ml.data<float>()), splits, static_cast<int>(D),
      a.out.data<T>());
  KILN_CUDA_CHECK_LAUNCH();
}

template <class T, int GS>
void decode_group(const AttentionDecodeArgs& a) {
  const int64_t G = a.q.size(1) / a.k.size(1);
  if (G == 1) launch_decode<T, GS, 1>(a);
  else if (G == 2) launch_decode<T, GS, 2>(a);
  else launch_decode<T, GS, 4>(a);  // 5..8 query heads per kv head: two blocks of 4 (8 in registers would spill occupancy)
}

}  // namespace

void attention_decode(const AttentionDecodeArgs& a) {
  auto typed = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t D = a.q.size(2), lanes = D / 8;  // 16-byte pieces of a row
    if (D <= 32) launch_decode_mma<T, 1>(a);
    else if (D <= 64) launch_decode_mma<T, 2>(a);
    else if (D <= 96) launch_decode_mma<T, 3>(a);
    else if (D <= 128) launch_decode_mma<T, 4>(a);
    else if (lanes <= 8) decode_group<T, 8>(a);
    else if (lanes <= 16) decode_group<T, 16>(a);
    else decode_group<T, 32>(a);
  };
  switch (a.q.dtype()) {
    case DType::BFloat16: typed(detail::TypeTag<BFloat16>{}); break;
    case DType::Float16: typed(detail::TypeTag<Half>{}); break;
    default: KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the CUDA decode kernel takes float16 or bfloat16");
  }
}

}  // namespace kiln::cuda_backend
