"""qkv_rotary_cache, attention_decode_cache and attention_decode_qkv (the two in one
call) — the KV cache ops of the decode step — on the CPU against numpy."""
import unittest

import numpy as np

import kiln

RNG = np.random.default_rng(11)


def rope_tables(cap, half, theta=10000.0):
    ang = np.arange(cap)[:, None] * (1.0 / theta ** (np.arange(half) * 2.0 / (2 * half)))[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def norm_rope(x, w, eps, cos, sin):
    """x [heads, D] at one position: rms_norm (w or none), then half-rotated rotary on 2 * len(cos) dims."""
    x = x.astype(np.float64)
    if w is not None:
        x = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w
    half = len(cos)
    out = x.copy()
    out[:, :half] = x[:, :half] * cos - x[:, half:2 * half] * sin
    out[:, half:2 * half] = x[:, half:2 * half] * cos + x[:, :half] * sin
    return out


class KvCacheOps(unittest.TestCase):
    def test_qkv_rotary_cache_writes_the_rows_of_its_positions(self):
        for hq, hkv, d, half, norms in [(4, 2, 16, 8, True), (2, 2, 40, 20, False), (8, 1, 64, 16, True)]:
            T, cap, eps = 3, 10, 1e-6
            qkv = RNG.standard_normal((T, (hq + 2 * hkv) * d)).astype(np.float32)
            qn, kn = (RNG.standard_normal(d).astype(np.float32) for _ in range(2))
            cos, sin = rope_tables(cap, half)
            pos = np.array([7, 2, 5], np.int32)
            kc = kiln.zeros((hkv, cap, d))
            vc = kiln.zeros((hkv, cap, d))
            q = kiln.qkv_rotary_cache(kiln.tensor(qkv), hq, hkv, kiln.tensor(qn) if norms else None,
                                      kiln.tensor(kn) if norms else None, eps, kiln.tensor(cos), kiln.tensor(sin),
                                      kiln.tensor(pos).to(kiln.int32), kc, vc)
            q, kc, vc = np.from_dlpack(q), np.from_dlpack(kc), np.from_dlpack(vc)
            self.assertEqual(q.shape, (T, hq, d))
            for t, p in enumerate(pos):
                heads = qkv[t].reshape(hq + 2 * hkv, d)
                np.testing.assert_allclose(q[t], norm_rope(heads[:hq], qn if norms else None, eps, cos[p], sin[p]),
                                           rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(kc[:, p], norm_rope(heads[hq:hq + hkv], kn if norms else None, eps, cos[p],
                                                               sin[p]), rtol=1e-5, atol=1e-5)
                np.testing.assert_array_equal(vc[:, p], heads[hq + hkv:])
            untouched = [i for i in range(cap) if i not in pos]
            self.assertFalse(kc[:, untouched].any() or vc[:, untouched].any(), "rows of other positions written")

    def test_qkv_rotary_cache_errors(self):
        kc, vc = kiln.zeros((2, 4, 16)), kiln.zeros((2, 4, 16))
        cos, sin = (kiln.tensor(t) for t in rope_tables(4, 8))
        qkv = kiln.zeros((1, 8 * 16))
        with self.assertRaisesRegex(kiln.Error, r"positions must lie in \[0, 4\), got 4"):
            kiln.qkv_rotary_cache(qkv, 4, 2, None, None, 1e-6, cos, sin, kiln.tensor([4]).to(kiln.int32), kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"positions must lie in \[0, 4\), got -1"):
            kiln.qkv_rotary_cache(kiln.zeros((3, 8 * 16)), 4, 2, None, None, 1e-6, cos, sin,
                                  kiln.tensor([1, -1, 3]).to(kiln.int32), kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"qkv must be \[T, \(3 \+ 2 \* 2\) \* head_dim\]"):
            kiln.qkv_rotary_cache(qkv, 3, 2, None, None, 1e-6, cos, sin, kiln.tensor([0]).to(kiln.int32), kc, vc)
        with self.assertRaisesRegex(kiln.Error, "positions must be int32"):
            kiln.qkv_rotary_cache(qkv, 4, 2, None, None, 1e-6, cos, sin, kiln.tensor([0]), kc, vc)
        with self.assertRaisesRegex(kiln.Error, "k_cache and v_cache must be"):
            kiln.qkv_rotary_cache(qkv, 4, 2, None, None, 1e-6, cos, sin, kiln.tensor([0]).to(kiln.int32),
                                  kiln.zeros((2, 4, 8)), vc)

    def test_attention_decode_cache_reads_only_the_filled_rows(self):
        for hq, hkv, d in [(8, 2, 64), (4, 4, 16), (6, 1, 128), (8, 1, 40)]:  # 40: a vector tail
            B, cap = 3, 40
            q = RNG.standard_normal((B, hq, d)).astype(np.float32)
            kc = RNG.standard_normal((B, hkv, cap, d)).astype(np.float32)
            vc = RNG.standard_normal((B, hkv, cap, d)).astype(np.float32)
            lens = np.array([1, 40, 17], np.int32)
            for dtype, tol in ((kiln.float32, 1e-5), (kiln.bfloat16, 2e-2), (kiln.float16, 4e-3)):
                got = kiln.attention_decode_cache(kiln.tensor(q).to(dtype), kiln.tensor(kc).to(dtype),
                                                  kiln.tensor(vc).to(dtype), kiln.tensor(lens).to(kiln.int32), 0.3)
                got = np.from_dlpack(got.to(kiln.float32))
                for b in range(B):
                    s = lens[b]
                    kk = np.repeat(kc[b, :, :s], hq // hkv, 0).astype(np.float64)
                    vv = np.repeat(vc[b, :, :s], hq // hkv, 0).astype(np.float64)
                    sc = np.einsum("hd,hsd->hs", q[b], kk) * 0.3
                    p = np.exp(sc - sc.max(-1, keepdims=True))
                    want = np.einsum("hs,hsd->hd", p / p.sum(-1, keepdims=True), vv)
                    np.testing.assert_allclose(got[b], want, rtol=tol, atol=tol, err_msg=f"{hq}/{hkv} b={b}")
        zero = kiln.attention_decode_cache(kiln.ones((1, 2, 8)), kiln.ones((1, 1, 4, 8)), kiln.ones((1, 1, 4, 8)),
                                           kiln.tensor([0]).to(kiln.int32))
        self.assertEqual(zero.tolist(), [[[0.0] * 8] * 2])  # no keys: 0, as a fully masked row
        with self.assertRaisesRegex(kiln.Error, r"seq_lens must lie in \[0, 4\], got 5"):
            kiln.attention_decode_cache(kiln.ones((1, 2, 8)), kiln.ones((1, 1, 4, 8)), kiln.ones((1, 1, 4, 8)),
                                        kiln.tensor([5]).to(kiln.int32))
        with self.assertRaisesRegex(kiln.Error, r"seq_lens must lie in \[0, 4\], got -2"):
            kiln.attention_decode_cache(kiln.ones((2, 2, 8)), kiln.ones((2, 1, 4, 8)), kiln.ones((2, 1, 4, 8)),
                                        kiln.tensor([3, -2]).to(kiln.int32))
        with self.assertRaisesRegex(kiln.Error, "Hq a multiple of Hkv"):
            kiln.attention_decode_cache(kiln.ones((1, 3, 8)), kiln.ones((1, 2, 4, 8)), kiln.ones((1, 2, 4, 8)),
                                        kiln.tensor([1]).to(kiln.int32))

    def test_attention_decode_qkv_writes_the_new_row_and_attends_to_it(self):
        for hq, hkv, d, half, norms in [(4, 2, 16, 8, True), (8, 1, 64, 16, False), (6, 3, 40, 20, True)]:
            cap, eps, scale = 12, 1e-6, 0.2
            qkv = RNG.standard_normal((1, (hq + 2 * hkv) * d)).astype(np.float32)
            qn, kn = (RNG.standard_normal(d).astype(np.float32) for _ in range(2))
            cos, sin = rope_tables(cap, half)
            old_k = RNG.standard_normal((hkv, cap, d)).astype(np.float32)
            old_v = RNG.standard_normal((hkv, cap, d)).astype(np.float32)
            for length in (1, 7, cap):
                kc, vc = kiln.tensor(old_k.copy()), kiln.tensor(old_v.copy())
                got = kiln.attention_decode_qkv(kiln.tensor(qkv), hq, hkv, kiln.tensor(qn) if norms else None,
                                                kiln.tensor(kn) if norms else None, eps, kiln.tensor(cos),
                                                kiln.tensor(sin), kiln.tensor([length]).to(kiln.int32), kc, vc, scale)
                got, kc, vc = np.from_dlpack(got), np.from_dlpack(kc), np.from_dlpack(vc)
                p = length - 1
                heads = qkv[0].reshape(hq + 2 * hkv, d)
                q = norm_rope(heads[:hq], qn if norms else None, eps, cos[p], sin[p])
                want_k, want_v = old_k.astype(np.float64), old_v.astype(np.float64)
                want_k[:, p] = norm_rope(heads[hq:hq + hkv], kn if norms else None, eps, cos[p], sin[p])
                want_v[:, p] = heads[hq + hkv:]
                np.testing.assert_allclose(kc, want_k, rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(vc, want_v, rtol=0, atol=0)
                kk = np.repeat(want_k[:, :length], hq // hkv, 0)
                vv = np.repeat(want_v[:, :length], hq // hkv, 0)
                sc = np.einsum("hd,hsd->hs", q, kk) * scale
                w = np.exp(sc - sc.max(-1, keepdims=True))
                want = np.einsum("hs,hsd->hd", w / w.sum(-1, keepdims=True), vv)
                self.assertEqual(got.shape, (1, hq, d))
                np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5, err_msg=f"{hq}/{hkv} d{d} len {length}")

    def test_attention_decode_qkv_errors(self):
        kc, vc = kiln.zeros((2, 4, 16)), kiln.zeros((2, 4, 16))
        cos, sin = (kiln.tensor(t) for t in rope_tables(4, 8))
        qkv = kiln.zeros((1, 8 * 16))
        one = kiln.tensor([1]).to(kiln.int32)
        for bad in (0, 5):
            with self.assertRaisesRegex(kiln.Error, rf"attention_decode_qkv: seq_len must lie in \[1, 4\], got {bad}"):
                kiln.attention_decode_qkv(qkv, 4, 2, None, None, 1e-6, cos, sin, kiln.tensor([bad]).to(kiln.int32),
                                          kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"attention_decode_qkv: qkv must be one token's row"):
            kiln.attention_decode_qkv(kiln.zeros((2, 8 * 16)), 4, 2, None, None, 1e-6, cos, sin, one, kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"attention_decode_qkv: seq_len must be int32 \[1\]"):
            kiln.attention_decode_qkv(qkv, 4, 2, None, None, 1e-6, cos, sin, kiln.tensor([1, 2]).to(kiln.int32),
                                      kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"attention_decode_qkv: num_heads \(18\) must be a multiple"):
            kiln.attention_decode_qkv(kiln.zeros((1, 22 * 16)), 18, 2, None, None, 1e-6, cos, sin, one, kc, vc)
        with self.assertRaisesRegex(kiln.Error, r"attention_decode_qkv: head_dim must be a multiple of 8"):
            kiln.attention_decode_qkv(kiln.zeros((1, 8 * 12)), 4, 2, None, None, 1e-6,
                                      *(kiln.tensor(t) for t in rope_tables(4, 6)), one, kiln.zeros((2, 4, 12)),
                                      kiln.zeros((2, 4, 12)))
        with self.assertRaisesRegex(kiln.Error, r"attention_decode_qkv: the caches have no rows \(capacity 0\)"):
            kiln.attention_decode_qkv(qkv, 4, 2, None, None, 1e-6, cos, sin, one, kiln.zeros((2, 0, 16)),
                                      kiln.zeros((2, 0, 16)))
        with self.assertRaisesRegex(kiln.Error, "attention_decode_qkv: k_cache and v_cache must be"):
            kiln.attention_decode_qkv(qkv, 4, 2, None, None, 1e-6, cos, sin, one, kiln.zeros((2, 4, 8)), vc)


if __name__ == "__main__":
    unittest.main()
