"""What the GPU parity tests share: the torch import (absent in CI), DLPack
helpers, and a base class that runs kiln on torch's stream and compares results."""
import unittest

import kiln

try:
    import torch
    HAVE = torch.cuda.is_available() and kiln.cuda.is_available()
except ImportError:  # CI has no torch
    torch, HAVE = None, False

DEV = "cuda"


def k(t):
    return kiln.from_dlpack(t)


def T(t):
    return torch.from_dlpack(t)


class TorchParityBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.guard = kiln.cuda.use_torch_stream()
        cls.guard.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.guard.__exit__(None, None, None)

    def assertSame(self, kt, ref, rtol=0.0, atol=0.0, msg=None):
        got = T(kt)
        self.assertEqual(tuple(got.shape), tuple(ref.shape), msg)
        self.assertEqual(got.dtype, ref.dtype, msg)
        if rtol == 0 and atol == 0:
            if got.dtype.is_floating_point and got.element_size() <= 2 or got.dtype in (torch.float32,):
                bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[got.element_size()]
                same = got.contiguous().view(bits) == ref.contiguous().view(bits)
                both_nan = torch.isnan(got.float()) & torch.isnan(ref.float())
                self.assertTrue(bool((same | both_nan).all()), msg)
            else:
                self.assertTrue(torch.equal(got, ref), msg)
        else:
            torch.testing.assert_close(got, ref, rtol=rtol, atol=atol, equal_nan=True, msg=msg)
