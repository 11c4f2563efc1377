"""The CUDA decode attention kernel against PyTorch's scaled_dot_product_attention (GPU machine)."""
import unittest

import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, TorchParityBase, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class AttentionDecode(TorchParityBase):
    def test_against_torch(self):
        F = torch.nn.functional
        for dt in (torch.bfloat16, torch.float16):
            for b, hq, hkv, d, s in [(1, 32, 8, 80, 4096), (2, 16, 16, 64, 1), (1, 32, 4, 128, 777), (3, 8, 2, 40, 50),
                                     (1, 8, 1, 256, 1000), (1, 6, 3, 96, 33), (1, 32, 8, 128, 32768),
                                     (1, 8, 1, 8, 20), (1, 16, 2, 24, 130), (2, 28, 4, 72, 300), (1, 5, 1, 112, 65),
                                     (1, 4, 4, 32, 17), (1, 32, 4, 128, 128), (1, 14, 2, 120, 1)]:
                q = torch.randn(b, hq, 1, d, device=DEV, dtype=dt)
                cache = torch.randn(2, b, hkv, s + 64, d, device=DEV, dtype=dt)  # a KV cache with room left
                cache[:, :, :, s:] = float("nan")  # rows past the keys must not be read
                kk, v = cache[0, :, :, :s], cache[1, :, :, :s]
                ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), enable_gqa=True).to(dt)
                got = KF.scaled_dot_product_attention(k(q), k(kk), k(v), enable_gqa=hq != hkv)
                self.assertSame(got, ref, rtol=2e-2, atol=2e-2, msg=f"{dt} {b}x{hq}/{hkv} d={d} S={s}")
        # huge scores stay finite (the softmax is shifted by the running max)
        q = torch.full((1, 4, 1, 64), 30.0, device=DEV, dtype=torch.bfloat16)
        kk = torch.randn(1, 4, 100, 64, device=DEV, dtype=torch.bfloat16) * 10
        v = torch.randn(1, 4, 100, 64, device=DEV, dtype=torch.bfloat16)
        ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float()).to(torch.bfloat16)
        self.assertSame(KF.scaled_dot_product_attention(k(q), k(kk), k(v)), ref, rtol=2e-2, atol=2e-2)
