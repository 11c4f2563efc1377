// kiln::linalg's backward formulas, composed from the forward ops and a batched
// gemm with conjugate transposes (cpu::matmul_adjoint_batched, or cuBLAS through
// cuda/linalg_backward.h, where the elementwise steps run as kernels too):
//   inv:   gA = -inv^H g inv^H            det:  gA = (g conj(det)) inv(A)^H
//   solve (A X = B):  gB = A^-H g,  gA = -gB X^H   (X A = B: gB = g A^-H, gA = -X^H gB)
//   lu_solve: gB as solve's; with A = P L U, gL = tril_-1(P^T gA U^H), gU = triu(L^H P^T gA).
//   solve_triangular: the same with the triangular solve, gA kept to A's triangle.
#include <complex>
#include <type_traits>

#include "cpu/lapack.h"
#include "kiln/linalg.h"
#include "ops/linalg_common.h"

#if KILN_WITH_CUDA
#include "core/backend.h"
#include "cuda/linalg_backward.h"
#include "cuda/linalg_solver.h"
#define KILN_ON_CUDA_GUARD(t) cuda_backend::DeviceGuard guard((t).device().index)
#endif

namespace kiln::linalg {

namespace {

using C = std::complex<float>;

// [*, r, c] -> an owned contiguous [b, r, c].
Tensor flat(const Tensor& t) { return owned_batch(t, batch_shape(t, 2)); }

// alpha * op(a) @ op(b) for two [*, ., .] of one batch shape.
Tensor mm_h(const Tensor& a, bool ha, const Tensor& b, bool hb, float alpha = 1.0f) {
  const Shape batch = batch_shape(a, 2);
  const int64_t m = ha ? a.size(-1) : a.size(-2), n = hb ? b.size(-2) : b.size(-1);
  Tensor fa = flat(a), fb = flat(b);
  Tensor out = Tensor::empty({fa.size(0), m, n}, a.dtype(), a.device());
  if (out.numel() > 0 && a.is_cuda()) {
#if KILN_WITH_CUDA
    KILN_ON_CUDA_GUARD(a);
    cuda_backend::matmul_adjoint(out, fa, ha, fb, hb, alpha);
#endif
  } else if (out.numel() > 0) {
    cpu::matmul_adjoint_batched(out, fa, ha, fb, hb, alpha);
  }
  return out.reshape(concat(batch, {m, n}));
}

// fn(element&, batch, row, col) over an owned contiguous [b, r, c] of T
template <class T, class F>
void each_element_of(const Tensor& t, F fn) {
  const int64_t B = t.size(0), r = t.size(1), c = t.size(2);
  T* p = t.data<T>();
  for (int64_t i = 0; i < B; ++i)
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) fn(p[(i * r + y) * c + x], i, y, x);
}

// The same for fn that works on either element type.
template <class F>
void each_element(const Tensor& t, F fn) {
  if (t.dtype() == DType::Float32) each_element_of<float>(t, fn);
  else each_element_of<C>(t, fn);
}

// The conjugate transpose of [*, r, c], owned.
Tensor adjoint_of(const Tensor& t) {
  Tensor out = flat(t.transpose(-2, -1));
  if (t.is_cuda()) {
#if KILN_WITH_CUDA
    KILN_ON_CUDA_GUARD(t);
    cuda_backend::conjugate_in_place(out);
#endif
  } else if (t.dtype() == DType::Complex64) each_element_of<C>(out, [](C& e, int64_t, int64_t, int64_t) { e = std::conj(e); });
  return out.reshape(concat(batch_shape(t, 2), {t.size(-1), t.size(-2)}));
}

void check_same_batch(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(batch_shape(a, 2) == batch_shape(b, 2), op, ": operands must share their batch shape, got ", a.shape(),
             " and ", b.shape());
}

// The arguments of a solve's backward: the square operand, the solution X and its gradient.
void check_solve_grads(const char* op, const Tensor& M, const char* name, const Tensor& X, const Tensor& grad) {
  check_matrix_args(op, M, name, true);
  check_matrix_args(op, X, "X", false);
  check_matrix_args(op, grad, "grad", false);
  check_pair(op, M, X);
  check_pair(op, M, grad);
  check_same_batch(op, M, X);
  KILN_CHECK(grad.shape() == X.shape(), op, ": grad must have X's shape ", X.shape(), ", got ", grad.shape());
}

}  // namespace

Tensor inv_backward(const Tensor& grad, const Tensor& inverse) {
  constexpr const char* op = "linalg.inv_backward";
  check_matrix_args(op, inverse, "inverse", true);
  check_matrix_args(op, grad, "grad", true);
  check_pair(op, inverse, grad);
  check_same_batch(op, inverse, grad);
  return mm_h(mm_h(inverse, true, grad, false), false, inverse, true, -1.0f);
}

