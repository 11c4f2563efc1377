// CUDA LU, solves, determinants, QR and SVD through cuSOLVER, with the few small
// kernels around the library calls (determinants from the factors, R out of
// geqrf's column-major result, conjugation, the power-of-two scaling before SVD).
#include <cuComplex.h>
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "cuda/block_reduce.cuh"
#include "cuda/common.h"
#include "cuda/cublas_handle.h"
#include "cuda/linalg_backward.h"
#include "cuda/linalg_small.h"
#include "cuda/linalg_solver.h"
#include "kiln/ops.h"

namespace kiln::cuda_backend {

namespace {

void check_solver(cusolverStatus_t st, const char* what) {
  KILN_CHECK(st == CUSOLVER_STATUS_SUCCESS, "cuSOLVER error ", static_cast<int>(st), " in ", what);
}

cusolverDnHandle_t solver() {
  cusolverDnHandle_t h = per_device_handle<cusolverDnHandle_t>(
      [](cusolverDnHandle_t* p) { check_solver(cusolverDnCreate(p), "cusolverDnCreate"); });
  check_solver(cusolverDnSetStream(h, current_stream()), "cusolverDnSetStream");
  return h;
}

int as_int(const char* op, int64_t v) {
  KILN_CHECK(v >= 0 && v < INT32_MAX, op, ": size ", v, " is beyond cuSOLVER's 32-bit sizes");
  return static_cast<int>(v);
}

// ---- the single and complex entry points under one name each ----
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgetrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, cuComplex* a, int* lw) {
  return cusolverDnCgetrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, float* a, float* w, int* piv, int* info) {
  return cusolverDnSgetrf(h, m, n, a, m, w, piv, info);
}
cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, cuComplex* a, cuComplex* w, int* piv, int* info) {
  return cusolverDnCgetrf(h, m, n, a, m, w, piv, info);
}
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const float* a, const int* piv,
                       float* b, int* info) {
  return cusolverDnSgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const cuComplex* a,
                       const int* piv, cuComplex* b, int* info) {
  return cusolverDnCgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}
cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgeqrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, cuComplex* a, int* lw) {
  return cusolverDnCgeqrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float* a, float* tau, float* w, int lw, int* info) {
  return cusolverDnSgeqrf(h, m, n, a, m, tau, w, lw, info);
}
cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, cuComplex* a, cuComplex* tau, cuComplex* w, int lw,
                       int* info) {
  return cusolverDnCgeqrf(h, m, n, a, m, tau, w, lw, info);
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const float* a, const float* tau, int* lw) {
  return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const cuComplex* a, const cuComplex* tau,
                            int* lw) {
  return cusolverDnCungqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float* a, const float* tau, float* w, int lw,
                       int* info) {
  return cusolverDnSorgqr(h, m, n, k, a, m, tau, w, lw, info);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, cuComplex* a, const cuComplex* tau, cuComplex* w,
                       int lw, int* info) {
  return cusolverDnCungqr(h, m, n, k, a, m, tau, w, lw, info);
}
cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, float*, int* lw) {
  return cusolverDnSgesvd_bufferSize(h, m, n, lw);
}
cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, cuComplex*, int* lw) {
  return cusolverDnCgesvd_bufferSize(h, m, n, lw);
}
cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char job, int m, int n, float* a, float* s, float* u, int ldu,
                       float* vt, int ldvt, float* w, int lw, float* rwork, int* info) {
  return cusolverDnSgesvd(h, job, job, m, n, a, m, s, u, ldu, vt, ldvt, w, lw, rwork, info);
}
cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char job, int m, int n, cuComplex* a, float* s, cuComplex* u,
                       int ldu, cuComplex* vt, int ldvt, cuComplex* w, int lw, float* rwork, int* info) {
  return cusolverDnCgesvd(h, job, job, m, n, a, m, s, u, ldu, vt, ldvt, w, lw, rwork, info);
}

cusolverStatus_t ormqr_size(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const float* a, int lda,
                            const float* tau, const float* c, int ldc, int* lw) {
  return cusolverDnSormqr_bufferSize(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, lw);
}
cusolverStatus_t ormqr_size(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const cuComplex* a,
                            int lda, const cuComplex* tau, const cuComplex* c, int ldc, int* lw) {
  return cusolverDnCunmqr_bufferSize(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, lw);
}
cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const float* a, int lda,
                       const float* tau, float* c, int ldc, float* w, int lw, int* info) {
  return cusolverDnSormqr(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, w, lw, info);
}
cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasOperation_t op, int m, int n, int k, const cuComplex* a, int lda,
                       const cuComplex* tau, cuComplex* c, int ldc, cuComplex* w, int lw, int* info) {
  return cusolverDnCunmqr(h, CUBLAS_SIDE_LEFT, op, m, n, k, a, lda, tau, c, ldc, w, lw, info);
}
// column-major triangular solve in place on b (m x n, ld ldb), alpha 1; a cuBLAS
// failure throws, naming op
void trsm(const char* op, cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t fill, cublasOperation_t trans,
          cublasDiagType_t diag, int m, int n, const float* a, int lda, float* b, int ldb) {
  const float one = 1.0f;
  const cublasStatus_t st = cublasStrsm(h, side, fill, trans, diag, m, n, &one, a, lda, b, ldb);
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cuBLAS error ", cublasGetStatusName(st), " in trsm");
}
void trsm(const char* op, cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t fill, cublasOperation_t trans,
          cublasDiagType_t diag, int m, int n, const cuComplex* a, int lda, cuComplex* b, int ldb) {
  const cuComplex one = {1.0f, 0.0f};
  const cublasStatus_t st = cublasCtrsm(h, side, fill, trans, diag, m, n, &one, a, lda, b, ldb);
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cuBLAS error ", cublasGetStatusName(st), " in trsm");
}

