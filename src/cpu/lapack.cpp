// LU-family kernels through LAPACKE (row-major: it transposes into LAPACK's
// column-major for us) and CBLAS trsm, on OpenBLAS. LAPACKE's NaN scan of every
// input is off: torch lets NaN flow through a factorisation, and so do we.
#include "cpu/lapack.h"

#include <cblas.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include "core/check.h"

namespace kiln::cpu {

namespace {

using C = std::complex<float>;

// One place per element type for the LAPACK / BLAS names.
template <class T>
struct Lapack;
template <>
struct Lapack<float> {
  static lapack_int getrf(int m, int n, float* a, lapack_int* ipiv) {
    return LAPACKE_sgetrf(LAPACK_ROW_MAJOR, m, n, a, n, ipiv);
  }
  static lapack_int getrs(char trans, int n, int k, const float* a, const lapack_int* ipiv, float* b) {
    return LAPACKE_sgetrs(LAPACK_ROW_MAJOR, trans, n, k, a, n, ipiv, b, k);
  }
  static lapack_int getri(int n, float* a, const lapack_int* ipiv) {
    return LAPACKE_sgetri(LAPACK_ROW_MAJOR, n, a, n, ipiv);
  }
  static void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_DIAG diag, int m, int n, const float* a, float* b) {
    cblas_strsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, m, n, 1.0f, a, side == CblasLeft ? m : n, b, n);
  }
  static float conj(float v) { return v; }
};
template <>
struct Lapack<C> {
  static lapack_int getrf(int m, int n, C* a, lapack_int* ipiv) {
    return LAPACKE_cgetrf(LAPACK_ROW_MAJOR, m, n, a, n, ipiv);
  }
  static lapack_int getrs(char trans, int n, int k, const C* a, const lapack_int* ipiv, C* b) {
    return LAPACKE_cgetrs(LAPACK_ROW_MAJOR, trans, n, k, a, n, ipiv, b, k);
  }
  static lapack_int getri(int n, C* a, const lapack_int* ipiv) { return LAPACKE_cgetri(LAPACK_ROW_MAJOR, n, a, n, ipiv); }
  static void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_DIAG diag, int m, int n, const C* a, C* b) {
    const C one(1.0f, 0.0f);
    cblas_ctrsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, m, n, &one, a, side == CblasLeft ? m : n, b, n);
  }
  static C conj(C v) { return std::conj(v); }
};

const bool kNanCheckOff = [] {
  LAPACKE_set_nancheck(0);
  return true;
}();

// fn(i) for every matrix of the batch, returning LAPACK's info; matrices of at
// most kSmall rows run one per thread (OpenBLAS runs a single small one on one
// thread anyway), larger ones one after another with OpenBLAS's threads. No
// exception crosses the parallel region: negative infos are reported after.
constexpr int64_t kSmall = 256;
template <class F>
void for_each_matrix(const char* op, int64_t batch, int64_t rows, F fn) {
  std::vector<lapack_int> status(static_cast<size_t>(batch), 0);
  if (batch > 1 && rows <= kSmall) {
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < batch; ++i) status[i] = fn(i);
  } else {
    for (int64_t i = 0; i < batch; ++i) status[i] = fn(i);
  }
  for (int64_t i = 0; i < batch; ++i)
    KILN_CHECK(status[i] >= 0, op, ": LAPACK reported error ", status[i], " for matrix ", i,
               status[i] == LAPACK_WORK_MEMORY_ERROR || status[i] == LAPACK_TRANSPOSE_MEMORY_ERROR ? " (out of memory)"
                                                                                                   : "");
}

int as_int(int64_t v) { return static_cast<int>(v); }

template <class T>
void lu_factor_typed(const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  const int64_t B = lu.size(0), m = lu.size(1), n = lu.size(2), k = std::min(m, n);
  T* a = lu.data<T>();
  lapack_int* piv = pivots.data<lapack_int>();
  int32_t* inf = info.data<int32_t>();
  for_each_matrix("linalg.lu_factor", B, m, [&](int64_t i) {
    const lapack_int r = Lapack<T>::getrf(as_int(m), as_int(n), a + i * m * n, piv + i * k);
    inf[i] = r > 0 ? r : 0;
    return r < 0 ? r : 0;
  });
}