Tensor det_backward(const Tensor& grad, const Tensor& A, const Tensor& det) {
  constexpr const char* op = "linalg.det_backward";
  check_matrix_args(op, A, "A", true);
  check_defined(op, grad, det);
  check_same_device(op, A, grad);
  check_same_device(op, A, det);
  const Shape batch = batch_shape(A, 2);
  KILN_CHECK(grad.shape() == batch && det.shape() == batch && grad.dtype() == A.dtype() && det.dtype() == A.dtype(),
             op, ": grad and det must be ", batch, " of A's dtype, got ", grad.shape(), " and ", det.shape());
  Tensor g = adjoint_of(inv(A));
  Tensor gf = flat(g);
  const Tensor gr = grad.reshape({-1}).contiguous(), dr = det.reshape({-1}).contiguous();
  if (A.is_cuda()) {
#if KILN_WITH_CUDA
    KILN_ON_CUDA_GUARD(A);
    cuda_backend::scale_by_grad_conj_det(gf, gr, dr);
#endif
  } else if (A.dtype() == DType::Float32) {
    const float *pg = gr.data<float>(), *pd = dr.data<float>();
    each_element_of<float>(gf, [&](float& e, int64_t i, int64_t, int64_t) { e *= pg[i] * pd[i]; });
  } else {
    const C *pg = gr.data<C>(), *pd = dr.data<C>();
    each_element_of<C>(gf, [&](C& e, int64_t i, int64_t, int64_t) { e *= pg[i] * std::conj(pd[i]); });
  }
  return gf.reshape(A.shape());
}

SolveGrads solve_backward(const Tensor& grad, const Tensor& A, const Tensor& X, bool left) {
  constexpr const char* op = "linalg.solve_backward";
  check_solve_grads(op, A, "A", X, grad);
  const LuFactorResult f = lu_factor(A);
  SolveGrads g;
  g.B = lu_solve(f.LU, f.pivots, grad, left, /*adjoint=*/true);
  g.A = left ? mm_h(g.B, false, X, true, -1.0f) : mm_h(X, true, g.B, false, -1.0f);
  return g;
}

SolveGrads lu_solve_backward(const Tensor& grad, const Tensor& LU, const Tensor& pivots, const Tensor& X, bool left,
                             bool adjoint) {
  constexpr const char* op = "linalg.lu_solve_backward";
  check_solve_grads(op, LU, "LU", X, grad);
  SolveGrads g;
  g.B = lu_solve(LU, pivots, grad, left, !adjoint);
  // the gradient with respect to op(A), then A
  const Tensor g_op = left ? mm_h(g.B, false, X, true, -1.0f) : mm_h(X, true, g.B, false, -1.0f);
  const Tensor gA = adjoint ? adjoint_of(g_op) : g_op;
  const int64_t n = LU.size(-1);
  Tensor lu = flat(LU), piv = pivots.reshape({lu.size(0), n}).contiguous();
  Tensor P = zeros({lu.size(0), n, n}, LU.dtype(), LU.device()), L = zeros({lu.size(0), n, n}, LU.dtype(), LU.device());
  Tensor U = zeros({lu.size(0), n, n}, LU.dtype(), LU.device());
  if (lu.numel() > 0 && LU.is_cuda()) {
#if KILN_WITH_CUDA
    KILN_ON_CUDA_GUARD(LU);
    cuda_backend::lu_unpack(lu, piv, P, L, U);
#endif
  } else if (lu.numel() > 0) {
    cpu::lu_unpack_batched(lu, piv, P, L, U);
  }
  const Tensor PtgA = mm_h(P, true, flat(gA), false);
  Tensor gL = flat(mm_h(PtgA, false, U, true));
  const Tensor gU = flat(mm_h(L, true, PtgA, false));
  const auto keep_upper = [&](auto* pu) {  // gL below the diagonal, gU on and above it
    using T = std::remove_pointer_t<decltype(pu)>;
    each_element_of<T>(gL, [&](T& e, int64_t i, int64_t y, int64_t x) {
      if (y <= x) e = pu[(i * n + y) * n + x];
    });
  };
  if (LU.is_cuda()) {
#if KILN_WITH_CUDA
    KILN_ON_CUDA_GUARD(LU);
    cuda_backend::merge_triangles(gL, gU);
#endif
  } else if (LU.dtype() == DType::Float32) {
    keep_upper(gU.data<float>());
  } else {
    keep_upper(gU.data<C>());
  }
  g.A = gL.reshape(LU.shape());
  return g;
}

SolveGrads solve_triangular_backward(const Tensor& grad, const Tensor& A, const Tensor& X, bool upper, bool left,
                                     bool unitriangular) {
  constexpr const char* op = "linalg.solve_triangular_backward";
  check_solve_grads(op, A, "A", X, grad);
  // A^H is triangular the other way; the strict other triangle of A is never read, so zero it first
  Tensor a = flat(A);
  const auto keep = [&](const Tensor& t, bool keep_diagonal) {
    if (t.is_cuda()) {
#if KILN_WITH_CUDA
      KILN_ON_CUDA_GUARD(t);
      cuda_backend::keep_triangle(t, upper, keep_diagonal);
#endif
      return;
    }
    each_element(t, [&](auto& e, int64_t, int64_t y, int64_t x) {
      if ((upper ? y > x : y < x) || (!keep_diagonal && y == x)) e = {};
    });
  };
  keep(a, true);
  SolveGrads g;
  g.B = solve_triangular(adjoint_of(a.reshape(A.shape())), grad, !upper, left, unitriangular);
  Tensor ga = flat(left ? mm_h(g.B, false, X, true, -1.0f) : mm_h(X, true, g.B, false, -1.0f));
  keep(ga, !unitriangular);
  g.A = ga.reshape(A.shape());
  return g;
}

}  // namespace kiln::linalg
