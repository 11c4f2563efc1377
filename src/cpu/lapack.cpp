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
  static void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                   float* c) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
                b, ldb, 0.0f, c, n);
  }
  static lapack_int geqrf(int m, int n, float* a, float* tau) { return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau); }
  static lapack_int orgqr(int m, int n, int k, float* a, const float* tau) {
    return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, n, k, a, n, tau);
  }
  static lapack_int gesdd(char job, int m, int n, float* a, float* s, float* u, int ldu, float* vt, int ldvt) {
    return LAPACKE_sgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
  }
  static lapack_int gels(int m, int n, int k, float* a, float* b) { return LAPACKE_sgels(LAPACK_ROW_MAJOR, 'N', m, n, k, a, n, b, k); }
  static lapack_int gelsy(int m, int n, int k, float* a, float* b, lapack_int* jpvt, float rcond, lapack_int* rank) {
    return LAPACKE_sgelsy(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, jpvt, rcond, rank);
  }
  static lapack_int gelsd(int m, int n, int k, float* a, float* b, float* s, float rcond, lapack_int* rank) {
    return LAPACKE_sgelsd(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, s, rcond, rank);
  }
  static lapack_int gelss(int m, int n, int k, float* a, float* b, float* s, float rcond, lapack_int* rank) {
    return LAPACKE_sgelss(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, s, rcond, rank);
  }
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
  static void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const C* a, int lda, const C* b, int ldb, C* c) {
    const C al(alpha, 0.0f), zero(0.0f, 0.0f);
    cblas_cgemm(CblasRowMajor, ta ? CblasConjTrans : CblasNoTrans, tb ? CblasConjTrans : CblasNoTrans, m, n, k, &al, a,
                lda, b, ldb, &zero, c, n);
  }
  static lapack_int geqrf(int m, int n, C* a, C* tau) { return LAPACKE_cgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau); }
  static lapack_int orgqr(int m, int n, int k, C* a, const C* tau) {
    return LAPACKE_cungqr(LAPACK_ROW_MAJOR, m, n, k, a, n, tau);
  }
  static lapack_int gesdd(char job, int m, int n, C* a, float* s, C* u, int ldu, C* vt, int ldvt) {
    return LAPACKE_cgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
  }
  static lapack_int gels(int m, int n, int k, C* a, C* b) { return LAPACKE_cgels(LAPACK_ROW_MAJOR, 'N', m, n, k, a, n, b, k); }
  static lapack_int gelsy(int m, int n, int k, C* a, C* b, lapack_int* jpvt, float rcond, lapack_int* rank) {
    return LAPACKE_cgelsy(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, jpvt, rcond, rank);
  }
  static lapack_int gelsd(int m, int n, int k, C* a, C* b, float* s, float rcond, lapack_int* rank) {
    return LAPACKE_cgelsd(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, s, rcond, rank);
  }
  static lapack_int gelss(int m, int n, int k, C* a, C* b, float* s, float rcond, lapack_int* rank) {
    return LAPACKE_cgelss(LAPACK_ROW_MAJOR, m, n, k, a, n, b, k, s, rcond, rank);
  }
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

template <class T>
void qr_typed(const Tensor& a, const Tensor& q, const Tensor& r) {
  const int64_t B = a.size(0), m = a.size(1), n = a.size(2), k = std::min(m, n), rr = r.size(1);
  const int64_t mq = q.defined() ? q.size(2) : 0;
  T* as = a.data<T>();
  T* rs = r.data<T>();
  T* qs = q.defined() ? q.data<T>() : nullptr;
  for_each_matrix("linalg.qr", B, std::max(m, n), [&](int64_t i) {
    T* ai = as + i * m * n;
    std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
    const lapack_int st = Lapack<T>::geqrf(as_int(m), as_int(n), ai, tau.data());
    if (st != 0) return st;
    T* ri = rs + i * rr * n;
    for (int64_t row = 0; row < std::min(rr, m); ++row)
      for (int64_t c = row; c < n; ++c) ri[row * n + c] = ai[row * n + c];
    if (!qs) return lapack_int{0};
    // the reflectors sit below the diagonal of a's first k columns; orgqr expands them into m x mq
    T* qi = qs + i * m * mq;
    for (int64_t row = 0; row < m; ++row)
      for (int64_t c = 0; c < std::min(k, mq); ++c) qi[row * mq + c] = ai[row * n + c];
    return Lapack<T>::orgqr(as_int(m), as_int(mq), as_int(k), qi, tau.data());
  });
}

