"""kiln.linalg: torch.linalg's names and result tuples (LU, pivots, ...)."""
from collections import namedtuple

from ._kiln import _linalg

LuFactorResult = namedtuple("LuFactorResult", "LU pivots")
LuFactorExResult = namedtuple("LuFactorExResult", "LU pivots info")
LuResult = namedtuple("LuResult", "P L U")
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")
QrResult = namedtuple("QrResult", "Q R")
SvdResult = namedtuple("SvdResult", "U S Vh")
LstsqResult = namedtuple("LstsqResult", "solution residuals rank singular_values")

lu_solve = _linalg.lu_solve
solve_triangular = _linalg.solve_triangular
solve = _linalg.solve
inv = _linalg.inv
det = _linalg.det
# backward formulas (grad_A or (grad_A, grad_B)), for the autograd to come
det_backward = _linalg.det_backward
inv_backward = _linalg.inv_backward
solve_backward = _linalg.solve_backward
lu_solve_backward = _linalg.lu_solve_backward
solve_triangular_backward = _linalg.solve_triangular_backward
svdvals = _linalg.svdvals


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    return _linalg.pinv(A, atol, rtol, hermitian)


def lstsq(A, B, rcond=None, *, driver=None):
    return LstsqResult(*_linalg.lstsq(A, B, rcond, driver))


def lu_factor(A, *, pivot=True):
    return LuFactorResult(*_linalg.lu_factor(A, pivot))


def lu_factor_ex(A, *, pivot=True):
    return LuFactorExResult(*_linalg.lu_factor_ex(A, pivot))


def lu(A, *, pivot=True):
    return LuResult(*_linalg.lu(A, pivot))


def slogdet(A):
    return SlogdetResult(*_linalg.slogdet(A))


def qr(A, mode="reduced"):
    return QrResult(*_linalg.qr(A, mode))


def svd(A, full_matrices=True):
    return SvdResult(*_linalg.svd(A, full_matrices))