// the handle on the current stream
cublasHandle_t blas(const char* op) {
  cublasHandle_t h = cublas_handle();
  KILN_CHECK(cublasSetStream(h, current_stream()) == CUBLAS_STATUS_SUCCESS, op, ": cublasSetStream failed");
  return h;
}

cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, const float* a,
                             const float* s, const float* u, const float* v, int* lw, gesvdjInfo_t p) {
  return cusolverDnSgesvdj_bufferSize(h, job, econ, m, n, a, m, s, u, m, v, n, lw, p);
}
cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, const cuComplex* a,
                             const float* s, const cuComplex* u, const cuComplex* v, int* lw, gesvdjInfo_t p) {
  return cusolverDnCgesvdj_bufferSize(h, job, econ, m, n, a, m, s, u, m, v, n, lw, p);
}
cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, float* a, float* s,
                        float* u, float* v, float* w, int lw, int* info, gesvdjInfo_t p) {
  return cusolverDnSgesvdj(h, job, econ, m, n, a, m, s, u, m, v, n, w, lw, info, p);
}
cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t job, int econ, int m, int n, cuComplex* a, float* s,
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
Tensor column_major(const Tensor& a) { return a.transpose(1, 2).contiguous(); }

// ---- kernels ----
__device__ inline float2 cmul(float2 a, float2 b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }

__global__ void conjugate_kernel(float2* z, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    z[i].y = -z[i].y;
}

}  // namespace

void conjugate_in_place(const Tensor& z) {
  if (z.dtype() != DType::Complex64 || z.numel() == 0) return;
  conjugate_kernel<<<grid_for(z.numel(), 256), 256, 0, current_stream()>>>(ptr<float2>(z), z.numel());
  KILN_CUDA_CHECK_LAUNCH();
}

namespace {

constexpr int kDetWarps = 4;

// A warp per matrix: the product of U's diagonal (or the sum of its log-magnitudes
// and the product of its phases) and the parity of the row swaps, reduced by shuffles.
template <class T>
__global__ void __launch_bounds__(kDetWarps * 32)
    lu_determinants_kernel(const T* __restrict__ lu, const int32_t* __restrict__ piv, int64_t batch, int n,
                           T* __restrict__ det, T* __restrict__ sign, float* __restrict__ logabs) {
  constexpr bool kComplex = std::is_same_v<T, float2>;
  const int64_t mat = static_cast<int64_t>(blockIdx.x) * kDetWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (mat >= batch) return;
  const T* a = lu + mat * n * n;
  float re = 1.0f, im = 0.0f, log_sum = 0.0f;  // product (of the diagonal, or of its phases)
  int swaps = 0;
  for (int i = lane; i < n; i += 32) {
    swaps += piv[mat * n + i] != i + 1;
    const T d = a[static_cast<int64_t>(i) * (n + 1)];
    float dr, di = 0.0f;
    if constexpr (kComplex) {
      dr = d.x;
      di = d.y;
    } else {
      dr = d;
    }
    if (logabs) {
      const float mag = kComplex ? hypotf(dr, di) : fabsf(dr);
      log_sum += logf(mag);  // -inf for a zero pivot
      dr = mag > 0.0f ? dr / mag : 0.0f;
      di = mag > 0.0f ? di / mag : 0.0f;
    }
    const float2 p = cmul({re, im}, {dr, di});
    re = p.x;
    im = p.y;
  }
  for (int off = 16; off > 0; off /= 2) {
    const float2 o = {__shfl_xor_sync(0xffffffffu, re, off), __shfl_xor_sync(0xffffffffu, im, off)};
    const float2 p = cmul({re, im}, o);
    re = p.x;
    im = p.y;
    swaps += __shfl_xor_sync(0xffffffffu, swaps, off);
    log_sum += __shfl_xor_sync(0xffffffffu, log_sum, off);
  }
  if (lane != 0) return;
  if (swaps % 2) {
    re = -re;
    im = -im;
  }
  T v;
  if constexpr (kComplex)
    v = {re, im};
  else
    v = re;
  if (logabs) {
    sign[mat] = v;
    logabs[mat] = log_sum;
  } else {
    det[mat] = v;
  }
}

// R [b, rows_r, n] row-major from geqrf's column-major [b, n, m] result: its upper
// triangle, zeros below.
template <class T>
__global__ void upper_triangle_kernel(const T* __restrict__ cm, T* __restrict__ r, int64_t batch, int m, int n,
                                      int rows_r) {
  const int64_t total = batch * rows_r * n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mat = e / (static_cast<int64_t>(rows_r) * n);
    const int i = static_cast<int>(e / n % rows_r), j = static_cast<int>(e % n);
    r[e] = i <= j ? cm[mat * m * n + static_cast<int64_t>(j) * m + i] : T{};
  }
}

constexpr int kScaleThreads = 256;

// A block per matrix: scales it by 2^-e, with 2^e the power of two at or below its
// largest |entry| (exact in binary), and keeps 2^e in factor; zero and non-finite
// matrices keep the factor 1.
template <class T>
__global__ void __launch_bounds__(kScaleThreads) scale_by_power_of_two_kernel(T* a, int64_t elems, float* factor) {
  constexpr bool kComplex = std::is_same_v<T, float2>;
  T* x = a + blockIdx.x * elems;
  float mx = 0.0f;
  for (int64_t i = threadIdx.x; i < elems; i += kScaleThreads) {
    if constexpr (kComplex)
      mx = fmaxf(mx, fmaxf(fabsf(x[i].x), fabsf(x[i].y)));
    else
      mx = fmaxf(mx, fabsf(x[i]));
  }
  __shared__ float warp_max[kScaleThreads / 32];
  mx = block_reduce(mx, MaxOp{}, warp_max);
  const int e = mx > 0.0f && isfinite(mx) ? ilogbf(mx) : 0;
  if (threadIdx.x == 0) factor[blockIdx.x] = ldexpf(1.0f, e);
  if (e == 0) return;
  for (int64_t i = threadIdx.x; i < elems; i += kScaleThreads) {
    if constexpr (kComplex)
      x[i] = {ldexpf(x[i].x, -e), ldexpf(x[i].y, -e)};
    else
      x[i] = ldexpf(x[i], -e);
  }
}

