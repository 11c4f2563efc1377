// Hopper's tensor memory accelerator, host side: tensor maps (the descriptors a
// kernel's cp.async.bulk.tensor copies read), encoded through the driver entry
// point that the CUDA runtime hands out, so kiln links no libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::cuda_backend {

// A tensor map over a row-major bf16, fp16 or fp8 e4m3fn (as bytes) tensor of `rank` (2 or 3) dimensions,
// innermost first: dims[i] elements, byte strides[i - 1] between steps of
// dimension i, boxes of box[i] elements. Elements outside the tensor read as
// zeros; no swizzle, so a box lands in shared memory densely, innermost first.
// Throws, naming the offending value, when the layout breaks the hardware's
// rules (16-byte aligned base and strides, box inner extent a multiple of 16 bytes).
CUtensorMap tensor_map(DType dtype, int rank, const void* base, const uint64_t* dims, const uint64_t* strides,
                       const uint32_t* box);

// Whether the layout meets those rules (to choose a kernel before encoding).
bool tensor_map_fits(const void* base, int rank, const uint64_t* strides);

}  // namespace kiln::cuda_backend
