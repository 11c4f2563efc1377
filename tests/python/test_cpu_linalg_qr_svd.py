"""kiln.linalg.qr / svd / svdvals on the CPU: checked by reconstruction and
orthogonality (not one sign choice), and singular values against numpy's float64
SVD of the same float32 / complex64 matrix, at the extremes of scale and rank."""
import unittest

import numpy as np

import kiln
from test_cpu_linalg_lu import DTYPES, K, N, close, rand


def adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


def wide(x):
    return x.astype(np.complex128 if x.dtype == np.complex64 else np.float64)


class Qr(unittest.TestCase):
    def test_modes_reconstruct_with_orthonormal_q(self):
        for dt, tol in DTYPES:
            for shape in [(6, 4), (4, 6), (3, 5, 5), (2, 1, 40, 17), (1, 1)]:
                A = rand(shape, dt)
                m, n = shape[-2:]
                k = min(m, n)
                for mode, qcols, rrows in (("reduced", k, k), ("complete", m, m)):
                    Q, R = (N(t) for t in kiln.linalg.qr(K(A), mode))
                    self.assertEqual((Q.shape[-2:], R.shape[-2:]), ((m, qcols), (rrows, n)), mode)
                    close(self, Q @ R, A, tol, f"{dt} {shape} {mode}")
                    close(self, adjoint(Q) @ Q, np.broadcast_to(np.eye(qcols), Q.shape[:-2] + (qcols, qcols)), tol)
                    self.assertTrue(np.all(np.tril(R, -1) == 0))
                    close(self, np.abs(R), np.abs(np.linalg.qr(wide(A), mode)[1]), 10 * tol)
                Q, R = kiln.linalg.qr(K(A), "r")
                self.assertEqual(Q.numel(), 0)
                close(self, np.abs(N(R)), np.abs(np.linalg.qr(wide(A), "r")), 10 * tol)

    def test_empty_and_bad_mode(self):
        Q, R = kiln.linalg.qr(kiln.zeros((3, 0)), "complete")
        self.assertEqual((N(Q).tolist(), R.shape), (np.eye(3).tolist(), (3, 0)))
        with self.assertRaisesRegex(kiln.Error, "mode must be 'reduced', 'complete' or 'r', got 'full'"):
            kiln.linalg.qr(kiln.zeros((3, 3)), "full")


class Svd(unittest.TestCase):
    def check(self, A, tol, msg):
        for full in (True, False):
            U, S, Vh = (N(t) for t in kiln.linalg.svd(K(A), full_matrices=full))
            m, n = A.shape[-2:]
            k = min(m, n)
            self.assertEqual((U.shape[-2:], S.shape[-1], Vh.shape[-2:]),
                             ((m, m if full else k), k, (n if full else k, n)), msg)
            self.assertEqual(S.dtype, np.float32)
            uc, vr = U.shape[-1], Vh.shape[-2]
            close(self, adjoint(U) @ U, np.broadcast_to(np.eye(uc), U.shape[:-2] + (uc, uc)), tol, msg + " U")
            close(self, Vh @ adjoint(Vh), np.broadcast_to(np.eye(vr), Vh.shape[:-2] + (vr, vr)), tol, msg + " V")
            scale = np.abs(A).max() if A.size else 1.0
            rec = (U[..., :, :k] * S[..., None, :]) @ Vh[..., :k, :]
            self.assertLessEqual(np.abs(rec - A).max(initial=0) / (scale or 1.0), tol, msg + " U S Vh")
            self.assertTrue(np.all(S >= 0) and np.all(np.diff(S, axis=-1) <= 0), msg + " S descending")
            want = np.linalg.svd(wide(A), compute_uv=False)
            top = want.max(initial=0) or 1.0
            self.assertLessEqual(np.abs(S - want).max(initial=0) / top, tol, msg + " S vs numpy")
            close(self, N(kiln.linalg.svdvals(K(A))), S, tol)  # gesdd without vectors: other rounding

    def test_random_shapes(self):
        for dt, tol in DTYPES:
            for shape in [(5, 5), (7, 3), (3, 7), (2, 3, 6, 4), (1, 1), (64, 48)]:
                self.check(rand(shape, dt), tol, f"{dt} {shape}")

    def test_extremes_of_scale_and_rank(self):
        rng = np.random.default_rng(3)
        for dt, tol in DTYPES:
            n = 12
            u, _ = np.linalg.qr(rng.standard_normal((n, n)))
            v, _ = np.linalg.qr(rng.standard_normal((n, n)))
            graded = (u * np.logspace(0, -30, n)) @ v.T  # singular values down to 1e-30 relative
            lowrank = rand((n, 3), dt) @ rand((3, n), dt)
            for name, A in [("graded", graded), ("graded * 1e-30", graded * 1e-30), ("1e30", rand((n, 9), dt) * 1e30),
                            ("1e-30", rand((9, n), dt) * 1e-30), ("rank 3", lowrank), ("zero", np.zeros((n, 5))),
                            ("rank 1 with one huge entry", np.outer(np.arange(1, n + 1), np.ones(4)) * 1e20)]:
                self.check(A.astype(dt), tol, f"{dt} {name}")
            U, S, Vh = kiln.linalg.svd(K(lowrank))
            self.assertTrue(np.all(N(S)[3:] <= 1e-5 * N(S)[0]))

    def test_empty(self):
        U, S, Vh = kiln.linalg.svd(kiln.zeros((2, 0, 3)))
        self.assertEqual((U.shape, S.shape, Vh.shape), ((2, 0, 0), (2, 0), (2, 3, 3)))
        self.assertEqual(N(Vh)[1].tolist(), np.eye(3).tolist())