__global__ void rescale_rows_kernel(float* s, const float* factor, int64_t batch, int k) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * k;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    s[e] *= factor[e / k];
}

// residual[mat, j] = sum over rows n..m-1 of |x[mat][j][row]|^2 (x column-major m x k
// per matrix): the squared residual of a least-squares solve, left below R by ormqr.
// A warp per (matrix, column).
template <class T>
__global__ void tail_norms_kernel(const T* __restrict__ x, float* __restrict__ residual, int64_t columns, int m,
                                  int n) {
  const int64_t col = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (col >= columns) return;
  const T* c = x + col * m;
  float acc = 0.0f;
  for (int r = n + lane; r < m; r += 32) {
    if constexpr (std::is_same_v<T, float2>)
      acc += c[r].x * c[r].x + c[r].y * c[r].y;
    else
      acc += c[r] * c[r];
  }
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) residual[col] = acc;
}

// out = the rows (by_rows) or columns of in [b, rows, cols] moved by perm [b, n]:
// gathered (out[i] = in[perm[i]]) or scattered (out[perm[i]] = in[i]).
template <class T>
__global__ void permute_kernel(const T* __restrict__ in, T* __restrict__ out, const int32_t* __restrict__ perm,
                               int64_t batch, int rows, int cols, bool by_rows, bool scatter) {
  const int n = by_rows ? rows : cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * rows * cols;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mat = e / (int64_t{rows} * cols);
    const int i = static_cast<int>(e / cols % rows), j = static_cast<int>(e % cols);
    const int idx = by_rows ? i : j, moved = perm[mat * n + idx];
    const int ri = by_rows ? moved : i, rj = by_rows ? j : moved;
    const int64_t base = mat * rows * cols, there = base + int64_t{ri} * cols + rj;
    if (scatter)
      out[there] = in[e];
    else
      out[e] = in[there];
  }
}

// pinv's middle factor: column j of each u [b, m, k] times 1/s_j where s_j exceeds
// max(atol, rtol * s_0) (s descending), else zeroed.
template <class T>
__global__ void scale_by_pseudo_inverse_kernel(T* u, const float* __restrict__ s, int64_t batch, int m, int k,
                                               float atol, float rtol) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * m * k;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mat = e / (int64_t{m} * k);
    const float* sm = s + mat * k;
    const float sv = sm[e % k], tol = fmaxf(atol, rtol * sm[0]);
    const float f = sv > tol ? 1.0f / sv : 0.0f;
    if constexpr (std::is_same_v<T, float2>)
      u[e] = {u[e].x * f, u[e].y * f};
    else
      u[e] *= f;
  }
}

// LAPACK's row swaps, applied in order to the identity: row i of P A is row perm[i]
// of A. A thread per matrix; perm [b, m] is scratch.
__global__ void pivots_to_permutation_kernel(const int32_t* __restrict__ piv, int32_t* __restrict__ perm,
                                             int64_t batch, int m, int k) {
  const int64_t mat = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (mat >= batch) return;
  int32_t* p = perm + mat * m;
  for (int i = 0; i < m; ++i) p[i] = i;
  for (int i = 0; i < k; ++i) {
    const int j = piv[mat * k + i] - 1;
    const int32_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

// The same permutation, a block per matrix (n up to kBlockPermMax): the pivots and the
// permutation in shared memory, one thread taking the swaps in order (each touches
// positions at or past its own, so they cannot be spread), the rest loading and storing.
constexpr int kBlockPermMax = 6144;
__global__ void __launch_bounds__(256) block_pivots_to_permutation_kernel(const int32_t* __restrict__ piv,
                                                                          int32_t* __restrict__ perm, int n) {
  __shared__ int32_t p[kBlockPermMax], swaps[kBlockPermMax];
  const int64_t mat = blockIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = i, swaps[i] = piv[mat * n + i] - 1;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < n; ++i) {
      const int j = swaps[i], t = p[i];
      p[i] = p[j];
      p[j] = t;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) perm[mat * n + i] = p[i];
}

// P, L, U of A = P L U, a thread per entry of L and of U; P has its one per column.
template <class T>
__global__ void lu_unpack_kernel(const T* __restrict__ lu, const int32_t* __restrict__ perm, T* __restrict__ P,
                                 T* __restrict__ L, T* __restrict__ U, int64_t batch, int m, int n) {
  const int k = m < n ? m : n;
  const int64_t l_elems = int64_t{m} * k, u_elems = int64_t{k} * n, per = l_elems + u_elems + m;
  T one{};
  if constexpr (std::is_same_v<T, float2>)
    one.x = 1.0f;
  else
    one = 1.0f;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * per;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mat = e / per, r = e % per;
    const T* a = lu + mat * m * n;
    if (r < l_elems) {
      const int i = static_cast<int>(r / k), j = static_cast<int>(r % k);
      L[mat * l_elems + r] = i > j ? a[int64_t{i} * n + j] : i == j ? one : T{};
    } else if (r < l_elems + u_elems) {
      const int64_t q = r - l_elems;
      const int i = static_cast<int>(q / n), j = static_cast<int>(q % n);
      U[mat * u_elems + q] = i <= j ? a[int64_t{i} * n + j] : T{};
    } else {
      const int i = static_cast<int>(r - l_elems - u_elems);  // column i of P: a one in row perm[i]
      P[mat * m * m + int64_t{perm[mat * m + i]} * m + i] = one;
    }
  }
}