template <class T>
void svd_typed(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh) {
  const int64_t B = a.size(0), m = a.size(1), n = a.size(2), k = std::min(m, n);
  const bool vectors = u.defined();
  const char job = !vectors ? 'N' : (u.size(2) == m && vh.size(1) == n) ? 'A' : 'S';  // all, or k columns / rows
  const int64_t ucols = vectors ? u.size(2) : 1, vrows = vectors ? vh.size(1) : 1;
  T* as = a.data<T>();
  float* ss = s.data<float>();
  T* us = vectors ? u.data<T>() : nullptr;
  T* vs = vectors ? vh.data<T>() : nullptr;
  std::vector<lapack_int> info(static_cast<size_t>(B), 0);
  for_each_matrix("linalg.svd", B, std::max(m, n), [&](int64_t i) {
    T dummy_u[1], dummy_v[1];
    const lapack_int st = Lapack<T>::gesdd(job, as_int(m), as_int(n), as + i * m * n, ss + i * k,
                                           vectors ? us + i * m * ucols : dummy_u, as_int(ucols),
                                           vectors ? vs + i * vrows * n : dummy_v, as_int(n));
    info[i] = st > 0 ? st : 0;
    return st < 0 ? st : 0;
  });
  for (int64_t i = 0; i < B; ++i)
    KILN_CHECK(info[i] == 0, "linalg.svd: ", B > 1 ? detail::format("(batch element ", i, ") ") : std::string(),
               "The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
               "repeated singular values (error code: ", info[i], ").");
}

template <class T>
void pinv_typed(const Tensor& u, const Tensor& s, const Tensor& vh, double atol, double rtol, const Tensor& out) {
  const int64_t B = u.size(0), m = u.size(1), k = u.size(2), n = vh.size(2);
  const T *us = u.data<T>(), *vs = vh.data<T>();
  const float* ss = s.data<float>();
  T* o = out.data<T>();
  for (int64_t i = 0; i < B; ++i) {
    const float* si = ss + i * k;
    const double tol = std::max(atol, k > 0 ? rtol * si[0] : 0.0);
    const T *ui = us + i * m * k, *vi = vs + i * k * n;
    T* oi = o + i * n * m;
    for (int64_t j = 0; j < k; ++j) {
      if (!(si[j] > tol)) break;  // descending: the rest are cut as well
      const float inv_s = 1.0f / si[j];
      for (int64_t r = 0; r < n; ++r) {
        const T vr = Lapack<T>::conj(vi[j * n + r]) * inv_s;
        for (int64_t c = 0; c < m; ++c) oi[r * m + c] += vr * Lapack<T>::conj(ui[c * k + j]);
      }
    }
  }
}

