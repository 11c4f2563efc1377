"""kiln.linalg's backward formulas against central finite differences of the
forward ops: for a real loss L = Re sum(conj(G) * f(inputs)), the directional
derivative along E must equal Re sum(conj(grad) * E) (torch's convention for
complex tensors). Forward ops run in float32 / complex64; the differences in
float64 numpy arithmetic on their outputs, with a step that keeps rounding small."""
import unittest

import numpy as np

import kiln
from test_cpu_linalg_lu import DTYPES, K, N, rand

H = 1e-2


def loss(G, out):
    return float(np.real(np.sum(np.conj(G) * out.astype(np.complex128))))


class Backward(unittest.TestCase):
    def check_direction(self, f, inputs, grads, G, msg):
        """f(list of arrays) -> array; grads: the formula's gradient for each input."""
        for which, (x, g) in enumerate(zip(inputs, grads)):
            E = rand(x.shape, x.dtype)
            plus = [a if i != which else (a.astype(np.complex128 if a.dtype == np.complex64 else np.float64) + H * E).astype(a.dtype)
                    for i, a in enumerate(inputs)]
            minus = [a if i != which else (a.astype(np.complex128 if a.dtype == np.complex64 else np.float64) - H * E).astype(a.dtype)
                     for i, a in enumerate(inputs)]
            fd = (loss(G, f(plus)) - loss(G, f(minus))) / (2 * H)
            formula = float(np.real(np.sum(np.conj(g.astype(np.complex128)) * E)))
            self.assertLess(abs(fd - formula), 2e-2 * max(1.0, abs(formula)), f"{msg}, input {which}: {fd} vs {formula}")

    def well_conditioned(self, shape, dt):
        return rand(shape, dt) + 3 * np.eye(shape[-1], dtype=dt)

    def test_inv_and_det(self):
        for dt, _ in DTYPES:
            A = self.well_conditioned((2, 4, 4), dt)
            G = rand((2, 4, 4), dt)
            inverse = kiln.linalg.inv(K(A))
            g = N(kiln.linalg.inv_backward(K(G), inverse))
            self.check_direction(lambda xs: N(kiln.linalg.inv(K(xs[0]))), [A], [g], G, f"inv {dt}")
            Gd = rand((2,), dt)
            det = kiln.linalg.det(K(A))
            gd = N(kiln.linalg.det_backward(K(Gd), K(A), det))
            self.check_direction(lambda xs: N(kiln.linalg.det(K(xs[0]))), [A], [gd], Gd, f"det {dt}")

    def test_solve_left_and_right(self):
        for dt, _ in DTYPES:
            A = self.well_conditioned((3, 5, 5), dt)
            for left in (True, False):
                B = rand((3, 5, 2) if left else (3, 2, 5), dt)
                X = kiln.linalg.solve(K(A), K(B), left=left)
                G = rand(tuple(X.shape), dt)
                gA, gB = (N(t) for t in kiln.linalg.solve_backward(K(G), K(A), X, left))
                self.check_direction(lambda xs: N(kiln.linalg.solve(K(xs[0]), K(xs[1]), left=left)), [A, B], [gA, gB], G,
                                     f"solve {dt} left={left}")

    def test_lu_solve_with_respect_to_lu_and_b(self):
        for dt, _ in DTYPES:
            A = self.well_conditioned((2, 5, 5), dt)
            LU, piv = kiln.linalg.lu_factor(K(A))
            LUn = N(LU).copy()
            for left in (True, False):
                for adjoint in (False, True):
                    B = rand((2, 5, 3) if left else (2, 3, 5), dt)
                    f = lambda xs: N(kiln.linalg.lu_solve(K(xs[0]), piv, K(xs[1]), left=left, adjoint=adjoint))
                    X = kiln.linalg.lu_solve(LU, piv, K(B), left=left, adjoint=adjoint)
                    G = rand(tuple(X.shape), dt)
                    gLU, gB = (N(t) for t in kiln.linalg.lu_solve_backward(K(G), LU, piv, X, left, adjoint))
                    self.check_direction(f, [LUn, B], [gLU, gB], G, f"lu_solve {dt} left={left} adjoint={adjoint}")

    def test_solve_triangular(self):
        for dt, _ in DTYPES:
            for upper in (True, False):
                for left in (True, False):
                    for unit in (False, True):
                        A = self.well_conditioned((2, 4, 4), dt)
                        B = rand((2, 4, 3) if left else (2, 3, 4), dt)
                        f = lambda xs: N(kiln.linalg.solve_triangular(K(xs[0]), K(xs[1]), upper=upper, left=left,
                                                                      unitriangular=unit))
                        X = kiln.linalg.solve_triangular(K(A), K(B), upper=upper, left=left, unitriangular=unit)
                        G = rand(tuple(X.shape), dt)
                        gA, gB = (N(t) for t in kiln.linalg.solve_triangular_backward(K(G), K(A), X, upper, left, unit))
                        unread = np.tril(np.ones((4, 4)), -1 if not unit else 0) if upper else np.triu(np.ones((4, 4)), -0 if unit else 1)
                        self.assertTrue(np.all(gA[:, unread.astype(bool)] == 0), "gradient outside the read triangle")
                        self.check_direction(f, [A, B], [gA, gB], G, f"solve_triangular {dt} upper={upper} left={left} unit={unit}")

    def test_errors_name_the_shapes(self):
        with self.assertRaisesRegex(kiln.Error, r"grad must have X's shape \[3, 2\], got \[2, 3\]"):
            kiln.linalg.solve_backward(kiln.zeros((2, 3)), kiln.ones((3, 3)), kiln.zeros((3, 2)))


if __name__ == "__main__":
    unittest.main()
