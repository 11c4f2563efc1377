"""index_select, embedding, and the MoE router and combine on the CPU against numpy."""
import unittest

import numpy as np

import kiln
import kiln.nn.functional as KF
from test_cpu_matmul_fp8_grouped import DECODE

RNG = np.random.default_rng(11)


def e4m3_decode(t):
    """The float64 values of a float8_e4m3fn tensor, from its codes (the format's formula, not kiln's)."""
    return DECODE[np.from_dlpack(t.contiguous().view(kiln.uint8))]


def reference_route(logits, k, sigmoid=False, bias=None, renormalize=True):
    """Qwen3-MoE (softmax) or DeepSeek-V3 (sigmoid + selection bias) routing in float64."""
    x = logits.astype(np.float64)
    if sigmoid:
        p = 1 / (1 + np.exp(-x))
    else:
        p = np.exp(x - x.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
    sel = p + (bias if bias is not None else 0)
    experts = np.argsort(-sel, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, experts, -1)
    if renormalize:
        w /= w.sum(-1, keepdims=True)
    return w, experts


def random_moe_layer(tokens, E, H, I):
    """x [T, H], router logits [T, E], gate_up [E, 2I, H], down [E, H, I]: float32, scaled to keep SwiGLU tame."""
    x = RNG.standard_normal((tokens, H)).astype(np.float32)
    logits = RNG.standard_normal((tokens, E)).astype(np.float32)
    gate_up = (RNG.standard_normal((E, 2 * I, H)) / 4).astype(np.float32)
    down = (RNG.standard_normal((E, H, I)) / 5).astype(np.float32)
    return x, logits, gate_up, down


def reference_swiglu_moe(x, logits, k, gate_up, down):
    """The routed SwiGLU experts, combined, in float64."""
    wr, er = reference_route(logits, k)
    ref = np.zeros((x.shape[0], down.shape[1]))
    for t in range(x.shape[0]):
        for j in range(k):
            g, u = np.split(gate_up[er[t, j]].astype(np.float64) @ x[t], 2)
            ref[t] += wr[t, j] * (down[er[t, j]] @ (g / (1 + np.exp(-g)) * u))
    return ref


def check_permutation(test, r, experts, E):
    ex = np.from_dlpack(r.experts)
    counts = np.bincount(ex.ravel(), minlength=E)
    np.testing.assert_array_equal(np.from_dlpack(r.offs), np.cumsum(counts))
    pos, tok = np.from_dlpack(r.sorted_pos), np.from_dlpack(r.token_of)
    test.assertEqual(sorted(pos.ravel().tolist()), list(range(ex.size)))  # a permutation
    ends = np.cumsum(counts)
    for t in range(ex.shape[0]):
        for j in range(ex.shape[1]):
            p, e = pos[t, j], ex[t, j]
            test.assertEqual(tok[p], t)
            test.assertTrue(ends[e] - counts[e] <= p < ends[e])  # inside its expert's rows


class IndexSelect(unittest.TestCase):
    def test_against_numpy(self):
        x = RNG.standard_normal((5, 6, 7)).astype(np.float32)
        for dim in range(3):
            idx = RNG.integers(-x.shape[dim], x.shape[dim], size=9)
            for dt in (np.int32, np.int64):
                got = kiln.index_select(kiln.tensor(x), dim, kiln.tensor(idx.astype(dt)))
                np.testing.assert_array_equal(np.from_dlpack(got), np.take(x, idx, axis=dim))
        ids = np.array([[3, 0], [4, 4]], dtype=np.int64)
        w = RNG.standard_normal((5, 8)).astype(np.float32)
        np.testing.assert_array_equal(np.from_dlpack(KF.embedding(kiln.tensor(ids), kiln.tensor(w))), w[ids])

    def test_out_of_range_raises(self):
        with self.assertRaisesRegex(kiln.Error, "index 5 at position 1 is out of range for a dimension of size 5"):
            kiln.index_select(kiln.zeros((5, 2)), 0, kiln.tensor([1, 5]))
        with self.assertRaisesRegex(kiln.Error, "int32 or int64"):
            kiln.index_select(kiln.zeros((5, 2)), 0, kiln.tensor([1.0]))
        with self.assertRaisesRegex(kiln.Error, r"embedding: weight must be 2-D .*got shape \(5,\)"):
            KF.embedding(kiln.tensor([1, 2]), kiln.zeros((5,)))


class Router(unittest.TestCase):
    def test_softmax_and_sigmoid_routing(self):
        for tokens, E, k in [(1, 128, 8), (7, 64, 6), (33, 8, 2), (3, 300, 32)]:
            logits = RNG.standard_normal((tokens, E)).astype(np.float32)
            bias = RNG.standard_normal(E).astype(np.float32) * 0.1
            for sigmoid, b, renorm in [(False, None, True), (False, None, False), (True, bias, True)]:
                w_ref, e_ref = reference_route(logits, k, sigmoid, b, renorm)
                r = kiln.moe_route(kiln.tensor(logits), k, scoring="sigmoid" if sigmoid else "softmax",
                                   selection_bias=None if b is None else kiln.tensor(b), renormalize=renorm)
                np.testing.assert_array_equal(np.from_dlpack(r.experts), e_ref)
                np.testing.assert_allclose(np.from_dlpack(r.weights), w_ref, rtol=1e-5, atol=1e-7)
                check_permutation(self, r, e_ref, E)

    def test_route_gather_grouped_mm_combine_equals_a_dense_moe(self):
        tokens, E, k, H, N = 6, 8, 2, 16, 12
        x = RNG.standard_normal((tokens, H)).astype(np.float32)
        logits = RNG.standard_normal((tokens, E)).astype(np.float32)
        w = RNG.standard_normal((E, N, H)).astype(np.float32)
        r = kiln.moe_route(kiln.tensor(logits), k)
        xs = kiln.index_select(kiln.tensor(x), 0, r.token_of)
        y = KF.grouped_mm(xs, kiln.tensor(w).transpose(-2, -1), offs=r.offs)
        got = np.from_dlpack(kiln.moe_combine(y, r))
        wr, er = reference_route(logits, k)
        ref = np.zeros((tokens, N))
        for t in range(tokens):
            for j in range(k):
                ref[t] += wr[t, j] * (w[er[t, j]] @ x[t])
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

    def test_swiglu_experts_against_numpy(self):
        k = 3
        x, logits, gate_up, down = random_moe_layer(tokens=5, E=8, H=16, I=24)
        r = kiln.moe_route(kiln.tensor(logits), k)
        got = np.from_dlpack(kiln.moe_combine(kiln.moe_experts(kiln.tensor(x), kiln.tensor(gate_up),
                                                               kiln.tensor(down), r), r))
        np.testing.assert_allclose(got, reference_swiglu_moe(x, logits, k, gate_up, down), rtol=1e-4, atol=1e-4)
        combined = np.from_dlpack(kiln.moe_experts_combine(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down), r))
        np.testing.assert_allclose(combined, reference_swiglu_moe(x, logits, k, gate_up, down), rtol=1e-4, atol=1e-4)
        with self.assertRaisesRegex(kiln.Error, r"gate_up \[E, 2I, H\] and down \[E, H, I\]"):
            kiln.moe_experts(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down[:, :, :5]), r)

    def test_fp8_swiglu_experts_against_numpy(self):
        E, k, H, I = 8, 3, 32, 48
        x, logits, gate_up, down = random_moe_layer(tokens=5, E=E, H=H, I=I)
        gu8, gu_s = kiln.quantize_fp8_rows(kiln.tensor(gate_up))
        dn8, dn_s = kiln.quantize_fp8_rows(kiln.tensor(down))
        self.assertEqual((gu8.dtype, tuple(gu_s.shape), tuple(dn_s.shape)), (kiln.float8_e4m3fn, (E, 2 * I), (E, H)))
        # the reference uses the quantised weights, decoded by numpy's table of the format
        gu_v = e4m3_decode(gu8) * np.from_dlpack(gu_s)[:, :, None]
        dn_v = e4m3_decode(dn8) * np.from_dlpack(dn_s)[:, :, None]
        np.testing.assert_allclose(gu_v, gate_up, rtol=2 ** -3, atol=1e-3)  # within e4m3's rounding
        r = kiln.moe_route(kiln.tensor(logits), k)
        got = np.from_dlpack(kiln.moe_combine(kiln.moe_experts(kiln.tensor(x), gu8, dn8, r, gate_up_scale=gu_s,
                                                               down_scale=dn_s), r))
        np.testing.assert_allclose(got, reference_swiglu_moe(x, logits, k, gu_v, dn_v), rtol=1e-4, atol=1e-4)
        with self.assertRaisesRegex(kiln.Error, "need gate_up_scale and down_scale"):
            kiln.moe_experts(kiln.tensor(x), gu8, dn8, r, gate_up_scale=gu_s)
        with self.assertRaisesRegex(kiln.Error, "only for float8_e4m3fn experts"):
            kiln.moe_experts(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down), r, gate_up_scale=gu_s,
                             down_scale=dn_s)

    def test_combine_rms_norm_residual_against_numpy(self):
        tokens, E, k, N = 4, 8, 3, 40
        logits = RNG.standard_normal((tokens, E)).astype(np.float32)
        y = RNG.standard_normal((tokens * k, N)).astype(np.float32)
        res = RNG.standard_normal((tokens, N)).astype(np.float32)
        w = RNG.standard_normal(N).astype(np.float32)
        r = kiln.moe_route(kiln.tensor(logits), k)
        h, res_out = kiln.moe_combine_rms_norm_residual(kiln.tensor(y), r, kiln.tensor(res), kiln.tensor(w), 1e-6)
        wr = np.from_dlpack(r.weights)
        pos = np.from_dlpack(r.sorted_pos)
        s = res + np.einsum("tj,tjn->tn", wr, y[pos])  # the combine gathers expert rows by sorted_pos
        ref = s / np.sqrt((s.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
        np.testing.assert_allclose(np.from_dlpack(res_out), s, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.from_dlpack(h), ref, rtol=1e-4, atol=1e-5)
        with self.assertRaisesRegex(kiln.Error, r"residual must be float32 \[4, 40\], got float32 \[4, 39\]"):
            kiln.moe_combine_rms_norm_residual(kiln.tensor(y), r, kiln.tensor(res[:, :39]), kiln.tensor(w), 1e-6)
        with self.assertRaisesRegex(kiln.Error, r"weight must be float32 \[40\]"):
            kiln.moe_combine_rms_norm_residual(kiln.tensor(y), r, kiln.tensor(res), kiln.tensor(w[:5]), 1e-6)

    def test_experts_combine_rms_norm_then_linear_against_numpy(self):
        # the norm left pending by the experts, then taken by the projection after it
        k, H, eps = 3, 16, 1e-6
        x, logits, gate_up, down = random_moe_layer(tokens=5, E=8, H=H, I=24)
        res = RNG.standard_normal((5, H)).astype(np.float32)
        g = RNG.standard_normal(H).astype(np.float32)
        w = (RNG.standard_normal((12, H)) / 4).astype(np.float32)
        r = kiln.moe_route(kiln.tensor(logits), k)
        p = kiln.moe_experts_combine_rms_norm(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down), r,
                                              kiln.tensor(res), kiln.tensor(g), eps)
        s = res + reference_swiglu_moe(x, logits, k, gate_up, down)
        np.testing.assert_allclose(np.from_dlpack(p.sum), s, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.from_dlpack(p.scaled), s * g, rtol=1e-4, atol=1e-4)
        parts = np.from_dlpack(p.sq_parts)
        self.assertEqual((parts.shape[0], parts.ndim), (5, 2))
        np.testing.assert_allclose(parts.sum(-1), (s * s).sum(-1), rtol=1e-4)
        self.assertEqual(p.eps, eps)
        h = s / np.sqrt((s * s).mean(-1, keepdims=True) + eps) * g
        got = np.from_dlpack(kiln.pending_rms_norm_linear(p, kiln.tensor(w)))
        np.testing.assert_allclose(got, h @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)
        # a pending norm made by hand: partial sums in any split, any leading shape
        s3 = RNG.standard_normal((2, 3, H)).astype(np.float32)
        parts3 = np.stack([(s3[..., :5] ** 2).sum(-1), (s3[..., 5:] ** 2).sum(-1)], -1).astype(np.float32)
        p3 = kiln.PendingRmsNorm(kiln.tensor(s3), kiln.tensor(s3 * g), kiln.tensor(parts3), kiln.tensor(g), eps)
        b = RNG.standard_normal(12).astype(np.float32)
        got3 = np.from_dlpack(kiln.pending_rms_norm_linear(p3, kiln.tensor(w), kiln.tensor(b)))
        h3 = s3 / np.sqrt((s3.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * g
        np.testing.assert_allclose(got3, h3 @ w.T.astype(np.float64) + b, rtol=1e-4, atol=1e-4)
        with self.assertRaisesRegex(kiln.Error, r"residual must be \[5, 16\].*got \[5, 15\]"):
            kiln.moe_experts_combine_rms_norm(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down), r,
                                              kiln.tensor(res[:, :15]), kiln.tensor(g), eps)
        with self.assertRaisesRegex(kiln.Error, r"norm_weight must be \[16\]"):
            kiln.moe_experts_combine_rms_norm(kiln.tensor(x), kiln.tensor(gate_up), kiln.tensor(down), r,
                                              kiln.tensor(res), kiln.tensor(g[:4]), eps)
        with self.assertRaisesRegex(kiln.Error, r"sq_parts must be float32 \[\.\.\., P\].*got float32 \[3, 2\]"):
            kiln.pending_rms_norm_linear(kiln.PendingRmsNorm(kiln.tensor(s3), kiln.tensor(s3 * g),
                                                             kiln.tensor(parts3[0]), kiln.tensor(g), eps), kiln.tensor(w))
        with self.assertRaisesRegex(kiln.Error, "sum and scaled must match"):
            kiln.pending_rms_norm_linear(kiln.PendingRmsNorm(kiln.tensor(s3), kiln.tensor(s3[0]),
                                                             kiln.tensor(parts3), kiln.tensor(g), eps), kiln.tensor(w))
        with self.assertRaisesRegex(kiln.Error, "eps must be non-negative"):
            kiln.pending_rms_norm_linear(kiln.PendingRmsNorm(kiln.tensor(s3), kiln.tensor(s3 * g),
                                                             kiln.tensor(parts3), kiln.tensor(g), -1.0), kiln.tensor(w))

    def test_bad_input_raises(self):
        with self.assertRaisesRegex(kiln.Error, r"k = 9 must be in \[1, 8\]"):
            kiln.moe_route(kiln.zeros((2, 8)), 9)
        with self.assertRaisesRegex(kiln.Error, "1 to 1024 experts"):
            kiln.moe_route(kiln.zeros((2, 2000)), 2)
        with self.assertRaisesRegex(kiln.Error, "scoring"):
            kiln.moe_route(kiln.zeros((2, 8)), 2, scoring="relu")
        r = kiln.moe_route(kiln.zeros((2, 8)), 2)
        with self.assertRaisesRegex(kiln.Error, r"\[4, N\]"):
            kiln.moe_combine(kiln.zeros((3, 5)), r)


if __name__ == "__main__":
    unittest.main()