class PinvLstsq(unittest.TestCase):
    def test_pinv_satisfies_the_penrose_conditions(self):
        for dt, tol in DTYPES:
            for full_rank, A in [(True, rand((6, 4), dt)), (True, rand((2, 3, 7), dt)),
                                 (False, rand((8, 2), dt) @ rand((2, 5), dt)), (True, np.zeros((3, 4), dt))]:
                X = N(kiln.linalg.pinv(K(A)))
                scale = max(1.0, float(np.abs(X).max()) * float(np.abs(A).max()))
                for got, want in [(A @ X @ A, A), (X @ A @ X, X), (adjoint(A @ X), A @ X), (adjoint(X @ A), X @ A)]:
                    close(self, got, want, 20 * tol * scale, f"{dt} {A.shape}")
                if full_rank:  # numpy's float64 cut would keep the float32 rounding noise of a low-rank A
                    close(self, X, np.linalg.pinv(wide(A)), 50 * tol)
        # a singular value under atol is cut: pinv of diag(1, 1e-3) with atol 1e-2 is diag(1, 0)
        D = np.diag([1.0, 1e-3]).astype(np.float32)
        self.assertEqual(N(kiln.linalg.pinv(K(D), atol=1e-2)).tolist(), [[1.0, 0.0], [0.0, 0.0]])
        close(self, N(kiln.linalg.pinv(K(D))), np.diag([1.0, 1e3]), 1e-4)

    def test_lstsq_drivers_against_numpy(self):
        for dt, tol in DTYPES:
            A, B = rand((3, 9, 4), dt), rand((3, 9, 2), dt)
            want = np.stack([np.linalg.lstsq(wide(A[i]), wide(B[i]), rcond=None)[0] for i in range(3)])
            res_want = (np.abs(A @ want - B) ** 2).sum(-2)
            for driver in ("gels", "gelsy", "gelsd", "gelss"):
                r = kiln.linalg.lstsq(K(A), K(B), driver=driver)
                close(self, N(r.solution), want, 10 * tol, f"{dt} {driver}")
                if driver == "gelsy":
                    self.assertEqual(r.residuals.numel(), 0)  # as torch: gelsy gives none
                else:
                    close(self, N(r.residuals), res_want, 10 * tol, f"{dt} {driver} residuals")
                self.assertEqual(r.rank.tolist() if driver != "gels" else [], [4, 4, 4] if driver != "gels" else [])
                if driver in ("gelsd", "gelss"):
                    close(self, N(r.singular_values), np.linalg.svd(wide(A), compute_uv=False), 10 * tol)
                else:
                    self.assertEqual(r.singular_values.numel(), 0)
            # rank-deficient, underdetermined, and a batch of vectors
            L = rand((6, 2), dt) @ rand((2, 5), dt)
            b = rand((6,), dt)
            r = kiln.linalg.lstsq(K(L), K(b), driver="gelsd")
            self.assertEqual((r.rank.item(), r.residuals.numel()), (2, 0))
            cut = np.finfo(np.float32).eps * 6  # kiln's default rcond, so the float32 noise is cut on both sides
            close(self, N(r.solution), np.linalg.lstsq(wide(L), wide(b), rcond=cut)[0], 10 * tol)
            W, c = rand((3, 7), dt), rand((3, 2), dt)
            close(self, N(kiln.linalg.lstsq(K(W), K(c), driver="gelsd").solution),
                  np.linalg.lstsq(wide(W), wide(c), rcond=None)[0], 10 * tol)
        with self.assertRaisesRegex(kiln.Error, "driver must be one of gels, gelsy, gelsd, gelss on the CPU, got 'qr'"):
            kiln.linalg.lstsq(kiln.zeros((3, 2)), kiln.zeros((3, 1)), driver="qr")
        with self.assertRaisesRegex(kiln.Error, r"need the same number of rows \(3 vs 4\)"):
            kiln.linalg.lstsq(kiln.zeros((3, 2)), kiln.zeros((4, 1)))


if __name__ == "__main__":
    unittest.main()
