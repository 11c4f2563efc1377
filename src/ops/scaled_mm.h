// The composed form of scaled_mm (fp8 decoded to float32, a float32 GEMM, the
// scales, the bias): the CPU's implementation and CUDA's fallback where its
// kernels do not apply (pre-sm_89 devices, strides the vector loads cannot take).
#pragma once

#include "core/backend.h"

namespace kiln {

// out = (a @ bt^T) * scale_a * scale_b + bias, in out's dtype; arguments checked.
void scaled_mm_composed(const ScaledMmArgs& args);

}  // namespace kiln
