"""kiln.linalg's LU family against torch.linalg on the GPU machine: kiln's CUDA
kernels (small LU, inverse, triangular solve) against torch and LAPACK, and its
CPU path against torch on the same inputs."""
import unittest

import kiln
from gpu_common import DEV, HAVE, T, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class LinalgAgainstTorch(unittest.TestCase):
    def inputs(self, shape, dt):
        g = torch.Generator().manual_seed(sum(shape))
        return torch.randn(shape, generator=g, dtype=torch.float32 if dt == torch.float32 else torch.complex64)

    def close(self, got, want, tol):
        torch.testing.assert_close(T(got), want, rtol=tol, atol=tol * max(1.0, float(want.abs().max())))

    def test_factor_solve_inverse_determinants(self):
        for dt in (torch.float32, torch.complex64):
            for shape in [(6, 6), (3, 5, 5), (2, 4, 8)]:
                A = self.inputs(shape, dt)
                LU, piv = kiln.linalg.lu_factor(k(A))
                tLU, tpiv = torch.linalg.lu_factor(A)
                self.assertTrue(torch.equal(T(piv), tpiv), f"{dt} {shape}")
                self.close(LU, tLU, 1e-4)
                for got, want in zip(kiln.linalg.lu(k(A)), torch.linalg.lu(A)):
                    self.close(got, want, 1e-4)
                if shape[-1] != shape[-2]:
                    continue
                B = self.inputs(shape[:-1] + (3,), dt)
                for adjoint in (False, True):
                    self.close(kiln.linalg.lu_solve(LU, piv, k(B), adjoint=adjoint),
                               torch.linalg.lu_solve(tLU, tpiv, B, adjoint=adjoint), 1e-3)
                Bt = B.transpose(-2, -1).contiguous()
                self.close(kiln.linalg.lu_solve(LU, piv, k(Bt), left=False), torch.linalg.lu_solve(tLU, tpiv, Bt, left=False), 1e-3)
                for upper in (True, False):
                    self.close(kiln.linalg.solve_triangular(k(A), k(B), upper=upper, unitriangular=True),
                               torch.linalg.solve_triangular(A, B, upper=upper, unitriangular=True), 1e-3)
                self.close(kiln.linalg.solve(k(A), k(B)), torch.linalg.solve(A, B), 1e-3)
                self.close(kiln.linalg.inv(k(A)), torch.linalg.inv(A), 1e-3)
                self.close(kiln.linalg.det(k(A)), torch.linalg.det(A), 1e-4)
                for got, want in zip(kiln.linalg.slogdet(k(A)), torch.linalg.slogdet(A)):
                    self.close(got, want, 1e-4)

    def test_singular_behaviour_matches(self):
        A = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
        _, _, info = kiln.linalg.lu_factor_ex(k(A))
        self.assertEqual(T(info).item(), torch.linalg.lu_factor_ex(A).info.item())
        self.assertEqual(kiln.linalg.det(k(A)).item(), torch.linalg.det(A).item())
        for fn in (kiln.linalg.inv, kiln.linalg.lu_factor):
            with self.assertRaisesRegex(kiln.Error, "is zero"):
                fn(k(A))
        for fn in (torch.linalg.inv, torch.linalg.lu_factor):
            with self.assertRaisesRegex(RuntimeError, "is zero"):
                fn(A)

    def test_sizes_past_the_small_kernels_take_cusolver(self):
        # 65: one past the small LU kernels; 5: one past the small inverse (test_gpu_linalg_solver.py has the rest)
        A = torch.randn(65, 65, device=DEV) + 8 * torch.eye(65, device=DEV)
        P, L, U = (T(t) for t in kiln.linalg.lu(k(A)))
        torch.testing.assert_close(P @ L @ U, A, rtol=1e-4, atol=1e-4)
        A5 = A[:5, :5].contiguous()
        torch.testing.assert_close(T(kiln.linalg.inv(k(A5))), torch.linalg.inv(A5), rtol=1e-4, atol=1e-5)

    def test_small_lu_factor_on_cuda_matches_lapack(self):
        for dt in (torch.float32, torch.complex64):
            # up to 32 x 32, and float32 up to 64: rows in registers; complex64 past 32: shared memory
            # (tall, wide, and m or n at the 32 boundary)
            for shape in [(1, 1), (5, 5), (64, 64), (3, 7, 40, 40), (10, 30, 17), (6, 17, 30), (0, 8, 8), (4, 0, 3),
                          (2, 50, 37), (2, 37, 50), (3, 64, 33), (33, 64), (5, 33, 2), (3, 20, 45), (2, 64, 32),
                          (3, 32, 64)]:
                A = torch.randn(shape, dtype=dt, device=DEV)
                LU, piv, info = kiln.linalg.lu_factor_ex(k(A))
                tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(A.cpu())  # LAPACK: pivots by |re| + |im|
                msg = f"{dt} {shape}"
                self.assertTrue(torch.equal(T(piv).cpu(), tpiv), msg)
                self.assertTrue(torch.equal(T(info).cpu(), tinfo), msg)
                torch.testing.assert_close(T(LU).cpu(), tLU, rtol=1e-4, atol=1e-4, msg=msg)
                # and independently of LAPACK: P L U rebuilds A
                P, L, U = torch.lu_unpack(T(LU), T(piv))
                torch.testing.assert_close(P @ L @ U, A, rtol=1e-4, atol=1e-4, msg=msg)
        # zero pivots: getrf's info is the first, and the factorization goes on past it
        # (12: a warp's rows in registers; complex64 48: shared memory; float32 48: two warps' rows in
        # registers; a zero column n - 9, past 32 at 48)
        for dt, n in ((torch.complex64, 12), (torch.float32, 12), (torch.complex64, 48), (torch.float32, 48)):
            S = torch.randn(6, n, n, device=DEV, dtype=dt)
            S[1, :, 3] = 0
            S[3, :, 0] = 0
            S[3, :, 7] = 0
            S[4] = 0
            S[5, :, n - 9] = 0
            LU, piv, info = kiln.linalg.lu_factor_ex(k(S))
            tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(S.cpu())
            self.assertEqual(T(info).cpu().tolist(), tinfo.tolist())
            self.assertEqual(T(info).cpu().tolist(), [0, 4, 0, 1, 1, n - 8])
            self.assertTrue(torch.equal(T(piv).cpu(), tpiv))
            torch.testing.assert_close(T(LU).cpu(), tLU, rtol=1e-4, atol=1e-4)
            with self.assertRaisesRegex(kiln.Error, r"\(batch element 1\) U\[4,4\] is zero"):
                kiln.linalg.lu_factor(k(S))
        # tiny pivots (below FLT_MIN, subnormal): getf2 divides by them, as a reciprocal would
        # overflow. Diagonally dominant, so no pivot is a near tie. Checked by P L U = A in double
        # precision, scaled up from ~1e-40 (LAPACK builds differ in how they scale by tiny pivots).
        for dt, n in ((torch.complex64, 12), (torch.float32, 12), (torch.complex64, 48), (torch.float32, 48)):
            A = (torch.randn(3, n, n, device=DEV, dtype=dt) + 2 * n * torch.eye(n, device=DEV, dtype=dt)) * 1e-40
            self.assertLess(float(A.abs().max()), 1.17e-38, "every entry below FLT_MIN")
            LU, piv, info = kiln.linalg.lu_factor_ex(k(A))
            wide = torch.complex128 if dt == torch.complex64 else torch.float64
            P, L, U = torch.lu_unpack(T(LU).cpu().to(wide) * 1e40, T(piv).cpu())
            L = L.tril(-1) / 1e40 + torch.eye(n, dtype=wide)  # lu_unpack scaled L's multipliers too
            self.assertEqual(T(info).cpu().tolist(), [0, 0, 0])
            self.assertTrue(torch.equal(T(piv).cpu(), torch.arange(1, n + 1, dtype=torch.int32).expand(3, n)))
            torch.testing.assert_close(P @ L @ U, A.cpu().to(wide) * 1e40, rtol=1e-3, atol=1e-3, msg=f"{dt} {n}")
        # a permutation: every pivot is a row swap, with ones found below zeros
        Pm = torch.eye(9, device=DEV)[torch.randperm(9, device=DEV)]
        LU, piv, _ = kiln.linalg.lu_factor_ex(k(Pm))
        self.assertTrue(torch.equal(T(piv).cpu(), torch.linalg.lu_factor_ex(Pm.cpu()).pivots))
        # ties: the first column's entries all of one magnitude (|re| + |im| for complex), so
        # the pivot is the first in getf2's order after the swaps, not the first physical row
        for dt, ones in ((torch.float32, [1.0, -1.0]), (torch.complex64, [1 + 1j, -2j, 2.0, 1 - 1j])):
            A = torch.randn(16, 64, 64, dtype=dt, device=DEV)
            sign = torch.tensor(ones, dtype=dt, device=DEV)
            A[:, :, 0] = sign[torch.randint(0, len(ones), (16, 64), device=DEV)]
            A[:, :, 1] = A[:, :, 0]  # and a second column equal to it: a zero pivot at step 2
            LU, piv, info = kiln.linalg.lu_factor_ex(k(A))
            tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(A.cpu())
            self.assertTrue(torch.equal(T(piv).cpu()[:, :2], tpiv[:, :2]), f"{dt}")
            self.assertEqual(T(info).cpu().tolist(), tinfo.tolist())
            self.assertEqual(T(info).cpu().tolist(), [2] * 16)

    def test_small_triangular_solves_on_cuda_match_torch(self):
        # (16, 40) and (32, 260): blocks of 3 systems, and past the column kernel's k
        for n, kk in [(64, 8), (32, 8), (16, 8), (5, 1), (40, 13), (1, 3), (64, 16), (32, 4), (63, 9),
                      (16, 40), (32, 260)]:
            for upper in (True, False):
                for unit in (False, True):
                    A = torch.randn(3, 50, n, n, device=DEV) / n ** 0.5 + 2 * torch.eye(n, device=DEV)
                    B = torch.randn(50, n, kk, device=DEV)  # broadcast over A's leading batch dim
                    got = T(kiln.linalg.solve_triangular(k(A), k(B), upper=upper, unitriangular=unit))
                    want = torch.linalg.solve_triangular(A.double(), B.double(), upper=upper, unitriangular=unit)
                    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4,
                                               msg=f"n={n} k={kk} upper={upper} unit={unit}")

    def test_many_64x64_triangular_solves_match_torch(self):
        # more systems than an H100's or H200's SMs hold at once (about 2100), and k past 8
        # and not a multiple of 4 (scalar loads of B and X, a tail of columns)
        for kk in (8, 12, 5):
            for upper in (True, False):
                A = torch.randn(6000, 64, 64, device=DEV) / 8 + 2 * torch.eye(64, device=DEV)
                B = torch.randn(6000, 64, kk, device=DEV)
                got = T(kiln.linalg.solve_triangular(k(A), k(B), upper=upper))
                want = torch.linalg.solve_triangular(A.double(), B.double(), upper=upper)
                torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4, msg=f"k={kk} upper={upper}")

    def test_64x64_triangular_solves_read_only_their_triangle(self):
        # one system, fewer than a wave, 2113, many; k of 8 (16-byte B rows), below and
        # above; lower and upper, unit or not; garbage off the triangle, which must not be read
        for batch, kk in [(1, 8), (100, 5), (2113, 8), (6000, 8), (3000, 3), (500, 16), (300, 13)]:
            for upper in (True, False):
                for unit in (False, True):
                    tri = torch.randn(batch, 64, 64, device=DEV) / 8 + 2 * torch.eye(64, device=DEV)
                    tri = tri.triu() if upper else tri.tril()
                    junk = torch.randn(batch, 64, 64, device=DEV)
                    A = tri + (junk.tril(-1) if upper else junk.triu(1))
                    B = torch.randn(batch, 64, kk, device=DEV)
                    got = T(kiln.linalg.solve_triangular(k(A), k(B), upper=upper, unitriangular=unit))
                    want = torch.linalg.solve_triangular(A.double(), B.double(), upper=upper, unitriangular=unit)
                    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4,
                                               msg=f"batch={batch} k={kk} upper={upper} unit={unit}")

    def test_small_inverses_on_cuda_match_torch(self):
        for n in (1, 2, 3, 4):
            A = torch.randn(3, 5000, n, n, device=DEV)
            got = T(kiln.linalg.inv(k(A)))
            want = torch.linalg.inv(A.double())
            err = ((got.double() - want).abs().amax((-2, -1)) / want.abs().amax((-2, -1))).sort().values.flatten()
            # random matrices include ill-conditioned ones: judge by the residual there, by the inverse elsewhere
            self.assertLess(err[int(0.99 * err.numel())].item(), 1e-4, f"n={n}")
            eye = torch.eye(n, device=DEV, dtype=torch.float64)
            res = (A.double() @ got.double() - eye).abs().amax((-2, -1)) / (A.double().abs().amax((-2, -1)) * got.double().abs().amax((-2, -1)))
            self.assertLess(res.flatten().sort().values[int(0.999 * res.numel())].item(), 1e-5, f"n={n}")
            P = torch.eye(n, device=DEV)[torch.randperm(n)]  # pivoting: a permutation has zeros on its diagonal
            self.assertTrue(torch.equal(T(kiln.linalg.inv(k(P))), P.T))
        S = torch.randn(6, 4, 4, device=DEV)
        S[4, :, 1] = 0
        with self.assertRaisesRegex(kiln.Error, r"\(batch element 4\) The diagonal element 2 is zero"):
            kiln.linalg.inv(k(S))
        with self.assertRaisesRegex(RuntimeError, "The diagonal element 2 is zero"):
            torch.linalg.inv(S)
        # the flag the kernel raised is cleared for the next call
        torch.testing.assert_close(T(kiln.linalg.inv(k(S[:4]))), torch.linalg.inv(S[:4]), rtol=1e-4, atol=1e-4)
        self.assertEqual(tuple(T(kiln.linalg.inv(k(torch.zeros(0, 3, 3, device=DEV)))).shape), (0, 3, 3))
        # a view 4 bytes into its storage: the kernel's unaligned load path
        base = torch.empty(1 + 700 * 9, device=DEV)
        A = base[1:].view(700, 3, 3)
        A.copy_(torch.randn(700, 3, 3, device=DEV) + 3 * torch.eye(3, device=DEV))
        torch.testing.assert_close(T(kiln.linalg.inv(k(A))).double(), torch.linalg.inv(A.double()), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
