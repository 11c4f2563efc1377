"""scaled_mm and grouped_mm on the CPU against numpy (float64 references)."""
import os
import subprocess
import sys
import unittest

import numpy as np

import kiln
import kiln.nn.functional as KF

RNG = np.random.default_rng(7)


def e4m3_value(code):
    """The float8_e4m3fn format's formula, independent of kiln."""
    s, e, m = code >> 7, (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


DECODE = np.array([e4m3_value(c) for c in range(256)])


def random_fp8(shape, allow_nan=False):
    """(kiln tensor, its float64 values): random codes, NaN codes left out unless asked."""
    codes = RNG.integers(0, 256, size=shape, dtype=np.uint8)
    if not allow_nan:
        codes[(codes & 0x7F) == 0x7F] = 0x38  # 1.0
    return kiln.from_dlpack(codes).view(kiln.float8_e4m3fn), DECODE[codes]


class ScaledMm(unittest.TestCase):
    def test_tensorwise_and_rowwise_with_bias(self):
        for m, kk, n in [(1, 64, 32), (5, 128, 48), (33, 256, 16)]:
            a, av = random_fp8((m, kk))
            w, wv = random_fp8((n, kk))
            for rowwise in (False, True):
                sa = RNG.random((m, 1) if rowwise else ()).astype(np.float32) + 0.5
                sb = RNG.random((1, n) if rowwise else ()).astype(np.float32) + 0.5
                bias = RNG.standard_normal(n).astype(np.float32)
                ref = (av @ wv.T) * sa * sb + bias
                got = kiln._scaled_mm(a, w.t(), kiln.tensor(sa), kiln.tensor(sb), bias=kiln.tensor(bias),
                                      out_dtype=kiln.float32)
                np.testing.assert_allclose(np.from_dlpack(got), ref, rtol=2e-5, atol=1e-3 * np.abs(ref).max())
                g16 = kiln._scaled_mm(a, w.t(), kiln.tensor(sa), kiln.tensor(sb))  # bfloat16 by default
                self.assertEqual(g16.dtype, kiln.bfloat16)
                np.testing.assert_allclose(np.from_dlpack(g16.to(kiln.float32)), ref - bias, rtol=2 ** -8,
                                           atol=2 ** -8 * np.abs(ref).max())

    def test_nan_propagates_and_448_is_exact(self):
        a, av = random_fp8((4, 32))
        codes = np.from_dlpack(a.view(kiln.uint8)).copy()
        codes[1, 3] = 0x7F  # NaN
        a = kiln.from_dlpack(codes).view(kiln.float8_e4m3fn)
        w, _ = random_fp8((16, 32))
        one = kiln.tensor(1.0)
        got = np.from_dlpack(kiln._scaled_mm(a, w.t(), one, one, out_dtype=kiln.float32))
        self.assertTrue(np.isnan(got[1]).all())
        self.assertFalse(np.isnan(got[[0, 2, 3]]).any())
        big = kiln.full((16, 16), 448.0).to(kiln.float8_e4m3fn)
        got = kiln._scaled_mm(big, big.t(), one, one, out_dtype=kiln.float32)
        self.assertEqual(got.tolist(), [[448.0 * 448.0 * 16] * 16] * 16)

    def test_bad_input_raises_with_values(self):
        a, _ = random_fp8((4, 32))
        w, _ = random_fp8((16, 32))
        one = kiln.tensor(1.0)
        with self.assertRaisesRegex(kiln.Error, r"column-major"):
            kiln._scaled_mm(a, w.t().contiguous(), one, one)
        with self.assertRaisesRegex(kiln.Error, r"\[4, 1\]"):
            kiln._scaled_mm(a, w.t(), kiln.ones((4,)), kiln.ones((1, 16)))
        with self.assertRaisesRegex(kiln.Error, "float8_e4m3fn"):
            kiln._scaled_mm(a.to(kiln.float32), w.t(), one, one)
        with self.assertRaisesRegex(kiln.Error, "cannot be multiplied"):
            kiln._scaled_mm(a, w, one, one)


class QuantizeFp8Rows(unittest.TestCase):
    def test_rows_hit_448_and_dequantise_within_fp8_rounding(self):
        w = RNG.standard_normal((6, 40)).astype(np.float32) * RNG.random((6, 1)).astype(np.float32) * 10
        w[3] = 0.0  # an all-zero row
        w8, scale = kiln.quantize_fp8_rows(kiln.tensor(w))
        self.assertEqual((w8.dtype, scale.shape), (kiln.float8_e4m3fn, (6,)))
        sv = np.from_dlpack(scale)
        np.testing.assert_allclose(sv[[0, 1, 2, 4, 5]], np.abs(w[[0, 1, 2, 4, 5]]).max(1) / 448, rtol=1e-6)
        self.assertEqual(sv[3], 1.0)
        codes = np.from_dlpack(w8.view(kiln.uint8))
        q = DECODE[codes]
        self.assertTrue((np.abs(q).max(1)[[0, 1, 2, 4, 5]] == 448).all())
        deq = q * sv[:, None]
        # e4m3 keeps 3 mantissa bits: a relative error of at most 2^-4 for normal values
        big = np.abs(w) > sv[:, None] * 2 ** -6
        self.assertTrue((np.abs(deq - w)[big] <= np.abs(w)[big] * 2 ** -4 + 1e-12).all())
        x = RNG.standard_normal((2, 40)).astype(np.float32)
        got = np.from_dlpack(KF.linear(kiln.tensor(x), w8, weight_scale=scale))
        np.testing.assert_allclose(got, x @ deq.T, rtol=1e-4, atol=1e-4)


class Fp8WeightLinear(unittest.TestCase):
    def test_every_code_with_vector_tails_and_nan_rows(self):
        for rows, kk in [(1, 256), (1, 300), (2, 40), (3, 512), (8, 264)]:
            codes = RNG.integers(0, 256, size=(24, kk), dtype=np.uint8)
            codes[:, :256 if kk >= 256 else kk] = np.arange(256, dtype=np.uint8)[:min(kk, 256)]  # every code
            codes[(codes & 0x7F) == 0x7F] = 0x01  # the smallest subnormal
            codes[5, kk - 1] = 0x7F  # a NaN in the scalar tail (or the last vector)
            codes[9, 3] = 0xFF  # a NaN in the first vector
            w = kiln.from_dlpack(codes).view(kiln.float8_e4m3fn)
            scale = RNG.random(24).astype(np.float32) + 0.5
            x = RNG.standard_normal((rows, kk)).astype(np.float32)
            got = np.from_dlpack(KF.linear(kiln.tensor(x), w, weight_scale=kiln.tensor(scale)))
            want = (x.astype(np.float64) @ DECODE[codes].T) * scale
            nan_rows = np.isnan(want).any(0)
            self.assertEqual(list(np.flatnonzero(nan_rows)), [5, 9])
            self.assertTrue(np.isnan(got[:, nan_rows]).all(), f"rows {rows} k {kk}")
            np.testing.assert_allclose(got[:, ~nan_rows], want[:, ~nan_rows], rtol=1e-5,
                                       atol=1e-5 * np.abs(want[:, ~nan_rows]).max(), err_msg=f"rows {rows} k {kk}")

    def test_bf16_inputs_every_code_tails_and_nan_rows(self):
        # bf16 inputs take the AVX512-BF16 path where the CPU has it (weights decoded in blocks of 64)
        for rows, kk in [(1, 40), (1, 64), (1, 256), (1, 300), (2, 128), (3, 200), (8, 264)]:
            codes = RNG.integers(0, 256, size=(20, kk), dtype=np.uint8)
            codes[:, :min(kk, 256)] = np.arange(256, dtype=np.uint8)[:min(kk, 256)]
            codes[(codes & 0x7F) == 0x7F] = 0x81  # the smallest negative subnormal
            codes[5, kk - 1] = 0x7F  # a NaN in the tail (or the last block)
            codes[9, 3] = 0xFF  # a NaN in the first block
            w = kiln.from_dlpack(codes).view(kiln.float8_e4m3fn)
            scale = RNG.random(20).astype(np.float32) + 0.5
            xb, xv = bf16_rows(RNG.standard_normal((rows, kk)).astype(np.float32))
            got = np.from_dlpack(KF.linear(xb, w, weight_scale=kiln.tensor(scale)).to(kiln.float32))
            want = (xv @ DECODE[codes].T) * scale
            nan_rows = np.isnan(want).any(0)
            self.assertEqual(list(np.flatnonzero(nan_rows)), [5, 9])
            self.assertTrue(np.isnan(got[:, nan_rows]).all(), f"rows {rows} k {kk}")
            # bf16 output: half an ulp of 2^-8, plus float32 sums of exact products
            np.testing.assert_allclose(got[:, ~nan_rows], want[:, ~nan_rows], rtol=2 ** -8,
                                       atol=1e-5 * np.abs(want[:, ~nan_rows]).max(), err_msg=f"rows {rows} k {kk}")

    def test_bf16_inputs_and_weights(self):
        for rows, kk in [(1, 24), (1, 64), (1, 1000), (4, 96), (8, 130)]:
            xb, xv = bf16_rows(RNG.standard_normal((rows, kk)).astype(np.float32))
            wb, wv = bf16_rows(RNG.standard_normal((33, kk)).astype(np.float32))
            got = np.from_dlpack(KF.linear(xb, wb).to(kiln.float32))
            want = xv @ wv.T
            np.testing.assert_allclose(got, want, rtol=2 ** -8, atol=1e-5 * np.abs(want).max(),
                                       err_msg=f"rows {rows} k {kk}")


def bf16_rows(x):
    """(kiln bfloat16 tensor, its float64 values): x rounded to bfloat16 in numpy (nearest even)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    values = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return kiln.from_dlpack(b).view(kiln.bfloat16), values


class PrefetchOverride(unittest.TestCase):
    def test_a_bad_prefetch_distance_raises_naming_it(self):
        # read once per process (cpu/prefetch.h), so each value runs in a fresh interpreter
        code = ("import kiln, kiln.nn.functional as KF\n"
                "w = kiln.zeros((64, 256), dtype=kiln.bfloat16)\n"
                "x = kiln.zeros((1, 256), dtype=kiln.bfloat16)\n"
                "try:\n    KF.linear(x, w)\n    print('ran')\n"
                "except kiln.Error as e:\n    print(e)\n")
        for value, want in [("-1", "got '-1'"), ("4k", "got '4k'"), ("", "got ''"), ("99999999999999999999999", "got '9"),
                            ("4096", "ran"), ("0", "ran")]:
            env = dict(os.environ, KILN_CPU_PREFETCH_AHEAD=value)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
            self.assertIn(want, out, msg=value)
            if want != "ran":
                self.assertIn("KILN_CPU_PREFETCH_AHEAD must be a count of bytes", out)


class InputPhase(unittest.TestCase):
    """KILN_CPU_INPUT_PHASE places the decode dots' copy of the input (cpu/prefetch.h): where it
    lies may change the speed, never a value."""

    CODE = ("import hashlib, numpy as np, kiln, kiln.nn.functional as KF\n"
            "rng = np.random.default_rng(7)\n"
            "out = []\n"
            "for n, k, rows in [(200, 1024, 1), (75, 320, 3), (33, 130, 8)]:\n"
            "    w = kiln.tensor(rng.standard_normal((n, k)).astype(np.float32)).to(kiln.bfloat16)\n"
            "    x = kiln.tensor(rng.standard_normal((rows, k)).astype(np.float32)).to(kiln.bfloat16)\n"
            "    out.append(np.from_dlpack(KF.linear(x, w).to(kiln.float32)).tobytes())\n"
            "    w8 = kiln.tensor(rng.standard_normal((n, k)).astype(np.float32)).to(kiln.float8_e4m3fn)\n"
            "    s = kiln.tensor(rng.random(n).astype(np.float32))\n"
            "    out.append(np.from_dlpack(KF.linear(x, w8, weight_scale=s).to(kiln.float32)).tobytes())\n"
            "print(hashlib.sha1(b''.join(out)).hexdigest())\n")

    def run_with(self, value):
        env = dict(os.environ, KILN_CPU_INPUT_PHASE=value)
        return subprocess.run([sys.executable, "-c", self.CODE], env=env, capture_output=True, text=True)

    def test_every_phase_gives_the_same_bits(self):
        digests = {v: self.run_with(v) for v in ("0", "16", "32", "48", "64")}
        for v, r in digests.items():
            self.assertEqual(r.returncode, 0, msg=f"phase {v}: {r.stderr[-500:]}")
        self.assertEqual(len({r.stdout for r in digests.values()}), 1, msg={v: r.stdout for v, r in digests.items()})

    def test_a_bad_phase_raises_naming_it(self):
        r = self.run_with("16b")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("KILN_CPU_INPUT_PHASE must be a count of bytes", r.stderr)


class GroupedMm(unittest.TestCase):
    def test_2d_3d_with_empty_groups(self):
        counts = [3, 0, 5, 0, 1, 0]
        rows, kk, n = sum(counts) + 2, 24, 20  # two rows past the last offset
        a = RNG.standard_normal((rows, kk)).astype(np.float32)
        w = RNG.standard_normal((len(counts), n, kk)).astype(np.float32)
        offs = np.cumsum(counts).astype(np.int32)
        got = np.from_dlpack(KF.grouped_mm(kiln.tensor(a), kiln.tensor(w).transpose(-2, -1), offs=kiln.tensor(offs)))
        ref = np.zeros((rows, n))
        start = 0
        for g, end in enumerate(offs):
            ref[start:end] = a[start:end].astype(np.float64) @ w[g].T.astype(np.float64)
            start = end
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        # bfloat16 in, float32 out
        kb = KF.grouped_mm(kiln.tensor(a).to(kiln.bfloat16), kiln.tensor(w).to(kiln.bfloat16).transpose(-2, -1),
                           offs=kiln.tensor(offs), out_dtype=kiln.float32)
        self.assertEqual(kb.dtype, kiln.float32)
        np.testing.assert_allclose(np.from_dlpack(kb), ref, rtol=0.02, atol=0.1)

    def test_3d_3d_and_2d_2d(self):
        a = RNG.standard_normal((3, 4, 8)).astype(np.float32)
        b = RNG.standard_normal((3, 8, 5)).astype(np.float32)
        np.testing.assert_allclose(np.from_dlpack(KF.grouped_mm(kiln.tensor(a), kiln.tensor(b))), a @ b, rtol=1e-5,
                                   atol=1e-5)
        x = RNG.standard_normal((6, 10)).astype(np.float32)
        y = RNG.standard_normal((10, 7)).astype(np.float32)
        offs = np.array([4, 4, 10], dtype=np.int32)
        got = np.from_dlpack(KF.grouped_mm(kiln.tensor(x), kiln.tensor(y), offs=kiln.tensor(offs)))
        ref = np.stack([x[:, :4] @ y[:4], np.zeros((6, 7)), x[:, 4:] @ y[4:]])
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)

    def test_zero_tokens(self):
        got = KF.grouped_mm(kiln.zeros((0, 8)), kiln.zeros((2, 8, 4)), offs=kiln.tensor([0, 0], dtype=kiln.int32))
        self.assertEqual(got.shape, (0, 4))

    def test_fp8_weights_with_scales(self):
        counts = [3, 0, 5, 0, 1, 0]
        G, rows, kk, n = len(counts), sum(counts) + 2, 32, 24  # two rows past the last offset
        offs = np.cumsum(counts).astype(np.int32)
        a = RNG.standard_normal((rows, kk)).astype(np.float32)
        w8, wv = random_fp8((G, n, kk))  # weights [G, N, K]
        per_row = (RNG.random((G, n)) + 0.5).astype(np.float32)
        per_group = (RNG.random(G) + 0.5).astype(np.float32)
        for scale, full in [(per_row, per_row), (per_group, np.repeat(per_group[:, None], n, 1)),
                            (per_group[:, None], np.repeat(per_group[:, None], n, 1)),
                            (np.float32(0.25), np.full((G, n), 0.25))]:
            ref = np.zeros((rows, n))
            start = 0
            for g, end in enumerate(offs):
                ref[start:end] = a[start:end].astype(np.float64) @ (wv[g] * full[g][:, None]).T
                start = end
            got = np.from_dlpack(KF.grouped_mm(kiln.tensor(a), w8.transpose(-2, -1), offs=kiln.tensor(offs),
                                               b_scale=kiln.tensor(scale)))
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max(),
                                       err_msg=f"scale shape {np.shape(scale)}")
            kb = KF.grouped_mm(kiln.tensor(a).to(kiln.bfloat16), w8.transpose(-2, -1), offs=kiln.tensor(offs),
                               b_scale=kiln.tensor(scale), out_dtype=kiln.float32)
            self.assertEqual(kb.dtype, kiln.float32)
            np.testing.assert_allclose(np.from_dlpack(kb), ref, rtol=0.02, atol=0.02 * np.abs(ref).max())
        # 3-D x 3-D: a batched matmul against the dequantised weights
        a3 = RNG.standard_normal((G, 4, kk)).astype(np.float32)
        got = np.from_dlpack(KF.grouped_mm(kiln.tensor(a3), w8.transpose(-2, -1), b_scale=kiln.tensor(per_row)))
        ref = a3.astype(np.float64) @ (wv * per_row[:, :, None]).transpose(0, 2, 1)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())

    def test_fp8_bad_input_raises(self):
        a, offs = kiln.zeros((6, 16)), kiln.tensor([3, 6], dtype=kiln.int32)
        b8 = kiln.zeros((2, 4, 16)).to(kiln.float8_e4m3fn).transpose(-2, -1)
        with self.assertRaisesRegex(kiln.Error, "needs b_scale"):
            KF.grouped_mm(a, b8, offs=offs)
        with self.assertRaisesRegex(kiln.Error, r"b_scale shape \[2, 3\] must be .*\[2, 4\]"):
            KF.grouped_mm(a, b8, offs=offs, b_scale=kiln.ones((2, 3)))
        with self.assertRaisesRegex(kiln.Error, "b_scale must be float32, got bfloat16"):
            KF.grouped_mm(a, b8, offs=offs, b_scale=kiln.ones((2, 4)).to(kiln.bfloat16))
        with self.assertRaisesRegex(kiln.Error, "only for a float8_e4m3fn b"):
            KF.grouped_mm(a, kiln.zeros((2, 16, 4)), offs=offs, b_scale=kiln.ones((2, 4)))
        with self.assertRaisesRegex(kiln.Error, "not 2-D x 2-D"):
            KF.grouped_mm(kiln.zeros((4, 6)), kiln.zeros((6, 5)).to(kiln.float8_e4m3fn), offs=offs,
                          b_scale=kiln.ones(()))

    def test_bad_input_raises_with_values(self):
        a, b = kiln.zeros((6, 8)), kiln.zeros((2, 8, 4))
        with self.assertRaisesRegex(kiln.Error, r"offs\[1\] = 2 after 5"):
            KF.grouped_mm(a, b, offs=kiln.tensor([5, 2], dtype=kiln.int32))
        with self.assertRaisesRegex(kiln.Error, "at most 6"):
            KF.grouped_mm(a, b, offs=kiln.tensor([5, 7], dtype=kiln.int32))
        with self.assertRaisesRegex(kiln.Error, "int32"):
            KF.grouped_mm(a, b, offs=kiln.tensor([5, 6]))
        with self.assertRaisesRegex(kiln.Error, "3 groups"):
            KF.grouped_mm(a, kiln.zeros((3, 8, 4)), offs=kiln.tensor([5, 6], dtype=kiln.int32))
        with self.assertRaisesRegex(kiln.Error, "bias"):
            KF.grouped_mm(a, b, offs=kiln.tensor([5, 6], dtype=kiln.int32), bias=kiln.zeros((2, 4)))
        with self.assertRaisesRegex(kiln.Error, "offs is required"):
            KF.grouped_mm(a, b)


if __name__ == "__main__":
    unittest.main()
