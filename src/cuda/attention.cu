// CUDA one-query attention (decode) for head dims past 128 (attention_mma.cu takes
// the rest on tensor cores), split over the context and merged (flash-decoding):
// the KV cache is read in place, once per kv head for up to 4 of its query heads
// (a kv head serving 8 takes two blocks, the second mostly reading from L2).
//
// Partial kernel: a block takes one kv head and a chunk of keys. A warp holds one
// key row: lane c loads 16 bytes of it (8 elements), keeps the same 8 dims of the
// G queries and of G running outputs in registers, and a key's score is a warp
// xor-shuffle sum. Each warp takes 4 consecutive keys at a time (their K and V
// loads in flight together) with one online-softmax rescale per 4 keys. The warps
// of a block meet through shared memory and write (max, sum, output) of their
// chunk, which the merge kernel (attention_merge.cuh) combines.
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/attention_decode.h"
#include "cuda/attention_merge.cuh"
#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

constexpr int kWarps = 4, kKeysPerStep = 4;

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
  launch_decode_merge<T>(part_acc.data<float>(), reinterpret_cast<const float2*>(part_ml.data<float>()), splits,
                         static_cast<int>(D), B * Hq, a.out.data<T>());
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
  if (a.q.size(2) <= kMmaMaxDim && (a.q.dtype() == DType::BFloat16 || a.q.dtype() == DType::Float16))
    return attention_decode_mma(a);  // tensor cores (attention_mma.cu)
  auto typed = [&](auto tag) {
    using T = typename decltype(tag)::type;
    decode_group<T, 32>(a);  // 136..256 dims: 17..32 16-byte pieces a row, a warp per key row
  };
  switch (a.q.dtype()) {
    case DType::BFloat16: typed(detail::TypeTag<BFloat16>{}); break;
    case DType::Float16: typed(detail::TypeTag<Half>{}); break;
    default: KILN_NOT_IMPLEMENTED("scaled_dot_product_attention: the CUDA decode kernel takes float16 or bfloat16");
  }
}

}  // namespace kiln::cuda_backend
