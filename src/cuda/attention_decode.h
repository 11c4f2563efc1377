// The CUDA decode attention kernels' entry points inside the backend.
#pragma once

#include "core/backend.h"

namespace kiln::cuda_backend {

// Float16 or bfloat16, head dim a multiple of 8 up to kMmaMaxDim, at most 8 q heads per kv head.
inline constexpr int64_t kMmaMaxDim = 128;
void attention_decode_mma(const AttentionDecodeArgs& a);

// attention_decode_qkv's arguments, checked: attn.out [1, Hq, D] contiguous, attn.q
// undefined, attn.k and attn.v the caches as [1, Hkv, capacity, D] (16-byte rows of
// unit stride), attn.seq_lens int32 [1] in 1..capacity on the device; qkv [(Hq + 2
// Hkv) D] contiguous, one dtype (float16 or bfloat16) with out, the caches and the
// norms ([D] contiguous or undefined); cos and sin [>= capacity, half] contiguous
// float32, 2 half <= D; D a multiple of 8 up to kMmaMaxDim; Hq / Hkv <= 8.
// settled: nothing still running writes the caches' rows before seq_lens - 1.
struct AttentionDecodeQkvArgs {
  AttentionDecodeArgs attn;
  Tensor qkv, q_norm, k_norm, cos, sin;
  float eps = 0;
  bool settled = false;
};
void attention_decode_qkv(const AttentionDecodeQkvArgs& a);

}  // namespace kiln::cuda_backend