template <class T>
void lu_unpack_typed(const Tensor& lu, const Tensor& pivots, const Tensor& P, const Tensor& L, const Tensor& U) {
  const int64_t B = lu.size(0), m = lu.size(1), n = lu.size(2), k = std::min(m, n);
  const T* a = lu.data<T>();
  const lapack_int* piv = pivots.data<lapack_int>();
  T *p = P.data<T>(), *l = L.data<T>(), *u = U.data<T>();
  std::vector<int64_t> perm(static_cast<size_t>(m));
  for (int64_t i = 0; i < B; ++i) {
    const T* ai = a + i * m * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < std::min(r, k); ++c) l[(i * m + r) * k + c] = ai[r * n + c];
    for (int64_t r = 0; r < k; ++r) {
      l[(i * m + r) * k + r] = T(1.0f);
      for (int64_t c = r; c < n; ++c) u[(i * k + r) * n + c] = ai[r * n + c];
    }
    // row j of the factored matrix was row perm[j] of A, so A = P L U with P[perm[j], j] = 1
    for (int64_t r = 0; r < m; ++r) perm[r] = r;
    for (int64_t j = 0; j < k; ++j) std::swap(perm[j], perm[piv[i * k + j] - 1]);
    for (int64_t j = 0; j < m; ++j) p[(i * m + perm[j]) * m + j] = T(1.0f);
  }
}

template <class T>
void lu_solve_typed(const Tensor& lu, const Tensor& pivots, const Tensor& x, bool left, bool adjoint) {
  const int64_t B = lu.size(0), n = lu.size(1), k = left ? x.size(2) : x.size(1);
  const T* a = lu.data<T>();
  const lapack_int* piv = pivots.data<lapack_int>();
  T* xs = x.data<T>();
  for_each_matrix("linalg.lu_solve", B, n, [&](int64_t i) {
    T* xi = xs + i * n * k;
    if (left) return Lapack<T>::getrs(adjoint ? 'C' : 'N', as_int(n), as_int(k), a + i * n * n, piv + i * n, xi);
    // X A = B  <=>  A^H X^H = B^H (and X A^H = B  <=>  A X^H = B^H): solve for Y = X^H
    std::vector<T> y(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) y[c * k + r] = Lapack<T>::conj(xi[r * n + c]);
    const lapack_int st = Lapack<T>::getrs(adjoint ? 'N' : 'C', as_int(n), as_int(k), a + i * n * n, piv + i * n, y.data());
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) xi[r * n + c] = Lapack<T>::conj(y[c * k + r]);
    return st;
  });
}

template <class T>
void triangular_solve_typed(const Tensor& a, const Tensor& x, bool upper, bool left, bool unit) {
  const int64_t B = a.size(0), n = a.size(1), rows = x.size(1), cols = x.size(2);
  const T* as = a.data<T>();
  T* xs = x.data<T>();
  for_each_matrix("linalg.solve_triangular", B, n, [&](int64_t i) {
    Lapack<T>::trsm(left ? CblasLeft : CblasRight, upper ? CblasUpper : CblasLower, unit ? CblasUnit : CblasNonUnit,
                    as_int(rows), as_int(cols), as + i * n * n, xs + i * rows * cols);
    return lapack_int{0};
  });
}

template <class T>
void inverse_typed(const Tensor& lu, const Tensor& pivots) {
  const int64_t B = lu.size(0), n = lu.size(1);
  T* a = lu.data<T>();
  const lapack_int* piv = pivots.data<lapack_int>();
  for_each_matrix("linalg.inv", B, n, [&](int64_t i) { return Lapack<T>::getri(as_int(n), a + i * n * n, piv + i * n); });
}

// The permutation's sign: each pivot that is not its own row is one swap.
bool odd_permutation(const lapack_int* piv, int64_t n) {
  bool odd = false;
  for (int64_t j = 0; j < n; ++j) odd ^= piv[j] != j + 1;
  return odd;
}

