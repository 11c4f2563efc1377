// CPU matmul through OpenBLAS sgemm; float16/bfloat16 are widened to float32
// for the product and rounded once at the end. scaled_mm is its composed form
// (fp8 decoded exactly to float32, one sgemm, the scales).
#include <cblas.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/gemm_layout.h"
#include "ops/scaled_mm.h"

namespace kiln::cpu {

namespace {

// float32 in the operand's own layout: a transposed [B, K, N] view (a linear's
// weight) widens as the contiguous [B, N, K] it is, since a widening that also
// transposes runs at a fraction of the speed (on the 2-core VM it took about as
// long as the sgemm of a 128-token prefill).
Tensor widen(const Tensor& t) {
  const Tensor t_t = t.transpose(1, 2);
  if (!t.is_contiguous() && t_t.is_contiguous()) return t_t.to(DType::Float32).transpose(1, 2);
  return t.to(DType::Float32);
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  const bool wide = a_in.dtype() != DType::Float32;
  Tensor a = wide ? widen(a_in) : a_in;
  Tensor b = wide ? widen(b_in) : b_in;
  Tensor c = wide ? Tensor::empty(out.shape(), DType::Float32, kCPU) : out;
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const GemmOperand ga = gemm_ready(a), gb = gemm_ready(b);
  const CBLAS_TRANSPOSE ta = ga.transposed ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = gb.transposed ? CblasTrans : CblasNoTrans;
  const int64_t lda = ga.ld, ldb = gb.ld;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  for (int64_t i = 0; i < B; ++i)
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f,
                pa + i * a.stride(0), static_cast<int>(lda), pb + i * b.stride(0), static_cast<int>(ldb), 0.0f,
                pc + i * N * M, static_cast<int>(N));
  if (wide) out.copy_(c);
}

void scaled_mm(const ScaledMmArgs& args) { scaled_mm_composed(args); }

}  // namespace kiln::cpu
