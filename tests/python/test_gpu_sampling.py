"""kiln.sample on CUDA: the same tokens as the float64 reference fed the same draws, the
expected frequencies, greedy edges, vocabularies of real models (GPU machine)."""
import unittest

import numpy as np

import kiln
from gpu_common import DEV, HAVE, TorchParityBase, k, torch
from test_cpu_sampling import reference


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class SamplingCuda(TorchParityBase):
    def test_matches_reference_with_the_same_draws(self):
        for b, v in [(1, 151936), (1, 128256), (16, 32000), (64, 1000), (3, 7)]:
            x = torch.randn(b, v, device=DEV) * 3
            for temperature, top_k, top_p in [(1.0, 0, 1.0), (0.7, 50, 1.0), (1.3, 0, 0.9), (0.8, 20, 0.5),
                                              (0.6, 2000, 0.95)]:
                got = torch.from_dlpack(kiln.sample(k(x), temperature, top_k, top_p, kiln.Generator(5))).cpu().numpy()
                u = torch.from_dlpack(kiln.rand(b, device="cuda", generator=kiln.Generator(5))).cpu().numpy()
                want = reference(x.cpu().numpy(), u, temperature, top_k, top_p)
                agree = np.mean(got == want)
                self.assertGreaterEqual(agree, 0.95 if b >= 16 else 1.0, f"[{b},{v}] {temperature} {top_k} {top_p}")

    def test_distribution_greedy_and_bf16(self):
        p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], device=DEV)
        logits = p.log().repeat(20000, 1)
        toks = torch.from_dlpack(kiln.sample(k(logits), 1.0, 0, 0.8, kiln.Generator(1)))
        freq = torch.bincount(toks, minlength=5).double() / toks.numel()
        want = torch.tensor([0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0], dtype=torch.float64, device=DEV)
        self.assertLess(float((freq - want).abs().max()), 0.015)
        x = torch.randn(8, 151936, device=DEV, dtype=torch.bfloat16)
        for kw in ({"temperature": 0.0}, {"top_k": 1}, {"top_p": 1e-6}):
            self.assertTrue(torch.equal(torch.from_dlpack(kiln.sample(k(x), **kw)), x.argmax(-1)), str(kw))
        # the same seed gives the same tokens, and CUDA agrees with the CPU path
        a = torch.from_dlpack(kiln.sample(k(x), 0.9, 40, 0.9, kiln.Generator(4))).cpu()
        b = torch.from_dlpack(kiln.sample(k(x.cpu()), 0.9, 40, 0.9, kiln.Generator(4)))
        self.assertTrue(torch.equal(a, b))
        masked = torch.full((4, 1000), float("-inf"), device=DEV)
        masked[:, 123] = 0.0
        self.assertTrue(bool((torch.from_dlpack(kiln.sample(k(masked), 1.0)) == 123).all()))


if __name__ == "__main__":
    unittest.main()
