"""kiln.linalg's LU family on the CPU: factorisations checked by reconstruction
(A = P L U), solves by residual, and all against numpy / scipy on the same inputs."""
import unittest

import numpy as np

try:  # Debian's python3-scipy here; the GPU machine may lack it (its checks then compare with torch)
    import scipy.linalg
except ImportError:
    scipy = None

import kiln

RNG = np.random.default_rng(11)


def rand(shape, dtype):
    x = RNG.standard_normal(shape)
    if dtype == np.complex64:
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


def K(a):
    return kiln.tensor(np.ascontiguousarray(a))


def N(t):
    return np.from_dlpack(t)


DTYPES = [(np.float32, 2e-4), (np.complex64, 3e-4)]


def close(test, got, want, tol, msg=""):
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    test.assertLessEqual(float(np.abs(got - want).max(initial=0.0)), tol * scale, msg)


class LuFactor(unittest.TestCase):
    def test_plu_reconstructs_a_and_matches_scipy(self):
        for dt, tol in DTYPES:
            for shape in [(5, 5), (3, 6, 6), (2, 3, 7, 4), (4, 9), (1, 1), (64, 64)]:
                A = rand(shape, dt)
                P, L, U = (N(t) for t in kiln.linalg.lu(K(A)))
                close(self, P @ L @ U, A, tol, f"{dt} {shape}")
                m, n = shape[-2:]
                k = min(m, n)
                self.assertEqual((P.shape[-2:], L.shape[-2:], U.shape[-2:]), ((m, m), (m, k), (k, n)))
                self.assertTrue(np.allclose(np.triu(L, 1), 0) and np.allclose(np.tril(U, -1), 0))
                LU, piv = kiln.linalg.lu_factor(K(A))
                for idx in np.ndindex(*shape[:-2]) if scipy else ():
                    slu, spiv = scipy.linalg.lu_factor(A[idx])
                    np.testing.assert_array_equal(N(piv)[idx], spiv + 1)  # 1-based, as LAPACK
                    close(self, N(LU)[idx], slu, tol)
                    sp, sl, su = scipy.linalg.lu(A[idx])
                    close(self, P[idx], sp, 0)
                    close(self, U[idx], su, tol)

    def test_singular_ex_reports_info_and_lu_factor_raises(self):
        A = rand((3, 4, 4), np.float32)
        A[1, :, 2] = 0.0  # column 2 zero: U[2, 2] is zero
        LU, piv, info = kiln.linalg.lu_factor_ex(K(A))
        self.assertEqual(info.tolist(), [0, 3, 0])
        P, L, U = (N(t) for t in kiln.linalg.lu(K(A)))  # lu factors singular input too
        close(self, P @ L @ U, A, 2e-4)
        with self.assertRaisesRegex(kiln.Error, r"\(batch element 1\) U\[3,3\] is zero"):
            kiln.linalg.lu_factor(K(A))

    def test_empty_and_bad_input(self):
        LU, piv, info = kiln.linalg.lu_factor_ex(kiln.zeros((0, 3, 3)))
        self.assertEqual((LU.shape, piv.shape, info.shape), ((0, 3, 3), (0, 3), (0,)))
        P, L, U = kiln.linalg.lu(kiln.zeros((2, 0, 3)))
        self.assertEqual((P.shape, L.shape, U.shape), ((2, 0, 0), (2, 0, 0), (2, 0, 3)))
        with self.assertRaisesRegex(kiln.Error, "float16 is not supported"):
            kiln.linalg.lu_factor(kiln.zeros((3, 3)).to(kiln.float16))
        with self.assertRaisesRegex(kiln.Error, r"at least 2 dimensions, got \[3\]"):
            kiln.linalg.lu_factor(kiln.zeros((3,)))
        with self.assertRaisesRegex(kiln.NotImplementedError, "pivot=False"):
            kiln.linalg.lu_factor(kiln.zeros((3, 3)), pivot=False)


