"""scaled_dot_product_attention on the CPU against numpy: the one-query (decode) path, lower-right causal."""
import unittest

import numpy as np

import kiln
import kiln.nn.functional as KF

RNG = np.random.default_rng(5)


def reference(q, k, v, scale, visible=None):
    """q [B, Hq, L, D], k/v [B, Hkv, S, D], GQA by head groups, in float64; visible [L, S] bool or None."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1).astype(np.float64), np.repeat(v, g, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) * scale
    if visible is not None:
        s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


class AttentionDecode(unittest.TestCase):
    def test_gqa_head_dims_and_a_cache_view(self):
        # every group size 1..8 (the keys' sums are reduced four at a time, the last four padded)
        for hq, hkv, d, s in [(32, 8, 80, 300), (8, 8, 64, 1), (16, 2, 128, 77), (4, 1, 40, 33), (6, 2, 256, 10),
                              (16, 8, 128, 45), (10, 2, 64, 41), (7, 1, 48, 70), (12, 2, 32, 19)]:
            q = RNG.standard_normal((2, hq, 1, d)).astype(np.float32)
            cache_k = RNG.standard_normal((2, hkv, s + 16, d)).astype(np.float32)  # a cache with room left
            cache_v = RNG.standard_normal((2, hkv, s + 16, d)).astype(np.float32)
            kk, kv = kiln.tensor(cache_k)[:, :, :s], kiln.tensor(cache_v)[:, :, :s]
            got = KF.scaled_dot_product_attention(kiln.tensor(q), kk, kv, enable_gqa=hq != hkv, scale=0.2)
            ref = reference(q, cache_k[:, :, :s], cache_v[:, :, :s], 0.2)
            np.testing.assert_allclose(np.from_dlpack(got), ref, rtol=1e-4, atol=1e-5, err_msg=f"{hq}/{hkv} d={d}")
            # the same through the math path (a mask of all true keeps every key)
            mask = kiln.ones((1, s), dtype=kiln.bool)
            math = KF.scaled_dot_product_attention(kiln.tensor(q), kk, kv, attn_mask=mask, enable_gqa=hq != hkv,
                                                   scale=0.2)
            np.testing.assert_allclose(np.from_dlpack(got), np.from_dlpack(math), rtol=1e-4, atol=1e-5)

    def test_bfloat16_and_causal_single_key(self):
        q = RNG.standard_normal((1, 4, 1, 64)).astype(np.float32)
        k = RNG.standard_normal((1, 4, 50, 64)).astype(np.float32)
        v = RNG.standard_normal((1, 4, 50, 64)).astype(np.float32)
        got = KF.scaled_dot_product_attention(*(kiln.tensor(x).to(kiln.bfloat16) for x in (q, k, v)))
        ref = reference(q, k, v, 64 ** -0.5)
        np.testing.assert_allclose(np.from_dlpack(got.to(kiln.float32)), ref, rtol=0.03, atol=0.03)
        # bfloat16 caches with query groups of 2 (Qwen3-0.6B's heads) and 7, against the
        # reference on the same bfloat16-rounded values
        for hq, hkv, d, s in [(16, 8, 128, 300), (7, 1, 80, 33)]:
            x = [kiln.tensor(RNG.standard_normal(shape).astype(np.float32)).to(kiln.bfloat16)
                 for shape in ((1, hq, 1, d), (1, hkv, s, d), (1, hkv, s, d))]
            got = KF.scaled_dot_product_attention(*x, enable_gqa=True)
            ref = reference(*(np.from_dlpack(t.to(kiln.float32)) for t in x), d ** -0.5)
            np.testing.assert_allclose(np.from_dlpack(got.to(kiln.float32)), ref, rtol=1e-2, atol=1e-2,
                                       err_msg=f"{hq}/{hkv} d={d}")
        # is_causal with one query sees only key 0 (top-left aligned, as torch): not the decode kernel
        got = KF.scaled_dot_product_attention(kiln.tensor(q), kiln.tensor(k), kiln.tensor(v), is_causal=True)
        np.testing.assert_allclose(np.from_dlpack(got)[0, :, 0], v[0, :, 0], rtol=1e-5, atol=1e-6)


class LowerRightCausal(unittest.TestCase):
    def test_query_i_sees_keys_up_to_i_plus_s_minus_l(self):
        for hq, hkv, d, L, S in [(4, 2, 64, 5, 12), (2, 2, 40, 7, 7), (8, 1, 32, 1, 9), (2, 1, 16, 30, 31)]:
            q = RNG.standard_normal((1, hq, L, d)).astype(np.float32)
            k = RNG.standard_normal((1, hkv, S, d)).astype(np.float32)
            v = RNG.standard_normal((1, hkv, S, d)).astype(np.float32)
            visible = np.arange(L)[:, None] + (S - L) >= np.arange(S)[None, :]
            got = KF.scaled_dot_product_attention(kiln.tensor(q), kiln.tensor(k), kiln.tensor(v), is_causal=True,
                                                  enable_gqa=hq != hkv, causal_variant="lower_right")
            np.testing.assert_allclose(np.from_dlpack(got), reference(q, k, v, d ** -0.5, visible), rtol=1e-4,
                                       atol=1e-5, err_msg=f"{hq}/{hkv} d={d} L={L} S={S}")

    def test_bad_input_raises(self):
        q, kv = kiln.zeros((1, 2, 6, 16)), kiln.zeros((1, 2, 4, 16))
        with self.assertRaisesRegex(kiln.Error, "6 queries and 4 keys"):
            KF.scaled_dot_product_attention(q, kv, kv, is_causal=True, causal_variant="lower_right")
        with self.assertRaisesRegex(kiln.Error, "'upper_left' or 'lower_right', got 'diagonal'"):
            KF.scaled_dot_product_attention(q, kv, kv, is_causal=True, causal_variant="diagonal")


if __name__ == "__main__":
    unittest.main()
