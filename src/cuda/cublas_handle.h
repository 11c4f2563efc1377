// The cuBLAS handle of the current device, one for the whole CUDA backend (matmul,
// the linear-algebra paths): made once per device and kept for the process. Callers
// set its stream (cublasSetStream) before each use.
#pragma once

#include <cublas_v2.h>

namespace kiln::cuda_backend {

cublasHandle_t cublas_handle();

}  // namespace kiln::cuda_backend
