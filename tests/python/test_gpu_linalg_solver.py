"""kiln.linalg's cuSOLVER paths on the GPU machine (LU of large matrices, solves,
inverses, determinants, QR, SVD, pinv), checked independently (P L U = A, Q R = A,
U S Vh = A, orthonormality, residuals of solves) and against torch.linalg."""
import unittest

import kiln
from gpu_common import DEV, HAVE, T, k, torch


def rel_err(got, want):
    if want.numel() == 0:
        return 0.0
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def wide(t):  # float64 or complex128 (.double() drops an imaginary part)
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def orth_err(Q):  # Q^H Q against the identity, over the batch
    n = Q.shape[-1]
    if n == 0 or Q.numel() == 0:
        return 0.0
    Q = wide(Q)
    return float((Q.mH @ Q - torch.eye(n, device=Q.device, dtype=Q.dtype)).abs().max())


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class SolverPathsAgainstTorch(unittest.TestCase):
    def rand(self, shape, dt, seed=0):
        g = torch.Generator(device=DEV).manual_seed(seed + sum(shape))
        return torch.randn(shape, generator=g, dtype=dt, device=DEV)

    def test_large_lu_rebuilds_and_pivots_partially(self):
        for dt in (torch.float32, torch.complex64):
            for shape in [(100, 100), (2, 300, 200), (2, 200, 300), (130, 130)]:
                A = self.rand(shape, dt)
                msg = f"{dt} {shape}"
                LU, piv, info = kiln.linalg.lu_factor_ex(k(A))
                self.assertTrue(bool((T(info) == 0).all()), msg)
                P, L, U = torch.lu_unpack(T(LU), T(piv))
                self.assertLess(rel_err(P @ L @ U, A), 1e-5, msg)
                # partial pivoting: |l| <= 1, with getrf's |re| + |im| as the size of a complex pivot
                bound = 2 ** 0.5 if dt.is_complex else 1.0
                self.assertLessEqual(float(L.abs().max()), bound + 1e-6, msg)
                kP, kL, kU = (T(t) for t in kiln.linalg.lu(k(A)))
                torch.testing.assert_close(kP, P, msg=msg)
                torch.testing.assert_close(kL, L, msg=msg)
                torch.testing.assert_close(kU, U, msg=msg)
                if dt == torch.float32:  # no ties in random data: the same pivots as LAPACK's getrf
                    self.assertTrue(torch.equal(T(piv).cpu(), torch.linalg.lu_factor(A.cpu()).pivots), msg)
        S = self.rand((3, 90, 90), torch.float32)
        S[1, :, 40] = 0
        _, _, info = kiln.linalg.lu_factor_ex(k(S))
        self.assertEqual(T(info).cpu().tolist(), torch.linalg.lu_factor_ex(S.cpu()).info.tolist())
        with self.assertRaisesRegex(kiln.Error, r"\(batch element 1\) U\[41,41\] is zero"):
            kiln.linalg.lu_factor(k(S))

    def test_solves_left_right_adjoint(self):
        for dt in (torch.float32, torch.complex64):
            n = 120
            A = self.rand((2, n, n), dt) + n ** 0.5 * torch.eye(n, device=DEV, dtype=dt)
            B = self.rand((2, n, 5), dt, 1)
            Bt = self.rand((2, 5, n), dt, 2)
            LU, piv = kiln.linalg.lu_factor(k(A))
            for adjoint in (False, True):
                X = T(kiln.linalg.lu_solve(LU, piv, k(B), adjoint=adjoint))
                Aop = A.mH if adjoint else A
                self.assertLess(rel_err(Aop @ X, B), 1e-5, f"{dt} left adjoint={adjoint}")
                Y = T(kiln.linalg.lu_solve(LU, piv, k(Bt), left=False, adjoint=adjoint))
                self.assertLess(rel_err(Y @ Aop, Bt), 1e-5, f"{dt} right adjoint={adjoint}")
                torch.testing.assert_close(Y, torch.linalg.lu_solve(*torch.linalg.lu_factor(A), Bt, left=False,
                                                                      adjoint=adjoint), rtol=1e-4, atol=1e-4)
            X = T(kiln.linalg.solve(k(A), k(B)))
            self.assertLess(rel_err(A @ X, B), 1e-5, f"{dt} solve")
            Y = T(kiln.linalg.solve(k(A), k(Bt), left=False))
            self.assertLess(rel_err(Y @ A, Bt), 1e-5, f"{dt} solve left=False")
            # a vector right-hand side broadcast against the batch
            v = self.rand((n,), dt, 3)
            x = T(kiln.linalg.solve(k(A), k(v)))
            torch.testing.assert_close(x, torch.linalg.solve(A, v), rtol=1e-4, atol=1e-4)

    def test_triangular_solves_through_trsm(self):
        for dt in (torch.float32, torch.complex64):
            for n, left in [(100, True), (100, False), (30, False), (8, True)]:
                A = self.rand((3, n, n), dt) / n ** 0.5 + 2 * torch.eye(n, device=DEV, dtype=dt)
                B = self.rand((3, n, 7) if left else (3, 7, n), dt, 1)
                for upper in (True, False):
                    for unit in (False, True):
                        got = T(kiln.linalg.solve_triangular(k(A), k(B), upper=upper, left=left, unitriangular=unit))
                        want = torch.linalg.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
                        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4,
                                                   msg=f"{dt} n={n} left={left} upper={upper} unit={unit}")

    def test_inverses_and_determinants(self):
        for dt in (torch.float32, torch.complex64):
            for n in (5, 17, 100):
                A = self.rand((4, n, n), dt) + n ** 0.5 * torch.eye(n, device=DEV, dtype=dt)
                Ai = T(kiln.linalg.inv(k(A)))
                eye = torch.eye(n, device=DEV, dtype=dt)
                self.assertLess(rel_err(A @ Ai, eye), 1e-5, f"{dt} n={n}")
                torch.testing.assert_close(Ai, torch.linalg.inv(A), rtol=1e-4, atol=1e-5)
                sign, logabs = (T(t) for t in kiln.linalg.slogdet(k(A)))
                tsign, tlogabs = torch.linalg.slogdet(A.to(torch.complex128 if dt.is_complex else torch.float64))
                torch.testing.assert_close(sign, tsign.to(dt), rtol=1e-4, atol=1e-4)
                torch.testing.assert_close(logabs.double(), tlogabs, rtol=1e-5, atol=1e-3)
                if n <= 17:
                    det = T(kiln.linalg.det(k(A)))
                    torch.testing.assert_close(det, torch.linalg.det(A), rtol=1e-4, atol=0.0)
            S = self.rand((2, 80, 80), dt)
            S[1, 3] = S[1, 7]  # two equal rows: only batch 0 is exactly singular
            S[0, :, 11] = 0
            self.assertEqual(float(T(kiln.linalg.det(k(S)))[0].abs()), 0.0)
            sign, logabs = (T(t) for t in kiln.linalg.slogdet(k(S)))
            self.assertEqual(float(sign[0].abs()), 0.0)
            self.assertEqual(float(logabs[0]), float("-inf"))
            with self.assertRaisesRegex(kiln.Error, r"\(batch element 0\) The diagonal element 12 is zero"):
                kiln.linalg.inv(k(S))

    def check_qr(self, A, mode, msg):
        Q, R = (T(t) for t in kiln.linalg.qr(k(A), mode))
        m, n = A.shape[-2:]
        kk = min(m, n)
        tR = torch.linalg.qr(A, mode="r").R
        if mode == "r":
            self.assertEqual(Q.numel(), 0, msg)
            self.assertEqual(tuple(R.shape), tuple(tR.shape), msg)
        else:
            self.assertEqual(tuple(Q.shape), A.shape[:-2] + ((m, m) if mode == "complete" else (m, kk)), msg)
            self.assertLess(rel_err(Q @ R, A), 2e-6 * max(m, n) ** 0.5, msg)
            self.assertLess(orth_err(Q), 1e-5 * max(m, n) ** 0.5, msg)
        self.assertTrue(torch.equal(R, R.triu()), msg)
        # R is unique up to a unit phase per row: compare magnitudes with torch's
        if tR.numel():
            torch.testing.assert_close(R[..., :kk, :].abs(), tR[..., :kk, :].abs(), rtol=1e-3,
                                       atol=1e-4 * float(tR.abs().max()), msg=msg)

    def test_qr_reduced_complete_r(self):
        for dt in (torch.float32, torch.complex64):
            for shape in [(300, 200), (200, 300), (2, 64, 64), (3, 40, 7), (1, 1), (5, 0)]:
                A = self.rand(shape, dt)
                for mode in ("reduced", "complete", "r"):
                    self.check_qr(A, mode, f"{dt} {shape} {mode}")
        # rank-deficient: the basis is still orthonormal and complete
        X = self.rand((60, 3), torch.float32) @ self.rand((3, 40), torch.float32, 1)
        self.check_qr(X, "complete", "rank 3")

    def check_svd(self, A, full, msg, s_tol=2e-5):
        U, S, Vh = (T(t) for t in kiln.linalg.svd(k(A), full_matrices=full))
        m, n = A.shape[-2:]
        kk = min(m, n)
        self.assertEqual(tuple(U.shape), A.shape[:-2] + ((m, m) if full else (m, kk)), msg)
        self.assertEqual(tuple(Vh.shape), A.shape[:-2] + ((n, n) if full else (kk, n)), msg)
        self.assertTrue(bool(torch.isfinite(S).all()) and bool((S >= 0).all()), msg)
        self.assertTrue(bool((S[..., 1:] <= S[..., :-1]).all()), msg)
        want = torch.linalg.svdvals(A.to(torch.complex128 if A.dtype.is_complex else torch.float64))
        scale = float(want.max()) if want.numel() else 0.0
        if A.numel() == 0:
            return S
        if scale > 0:
            # as accurate as torch (gesvdj is its default too) on the same input, or within s_tol
            theirs = float((torch.linalg.svdvals(A).double() - want).abs().max()) / scale
            tol = max(s_tol, min(1.5 * theirs, 1e-4))
            self.assertLess(float((S.double() - want).abs().max()) / scale, tol, f"{msg} (torch's error {theirs:.2e})")
        else:
            self.assertEqual(float(S.abs().max()) if S.numel() else 0.0, 0.0, msg)
        self.assertLess(orth_err(U), 2e-5 * max(m, n) ** 0.5, msg)
        self.assertLess(orth_err(Vh.mH), 2e-5 * max(m, n) ** 0.5, msg)
        rebuilt = (wide(U[..., :kk]) * S[..., None, :].double()) @ wide(Vh[..., :kk, :])
        if scale > 0:
            self.assertLess(float((rebuilt - wide(A)).abs().max()) / float(A.abs().max()), 2e-5 * max(m, n) ** 0.5,
                            msg)
        values = T(kiln.linalg.svdvals(k(A)))  # Jacobi without vectors: its own rounding, the same bound
        if scale > 0:
            self.assertLess(float((values.double() - want).abs().max()) / scale, tol, msg)
        return S

    def test_svd_shapes_and_types(self):
        for dt in (torch.float32, torch.complex64):
            for shape in [(300, 200), (200, 300), (2, 50, 40), (3, 40, 50), (64, 64), (1, 5), (7, 1), (0, 4)]:
                for full in (False, True):
                    self.check_svd(self.rand(shape, dt), full, f"{dt} {shape} full={full}")

    def test_svd_at_the_extremes(self):
        A = self.rand((2, 60, 45), torch.float32)
        S1 = self.check_svd(A, True, "unit")
        for scale in (1e-30, 1e30, 1e-38):
            S = self.check_svd(A * scale, True, f"scaled by {scale}")
            torch.testing.assert_close(S.double() / scale, S1.double(), rtol=0.0, atol=4e-5 * float(S1.max()))
        # singular values from 1 down to 1e-30 relative: each within fp32 accuracy of the largest
        Uo, _ = torch.linalg.qr(self.rand((50, 50), torch.float64))
        Vo, _ = torch.linalg.qr(self.rand((40, 40), torch.float64, 1))
        s = torch.logspace(0, -30, 40, device=DEV, dtype=torch.float64)
        G = ((Uo[:, :40] * s) @ Vo.T).float()
        self.check_svd(G, True, "graded spectrum")
        # rank-deficient, zero, and a single non-zero entry
        R = self.rand((70, 4), torch.float32) @ self.rand((4, 50), torch.float32, 1)
        S = self.check_svd(R, True, "rank 4")
        self.assertLess(float(S[4:].max() / S[0]), 1e-5)
        for full in (False, True):
            self.check_svd(torch.zeros(2, 30, 20, device=DEV), full, f"zeros full={full}")
            self.check_svd(torch.zeros(3, 4, device=DEV, dtype=torch.complex64), full, "complex zeros")
        E = torch.zeros(20, 30, device=DEV)
        E[3, 17] = -2.5
        self.check_svd(E, True, "one entry")

    def test_pinv(self):
        for shape in [(50, 30), (30, 50), (3, 20, 20)]:
            A = self.rand(shape, torch.float32)
            P = T(kiln.linalg.pinv(k(A)))
            torch.testing.assert_close(P, torch.linalg.pinv(A), rtol=1e-3, atol=1e-4)
            self.assertLess(rel_err(A @ P @ A, A), 1e-4, str(shape))
        R = self.rand((40, 3), torch.float32) @ self.rand((3, 25), torch.float32, 1)  # rank 3: the cut matters
        P = T(kiln.linalg.pinv(k(R)))
        torch.testing.assert_close(P, torch.linalg.pinv(R), rtol=1e-3, atol=1e-4)
        self.assertLess(rel_err(P @ R @ P, P), 1e-4)
        P = T(kiln.linalg.pinv(k(R), atol=1.0, rtol=0.0))
        torch.testing.assert_close(P, torch.linalg.pinv(R, atol=1.0, rtol=0.0), rtol=1e-3, atol=1e-4)
        self.assertEqual(tuple(T(kiln.linalg.pinv(k(torch.zeros(0, 4, 3, device=DEV)))).shape), (0, 3, 4))

    def test_pinv_complex(self):
        for shape in [(40, 25), (2, 25, 40)]:
            A = self.rand(shape, torch.complex64)
            P = T(kiln.linalg.pinv(k(A)))
            torch.testing.assert_close(P, torch.linalg.pinv(A), rtol=1e-3, atol=1e-4)
            self.assertLess(rel_err(A @ P @ A, A), 1e-4, str(shape))

    def test_lstsq_by_qr(self):
        for dt in (torch.float32, torch.complex64):
            A = self.rand((2, 80, 30), dt)
            B = self.rand((2, 80, 4), dt, 1)
            X, res, rank, sv = (T(t) for t in kiln.linalg.lstsq(k(A), k(B)))
            want = torch.linalg.lstsq(A, B)  # torch's CUDA driver: gels, as kiln's
            torch.testing.assert_close(X, want.solution, rtol=1e-4, atol=1e-4)
            # independently: the normal equations A^H (A X - B) = 0, and the squared residuals
            self.assertLess(float((A.mH @ (A @ X - B)).abs().max()), 1e-4 * float((A.mH @ B).abs().max()), str(dt))
            torch.testing.assert_close(res, ((A @ X - B).abs() ** 2).sum(-2), rtol=1e-4, atol=1e-4)
            self.assertEqual((rank.numel(), sv.numel()), (0, 0))
            # wide: the solution of least norm, pinv(A) B (torch's CUDA lstsq has no wide case)
            W = self.rand((3, 20, 50), dt, 2)
            C = self.rand((3, 20, 2), dt, 3)
            Xw, resw, _, _ = (T(t) for t in kiln.linalg.lstsq(k(W), k(C)))
            torch.testing.assert_close(Xw.to(wide(W).dtype), torch.linalg.pinv(wide(W)) @ wide(C), rtol=1e-4, atol=1e-4)
            self.assertEqual(resw.numel(), 0)
            # a vector right-hand side
            v = self.rand((80,), dt, 4)
            x = T(kiln.linalg.lstsq(k(A[0]), k(v))[0])
            torch.testing.assert_close(x, torch.linalg.lstsq(A[0], v.unsqueeze(-1)).solution.squeeze(-1), rtol=1e-4,
                                       atol=1e-4)
        with self.assertRaisesRegex(kiln.Error, "linalg.lstsq: driver 'gelsd' is not supported on CUDA"):
            kiln.linalg.lstsq(k(A), k(B), driver="gelsd")


    def torch_grads(self, f, inputs, G):
        """torch autograd of L = Re sum(conj(G) f(inputs)): the convention kiln's formulas follow."""
        leaves = [x.clone().requires_grad_() for x in inputs]
        (G.conj() * f(*leaves)).real.sum().backward()
        return [x.grad for x in leaves]

    def test_backward_formulas_on_cuda_match_torch_autograd(self):
        for dt in (torch.float32, torch.complex64):
            n = 6
            kk = lambda t: k(t.resolve_conj())  # noqa: E731  (torch returns some results as conjugate views)
            A = self.rand((2, n, n), dt) + 3 * torch.eye(n, device=DEV, dtype=dt)
            B = self.rand((2, n, 3), dt, 1)
            Bt = self.rand((2, 3, n), dt, 2)
            close = lambda got, want, msg: torch.testing.assert_close(T(got), want, rtol=1e-4, atol=1e-4, msg=msg)  # noqa: E731
            G = self.rand((2, n, n), dt, 3)
            close(kiln.linalg.inv_backward(kk(G), kk(torch.linalg.inv(A))),
                  self.torch_grads(torch.linalg.inv, [A], G)[0], f"{dt} inv")
            g = self.rand((2,), dt, 4)
            close(kiln.linalg.det_backward(kk(g), kk(A), kk(torch.linalg.det(A))),
                  self.torch_grads(torch.linalg.det, [A], g)[0], f"{dt} det")
            for left, rhs in ((True, B), (False, Bt)):
                X = torch.linalg.solve(A, rhs, left=left)
                Gx = self.rand(tuple(X.shape), dt, 5)
                gA, gB = kiln.linalg.solve_backward(kk(Gx), kk(A), kk(X), left=left)
                tA, tB = self.torch_grads(lambda a, b: torch.linalg.solve(a, b, left=left), [A, rhs], Gx)
                close(gA, tA, f"{dt} solve A left={left}")
                close(gB, tB, f"{dt} solve B left={left}")
                LU, piv = torch.linalg.lu_factor(A)
                for adjoint in (False, True):
                    X = torch.linalg.lu_solve(LU, piv, rhs, left=left, adjoint=adjoint)
                    gLU, gB = kiln.linalg.lu_solve_backward(kk(Gx), kk(LU), kk(piv), kk(X), left=left, adjoint=adjoint)
                    tLU, tB = self.torch_grads(lambda lu, b: torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
                                               [LU, rhs], Gx)
                    close(gLU, tLU, f"{dt} lu_solve LU left={left} adjoint={adjoint}")
                    close(gB, tB, f"{dt} lu_solve B left={left} adjoint={adjoint}")
                for upper in (True, False):
                    for unit in (False, True):
                        X = torch.linalg.solve_triangular(A, rhs, upper=upper, left=left, unitriangular=unit)
                        gA, gB = kiln.linalg.solve_triangular_backward(kk(Gx), kk(A), kk(X), upper=upper, left=left,
                                                                       unitriangular=unit)
                        tA, tB = self.torch_grads(lambda a, b: torch.linalg.solve_triangular(
                            a, b, upper=upper, left=left, unitriangular=unit), [A, rhs], Gx)
                        msg = f"{dt} solve_triangular left={left} upper={upper} unit={unit}"
                        close(gA, tA, msg)
                        close(gB, tB, msg)

if __name__ == "__main__":
    unittest.main()
