// What the cuSOLVER-backed linear algebra shares (linalg_solver.cu: LU, solves,
// determinants; linalg_solver_qr_svd.cu: QR, SVD, least squares, pinv): the handles
// on the current stream, status checks, the float32 and complex64 routines under
// one overloaded name each, and scratch from kiln's allocator.
#pragma once

#include <cuComplex.h>
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/common.h"
#include "cuda/cublas_handle.h"
#include "kiln/tensor.h"

namespace kiln::cuda_backend {

inline void check_solver(cusolverStatus_t st, const char* what) {
  KILN_CHECK(st == CUSOLVER_STATUS_SUCCESS, "cuSOLVER error ", static_cast<int>(st), " in ", what);
}

inline cusolverDnHandle_t solver() {
  cusolverDnHandle_t h = per_device_handle<cusolverDnHandle_t>(
      [](cusolverDnHandle_t* p) { check_solver(cusolverDnCreate(p), "cusolverDnCreate"); });
  check_solver(cusolverDnSetStream(h, current_stream()), "cusolverDnSetStream");
  return h;
}

inline int as_int(const char* op, int64_t v) {
  KILN_CHECK(v >= 0 && v < INT32_MAX, op, ": size ", v, " is beyond cuSOLVER's 32-bit sizes");
  return static_cast<int>(v);
}

// The single and complex entry points of cuSOLVER, under one name each.
inline cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgetrf_bufferSize(h, m, n, a, m, lw);
}
inline cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, cuComplex* a, int* lw) {
  return cusolverDnCgetrf_bufferSize(h, m, n, a, m, lw);
}
inline cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, float* a, float* w, int* piv, int* info) {
  return cusolverDnSgetrf(h, m, n, a, m, w, piv, info);
}
inline cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, cuComplex* a, cuComplex* w, int* piv, int* info) {
  return cusolverDnCgetrf(h, m, n, a, m, w, piv, info);
}
inline cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const float* a, const int* piv,
                       float* b, int* info) {
  return cusolverDnSgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}
inline cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const cuComplex* a,
                       const int* piv, cuComplex* b, int* info) {
  return cusolverDnCgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}
inline cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgeqrf_bufferSize(h, m, n, a, m, lw);
}
inline cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, cuComplex* a, int* lw) {
  return cusolverDnCgeqrf_bufferSize(h, m, n, a, m, lw);
}
inline cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float* a, float* tau, float* w, int lw, int* info) {
  return cusolverDnSgeqrf(h, m, n, a, m, tau, w, lw, info);
}
inline cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, cuComplex* a, cuComplex* tau, cuComplex* w, int lw,
                       int* info) {
  return cusolverDnCgeqrf(h, m, n, a, m, tau, w, lw, info);
}
inline cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const float* a, const float* tau, int* lw) {
  return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
inline cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const cuComplex* a, const cuComplex* tau,
                            int* lw) {
  return cusolverDnCungqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
inline cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float* a, const float* tau, float* w, int lw,
                       int* info) {
  return cusolverDnSorgqr(h, m, n, k, a, m, tau, w, lw, info);
}
inline cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, cuComplex* a, const cuComplex* tau, cuComplex* w,
                       int lw, int* info) {
  return cusolverDnCungqr(h, m, n, k, a, m, tau, w, lw, info);
}
inline cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, float*, int* lw) {
  return cusolverDnSgesvd_bufferSize(h, m, n, lw);
}
inline cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, cuComplex*, int* lw) {
  return cusolverDnCgesvd_bufferSize(h, m, n, lw);
}
inline cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char job, int m, int n, float* a, float* s, float* u, int ldu,
                       float* vt, int ldvt, float* w, int lw, float* rwork, int* info) {
  return cusolverDnSgesvd(h, job, job, m, n, a, m, s, u, ldu, vt, ldvt, w, lw, rwork, info);
}
inline cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char job, int m, int n, cuComplex* a, float* s, cuComplex* u,
                       int ldu, cuComplex* vt, int ldvt, cuComplex* w, int lw, float* rwork, int* info) {
  return cusolverDnCgesvd(h, job, job, m, n, a, m, s, u, ldu, vt, ldvt, w, lw, rwork, info);
}