template <class T>
__global__ void set_identity_kernel(T* t, int64_t batch, int rows, int cols) {
  const int d = rows < cols ? rows : cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch * d;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t mat = e / d;
    const int i = static_cast<int>(e % d);
    T one{};
    if constexpr (std::is_same_v<T, float2>)
      one.x = 1.0f;
    else
      one = 1.0f;
    t[mat * rows * cols + int64_t{i} * cols + i] = one;
  }
}

// ---- the typed bodies ----
template <class T>
void lu_factor_typed(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  constexpr const char* op = "linalg.lu_factor_ex";
  const int64_t batch = a.size(0);
  const int m = as_int(op, a.size(1)), n = as_int(op, a.size(2)), k = std::min(m, n);
  Tensor cm = column_major(a);
  cusolverDnHandle_t h = solver();
  int lwork = 0;
  check_solver(getrf_size(h, m, n, ptr<T>(cm), &lwork), "getrf_bufferSize");
  Tensor work = workspace<T>(lwork, a.device());
  for (int64_t i = 0; i < batch; ++i)
    check_solver(getrf(h, m, n, ptr<T>(cm) + i * m * n, ptr<T>(work), pivots.data<int32_t>() + i * k,
                       info.data<int32_t>() + i),
                 "getrf");
  lu.copy_(cm.transpose(1, 2));
}

template <class T>
Tensor lu_solve_by_getrs(const Tensor& lu, const Tensor& pivots, const Tensor& rhs, bool left, bool adjoint) {
  constexpr const char* op = "linalg.lu_solve";
  constexpr bool kComplex = std::is_same_v<T, cuComplex>;
  const int64_t batch = lu.size(0);
  const int n = as_int(op, lu.size(1));
  Tensor lu_cm = column_major(lu);
  // The column-major right-hand side and the op on A that getrs applies:
  //   A X = B, A^H X = B: B's column-major copy;
  //   X A = B:   A^T X^T = B^T, and B's row-major memory is B^T column-major;
  //   X A^H = B: A X^H = B^H, and conj(B)'s row-major memory is B^H column-major.
  Tensor x;
  cublasOperation_t trans = CUBLAS_OP_N;
  if (left) {
    x = column_major(rhs);
    if (adjoint) trans = kComplex ? CUBLAS_OP_C : CUBLAS_OP_T;
  } else {
    x = rhs.clone();
    if (!adjoint)
      trans = CUBLAS_OP_T;
    else if (kComplex)
      conjugate_in_place(x);
  }
  const int nrhs = as_int(op, x.size(1));
  const int64_t x_stride = x.size(1) * x.size(2);
  Tensor info = Tensor::empty({1}, DType::Int32, lu.device());
  cusolverDnHandle_t h = solver();
  for (int64_t i = 0; i < batch; ++i)
    check_solver(getrs(h, trans, n, nrhs, ptr<T>(lu_cm) + i * n * n, pivots.data<int32_t>() + i * n,
                       ptr<T>(x) + i * x_stride, info.data<int32_t>()),
                 "getrs");
  if (left) return column_major(x);
  if (adjoint && kComplex) conjugate_in_place(x);
  return x;
}

// lu_solve as torch's does for one large matrix: the pivots made a permutation once,
// B's rows (or columns) moved by it in one pass, then the two triangles through
// trsm from the left, which is what getrs does but for its row-interchange kernel
// (laswp): on the H200, 2048 x 2048 with 64 columns, laswp alone took 430 of
// getrs's 1200 us. lu's row-major memory is, column-major, V = (L\U)^T: V's upper
// triangle is L^T, its lower U^T, so no factor is copied; a row-major right-hand
// side is B^T column-major. With P^T B the gathered rows of B:
//   A X = B:    X = U^-1 L^-1 P^T B     (B column-major; op T on V's triangles)
//   A^H X = B:  X = P conj(V_up^-1 V_lo^-1 conj(B))
//   X A = B:    X^T = P V_up^-1 V_lo^-1 B^T      (B's own memory)
//   X A^H = B:  conj(X)^T = U^-1 L^-1 P^T B^H    (conj(B)'s memory)
// float32 systems up to 64 from the left take the small triangular kernels instead.
template <class T>
Tensor lu_solve_typed(const Tensor& lu, const Tensor& pivots, const Tensor& rhs, bool left, bool adjoint) {
  constexpr const char* op = "linalg.lu_solve";
  constexpr bool kComplex = std::is_same_v<T, cuComplex>;
  using Elem = std::conditional_t<kComplex, float2, float>;
  const int64_t batch = lu.size(0);
  const int n = as_int(op, lu.size(1)), rows = as_int(op, rhs.size(1)), cols = as_int(op, rhs.size(2));
  if (n > kBlockPermMax) return lu_solve_by_getrs<T>(lu, pivots, rhs, left, adjoint);
  cudaStream_t stream = current_stream();
  Tensor perm = Tensor::empty({batch, n}, DType::Int32, lu.device());
  block_pivots_to_permutation_kernel<<<static_cast<unsigned>(batch), 256, 0, stream>>>(pivots.data<int32_t>(),
                                                                                       perm.data<int32_t>(), n);
  KILN_CUDA_CHECK_LAUNCH();
  // rows (left) or columns of a row-major [b, rows, cols] moved by perm
  const auto permute = [&](const Tensor& in, bool scatter) {
    Tensor out = Tensor::empty(in.shape(), in.dtype(), in.device());
    permute_kernel<Elem><<<grid_for(in.numel(), 256), 256, 0, stream>>>(ptr<Elem>(in), ptr<Elem>(out),
                                                                        perm.data<int32_t>(), batch, rows, cols, left,
                                                                        scatter);
    KILN_CUDA_CHECK_LAUNCH();
    return out;
  };
  if (left && !adjoint && !kComplex && n <= 64) {
    Tensor y = permute(rhs, false), z = Tensor::empty(rhs.shape(), rhs.dtype(), rhs.device());
    small_triangular_solve(lu, y, z, /*upper=*/false, /*unit=*/true);
    small_triangular_solve(lu, z, y, /*upper=*/true, /*unit=*/false);
    return y;
  }
  // the column-major right-hand side: n rows, nrhs columns per matrix
  const bool gather_first = left != adjoint;
  Tensor moved = gather_first ? permute(rhs, false) : rhs;
  Tensor x = left ? column_major(moved) : moved.clone();
  const bool conj = kComplex && adjoint;
  if (conj) conjugate_in_place(x);
  const int nrhs = left ? cols : rows;
  cublasHandle_t h = blas(op);
  // op T on V for A X = B and X A^H = B (L and U themselves), op N for the other two
  const cublasOperation_t trans = gather_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto solve_with = [&](bool upper, bool unit) {
    for (int64_t i = 0; i < batch; ++i)
      trsm(op, h, CUBLAS_SIDE_LEFT, upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER, trans,
           unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT, n, nrhs, ptr<T>(lu) + i * int64_t{n} * n, n,
           ptr<T>(x) + i * int64_t{n} * nrhs, n);
  };
  if (gather_first) {  // L (V's upper, transposed), then U
    solve_with(/*upper=*/true, /*unit=*/true);
    solve_with(/*upper=*/false, /*unit=*/false);
  } else {  // U^T (V's lower), then L^T
    solve_with(/*upper=*/false, /*unit=*/false);
    solve_with(/*upper=*/true, /*unit=*/true);
  }
  if (conj) conjugate_in_place(x);
  Tensor out = left ? column_major(x) : x;
  return gather_first ? out : permute(out, true);
}

