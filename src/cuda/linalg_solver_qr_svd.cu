// CUDA QR, SVD, least squares and pinv through cuSOLVER, with the small kernels
// around the library calls (R out of geqrf's column-major result, the power-of-two
// scaling before SVD, the residuals of a least-squares solve, pinv's middle factor).
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "cuda/block_reduce.cuh"
#include "cuda/common.h"
#include "cuda/cusolver_calls.h"
#include "cuda/linalg_backward.h"
#include "cuda/linalg_solver.h"
#include "kiln/ops.h"

namespace kiln::cuda_backend {

namespace {

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

}  // namespace

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
