// The device pieces of kiln::linalg's backward formulas: a batched gemm with
// conjugate transposes (cuBLAS), and the elementwise masks and scalings.
#include <cublas_v2.h>
#include <cuComplex.h>

#include <type_traits>

#include "core/check.h"
#include "cuda/common.h"
#include "cuda/cublas_handle.h"
#include "cuda/linalg_backward.h"

namespace kiln::cuda_backend {

namespace {

template <class F>
void by_dtype(const Tensor& t, F fn) {
  if (t.dtype() == DType::Complex64)
    fn(float2{});
  else
    fn(float{});
}

__device__ inline float2 cmul(float2 a, float2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

template <class T>
__global__ void scale_kernel(T* t, const T* __restrict__ grad, const T* __restrict__ det, int64_t batch,
                             int64_t elems) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * elems;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / elems;
    if constexpr (std::is_same_v<T, float2>)
      t[e] = cmul(t[e], cmul(grad[i], float2{det[i].x, -det[i].y}));
    else
      t[e] *= grad[i] * det[i];
  }
}

template <class T>
__global__ void keep_triangle_kernel(T* t, int64_t batch, int rows, int cols, bool upper, bool keep_diagonal) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * rows * cols;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int y = static_cast<int>(e / cols % rows), x = static_cast<int>(e % cols);
    if ((upper ? y > x : y < x) || (!keep_diagonal && y == x)) t[e] = T{};
  }
}

template <class T>
__global__ void merge_kernel(T* lower, const T* __restrict__ upper, int64_t batch, int rows, int cols) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * rows * cols;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int y = static_cast<int>(e / cols % rows), x = static_cast<int>(e % cols);
    if (y <= x) lower[e] = upper[e];
  }
}

}  // namespace

void matmul_adjoint(const Tensor& out, const Tensor& a, bool adjoint_a, const Tensor& b, bool adjoint_b, float alpha) {
  const int64_t batch = out.size(0);
  const int m = static_cast<int>(out.size(1)), n = static_cast<int>(out.size(2));
  const int k = static_cast<int>(adjoint_a ? a.size(1) : a.size(2));
  if (out.numel() == 0) return;
  cublasHandle_t h = cublas_handle();
  KILN_CHECK(cublasSetStream(h, current_stream()) == CUBLAS_STATUS_SUCCESS, "matmul_adjoint: cublasSetStream failed");
  // Row-major memory is the column-major transpose: out^T = op(b)^T op(a)^T, and
  // op(x)^T is the memory's matrix itself (no op) or its conjugate transpose (op C).
  const cublasOperation_t opa = adjoint_a ? CUBLAS_OP_C : CUBLAS_OP_N, opb = adjoint_b ? CUBLAS_OP_C : CUBLAS_OP_N;
  const int lda = static_cast<int>(a.size(2)), ldb = static_cast<int>(b.size(2));
  const long long sa = a.size(1) * a.size(2), sb = b.size(1) * b.size(2), so = int64_t{m} * n;
  cublasStatus_t st;
  if (a.dtype() == DType::Complex64) {
    const cuComplex al = {alpha, 0.0f}, zero = {0.0f, 0.0f};
    st = cublasCgemmStridedBatched(h, opb, opa, n, m, k, &al, static_cast<const cuComplex*>(b.data_ptr()), ldb, sb,
                                   static_cast<const cuComplex*>(a.data_ptr()), lda, sa, &zero,
                                   static_cast<cuComplex*>(out.data_ptr()), n, so, static_cast<int>(batch));
  } else {
    const float zero = 0.0f;
    st = cublasSgemmStridedBatched(h, opb, opa, n, m, k, &alpha, b.data<float>(), ldb, sb, a.data<float>(), lda, sa,
                                   &zero, out.data<float>(), n, so, static_cast<int>(batch));
  }
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, "matmul_adjoint: cuBLAS error ", cublasGetStatusName(st));
}

void scale_by_grad_conj_det(const Tensor& t, const Tensor& grad, const Tensor& det) {
  const int64_t batch = t.size(0), elems = t.size(1) * t.size(2);
  if (t.numel() == 0) return;
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(t.numel(), 256), 256, 0, current_stream()>>>(
        static_cast<T*>(t.data_ptr()), static_cast<const T*>(grad.data_ptr()), static_cast<const T*>(det.data_ptr()),
        batch, elems);
  });
  KILN_CUDA_CHECK_LAUNCH();
}

void keep_triangle(const Tensor& t, bool upper, bool keep_diagonal) {
  if (t.numel() == 0) return;
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    keep_triangle_kernel<T><<<grid_for(t.numel(), 256), 256, 0, current_stream()>>>(
        static_cast<T*>(t.data_ptr()), t.size(0), static_cast<int>(t.size(1)), static_cast<int>(t.size(2)), upper,
        keep_diagonal);
  });
  KILN_CUDA_CHECK_LAUNCH();
}

void merge_triangles(const Tensor& lower, const Tensor& upper) {
  if (lower.numel() == 0) return;
  by_dtype(lower, [&](auto tag) {
    using T = decltype(tag);
    merge_kernel<T><<<grid_for(lower.numel(), 256), 256, 0, current_stream()>>>(
        static_cast<T*>(lower.data_ptr()), static_cast<const T*>(upper.data_ptr()), lower.size(0),
        static_cast<int>(lower.size(1)), static_cast<int>(lower.size(2)));
  });
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda_backend
