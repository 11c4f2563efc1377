"""The CUDA flash prefill attention kernel against PyTorch's scaled_dot_product_attention (GPU machine)."""
import unittest

import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, TorchParityBase, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class AttentionPrefill(TorchParityBase):
    def check(self, q, kk, v, causal, gqa=False, scale=None, msg=""):
        F = torch.nn.functional
        ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), is_causal=causal, scale=scale,
                                             enable_gqa=gqa).to(q.dtype)
        got = KF.scaled_dot_product_attention(k(q), k(kk), k(v), is_causal=causal, scale=scale, enable_gqa=gqa)
        self.assertSame(got, ref, rtol=2e-2, atol=2e-2, msg=msg)

    def test_against_torch(self):
        for dt in (torch.float16, torch.bfloat16):
            # (batch, q heads, kv heads, head dim, queries, keys): ragged tiles, L < S and L > S, GQA
            for b, hq, hkv, d, L, S in [(1, 16, 16, 40, 300, 300), (2, 8, 2, 64, 129, 129), (1, 4, 4, 80, 65, 200),
                                        (1, 6, 3, 96, 200, 77), (1, 8, 1, 128, 257, 257), (3, 2, 2, 40, 2, 1),
                                        (1, 4, 2, 128, 64, 64), (1, 2, 2, 40, 1000, 1000)]:
                q = torch.randn(b, hq, L, d, device=DEV, dtype=dt)
                kk, v = (torch.randn(b, hkv, S, d, device=DEV, dtype=dt) for _ in range(2))
                for causal in (False, True):
                    self.check(q, kk, v, causal, gqa=hq != hkv, msg=f"{dt} {b}x{hq}/{hkv} d={d} L={L} S={S} causal={causal}")

    def test_lower_right_causal_for_a_chunk_after_cached_context(self):
        F = torch.nn.functional
        for dt in (torch.float16, torch.bfloat16):
            # (q heads, kv heads, head dim, queries, keys): the kernel's dims, ragged tiles, L = 1, L = S; d32 and
            # float32 take the math path
            for hq, hkv, d, L, S, dtype in [(16, 16, 40, 300, 1000, dt), (8, 2, 64, 129, 400, dt),
                                            (4, 4, 80, 65, 200, dt), (8, 1, 128, 257, 300, dt), (4, 2, 128, 1, 50, dt),
                                            (2, 2, 64, 100, 100, dt), (2, 2, 32, 40, 90, dt),
                                            (2, 1, 64, 40, 90, torch.float32)]:
                q = torch.randn(1, hq, L, d, device=DEV, dtype=dtype)
                kk, v = (torch.randn(1, hkv, S, d, device=DEV, dtype=dtype) for _ in range(2))
                visible = torch.ones(L, S, device=DEV, dtype=torch.bool).tril(S - L)
                ref = F.scaled_dot_product_attention(q.float(), kk.float(), v.float(), attn_mask=visible,
                                                     enable_gqa=hq != hkv).to(dtype)
                got = KF.scaled_dot_product_attention(k(q), k(kk), k(v), is_causal=True, enable_gqa=hq != hkv,
                                                      causal_variant="lower_right")
                self.assertSame(got, ref, rtol=2e-2, atol=2e-2, msg=f"{dtype} {hq}/{hkv} d={d} L={L} S={S}")

    def test_strided_layouts_and_scale(self):
        # q, k, v as slices of a [B, L, 3, H, D] projection, transposed to [B, H, L, D]: row stride 3*H*D
        qkv = torch.randn(2, 150, 3, 8, 64, device=DEV, dtype=torch.bfloat16)
        q, kk, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        self.check(q, kk, v, True)
        self.check(q, kk, v, False, scale=0.3)
        # a KV cache with room left: keys past S hold NaN and must not be read
        cache = torch.randn(2, 1, 4, 300, 40, device=DEV, dtype=torch.float16)
        cache[:, :, :, 170:] = float("nan")
        q = torch.randn(1, 4, 170, 40, device=DEV, dtype=torch.float16)
        self.check(q, cache[0, :, :, :170], cache[1, :, :, :170], True)

    def test_huge_scores_stay_finite(self):
        q = torch.full((1, 2, 100, 64), 30.0, device=DEV, dtype=torch.bfloat16)
        kk = torch.randn(1, 2, 100, 64, device=DEV, dtype=torch.bfloat16) * 10
        v = torch.randn(1, 2, 100, 64, device=DEV, dtype=torch.bfloat16)
        for causal in (False, True):
            self.check(q, kk, v, causal)

    def test_other_cases_take_the_math_path(self):
        # head dim 32 (no flash instance), float32, a mask, zero queries: still PyTorch's answers
        F = torch.nn.functional
        q = torch.randn(1, 2, 70, 32, device=DEV, dtype=torch.float16)
        self.check(q, q.clone(), q.clone(), True)
        q32 = torch.randn(1, 2, 70, 64, device=DEV)
        self.check(q32, q32.clone(), q32.clone(), False)
        mask = torch.rand(70, 70, device=DEV) > 0.3
        qh = q32.half()
        ref = F.scaled_dot_product_attention(qh.float(), qh.float(), qh.float(), attn_mask=mask).half()
        self.assertSame(KF.scaled_dot_product_attention(k(qh), k(qh), k(qh), attn_mask=k(mask)), ref, rtol=2e-2,
                        atol=2e-2)
        empty = torch.randn(1, 2, 0, 64, device=DEV, dtype=torch.float16)
        kv = torch.randn(1, 2, 5, 64, device=DEV, dtype=torch.float16)
        got = KF.scaled_dot_product_attention(k(empty), k(kv), k(kv), is_causal=True)
        self.assertEqual(tuple(torch.from_dlpack(got).shape), (1, 2, 0, 64))


if __name__ == "__main__":
    unittest.main()
