// CUDA matmul through cuBLAS (strided batched GEMM, fp32 accumulation).
#include <cublas_v2.h>

#include "core/backend.h"
#include "core/gemm_layout.h"
#include "cuda/common.h"
#include "cuda/cublas_handle.h"

namespace kiln::cuda_backend {

namespace {

void check_cublas(cublasStatus_t st, const char* what) {
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLAS error ", cublasGetStatusName(st), " in ", what);
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: throw Error(detail::format("matmul: dtype ", dtype_name(d), " is not supported on CUDA"));
  }
}

}  // namespace

cublasHandle_t cublas_handle() {
  return per_device_handle<cublasHandle_t>([](cublasHandle_t* h) { check_cublas(cublasCreate(h), "cublasCreate"); });
}

void matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const GemmOperand ga = gemm_ready(a), gb = gemm_ready(b);
  const cublasOperation_t opa = ga.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = gb.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t lda = ga.ld, ldb = gb.ld;
  KILN_CHECK(M < INT32_MAX && N < INT32_MAX && K < INT32_MAX && B < INT32_MAX, "matmul: sizes beyond 2^31 (", M, ", ",
             N, ", ", K, ") are not supported");
  cublasHandle_t h = cublas_handle();
  check_cublas(cublasSetStream(h, current_stream()), "cublasSetStream");
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t t = cuda_type(out.dtype());
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
  check_cublas(cublasGemmStridedBatchedEx(h, opb, opa, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                          &one, b.data_ptr(), t, static_cast<int>(ldb), b.stride(0), a.data_ptr(), t,
                                          static_cast<int>(lda), a.stride(0), &zero, out.data_ptr(), t,
                                          static_cast<int>(N), M * N, static_cast<int>(B), CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace kiln::cuda_backend