template <class T>
void qr_typed(const Tensor& a, const Tensor& q, const Tensor& r) {
  constexpr const char* op = "linalg.qr";
  const int64_t batch = a.size(0);
  const int m = as_int(op, a.size(1)), n = as_int(op, a.size(2)), k = std::min(m, n);
  const int cols_q = q.defined() ? as_int(op, q.size(2)) : 0, rows_r = as_int(op, r.size(1));
  Tensor cm = column_major(a);
  Tensor tau = Tensor::empty({batch, k}, a.dtype(), a.device());
  Tensor info = Tensor::empty({1}, DType::Int32, a.device());
  cusolverDnHandle_t h = solver();
  int lwork = 0, lwork_q = 0;
  check_solver(geqrf_size(h, m, n, ptr<T>(cm), &lwork), "geqrf_bufferSize");
  // complete Q of a tall matrix: m columns, the first n of them geqrf's reflectors
  Tensor basis = cols_q > n ? zeros({batch, cols_q, m}, a.dtype(), a.device()) : cm;
  if (cols_q > 0) {
    check_solver(orgqr_size(h, m, cols_q, k, ptr<T>(basis), ptr<T>(tau), &lwork_q), "orgqr_bufferSize");
    lwork = std::max(lwork, lwork_q);
  }
  Tensor work = workspace<T>(lwork, a.device());
  for (int64_t i = 0; i < batch; ++i)
    check_solver(geqrf(h, m, n, ptr<T>(cm) + i * m * n, ptr<T>(tau) + i * k, ptr<T>(work), lwork,
                       info.data<int32_t>()),
                 "geqrf");
  const int64_t elems = batch * rows_r * n;
  upper_triangle_kernel<T><<<grid_for(elems, 256), 256, 0, current_stream()>>>(ptr<T>(cm), ptr<T>(r), batch, m, n,
                                                                                  rows_r);
  KILN_CUDA_CHECK_LAUNCH();
  if (cols_q == 0) return;
  if (cols_q > n) basis.narrow(1, 0, n).copy_(cm);
  const int64_t basis_stride = basis.size(1) * static_cast<int64_t>(m);
  for (int64_t i = 0; i < batch; ++i)
    check_solver(orgqr(h, m, cols_q, k, ptr<T>(basis) + i * basis_stride, ptr<T>(tau) + i * k, ptr<T>(work), lwork,
                       info.data<int32_t>()),
                 "orgqr");
  q.copy_(basis.narrow(1, 0, cols_q).transpose(1, 2));
}

// What both SVD drivers read off their operands: a [b, m, n]; u undefined for the
// values alone; full when u and vh are complete bases (square: reduced and full agree).
struct SvdShape {
  int64_t batch;
  int m, n, k;
  bool vectors, full;
  SvdShape(const Tensor& a, const Tensor& u, const Tensor& vh)
      : batch(a.size(0)),
        m(as_int("linalg.svd", a.size(1))),
        n(as_int("linalg.svd", a.size(2))),
        k(std::min(m, n)),
        vectors(u.defined()),
        full(vectors && u.size(2) == m && vh.size(1) == n && m != n) {}
};

// Scales each matrix of t [b, m, n] (in place) by a power of two, returned per matrix.
template <class Elem>
Tensor scale_each_by_power_of_two(const Tensor& t) {
  Tensor factor = Tensor::empty({t.size(0)}, DType::Float32, t.device());
  scale_by_power_of_two_kernel<Elem><<<static_cast<unsigned>(t.size(0)), kScaleThreads, 0, current_stream()>>>(
      ptr<Elem>(t), t.size(1) * t.size(2), factor.data<float>());
  KILN_CUDA_CHECK_LAUNCH();
  return factor;
}

