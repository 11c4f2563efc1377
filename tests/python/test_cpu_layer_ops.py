"""rms_norm (+residual, and fused before a projection: rms_norm_linear), layer_norm, silu_and_mul and apply_rotary on the CPU against numpy formulas."""
import unittest

import numpy as np

import kiln
import kiln.nn.functional as KF

RNG = np.random.default_rng(3)


def rope_ref(x, cos, sin, interleaved):
    x = x.astype(np.float64)
    out = x.copy()
    half = cos.shape[1]
    c, s = cos[:, None, :], sin[:, None, :]
    if interleaved:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2], out[..., 1:2 * half:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :half], x[..., half:2 * half]
        out[..., :half], out[..., half:2 * half] = a * c - b * s, b * c + a * s
    return out


class LayerOps(unittest.TestCase):
    def test_rms_norm_linear(self):
        # float32 rows (one and several), with and without the residual, plain and SwiGLU
        def ref(x, r, g, w, eps, silu):
            s = x.astype(np.float64) + (0 if r is None else r)
            h = s / np.sqrt((s * s).mean(-1, keepdims=True) + eps) * g
            y = h @ w.astype(np.float64).T
            if silu:
                half = w.shape[0] // 2
                gate, up = y[..., :half], y[..., half:]
                y = gate / (1 + np.exp(-gate)) * up
            return y, s, h

        for rows in ((1,), (3,), (2, 2)):
            x = RNG.standard_normal(rows + (64,)).astype(np.float32)
            r = RNG.standard_normal(rows + (64,)).astype(np.float32)
            g = RNG.standard_normal(64).astype(np.float32)
            w = RNG.standard_normal((48, 64)).astype(np.float32) / 8
            for res in (r, None):
                for silu in (False, True):
                    out, s, h = kiln.rms_norm_linear(kiln.tensor(x), None if res is None else kiln.tensor(res),
                                                     kiln.tensor(g), 1e-6, kiln.tensor(w), silu_and_mul=silu,
                                                     want_normed=True)
                    want_y, want_s, want_h = ref(x, res, g, w, 1e-6, silu)
                    np.testing.assert_allclose(np.from_dlpack(out), want_y, rtol=1e-4, atol=1e-4)
                    np.testing.assert_allclose(np.from_dlpack(s), want_s, rtol=1e-6, atol=1e-6)
                    np.testing.assert_allclose(np.from_dlpack(h), want_h, rtol=1e-5, atol=1e-5)
        out, s, h = kiln.rms_norm_linear(kiln.tensor(x), None, kiln.tensor(g), 1e-6, kiln.tensor(w))
        self.assertIsNone(h)
        with self.assertRaisesRegex(RuntimeError, r"norm_weight must be \[64\]"):
            kiln.rms_norm_linear(kiln.tensor(x), None, kiln.tensor(g[:32]), 1e-6, kiln.tensor(w))
        with self.assertRaisesRegex(RuntimeError, "residual must match the input"):
            kiln.rms_norm_linear(kiln.tensor(x), kiln.tensor(r[..., :32]), kiln.tensor(g), 1e-6, kiln.tensor(w))
        with self.assertRaisesRegex(RuntimeError, "out_features must be even"):
            kiln.rms_norm_linear(kiln.tensor(x), None, kiln.tensor(g), 1e-6, kiln.tensor(w[:47]), silu_and_mul=True)

    def test_layer_norm(self):
        def ref(x, shape, w=None, b=None, eps=1e-5):
            axes = tuple(range(x.ndim - len(shape), x.ndim))
            x = x.astype(np.float64)
            y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
            return y * (1 if w is None else w) + (0 if b is None else b)

        # an offset far larger than the spread: the variance must be taken about the mean
        x = (RNG.standard_normal((4, 3, 96)) + 1000.0).astype(np.float32)
        w, b = RNG.standard_normal(96).astype(np.float32), RNG.standard_normal(96).astype(np.float32)
        got = KF.layer_norm(kiln.tensor(x), (96,), kiln.tensor(w), kiln.tensor(b), 1e-6)
        np.testing.assert_allclose(np.from_dlpack(got), ref(x, (96,), w, b, 1e-6), rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(np.from_dlpack(KF.layer_norm(kiln.tensor(x), 96)), ref(x, (96,)), rtol=1e-3, atol=1e-3)
        # two trailing dims, weight only; bfloat16 in and out
        w2 = RNG.standard_normal((3, 96)).astype(np.float32)
        got = KF.layer_norm(kiln.tensor(x), (3, 96), weight=kiln.tensor(w2))
        np.testing.assert_allclose(np.from_dlpack(got), ref(x, (3, 96), w2), rtol=1e-3, atol=1e-3)
        xs = RNG.standard_normal((5, 40)).astype(np.float32)
        got16 = KF.layer_norm(kiln.tensor(xs).to(kiln.bfloat16), (40,)).to(kiln.float32)
        xs16 = np.from_dlpack(kiln.tensor(xs).to(kiln.bfloat16).to(kiln.float32))
        np.testing.assert_allclose(np.from_dlpack(got16), ref(xs16, (40,)), rtol=2e-2, atol=2e-2)
        self.assertEqual(tuple(KF.layer_norm(kiln.zeros((0, 8)), (8,)).shape), (0, 8))
        with self.assertRaisesRegex(Exception, "layer_norm: normalized_shape"):
            KF.layer_norm(kiln.tensor(x), (95,))
        with self.assertRaisesRegex(Exception, "layer_norm: bias must be"):
            KF.layer_norm(kiln.tensor(x), (96,), bias=kiln.zeros((95,)))
        with self.assertRaisesRegex(Exception, "layer_norm: weight must be"):
            KF.layer_norm(kiln.tensor(x), (96,), kiln.zeros((96,), dtype=kiln.bfloat16))

    def test_rms_norm_and_residual(self):
        x = RNG.standard_normal((3, 5, 64)).astype(np.float32)
        r = RNG.standard_normal((3, 5, 64)).astype(np.float32)
        w = RNG.standard_normal(64).astype(np.float32)
        ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
        got = KF.rms_norm(kiln.tensor(x), (64,), kiln.tensor(w), 1e-6)
        np.testing.assert_allclose(np.from_dlpack(got), ref, rtol=1e-5, atol=1e-6)
        y, s = kiln.rms_norm_residual(kiln.tensor(x), kiln.tensor(r), kiln.tensor(w), 1e-6)
        xs = x + r
        np.testing.assert_array_equal(np.from_dlpack(s), xs)
        ref = xs / np.sqrt((xs.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
        np.testing.assert_allclose(np.from_dlpack(y), ref, rtol=1e-5, atol=1e-6)
        # eps defaults to the dtype's machine epsilon, as torch's
        ref32 = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + np.finfo(np.float32).eps)
        np.testing.assert_allclose(np.from_dlpack(KF.rms_norm(kiln.tensor(x), (64,))), ref32, rtol=1e-5, atol=1e-6)
        small = (x * 1e-2).astype(np.float16)
        ref16 = small / np.sqrt((small.astype(np.float64) ** 2).mean(-1, keepdims=True) + np.finfo(np.float16).eps)
        np.testing.assert_allclose(np.from_dlpack(KF.rms_norm(kiln.tensor(small), (64,)).to(kiln.float32)), ref16,
                                   rtol=2e-3, atol=2e-3)
        with self.assertRaisesRegex(kiln.Error, r"weight must be \[64\]"):
            KF.rms_norm(kiln.tensor(x), (64,), kiln.zeros((32,)))

    def test_rms_norm_residual_bf16_rounds_the_sum(self):
        # bf16 inputs (rounded by kiln, read back exactly), the sum rounded to bf16 by an
        # independent round-to-nearest-even on the float32 bits; one row (a decode step) and many
        def bf16(a):
            u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
            u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
            return u.astype(np.uint32).view(np.float32)
        for rows in (1, 7):
            x, r, w = (bf16(RNG.standard_normal(n).astype(np.float32)) for n in ((rows, 1024), (rows, 1024), 1024))
            k = [kiln.tensor(t).to(kiln.bfloat16) for t in (x, r, w)]
            y, s = kiln.rms_norm_residual(k[0], k[1], k[2], 1e-6)
            xs = bf16(x + r)
            np.testing.assert_array_equal(np.from_dlpack(s.to(kiln.float32)), xs)
            ref = xs / np.sqrt((xs.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
            np.testing.assert_allclose(np.from_dlpack(y.to(kiln.float32)), ref, rtol=8e-3, atol=8e-3)

    def test_silu_and_mul(self):
        x = RNG.standard_normal((4, 2 * 48)).astype(np.float32)
        g, u = x[:, :48].astype(np.float64), x[:, 48:]
        np.testing.assert_allclose(np.from_dlpack(kiln.silu_and_mul(kiln.tensor(x))), g / (1 + np.exp(-g)) * u,
                                   rtol=1e-5, atol=1e-6)
        with self.assertRaisesRegex(kiln.Error, "even"):
            kiln.silu_and_mul(kiln.zeros((2, 5)))

    def test_silu_and_mul_bf16_rows_in_chunks(self):
        # one long row (split into chunks across threads) and a few short ones, bfloat16
        for shape in ((1, 2 * 5000), (3, 2 * 40)):
            x = kiln.tensor(RNG.standard_normal(shape).astype(np.float32) * 4).to(kiln.bfloat16)
            a = np.from_dlpack(x.to(kiln.float32)).astype(np.float64)
            h = shape[1] // 2
            g, u = a[:, :h], a[:, h:]
            got = np.from_dlpack(kiln.silu_and_mul(x).to(kiln.float32))
            np.testing.assert_allclose(got, g / (1 + np.exp(-g)) * u, rtol=2 ** -8, atol=1e-6, err_msg=str(shape))

    def test_linear_silu_and_mul(self):
        def silu_mul(p):
            g, u = np.split(p.astype(np.float64), 2, axis=-1)
            return g / (1 + np.exp(-g)) * u

        for shape, n, kk in [((1, 64), 2 * 48, 64), ((3, 2, 40), 2 * 7, 40), ((20, 32), 2 * 16, 32)]:  # decode rows, GEMM rows
            x = RNG.standard_normal(shape).astype(np.float32)
            w = (RNG.standard_normal((n, kk)) / kk ** 0.5).astype(np.float32)
            b = RNG.standard_normal(n).astype(np.float32)
            got = KF.linear_silu_and_mul(kiln.tensor(x), kiln.tensor(w), kiln.tensor(b))
            self.assertEqual(got.shape, shape[:-1] + (n // 2,))
            np.testing.assert_allclose(np.from_dlpack(got), silu_mul(x @ w.T + b), rtol=1e-4, atol=1e-5, err_msg=str(shape))
        # bfloat16 with fp8 per-row scales: the same bits as the two calls
        x = kiln.tensor(RNG.standard_normal((2, 96)).astype(np.float32)).to(kiln.bfloat16)
        w8, scale = kiln.quantize_fp8_rows(kiln.tensor(RNG.standard_normal((2 * 24, 96)).astype(np.float32)))
        two = np.from_dlpack(kiln.silu_and_mul(KF.linear(x, w8, weight_scale=scale)).to(kiln.float32))
        one = np.from_dlpack(KF.linear_silu_and_mul(x, w8, weight_scale=scale).to(kiln.float32))
        np.testing.assert_array_equal(one, two)
        with self.assertRaisesRegex(Exception, r"linear_silu_and_mul: the weight's out_features must be even.*\[7, 8\]"):
            KF.linear_silu_and_mul(kiln.zeros((1, 8)), kiln.zeros((7, 8)))
        with self.assertRaisesRegex(Exception, r"linear_silu_and_mul: input shape \[1, 9\] and weight shape \[8, 8\]"):
            KF.linear_silu_and_mul(kiln.zeros((1, 9)), kiln.zeros((8, 8)))

    def test_rotary_half_interleaved_partial(self):
        t, h, d = 7, 3, 16
        x = RNG.standard_normal((t, h, d)).astype(np.float32)
        for half in (8, 4):  # full and partial rotary dims
            ang = RNG.standard_normal((t, half)).astype(np.float32)
            cos, sin = np.cos(ang), np.sin(ang)
            for inter in (False, True):
                got = kiln.apply_rotary(kiln.tensor(x), kiln.tensor(cos), kiln.tensor(sin), inter)
                np.testing.assert_allclose(np.from_dlpack(got), rope_ref(x, cos, sin, inter), rtol=1e-5, atol=1e-6)
        with self.assertRaisesRegex(kiln.Error, "rotary_dim 20 exceeds head_dim 16"):
            kiln.apply_rotary(kiln.tensor(x), kiln.zeros((t, 10)), kiln.zeros((t, 10)))


if __name__ == "__main__":
    unittest.main()