inline cusolverStatus_t ormqr_size(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const float* a, int lda,
                            const float* tau, const float* c, int ldc, int* lw) {
  return cusolverDnSormqr_bufferSize(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, lw);
}
inline cusolverStatus_t ormqr_size(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const cuComplex* a,
                            int lda, const cuComplex* tau, const cuComplex* c, int ldc, int* lw) {
  return cusolverDnCunmqr_bufferSize(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, lw);
}
inline cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const float* a, int lda,
                       const float* tau, float* c, int ldc, float* w, int lw, int* info) {
  return cusolverDnSormqr(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, w, lw, info);
}
inline cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const cuComplex* a, int lda,
                       const cuComplex* tau, cuComplex* c, int ldc, cuComplex* w, int lw, int* info) {
  return cusolverDnCunmqr(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, w, lw, info);
}
// column-major triangular solve in place on b (m x n, ld ldb), alpha 1; a cuBLAS
// failure throws, naming op
inline void trsm(const char* op, cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t fill, cublasOperation_t trans,
          cublasDiagType_t diag, int m, int n, const float* a, int lda, float* b, int ldb) {
  const float one = 1.0f;
  const cublasStatus_t st = cublasStrsm(h, side, fill, trans, diag, m, n, &one, a, lda, b, ldb);
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cuBLAS error ", cublasGetStatusName(st), " in trsm");
}
inline void trsm(const char* op, cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t fill, cublasOperation_t trans,
          cublasDiagType_t diag, int m, int n, const cuComplex* a, int lda, cuComplex* b, int ldb) {
  const cuComplex one = {1.0f, 0.0f};
  const cublasStatus_t st = cublasCtrsm(h, side, fill, trans, diag, m, n, &one, a, lda, b, ldb);
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cuBLAS error ", cublasGetStatusName(st), " in trsm");
}

// the handle on the current stream
inline cublasHandle_t blas(const char* op) {
  cublasHandle_t h = cublas_handle();
  KILN_CHECK(cublasSetStream(h, current_stream()) == CUBLAS_STATUS_SUCCESS, op, ": cublasSetStream failed");
  return h;
}

inline cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, const float* a,
                             const float* s, const float* u, const float* v, int* lw, gesvdjInfo_t p) {
  return cusolverDnSgesvdj_bufferSize(h, job, econ, m, n, a, m, s, u, m, v, n, lw, p);
}
inline cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, const cuComplex* a,
                             const float* s, const cuComplex* u, const cuComplex* v, int* lw, gesvdjInfo_t p) {
  return cusolverDnCgesvdj_bufferSize(h, job, econ, m, n, a, m, s, u, m, v, n, lw, p);
}
inline cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, float* a, float* s,
                        float* u, float* v, float* w, int lw, int* info, gesvdjInfo_t p) {
  return cusolverDnSgesvdj(h, job, econ, m, n, a, m, s, u, m, v, n, w, lw, info, p);
}
inline cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, cuComplex* a, float* s,
                        cuComplex* u, cuComplex* v, cuComplex* w, int lw, int* info, gesvdjInfo_t p) {
  return cusolverDnCgesvdj(h, job, econ, m, n, a, m, s, u, m, v, n, w, lw, info, p);
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// Scratch of `elems` elements of T from kiln's allocator (stream-ordered reuse).
template <class T>
Tensor workspace(int elems, Device device) {
  return Tensor::empty({static_cast<int64_t>(std::max(elems, 1)) * static_cast<int64_t>(sizeof(T))}, DType::UInt8,
                       device);
}

// The column-major copy of a row-major batch [b, rows, cols]: [b, cols, rows] contiguous.
inline Tensor column_major(const Tensor& a) { return a.transpose(1, 2).contiguous(); }

}  // namespace kiln::cuda_backend