template <class T>
void svd_by_gesvd(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh) {
  using Elem = std::conditional_t<std::is_same_v<T, cuComplex>, float2, float>;
  const SvdShape sh(a, u, vh);
  const int64_t batch = sh.batch;
  const int m = sh.m, n = sh.n, k = sh.k;
  const bool vectors = sh.vectors, full = sh.full;
  // gesvd wants rows >= cols: a wide A's row-major memory is the tall A^T column-major
  const bool wide = m < n;
  const int rows = wide ? n : m, cols = wide ? m : n;
  Tensor cm = wide ? a : column_major(a);
  cudaStream_t stream = current_stream();
  const Tensor factor = scale_each_by_power_of_two<Elem>(cm);  // cm's memory: [b, m, n] elements either way
  // Column-major factors of the tall matrix: U' [rows, ucols'] and V'^H [cols, cols].
  // For a wide A (A^T = U' S V'^H) A's U is (V'^H)^T and its Vh is U'^T: the
  // row-major readings of V'^H and U', so gesvd writes them straight into u and vh.
  const int ucols = full ? rows : cols;
  Tensor u_cm, vt_cm;
  if (vectors) {
    u_cm = wide ? vh : Tensor::empty({batch, ucols, rows}, a.dtype(), a.device());
    vt_cm = wide ? u : Tensor::empty({batch, cols, cols}, a.dtype(), a.device());
  }
  const signed char job = !vectors ? 'N' : full ? 'A' : 'S';
  cusolverDnHandle_t h = solver();
  int lwork = 0;
  check_solver(gesvd_size(h, rows, cols, ptr<T>(cm), &lwork), "gesvd_bufferSize");
  Tensor work = workspace<T>(lwork, a.device());
  Tensor rwork = Tensor::empty({std::max(cols - 1, 1)}, DType::Float32, a.device());
  Tensor info = Tensor::empty({1}, DType::Int32, a.device());
  for (int64_t i = 0; i < batch; ++i)
    check_solver(gesvd(h, job, rows, cols, ptr<T>(cm) + i * m * n, s.data<float>() + i * k,
                       vectors ? ptr<T>(u_cm) + i * int64_t{ucols} * rows : nullptr, rows,
                       vectors ? ptr<T>(vt_cm) + i * int64_t{cols} * cols : nullptr, cols, ptr<T>(work), lwork,
                       rwork.data<float>(), info.data<int32_t>()),
                 "gesvd");
  rescale_rows_kernel<<<grid_for(batch * k, 256), 256, 0, stream>>>(s.data<float>(), factor.data<float>(), batch, k);
  KILN_CUDA_CHECK_LAUNCH();
  if (!vectors || wide) return;
  u.copy_(u_cm.transpose(1, 2));
  vh.copy_(vt_cm.transpose(1, 2));
}

// The default driver: gesvdj (Jacobi, as torch's default on CUDA), on A's row-major
// memory read as the column-major A^T (no transposed copy). A^T = U' S V'^H gives
// A = conj(V') S U'^T: U' read row-major is Vh itself; U is V' transposed (and
// conjugated). Matrices Jacobi leaves unconverged (info > 0, read back once) are
// redone by gesvd from the untouched input.
struct JacobiParams {
  gesvdjInfo_t p = nullptr;
  JacobiParams() { check_solver(cusolverDnCreateGesvdjInfo(&p), "cusolverDnCreateGesvdjInfo"); }
  ~JacobiParams() { cusolverDnDestroyGesvdjInfo(p); }
  JacobiParams(const JacobiParams&) = delete;
  JacobiParams& operator=(const JacobiParams&) = delete;
};

template <class T>
void svd_typed(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh) {
  constexpr const char* op = "linalg.svd";
  using Elem = std::conditional_t<std::is_same_v<T, cuComplex>, float2, float>;
  const SvdShape sh(a, u, vh);
  const int64_t batch = sh.batch;
  const int m = sh.m, n = sh.n, k = sh.k;
  const bool vectors = sh.vectors, full = sh.full;
  Tensor w = a.clone();
  cudaStream_t stream = current_stream();
  const Tensor factor = scale_each_by_power_of_two<Elem>(w);
  // gesvdj's m x n is n x m here; its U' (n x ucols') lands in vh, its V' (m x vcols') in v
  const int vcols = full ? m : k, ucols_t = full ? n : k;
  Tensor v = Tensor::empty({vectors ? batch : 1, vcols, m}, a.dtype(), a.device());
  // NOVECTOR still writes U' (seen on the H200): one matrix of scratch, reused down the batch
  Tensor u_scratch = vectors ? Tensor() : Tensor::empty({ucols_t, n}, a.dtype(), a.device());
  const cusolverEigMode_t job = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const int econ = full ? 0 : 1;
  JacobiParams params;
  cusolverDnHandle_t h = solver();
  T* up = vectors ? ptr<T>(vh) : ptr<T>(u_scratch);
  T* vp = ptr<T>(v);
  int lwork = 0;
  check_solver(gesvdj_size(h, job, econ, n, m, ptr<T>(w), s.data<float>(), up, vp, &lwork, params.p),
               "gesvdj_bufferSize");
  Tensor work = workspace<T>(lwork, a.device());
  Tensor info = zeros({batch}, DType::Int32, a.device());
  const int64_t ustride = vectors ? int64_t{ucols_t} * n : 0, vstride = vectors ? int64_t{vcols} * m : 0;
  for (int64_t i = 0; i < batch; ++i)
    check_solver(gesvdj(h, job, econ, n, m, ptr<T>(w) + i * m * n, s.data<float>() + i * k, up + i * ustride,
                        vp + i * vstride, ptr<T>(work), lwork, info.data<int32_t>() + i, params.p),
                 "gesvdj");
  rescale_rows_kernel<<<grid_for(batch * k, 256), 256, 0, stream>>>(s.data<float>(), factor.data<float>(), batch, k);
  KILN_CUDA_CHECK_LAUNCH();
  if (vectors) {
    u.copy_(v.transpose(1, 2));
    if constexpr (std::is_same_v<T, cuComplex>) conjugate_in_place(u);
  }
  const Tensor info_host = info.to(kCPU);
  const int32_t* inf = info_host.data<int32_t>();
  for (int64_t i = 0; i < batch; ++i) {
    if (inf[i] == 0) continue;
    KILN_CHECK(inf[i] > 0, op, ": gesvdj reported argument ", -inf[i], " as wrong");
    const Tensor ai = a.narrow(0, i, 1).clone();
    svd_by_gesvd<T>(ai, vectors ? u.narrow(0, i, 1) : Tensor(), s.narrow(0, i, 1), vectors ? vh.narrow(0, i, 1) : Tensor());
  }
}

}  // namespace

