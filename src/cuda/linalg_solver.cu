// CUDA LU, solves and determinants through cuSOLVER and cuBLAS, with the small
// kernels around the library calls (the pivots as a permutation, P, L and U, the
// determinants from the factors, conjugation).
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "cuda/common.h"
#include "cuda/cusolver_calls.h"
#include "cuda/linalg_small.h"
#include "cuda/linalg_solver.h"
#include "kiln/ops.h"

namespace kiln::cuda_backend {

namespace {

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

}  // namespace kiln::cuda_backend