template <class T>
void det_typed(const Tensor& lu, const Tensor& pivots, const Tensor& det) {
  const int64_t B = lu.size(0), n = lu.size(1);
  const T* a = lu.data<T>();
  const lapack_int* piv = pivots.data<lapack_int>();
  T* out = det.data<T>();
  for (int64_t i = 0; i < B; ++i) {
    // accumulated in double, so a product that fits float32 is not lost to an intermediate overflow
    std::conditional_t<std::is_same_v<T, float>, double, std::complex<double>> p = 1.0;
    for (int64_t j = 0; j < n; ++j) p *= a[i * n * n + j * n + j];
    if (odd_permutation(piv + i * n, n)) p = -p;
    out[i] = static_cast<T>(p);
  }
}

template <class T>
void slogdet_typed(const Tensor& lu, const Tensor& pivots, const Tensor& sign, const Tensor& logabsdet) {
  const int64_t B = lu.size(0), n = lu.size(1);
  const T* a = lu.data<T>();
  const lapack_int* piv = pivots.data<lapack_int>();
  T* sg = sign.data<T>();
  float* la = logabsdet.data<float>();
  for (int64_t i = 0; i < B; ++i) {
    std::conditional_t<std::is_same_v<T, float>, double, std::complex<double>> s = 1.0;
    double log_sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const auto d = a[i * n * n + j * n + j];
      const double mag = std::abs(d);
      if (mag == 0.0) {  // singular: torch gives sign 0 and -inf
        s = 0.0;
        log_sum = -std::numeric_limits<double>::infinity();
        break;
      }
      s *= static_cast<decltype(s)>(d) / mag;
      log_sum += std::log(mag);
    }
    if (odd_permutation(piv + i * n, n)) s = -s;
    if constexpr (!std::is_same_v<T, float>) {
      const double r = std::abs(s);  // keep the sign on the unit circle despite rounding
      if (r > 0) s /= r;
    }
    sg[i] = static_cast<T>(s);
    la[i] = static_cast<float>(log_sum);
  }
}

template <class F>
void by_dtype(const Tensor& t, F fn) {
  if (t.dtype() == DType::Float32) fn(float{});
  else if (t.dtype() == DType::Complex64) fn(C{});
  else KILN_CHECK(false, "linalg: float32 or complex64 expected, got ", dtype_name(t.dtype()));
}

}  // namespace

void lu_factor_batched(const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  by_dtype(lu, [&](auto tag) { lu_factor_typed<decltype(tag)>(lu, pivots, info); });
}
void lu_unpack_batched(const Tensor& lu, const Tensor& pivots, const Tensor& P, const Tensor& L, const Tensor& U) {
  by_dtype(lu, [&](auto tag) { lu_unpack_typed<decltype(tag)>(lu, pivots, P, L, U); });
}
void lu_solve_batched(const Tensor& lu, const Tensor& pivots, const Tensor& x, bool left, bool adjoint) {
  by_dtype(lu, [&](auto tag) { lu_solve_typed<decltype(tag)>(lu, pivots, x, left, adjoint); });
}
void triangular_solve_batched(const Tensor& a, const Tensor& x, bool upper, bool left, bool unit) {
  by_dtype(a, [&](auto tag) { triangular_solve_typed<decltype(tag)>(a, x, upper, left, unit); });
}
void inverse_from_lu_batched(const Tensor& lu, const Tensor& pivots) {
  by_dtype(lu, [&](auto tag) { inverse_typed<decltype(tag)>(lu, pivots); });
}
void det_from_lu_batched(const Tensor& lu, const Tensor& pivots, const Tensor& det) {
  by_dtype(lu, [&](auto tag) { det_typed<decltype(tag)>(lu, pivots, det); });
}
void slogdet_from_lu_batched(const Tensor& lu, const Tensor& pivots, const Tensor& sign, const Tensor& logabsdet) {
  by_dtype(lu, [&](auto tag) { slogdet_typed<decltype(tag)>(lu, pivots, sign, logabsdet); });
}

}  // namespace kiln::cpu