void lu_unpack(const Tensor& lu, const Tensor& pivots, const Tensor& P, const Tensor& L, const Tensor& U) {
  const int64_t batch = lu.size(0);
  const int m = as_int("linalg.lu", lu.size(1)), n = as_int("linalg.lu", lu.size(2)), k = std::min(m, n);
  if (batch == 0) return;
  cudaStream_t stream = current_stream();
  Tensor perm = Tensor::empty({batch, m}, DType::Int32, lu.device());
  pivots_to_permutation_kernel<<<grid_all(batch, 128), 128, 0, stream>>>(pivots.data<int32_t>(),
                                                                         perm.data<int32_t>(), batch, m, k);
  KILN_CUDA_CHECK_LAUNCH();
  const int64_t work = batch * (int64_t{m} * k + int64_t{k} * n + m);
  if (lu.dtype() == DType::Complex64)
    lu_unpack_kernel<float2><<<grid_for(work, 256), 256, 0, stream>>>(
        ptr<float2>(lu), perm.data<int32_t>(), ptr<float2>(P), ptr<float2>(L), ptr<float2>(U), batch, m, n);
  else
    lu_unpack_kernel<float><<<grid_for(work, 256), 256, 0, stream>>>(
        lu.data<float>(), perm.data<int32_t>(), P.data<float>(), L.data<float>(), U.data<float>(), batch, m, n);
  KILN_CUDA_CHECK_LAUNCH();
}

void set_identity(const Tensor& t) {
  const int64_t batch = t.size(0), d = std::min(t.size(1), t.size(2));
  if (batch * d == 0) return;
  const int rows = as_int("linalg", t.size(1)), cols = as_int("linalg", t.size(2));
  if (t.dtype() == DType::Complex64)
    set_identity_kernel<float2><<<grid_for(batch * d, 256), 256, 0, current_stream()>>>(ptr<float2>(t), batch, rows,
                                                                                         cols);
  else
    set_identity_kernel<float><<<grid_for(batch * d, 256), 256, 0, current_stream()>>>(t.data<float>(), batch, rows,
                                                                                        cols);
  KILN_CUDA_CHECK_LAUNCH();
}

template <class T>
void lstsq_typed(const Tensor& a, const Tensor& x, const Tensor& residual) {
  constexpr const char* op = "linalg.lstsq";
  constexpr bool kComplex = std::is_same_v<T, cuComplex>;
  using Elem = std::conditional_t<kComplex, float2, float>;
  const int64_t batch = a.size(0);
  const int m = as_int(op, a.size(1)), n = as_int(op, a.size(2)), k = as_int(op, x.size(2));
  const int rows = std::max(m, n), p = std::min(m, n);
  const cublasOperation_t adj = kComplex ? CUBLAS_OP_C : CUBLAS_OP_T;
  // tall (m >= n): A = Q R, X = R^-1 (Q^H B)[:n]; wide: A^H = Q R, X = Q (R^-H B; 0),
  // the solution of least norm. A's row-major memory is A^T column-major, so the
  // wide case factors it, conjugated, in place of a transposed copy.
  const bool tall = m >= n;
  Tensor f = tall ? column_major(a) : a.clone();
  if (!tall && kComplex) conjugate_in_place(f);
  const int fr = tall ? m : n;  // rows of the factored column-major matrix (its leading dimension)
  Tensor bx = column_major(x);   // [b, k, rows]: column-major rows x k
  Tensor tau = Tensor::empty({batch, p}, a.dtype(), a.device());
  Tensor info = Tensor::empty({1}, DType::Int32, a.device());
  cusolverDnHandle_t h = solver();
  cublasHandle_t bh = blas(op);
  int lwork = 0, lwork_q = 0;
  check_solver(geqrf_size(h, fr, p, ptr<T>(f), &lwork), "geqrf_bufferSize");
  check_solver(ormqr_size(h, tall ? adj : CUBLAS_OP_N, rows, k, p, ptr<T>(f), fr, ptr<T>(tau), ptr<T>(bx), rows,
                          &lwork_q),
               "ormqr_bufferSize");
  Tensor work = workspace<T>(std::max(lwork, lwork_q), a.device());
  lwork = std::max(lwork, lwork_q);
  const int64_t fs = int64_t{m} * n, bs = int64_t{rows} * k;
  for (int64_t i = 0; i < batch; ++i) {
    T* fi = ptr<T>(f) + i * fs;
    T* bi = ptr<T>(bx) + i * bs;
    T* ti = ptr<T>(tau) + i * p;
    check_solver(geqrf(h, fr, p, fi, ti, ptr<T>(work), lwork, info.data<int32_t>()), "geqrf");
    if (tall) {
      check_solver(ormqr(h, adj, m, k, p, fi, m, ti, bi, rows, ptr<T>(work), lwork, info.data<int32_t>()), "ormqr");
      trsm(op, bh, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, k, fi, m, bi, rows);
    } else {
      trsm(op, bh, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, adj, CUBLAS_DIAG_NON_UNIT, m, k, fi, n, bi, rows);
      check_solver(ormqr(h, CUBLAS_OP_N, n, k, p, fi, n, ti, bi, rows, ptr<T>(work), lwork, info.data<int32_t>()),
                   "ormqr");
    }
  }
  if (tall && m > n && batch * k > 0) {
    const int64_t columns = batch * k;
    tail_norms_kernel<Elem><<<static_cast<unsigned>((columns * 32 + 255) / 256), 256, 0, current_stream()>>>(
        ptr<Elem>(bx), residual.data<float>(), columns, m, n);
    KILN_CUDA_CHECK_LAUNCH();
  }
  x.copy_(bx.transpose(1, 2));
}