template <class T>
void lstsq_typed(const Tensor& a, const Tensor& x, char driver, float rcond, const Tensor& rank, const Tensor& sv,
                 const Tensor& residual) {
  const int64_t B = a.size(0), m = a.size(1), n = a.size(2), rows = x.size(1), k = x.size(2), mn = std::min(m, n);
  T* as = a.data<T>();
  T* xs = x.data<T>();
  int64_t* rk = rank.defined() ? rank.data<int64_t>() : nullptr;
  float* svs = sv.defined() ? sv.data<float>() : nullptr;
  float* res = residual.data<float>();
  std::vector<lapack_int> info(static_cast<size_t>(B), 0);
  for_each_matrix("linalg.lstsq", B, std::max(m, n), [&](int64_t i) {
    T* ai = as + i * m * n;
    T* xi = xs + i * rows * k;
    lapack_int r = static_cast<lapack_int>(mn), st = 0;
    std::vector<float> s_local(static_cast<size_t>(std::max<int64_t>(mn, 1)));
    float* si = svs ? svs + i * mn : s_local.data();
    switch (driver) {
      case 'l': st = Lapack<T>::gels(as_int(m), as_int(n), as_int(k), ai, xi); break;
      case 'y': {
        std::vector<lapack_int> jpvt(static_cast<size_t>(std::max<int64_t>(n, 1)), 0);  // every column free
        st = Lapack<T>::gelsy(as_int(m), as_int(n), as_int(k), ai, xi, jpvt.data(), rcond, &r);
        break;
      }
      case 'd': st = Lapack<T>::gelsd(as_int(m), as_int(n), as_int(k), ai, xi, si, rcond, &r); break;
      default: st = Lapack<T>::gelss(as_int(m), as_int(n), as_int(k), ai, xi, si, rcond, &r); break;
    }
    if (rk) rk[i] = r;
    info[i] = st > 0 ? st : 0;
    for (int64_t c = 0; c < k; ++c) {
      double sum = 0.0;
      for (int64_t row = n; row < m; ++row) sum += std::norm(std::complex<double>(xi[row * k + c]));
      res[i * k + c] = static_cast<float>(sum);
    }
    return st < 0 ? st : 0;
  });
  for (int64_t i = 0; i < B; ++i)
    KILN_CHECK(info[i] == 0, "linalg.lstsq: ", B > 1 ? detail::format("(batch element ", i, ") ") : std::string(),
               driver == 'l' ? "The least squares solution could not be computed because the input matrix does not "
                               "have full rank (error code: "
                             : "The algorithm failed to converge (error code: ",
               info[i], ").");
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

void qr_batched(const Tensor& a, const Tensor& q, const Tensor& r) {
  by_dtype(a, [&](auto tag) { qr_typed<decltype(tag)>(a, q, r); });
}
void svd_batched(const Tensor& a, const Tensor& u, const Tensor& s, const Tensor& vh) {
  by_dtype(a, [&](auto tag) { svd_typed<decltype(tag)>(a, u, s, vh); });
}
void pinv_from_svd(const Tensor& u, const Tensor& s, const Tensor& vh, double atol, double rtol, const Tensor& out) {
  by_dtype(u, [&](auto tag) { pinv_typed<decltype(tag)>(u, s, vh, atol, rtol, out); });
}
void lstsq_batched(const Tensor& a, const Tensor& x, char driver, float rcond, const Tensor& rank, const Tensor& sv,
                   const Tensor& residual) {
  by_dtype(a, [&](auto tag) { lstsq_typed<decltype(tag)>(a, x, driver, rcond, rank, sv, residual); });
}
void matmul_adjoint_batched(const Tensor& out, const Tensor& a, bool adjoint_a, const Tensor& b, bool adjoint_b,
                            float alpha) {
  by_dtype(a, [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = out.size(0), m = out.size(1), n = out.size(2), k = adjoint_a ? a.size(1) : a.size(2);
    const T *as = a.data<T>(), *bs = b.data<T>();
    T* os = out.data<T>();
    for (int64_t i = 0; i < B; ++i)
      Lapack<T>::gemm(adjoint_a, adjoint_b, as_int(m), as_int(n), as_int(k), alpha, as + i * a.size(1) * a.size(2),
                      as_int(a.size(2)), bs + i * b.size(1) * b.size(2), as_int(b.size(2)), os + i * m * n);
  });
}
void set_identity_batched(const Tensor& t) {
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const int64_t B = t.size(0), m = t.size(1), n = t.size(2);
    T* p = t.data<T>();
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < std::min(m, n); ++j) p[(i * m + j) * n + j] = T(1.0f);
  });
}

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