class Solves(unittest.TestCase):
    def test_lu_solve_left_right_adjoint_with_broadcast(self):
        for dt, tol in DTYPES:
            A = rand((2, 1, 5, 5), dt) + 4 * np.eye(5, dtype=dt)
            LU, piv = kiln.linalg.lu_factor(K(A))
            for left in (True, False):
                for adjoint in (False, True):
                    B = rand((3, 5, 2) if left else (3, 2, 5), dt)  # batch (3,) broadcasts with (2, 1)
                    X = N(kiln.linalg.lu_solve(LU, piv, K(B), left=left, adjoint=adjoint))
                    Aop = np.conj(np.swapaxes(A, -1, -2)) if adjoint else A
                    self.assertEqual(X.shape, (2, 3) + B.shape[1:])
                    res = Aop @ X - B if left else X @ Aop - B
                    close(self, res, np.zeros_like(res), tol, f"{dt} left={left} adjoint={adjoint}")

    def test_lu_solve_checks_pivots_and_shapes(self):
        A = rand((4, 4), np.float32)
        LU, piv = kiln.linalg.lu_factor(K(A))
        bad = kiln.tensor(np.array([1, 2, 9, 4], np.int32))
        with self.assertRaisesRegex(kiln.Error, r"pivots must lie in \[1, 4\], got 9"):
            kiln.linalg.lu_solve(LU, bad, K(rand((4, 1), np.float32)))
        with self.assertRaisesRegex(kiln.Error, "pivots must be int32"):
            kiln.linalg.lu_solve(LU, kiln.tensor([1, 2, 3, 4]), K(rand((4, 1), np.float32)))
        with self.assertRaisesRegex(kiln.Error, r"B \[3, 1\] does not fit LU \[4, 4\]"):
            kiln.linalg.lu_solve(LU, piv, K(rand((3, 1), np.float32)))
        with self.assertRaisesRegex(kiln.Error, "same dtype"):
            kiln.linalg.lu_solve(LU, piv, K(rand((4, 1), np.complex64)))

    @unittest.skipUnless(scipy, "needs scipy")
    def test_solve_triangular_against_scipy(self):
        for dt, tol in DTYPES:
            for upper in (True, False):
                for unit in (False, True):
                    for left in (True, False):
                        A = rand((3, 6, 6), dt) + 3 * np.eye(6, dtype=dt)
                        B = rand((3, 6, 8) if left else (3, 8, 6), dt)
                        X = N(kiln.linalg.solve_triangular(K(A), K(B), upper=upper, left=left, unitriangular=unit))
                        for i in range(3):
                            if left:
                                want = scipy.linalg.solve_triangular(A[i], B[i], lower=not upper, unit_diagonal=unit)
                            else:  # X A = B  <=>  A^T X^T = B^T
                                want = scipy.linalg.solve_triangular(A[i].T, B[i].T, lower=upper,
                                                                     unit_diagonal=unit).T
                            close(self, X[i], want, tol, f"{dt} upper={upper} unit={unit} left={left}")

    def test_solve_vectors_matrices_and_singular(self):
        for dt, tol in DTYPES:
            A = rand((4, 7, 7), dt)
            b = rand((4, 7), dt)  # a batch of vectors: A's shape without its last dim
            close(self, N(kiln.linalg.solve(K(A), K(b))), np.linalg.solve(A, b[..., None])[..., 0], tol)
            B = rand((7, 3), dt)  # broadcast over A's batch
            close(self, N(kiln.linalg.solve(K(A), K(B))), np.linalg.solve(A, np.broadcast_to(B, (4, 7, 3))), tol)
            Br = rand((4, 3, 7), dt)
            close(self, N(kiln.linalg.solve(K(A), K(Br), left=False)),
                  np.swapaxes(np.linalg.solve(np.swapaxes(A, -1, -2), np.swapaxes(Br, -1, -2)), -1, -2), tol)
        with self.assertRaisesRegex(kiln.Error, r"linalg.solve: B \[4, 2\] does not fit A \[3, 3\]"):
            kiln.linalg.solve(kiln.ones((3, 3)), kiln.ones((4, 2)))
        S = np.ones((2, 3, 3), np.float32)
        S[0] = np.eye(3)
        with self.assertRaisesRegex(kiln.Error, r"\(batch element 1\) The solver failed because the input matrix "
                                                r"is singular"):
            kiln.linalg.solve(K(S), K(np.ones((2, 3), np.float32)))


class InverseAndDeterminants(unittest.TestCase):
    def test_inv_det_slogdet_against_numpy(self):
        for dt, tol in DTYPES:
            for shape in [(1, 1), (4, 4), (3, 2, 5, 5), (50, 50)]:
                A = rand(shape, dt)
                close(self, N(kiln.linalg.inv(K(A))) @ A, np.broadcast_to(np.eye(shape[-1]), shape), 5 * tol)
                if shape[-1] <= 5:  # a 50 x 50 determinant is past float32's range: slogdet's case
                    close(self, N(kiln.linalg.det(K(A))), np.linalg.det(A.astype(np.complex128 if dt == np.complex64
                                                                                  else np.float64)), 10 * tol)
                sign, logabs = kiln.linalg.slogdet(K(A))
                ws, wl = np.linalg.slogdet(A.astype(np.float64 if dt == np.float32 else np.complex128))
                self.assertEqual((sign.dtype, logabs.dtype), (kiln.float32 if dt == np.float32 else kiln.complex64,
                                                              kiln.float32))
                close(self, N(sign), ws, tol)
                close(self, N(logabs), wl, tol)

    def test_singular_and_empty(self):
        S = np.array([[[1, 2], [2, 4]], [[1, 0], [0, 1]]], np.float32)
        self.assertEqual(kiln.linalg.det(K(S)).tolist(), [0.0, 1.0])
        sign, logabs = kiln.linalg.slogdet(K(S))
        self.assertEqual((sign.tolist(), logabs.tolist()), ([0.0, 1.0], [-np.inf, 0.0]))
        with self.assertRaisesRegex(kiln.Error, r"\(batch element 0\) The diagonal element 2 is zero, the inversion "
                                                r"could not be completed because the input matrix is singular"):
            kiln.linalg.inv(K(S))
        self.assertEqual(kiln.linalg.det(kiln.zeros((3, 0, 0))).tolist(), [1.0, 1.0, 1.0])  # the empty product
        self.assertEqual(kiln.linalg.inv(kiln.zeros((0, 0))).shape, (0, 0))
        with self.assertRaisesRegex(kiln.Error, "square matrices, but they are 2 by 3"):
            kiln.linalg.det(kiln.zeros((2, 3)))

    def test_permutation_sign_of_det(self):
        P = np.eye(5, dtype=np.float32)[[1, 0, 3, 4, 2]]  # one swap and a 3-cycle: odd
        self.assertEqual(kiln.linalg.det(K(P)).item(), -1.0)
        self.assertEqual(kiln.linalg.slogdet(K(P)).sign.item(), -1.0)


if __name__ == "__main__":
    unittest.main()
