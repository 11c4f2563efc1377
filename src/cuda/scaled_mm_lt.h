// scaled_mm through cuBLASLt's fp8 GEMM (many rows).
#pragma once

#include "core/backend.h"

namespace kiln::cuda_backend {

// Runs args on the current stream and returns true, or returns false (nothing
// written) when cuBLASLt has no algorithm for them.
bool scaled_mm_lt(const ScaledMmArgs& args);

}  // namespace kiln::cuda_backend
