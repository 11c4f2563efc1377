// scaled_mm through cuBLASLt's fp8 GEMM. cuBLASLt is column-major, so the
// row-major out [M, N] = a [M, K] bt[N, K]^T is computed as out^T = bt a^T: its
// "A" is bt (transposed, the TN layout fp8 requires) and its "B" is a. The
// dequantisation scales go in as scale pointers (tensorwise) or as outer vectors
// (rowwise: one float per row of its A and per column of its B), so the GEMM's
// own epilogue applies them and the bias; algorithms are looked up once per shape.
#include "cuda/scaled_mm_lt.h"

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/check.h"
#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

void check_lt(cublasStatus_t st, const char* what) {
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, "scaled_mm: cuBLASLt error ", cublasGetStatusName(st), " in ", what);
}

cublasLtHandle_t lt_handle() {
  return per_device_handle<cublasLtHandle_t>(
      [](cublasLtHandle_t* h) { check_lt(cublasLtCreate(h), "cublasLtCreate"); });
}

cudaDataType_t lt_type(DType d) {
  switch (d) {
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Owns the descriptors of one call.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
  template <class V>
  void set(cublasLtMatmulDescAttributes_t attr, const V& v) {
    check_lt(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)), "cublasLtMatmulDescSetAttribute");
  }
};

// (device, M, N, K, lda, ldb, out dtype, rowwise, bias, fast accum) -> algorithm, or none.
using AlgoKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, bool, bool>;

}  // namespace

bool scaled_mm_lt(const ScaledMmArgs& s) {
  const int64_t M = s.a.size(0), N = s.bt.size(0), K = s.a.size(1);
  const int64_t lda = s.a.stride(0), ldb = s.bt.stride(0);
  if (M >= INT32_MAX || N >= INT32_MAX || K >= INT32_MAX || lda % 16 != 0 || ldb % 16 != 0) return false;
  const bool rowwise = s.rowwise();
  const cudaDataType_t out_t = lt_type(s.out.dtype());

  LtCall c;
  check_lt(cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  c.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  c.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  c.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, s.scale_b.data_ptr());
  c.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, s.scale_a.data_ptr());
  if (rowwise) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    c.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode);
    c.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode);
  }
  c.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(s.fast_accum ? 1 : 0));
  if (s.bias.defined()) {
    c.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    c.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, s.bias.data_ptr());
    c.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(out_t));
  }
  check_lt(cublasLtMatrixLayoutCreate(&c.la, CUDA_R_8F_E4M3, K, N, ldb), "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&c.lb, CUDA_R_8F_E4M3, K, M, lda), "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&c.lc, out_t, N, M, s.out.stride(0)), "cublasLtMatrixLayoutCreate");

  static std::mutex mu;
  static std::map<AlgoKey, std::pair<bool, cublasLtMatmulAlgo_t>> algos;
  const AlgoKey key{current_device(), M, N, K, lda, ldb, static_cast<int>(s.out.dtype()), rowwise,
                    s.bias.defined(), s.fast_accum};
  cublasLtHandle_t h = lt_handle();
  std::pair<bool, cublasLtMatmulAlgo_t> found{false, {}};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = algos.find(key);
    if (it != algos.end()) {
      found = it->second;
    } else {
      check_lt(cublasLtMatmulPreferenceCreate(&c.pref), "cublasLtMatmulPreferenceCreate");
      const uint64_t ws = kWorkspaceBytes;
      check_lt(cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               "cublasLtMatmulPreferenceSetAttribute");
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      const cublasStatus_t st =
          cublasLtMatmulAlgoGetHeuristic(h, c.desc, c.la, c.lb, c.lc, c.lc, c.pref, 1, &result, &count);
      found = {st == CUBLAS_STATUS_SUCCESS && count > 0, result.algo};
      algos[key] = found;
    }
  }
  if (!found.first) return false;
  const Tensor workspace = Tensor::empty({static_cast<int64_t>(kWorkspaceBytes)}, DType::UInt8, s.out.device());
  const float one = 1.0f, zero = 0.0f;
  check_lt(cublasLtMatmul(h, c.desc, &one, s.bt.data_ptr(), c.la, s.a.data_ptr(), c.lb, &zero, s.out.data_ptr(), c.lc,
                          s.out.data_ptr(), c.lc, &found.second, workspace.data_ptr(), kWorkspaceBytes,
                          current_stream()),
           "cublasLtMatmul");
  return true;
}

}  // namespace kiln::cuda_backend
