"""kiln.linalg's LU family against torch.linalg on the GPU machine: kiln runs on
the CPU (its CUDA path is not there yet, and says so), torch on the same inputs."""
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

    def test_cuda_input_says_it_is_not_there_yet(self):
        with self.assertRaisesRegex(kiln.NotImplementedError, "linalg.lu_factor_ex on CUDA is not implemented yet"):
            kiln.linalg.lu_factor(k(torch.eye(3, device=DEV)))
        with self.assertRaisesRegex(kiln.NotImplementedError, "linalg.inv on CUDA is not implemented yet"):
            kiln.linalg.inv(k(torch.eye(5, device=DEV)))

    def test_small_triangular_solves_on_cuda_match_torch(self):
        for n, kk in [(64, 8), (32, 8), (16, 8), (5, 1), (40, 13), (1, 3)]:
            for upper in (True, False):
                for unit in (False, True):
                    A = torch.randn(3, 50, n, n, device=DEV) / n ** 0.5 + 2 * torch.eye(n, device=DEV)
                    B = torch.randn(50, n, kk, device=DEV)  # broadcast over A's leading batch dim
                    got = T(kiln.linalg.solve_triangular(k(A), k(B), upper=upper, unitriangular=unit))
                    want = torch.linalg.solve_triangular(A.double(), B.double(), upper=upper, unitriangular=unit)
                    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4,
                                               msg=f"n={n} k={kk} upper={upper} unit={unit}")
        with self.assertRaisesRegex(kiln.NotImplementedError, "linalg.solve_triangular on CUDA is not implemented"):
            kiln.linalg.solve_triangular(k(torch.eye(3, device=DEV)), k(torch.ones(2, 3, device=DEV)), upper=True,
                                         left=False)

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
        self.assertEqual(tuple(T(kiln.linalg.inv(k(torch.zeros(0, 3, 3, device=DEV)))).shape), (0, 3, 3))


if __name__ == "__main__":
    unittest.main()
