// CPU matmul through OpenBLAS sgemm; float16/bfloat16 are widened to float32
// for the product and rounded once at the end.
#include <cblas.h>

#include "core/backend.h"
#include "core/check.h"

namespace kiln::cpu {

namespace {
// A 2-D operand layout cblas takes directly: row-major, or its transpose.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, CBLAS_TRANSPOSE& trans, int64_t& ld) {
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    trans = CblasNoTrans;
    ld = rs;
    return true;
  }
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {
    trans = CblasTrans;
    ld = cs;
    return true;
  }
  return false;
}
}  // namespace

void matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const bool wide = a_in.dtype() != DType::Float32;
  Tensor a = wide ? a_in.to(DType::Float32) : a_in;
  Tensor b = wide ? b_in.to(DType::Float32) : b_in;
  Tensor c = wide ? Tensor::empty(out.shape(), DType::Float32, kCPU) : out;
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;
  int64_t lda = 1, ldb = 1;
  if (M > 0 && K > 0 && !blas_layout(M, K, a.stride(1), a.stride(2), ta, lda)) a = a.contiguous();
  if (K > 0 && N > 0 && !blas_layout(K, N, b.stride(1), b.stride(2), tb, ldb)) b = b.contiguous();
  blas_layout(M, K, a.stride(1), a.stride(2), ta, lda);
  blas_layout(K, N, b.stride(1), b.stride(2), tb, ldb);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  for (int64_t i = 0; i < B; ++i)
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f,
                pa + i * a.stride(0), static_cast<int>(lda), pb + i * b.stride(0), static_cast<int>(ldb), 0.0f,
                pc + i * N * M, static_cast<int>(N));
  if (wide) out.copy_(c);
}

}  // namespace kiln::cpu