void solver_triangular_solve(const Tensor& a, const Tensor& x, bool upper, bool left, bool unit) {
  constexpr const char* op = "linalg.solve_triangular";
  const int64_t batch = a.size(0);
  const int n = as_int(op, a.size(1)), rows = as_int(op, x.size(1)), cols = as_int(op, x.size(2));
  if (batch == 0 || x.numel() == 0) return;
  cublasHandle_t h = blas(op);
  // Row-major memory is the column-major transpose: A X = B reads as X^T A^T = B^T
  // (A^T from the right) and X A = B as A^T X^T = B^T; A^T's triangle is the other one.
  const cublasSideMode_t side = left ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT;
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  const cublasDiagType_t diag = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  const int cm_rows = cols, cm_cols = rows;  // x as column-major
  const int64_t a_stride = int64_t{n} * n, x_stride = int64_t{rows} * cols;
  for (int64_t i = 0; i < batch; ++i) {
    if (a.dtype() == DType::Complex64)
      trsm(op, h, side, fill, CUBLAS_OP_N, diag, cm_rows, cm_cols, ptr<cuComplex>(a) + i * a_stride, n,
           ptr<cuComplex>(x) + i * x_stride, cm_rows);
    else
      trsm(op, h, side, fill, CUBLAS_OP_N, diag, cm_rows, cm_cols, a.data<float>() + i * a_stride, n,
           x.data<float>() + i * x_stride, cm_rows);
  }
}

void solver_lu_factor(const Tensor& a, const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  if (a.dtype() == DType::Complex64)
    lu_factor_typed<cuComplex>(a, lu, pivots, info);
  else
    lu_factor_typed<float>(a, lu, pivots, info);
}

Tensor solver_lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& rhs, bool left, bool adjoint) {
  if (lu.dtype() == DType::Complex64) return lu_solve_typed<cuComplex>(lu, pivots, rhs, left, adjoint);
  return lu_solve_typed<float>(lu, pivots, rhs, left, adjoint);
}

void lu_determinants(const Tensor& lu, const Tensor& pivots, const Tensor& det, const Tensor& sign,
                     const Tensor& logabsdet) {
  const int64_t batch = lu.size(0);
  const int n = as_int("linalg.det", lu.size(1));
  if (batch == 0) return;
  const unsigned grid = static_cast<unsigned>((batch + kDetWarps - 1) / kDetWarps);
  float* logabs = logabsdet.defined() ? logabsdet.data<float>() : nullptr;
  const auto out = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
  if (lu.dtype() == DType::Complex64)
    lu_determinants_kernel<float2><<<grid, kDetWarps * 32, 0, current_stream()>>>(
        ptr<float2>(lu), pivots.data<int32_t>(), batch, n, static_cast<float2*>(out(det)),
        static_cast<float2*>(out(sign)), logabs);
  else
    lu_determinants_kernel<float><<<grid, kDetWarps * 32, 0, current_stream()>>>(
        lu.data<float>(), pivots.data<int32_t>(), batch, n, static_cast<float*>(out(det)),
        static_cast<float*>(out(sign)), logabs);
  KILN_CUDA_CHECK_LAUNCH();
}

void solver_qr(const Tensor& a, const Tensor& q, const Tensor& r) {
  if (a.dtype() == DType::Complex64)
    qr_typed<cuComplex>(a, q, r);
  else
    qr_typed<float>(a, q, r);
}

void solver_svd(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh) {
  if (a.dtype() == DType::Complex64)
    svd_typed<cuComplex>(a, u, s, vh);
  else
    svd_typed<float>(a, u, s, vh);
}

void solver_lstsq(const Tensor& a, const Tensor& x, const Tensor& residual) {
  if (a.dtype() == DType::Complex64)
    lstsq_typed<cuComplex>(a, x, residual);
  else
    lstsq_typed<float>(a, x, residual);
}

void solver_pinv(const Tensor& u, const Tensor& s, const Tensor& vh, double atol, double rtol, const Tensor& out) {
  constexpr const char* op = "linalg.pinv";
  const int64_t batch = u.size(0);
  const int m = as_int(op, u.size(1)), k = as_int(op, u.size(2)), n = as_int(op, vh.size(2));
  if (batch == 0 || out.numel() == 0) return;
  if (k == 0) {
    out.zero_();
    return;
  }
  const bool complex = u.dtype() == DType::Complex64;
  cudaStream_t stream = current_stream();
  const int64_t elems = batch * m * k;
  if (complex)
    scale_by_pseudo_inverse_kernel<float2><<<grid_for(elems, 256), 256, 0, stream>>>(
        ptr<float2>(u), s.data<float>(), batch, m, k, static_cast<float>(atol), static_cast<float>(rtol));
  else
    scale_by_pseudo_inverse_kernel<float><<<grid_for(elems, 256), 256, 0, stream>>>(
        u.data<float>(), s.data<float>(), batch, m, k, static_cast<float>(atol), static_cast<float>(rtol));
  KILN_CUDA_CHECK_LAUNCH();
  // Z = (u scaled) vh [b, m, n]
  Tensor z = Tensor::empty({batch, m, n}, u.dtype(), u.device());
  matmul_adjoint(z, u, false, vh, false, 1.0f);
  out.copy_(z.transpose(1, 2));  // pinv = Z^H
  if (complex) conjugate_in_place(out);
}

}  // namespace kiln::cuda_backend
