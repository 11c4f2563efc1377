// The CUDA decode attention kernels' entry points inside the backend.
#pragma once

#include "core/backend.h"

namespace kiln::cuda_backend {

// Float16 or bfloat16, head dim a multiple of 8 up to kMmaMaxDim, at most 8 q heads per kv head.
inline constexpr int64_t kMmaMaxDim = 128;
void attention_decode_mma(const AttentionDecodeArgs& a);

}  // namespace kiln::cuda_backend
