// kiln._kiln._linalg: the C++ kiln::linalg ops; python/kiln/linalg.py wraps their
// tuples in torch's named tuples.
#include <optional>
#include <string>

#include "kiln/linalg.h"
#include "python/convert.h"

namespace kiln::python {

void bind_linalg(py::module_& m) {
  auto l = m.def_submodule("_linalg", "torch.linalg's LU family (kiln.linalg wraps these)");
  using py::arg;
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  l.def("lu_factor_ex", [](const Tensor& A, bool pivot) {
    auto r = linalg::lu_factor_ex(A, pivot);
    return py::make_tuple(r.LU, r.pivots, r.info);
  }, arg("A"), arg("pivot") = true);
  l.def("lu_factor", [](const Tensor& A, bool pivot) {
    auto r = linalg::lu_factor(A, pivot);
    return py::make_tuple(r.LU, r.pivots);
  }, arg("A"), arg("pivot") = true);
  l.def("lu", [](const Tensor& A, bool pivot) {
    auto r = linalg::lu(A, pivot);
    return py::make_tuple(r.P, r.L, r.U);
  }, arg("A"), arg("pivot") = true);
  l.def("lu_solve", &linalg::lu_solve, arg("LU"), arg("pivots"), arg("B"), arg("left") = true, arg("adjoint") = false,
        nogil);
  l.def("solve_triangular", &linalg::solve_triangular, arg("A"), arg("B"), arg("upper"), arg("left") = true,
        arg("unitriangular") = false, nogil);
  l.def("solve", &linalg::solve, arg("A"), arg("B"), arg("left") = true, nogil);
  l.def("inv", &linalg::inv, arg("A"), nogil);
  l.def("det", &linalg::det, arg("A"), nogil);
  l.def("qr", [](const Tensor& A, const std::string& mode) {
    auto r = linalg::qr(A, mode);
    return py::make_tuple(r.Q, r.R);
  }, arg("A"), arg("mode") = "reduced");
  l.def("svd", [](const Tensor& A, bool full_matrices) {
    auto r = linalg::svd(A, full_matrices);
    return py::make_tuple(r.U, r.S, r.Vh);
  }, arg("A"), arg("full_matrices") = true);
  l.def("svdvals", &linalg::svdvals, arg("A"), nogil);
  l.def("pinv", &linalg::pinv, arg("A"), arg("atol") = py::none(), arg("rtol") = py::none(),
        arg("hermitian") = false, nogil);
  l.def("lstsq", [](const Tensor& A, const Tensor& B, std::optional<double> rcond, std::optional<std::string> driver) {
    auto r = linalg::lstsq(A, B, rcond, driver);
    return py::make_tuple(r.solution, r.residuals, r.rank, r.singular_values);
  }, arg("A"), arg("B"), arg("rcond") = py::none(), arg("driver") = py::none());
  l.def("det_backward", &linalg::det_backward, arg("grad"), arg("A"), arg("det"), nogil);
  l.def("inv_backward", &linalg::inv_backward, arg("grad"), arg("inverse"), nogil);
  l.def("solve_backward", [](const Tensor& grad, const Tensor& A, const Tensor& X, bool left) {
    auto r = linalg::solve_backward(grad, A, X, left);
    return py::make_tuple(r.A, r.B);
  }, arg("grad"), arg("A"), arg("X"), arg("left") = true);
  l.def("lu_solve_backward", [](const Tensor& grad, const Tensor& LU, const Tensor& pivots, const Tensor& X, bool left,
                                bool adjoint) {
    auto r = linalg::lu_solve_backward(grad, LU, pivots, X, left, adjoint);
    return py::make_tuple(r.A, r.B);
  }, arg("grad"), arg("LU"), arg("pivots"), arg("X"), arg("left") = true, arg("adjoint") = false);
  l.def("solve_triangular_backward", [](const Tensor& grad, const Tensor& A, const Tensor& X, bool upper, bool left,
                                        bool unitriangular) {
    auto r = linalg::solve_triangular_backward(grad, A, X, upper, left, unitriangular);
    return py::make_tuple(r.A, r.B);
  }, arg("grad"), arg("A"), arg("X"), arg("upper"), arg("left") = true, arg("unitriangular") = false);
  l.def("slogdet", [](const Tensor& A) {
    auto r = linalg::slogdet(A);
    return py::make_tuple(r.sign, r.logabsdet);
  }, arg("A"));
}

}  // namespace kiln::python
