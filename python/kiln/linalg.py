"""kiln.linalg: torch.linalg's names and result tuples (LU, pivots, ...)."""
from collections import namedtuple

from ._kiln import _linalg

LuFactorResult = namedtuple("LuFactorResult", "LU pivots")
LuFactorExResult = namedtuple("LuFactorExResult", "LU pivots info")
LuResult = namedtuple("LuResult", "P L U")
SlogdetResult = namedtuple("SlogdetResult", "sign logabsdet")

lu_solve = _linalg.lu_solve
solve_triangular = _linalg.solve_triangular
solve = _linalg.solve
inv = _linalg.inv
det = _linalg.det


def lu_factor(A, *, pivot=True):
    return LuFactorResult(*_linalg.lu_factor(A, pivot))


def lu_factor_ex(A, *, pivot=True):
    return LuFactorExResult(*_linalg.lu_factor_ex(A, pivot))


def lu(A, *, pivot=True):
    return LuResult(*_linalg.lu(A, pivot))


def slogdet(A):
    return SlogdetResult(*_linalg.slogdet(A))
