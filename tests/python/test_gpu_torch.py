"""kiln on CUDA checked op by op against PyTorch on the same tensors (GPU machine).

Skipped where torch or a CUDA device is missing (CI). Run there with
    PYTHONPATH=build/python python3 -m unittest discover -s tests/python -v
"""
import math
import unittest

import kiln
from gpu_common import DEV, HAVE, T, TorchParityBase, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class TorchParity(TorchParityBase):
    # ---- DLPack both ways, no copy ----
    def test_dlpack_shares_cuda_memory(self):
        x = torch.randn(64, 33, device=DEV)[:, 1:]
        kx = k(x)
        self.assertEqual(kx.data_ptr(), x.data_ptr())
        self.assertEqual(kx.stride(), x.stride())
        y = T(kx * 2)
        torch.testing.assert_close(y, x * 2)
        back = T(kx)
        self.assertEqual(back.data_ptr(), x.data_ptr())
        z = T(kiln.zeros(0, 5, device=DEV))
        self.assertEqual(tuple(z.shape), (0, 5))

    def test_dlpack_orders_work_across_streams(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            big = torch.ones(1 << 24, device=DEV)
            big.mul_(3)
        kb = k(big)  # kiln's stream waits for s
        self.assertEqual(kb.sum().item(), 3.0 * (1 << 24))

    # ---- casts: every pair, bit-exact; fp8 both rules ----
    def test_casts_bit_exact(self):
        src = torch.cat([torch.randn(4096, device=DEV) * 100, torch.tensor(
            [0.0, -0.0, 1e-8, -1e-8, 65504.0, 65520.0, 1e38, 3e38, float("inf"), -float("inf"), float("nan"),
             447.9, 448.0, 463.9, 464.0, 464.1, 57344.0, 61440.0, 0.5 ** 9, 0.5 ** 10, 0.5 ** 17],
            device=DEV)])
        floats = [torch.float32, torch.float16, torch.bfloat16]
        for sd in floats:
            s = src.to(sd)
            for dd in floats + [torch.float8_e5m2, torch.int32, torch.int8, torch.uint8, torch.bool]:
                if dd in (torch.int32, torch.int8, torch.uint8):
                    finite = s[torch.isfinite(s)].clamp(-100, 100)  # in range: C leaves the rest undefined
                    if dd == torch.uint8:
                        finite = finite.abs()
                    self.assertSame(k(finite).to(getattr(kiln, str(dd)[6:])), finite.to(dd), msg=f"{sd}->{dd}")
                    continue
                self.assertSame(k(s).to(getattr(kiln, str(dd)[6:])), s.to(dd), msg=f"{sd}->{dd}")

    def test_complex_casts(self):
        z = torch.randn(300, device=DEV, dtype=torch.complex64)
        x = torch.randn(300, device=DEV)
        self.assertSame(k(z).to(kiln.float32), z.real.contiguous())
        self.assertSame(k(z).to(kiln.bfloat16), z.real.to(torch.bfloat16))
        self.assertSame(k(x).to(kiln.complex64), x.to(torch.complex64))
        self.assertSame(k(x.to(torch.int32)).to(kiln.complex64), x.to(torch.int32).to(torch.complex64))
        self.assertEqual(k(z).cpu().tolist(), z.cpu().tolist())

    def test_fp8_e4m3_both_saturation_rules(self):
        codes = torch.arange(256, device=DEV, dtype=torch.int32).to(torch.uint8)
        for name in ("float8_e4m3fn", "float8_e5m2"):
            td, kd = getattr(torch, name), getattr(kiln, name)
            ref = codes.view(td).float()
            self.assertSame(k(codes).view(kd).to(kiln.float32), ref, msg=name)
        x = torch.cat([torch.randn(100000, device=DEV) * 300, torch.tensor(
            [448.0, 449.0, 463.99, 464.0, 480.0, 1e6, float("inf"), -float("inf"), float("nan"), -500.0],
            device=DEV)])
        for sd in (torch.float32, torch.bfloat16, torch.float16):
            xs = x.to(sd)
            # saturate=False is the rule PyTorch 2.11 follows: overflow and inf become NaN
            self.assertSame(k(xs).to(kiln.float8_e4m3fn, saturate=False), xs.to(torch.float8_e4m3fn), msg=str(sd))
            # satfinite: the same as clamping to +-448 first (NaN stays NaN)
            clamped = torch.where(torch.isnan(xs), xs, xs.clamp(-448, 448))
            self.assertSame(k(xs).to(kiln.float8_e4m3fn), clamped.to(torch.float8_e4m3fn), msg=str(sd))

    def test_fp8_e4m3_fast_cast_groups(self):
        # lengths that are multiples of 16 on 16-byte boundaries take the paired-cvt kernel;
        # its groups with |x| > 448 or NaN fall back to the per-element rule
        codes = torch.arange(256, device=DEV, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
        small = torch.randn(1 << 16, device=DEV) * 40
        mixed = small.clone()
        mixed[::997] = torch.tensor([500.0, float("nan"), -1e6, 448.0, 464.0, float("inf")], device=DEV).repeat(
            (mixed[::997].numel() + 5) // 6)[:mixed[::997].numel()]
        for name, x in (("codes", codes), ("finite codes", codes[torch.isfinite(codes)][:240]), ("small", small),
                        ("mixed", mixed), ("offset 16", small[16:]), ("unaligned", small[1:65]),
                        ("at 448", torch.full((32,), 448.0, device=DEV)), ("just over", torch.full((32,), 448.5, device=DEV))):
            for sd in (torch.float32, torch.bfloat16, torch.float16):
                xs = x.to(sd)
                self.assertSame(k(xs).to(kiln.float8_e4m3fn, saturate=False), xs.to(torch.float8_e4m3fn),
                                msg=f"{name} {sd}")
                clamped = torch.where(torch.isnan(xs), xs, xs.clamp(-448, 448))
                self.assertSame(k(xs).to(kiln.float8_e4m3fn), clamped.to(torch.float8_e4m3fn), msg=f"{name} {sd}")

    # ---- creation ops ----
    def test_arange_full_zeros_ones_against_torch(self):
        for args, dt in (((10,), "int64"), ((-7, 25, 3), "int32"), ((0, 1000), "float32"), ((0.0, 1.0, 0.125), "float32"),
                         ((5, -5, -1), "int64"), ((0, 100, 7), "bfloat16"), ((0, 4096), "float16")):
            ref = torch.arange(*args, dtype=getattr(torch, dt), device=DEV)
            self.assertSame(kiln.arange(*args, dtype=getattr(kiln, dt), device="cuda"), ref, msg=str(args))
        ref = torch.arange(0.0, 3.0, 0.1, device=DEV)
        got = T(kiln.arange(0.0, 3.0, 0.1, device="cuda"))
        self.assertEqual(got.shape, ref.shape)  # same length rule for an inexact step
        torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
        for shape, v, dt in (((3, 5), 2.5, "float32"), ((0, 4), 1, "int64"), ((7,), True, "bool"),
                             ((2, 3), -3, "int8"), ((9,), 1.0e-3, "bfloat16")):
            self.assertSame(kiln.full(shape, v, dtype=getattr(kiln, dt), device="cuda"),
                            torch.full(shape, v, dtype=getattr(torch, dt), device=DEV), msg=str(shape))
        self.assertSame(kiln.zeros(4, 0, 3, dtype=kiln.float16, device="cuda"), torch.zeros(4, 0, 3, dtype=torch.float16, device=DEV))
        self.assertSame(kiln.ones(5, 6, dtype=kiln.uint8, device="cuda"), torch.ones(5, 6, dtype=torch.uint8, device=DEV))

    def test_random_distributions_match_torch(self):
        # kiln's generator is its own (values differ from torch's); the distributions must not:
        # two-sample Kolmogorov-Smirnov distance between kiln's and torch's draws
        n = 1 << 20

        def ks(a, b):
            both = torch.cat([a, b]).sort().values
            fa = torch.searchsorted(a.sort().values, both, right=True).double() / a.numel()
            fb = torch.searchsorted(b.sort().values, both, right=True).double() / b.numel()
            return (fa - fb).abs().max().item()

        for dt in ("float32", "bfloat16"):
            u = T(kiln.rand(n, dtype=getattr(kiln, dt), device="cuda", generator=kiln.Generator(7))).float()
            g = T(kiln.randn(n, dtype=getattr(kiln, dt), device="cuda", generator=kiln.Generator(7))).float()
            tu = torch.rand(n, device=DEV, dtype=getattr(torch, dt)).float()
            tg = torch.randn(n, device=DEV, dtype=getattr(torch, dt)).float()
            self.assertLess(ks(u, tu), 6e-3, dt)  # 1.63 * sqrt(2 / n) is the 1% critical value: 2.3e-3
            self.assertLess(ks(g, tg), 6e-3, dt)
            self.assertTrue(bool(((u >= 0) & (u < 1)).all()), dt)
        again = T(kiln.randn(n, device="cuda", generator=kiln.Generator(7)))
        self.assertTrue(torch.equal(again, T(kiln.randn(n, device="cuda", generator=kiln.Generator(7)))))

    # ---- elementwise ----
    def test_elementwise_against_torch(self):
        for dt, tol in ((torch.float32, 1e-6), (torch.bfloat16, 1e-2), (torch.float16, 1e-3)):
            a = torch.randn(37, 1, 129, device=DEV, dtype=dt)
            b = torch.randn(5, 1, device=DEV, dtype=dt)
            ka, kb = k(a), k(b)
            pairs = [(ka + kb, a + b), (ka - kb, a - b), (ka * kb, a * b), (ka / kb, a / b),
                     (kiln.maximum(ka, kb), torch.maximum(a, b)), (ka * 0.5, a * 0.5), (3 - ka, 3 - a),
                     (kiln.add(ka, kb, alpha=2), torch.add(a, b, alpha=2)),
                     (kiln.exp(ka), a.exp()), (kiln.tanh(ka), a.tanh()), (kiln.sigmoid(ka), a.sigmoid()),
                     (kiln.nn.functional.silu(ka), torch.nn.functional.silu(a)),
                     (kiln.gelu(ka), torch.nn.functional.gelu(a)),
                     (kiln.gelu(ka, "tanh"), torch.nn.functional.gelu(a, approximate="tanh")),
                     (kiln.abs(ka), a.abs()), (-ka, -a), (kiln.sqrt(kiln.abs(ka)), a.abs().sqrt()),
                     (kiln.log(kiln.abs(ka) + 1), (a.abs() + 1).log()), (kiln.rsqrt(kiln.abs(ka) + 1), (a.abs() + 1).rsqrt()),
                     (ka ** 2, a ** 2), (kiln.pow(kiln.abs(ka), kb), a.abs().pow(b))]
            for i, (got, ref) in enumerate(pairs):
                self.assertSame(got, ref, rtol=tol, atol=tol, msg=f"{dt} case {i}")
            for op in ("eq", "ne", "lt", "le", "gt", "ge"):
                self.assertSame(getattr(kiln, op)(ka, kb), getattr(torch, op)(a, b), msg=op)
            self.assertSame(kiln.where(ka > 0, ka, kb), torch.where(a > 0, a, b))

    def test_mixed_dtypes_promote_as_torch(self):
        combos = [(torch.int32, torch.float16), (torch.uint8, torch.int8), (torch.bfloat16, torch.float16),
                  (torch.int64, torch.float32), (torch.bool, torch.int16)]
        for da, db in combos:
            a = (torch.randn(8, 3, device=DEV) * 10).to(da)
            b = (torch.randn(3, device=DEV) * 10).to(db)
            self.assertSame(k(a) + k(b), a + b, rtol=1e-3, atol=1e-3, msg=f"{da}+{db}")
            self.assertSame(k(a) * 2.5, a * 2.5, rtol=1e-3, atol=1e-3, msg=f"{da}*2.5")

    def test_zero_length_tensors(self):
        a = torch.randn(0, 7, device=DEV)
        self.assertSame(k(a) + 1, a + 1)
        self.assertSame(k(a).sum(0), a.sum(0))
        self.assertSame(k(a).sum(1), a.sum(1))
        self.assertSame(k(a).mean(0), a.mean(0))
        self.assertSame(k(a).prod(0), a.prod(0))
        self.assertSame(kiln.matmul(k(a), k(torch.randn(7, 4, device=DEV))), a @ torch.randn(7, 4, device=DEV))

    # ---- copies and layouts: each launcher path (flat, rows, tiled transpose, strided) ----
    def test_layout_paths_against_torch(self):
        x = torch.randn(67, 129, device=DEV)
        b = torch.randn(6, 130, 64, device=DEV, dtype=torch.bfloat16)
        cases = [
            (k(x).t().contiguous(), x.t().contiguous()),                          # tiled transpose
            (k(b).permute(0, 2, 1).contiguous(), b.permute(0, 2, 1).contiguous()),  # batched transpose
            (k(b).permute(2, 0, 1).contiguous(), b.permute(2, 0, 1).contiguous()),  # general strided
            (k(b)[:, 1:, :].contiguous(), b[:, 1:, :].contiguous()),
            (k(b) + k(b[0, 0]), b + b[0, 0]),                                   # rows: bias add
            (k(b) * k(b[:, :, :1]), b * b[:, :, :1]),                           # rows: per-row scale
            (k(b)[:, ::2] - 1, b[:, ::2] - 1),                                  # rows with a row stride
            (k(x)[:, 3:] * 2, x[:, 3:] * 2),                                    # misaligned rows: strided
            (kiln.exp(k(x).t()), x.t().exp()),
        ]
        for i, (got, ref) in enumerate(cases):
            self.assertSame(got, ref, rtol=1e-6, atol=1e-6, msg=f"case {i}")

    def test_more_than_2_to_the_31_elements_strided(self):
        a = torch.randint(0, 100, (3, (1 << 30) + 1), device=DEV, dtype=torch.uint8)
        got = T(k(a).t() + 1)
        self.assertTrue(torch.equal(got, a.t() + 1))
        del got, a
        torch.cuda.empty_cache()
        kiln.cuda.empty_cache()

    # ---- reductions ----
    def test_reductions_against_torch(self):
        shapes = [(1000,), (3, 4097), (257, 33), (64, 1, 300), (5, 6, 7, 8), (1 << 21,), (2048, 2048)]
        for shape in shapes:
            for dt in (torch.float32, torch.bfloat16):
                x = torch.randn(*shape, device=DEV, dtype=dt)
                kx = k(x)
                tol = 1e-4 if dt == torch.float32 else 2e-2
                dims_list = [None] + list(range(x.dim())) + ([(0, x.dim() - 1)] if x.dim() > 2 else [])
                for dims in dims_list:
                    kw = {} if dims is None else {"dim": dims}
                    msg = f"{shape} {dt} dims={dims}"
                    self.assertSame(kx.sum(dims), x.sum(**kw), rtol=tol, atol=tol * math.sqrt(x.numel()), msg=msg)
                    self.assertSame(kx.mean(dims), x.mean(**kw), rtol=tol, atol=tol, msg=msg)
                    self.assertSame(kx.amax(dims), x.amax(**kw) if dims is not None else x.amax(), msg=msg)
                    self.assertSame(kx.amin(dims, True), x.amin(**kw, keepdim=True) if dims is not None
                                    else x.amin().reshape([1] * x.dim()), msg=msg)
                for d in range(x.dim()):
                    v, i = kx.max(d)
                    tv, ti = x.max(d)
                    self.assertSame(v, tv, msg=f"max {shape} {d}")
                    self.assertSame(i, ti, msg=f"max idx {shape} {d}")
                    self.assertSame(kx.argmin(d, True), x.argmin(d, keepdim=True), msg=f"argmin {shape} {d}")
                self.assertSame(kx.argmax(), x.argmax(), msg=f"argmax all {shape}")

    def test_split_reductions_repeat_across_streams_and_under_capture(self):
        # R split over blocks: the last block folds the partials (ticket counters per stream,
        # reset by that block); while a graph is captured a second kernel folds them instead
        x, m = torch.randn(1 << 22, device=DEV), torch.randn(8192, 512, device=DEV)
        kx, km = k(x), k(m)

        def check(outs):
            self.assertSame(outs[0], x.sum(), rtol=1e-4, atol=1e-2, msg="sum all")
            self.assertSame(outs[1], m.sum(0), rtol=1e-4, atol=1e-3, msg="sum dim=0")
            self.assertSame(outs[2], m.argmax(0), msg="argmax dim=0")
            self.assertSame(outs[3], x.amax(), msg="amax all")

        def run():
            return [kx.sum(), km.sum(0), km.argmax(0), kx.amax()]

        for _ in range(3):
            check(run())
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        s1.wait_stream(torch.cuda.current_stream())
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s1), kiln.cuda.use_torch_stream(s1):
            a = [run() for _ in range(4)]
        with torch.cuda.stream(s2), kiln.cuda.use_torch_stream(s2):
            b = [run() for _ in range(4)]
        torch.cuda.synchronize()
        for outs in a + b:
            check(outs)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s1, capture_error_mode="relaxed"), kiln.cuda.use_torch_stream(s1):
            captured = run()
        x.copy_(torch.randn_like(x))
        m.copy_(torch.randn_like(m))
        g.replay()
        torch.cuda.synchronize()
        check(captured)
        del g

    def test_nan_and_ties(self):
        x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 2.0, 1.0, 2.0]], device=DEV)
        self.assertSame(k(x).argmax(1), x.argmax(1))
        self.assertSame(k(x).amax(1), x.amax(1))
        self.assertSame(k(x).max(1).indices, x.max(1).indices)
        self.assertSame(k(x).argmin(1), x.argmin(1))
        # bf16 / fp16 max and min run on packed pairs: NaN anywhere in a pair, infinities, odd tails
        for dt in (torch.bfloat16, torch.float16):
            for cols in (4096, 4104, 13):
                y = torch.randn(6, cols, device=DEV, dtype=dt)
                y[1, 10], y[3, cols - 1], y[5, 7] = float("nan"), float("nan"), float("inf")
                y[4] = float("-inf")
                for f in ("amax", "amin"):
                    self.assertSame(getattr(k(y), f)(1), getattr(y, f)(1), msg=f"{f} {dt} {cols}")
                    self.assertSame(getattr(k(y[4:]), f)(), getattr(y[4:], f)(), msg=f"{f} all {dt} {cols}")

    # ---- matmul ----
    def test_matmul_against_torch(self):
        for dt, tol in ((torch.float32, 1e-3), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
            for sa, sb in [((64, 48), (48, 80)), ((3, 17, 33), (33, 9)), ((2, 1, 8, 16), (5, 16, 4)), ((40,), (40, 6)),
                           ((7, 40), (40,))]:
                a, b = torch.randn(*sa, device=DEV, dtype=dt), torch.randn(*sb, device=DEV, dtype=dt)
                self.assertSame(kiln.matmul(k(a), k(b)), a @ b, rtol=tol, atol=tol * 10, msg=f"{dt} {sa}x{sb}")
            a, b = torch.randn(96, 64, device=DEV, dtype=dt), torch.randn(80, 64, device=DEV, dtype=dt)
            self.assertSame(kiln.matmul(k(a), k(b).t()), a @ b.t(), rtol=tol, atol=tol * 10)
            self.assertSame(kiln.matmul(k(b.t().contiguous()).t(), k(a).t()), b @ a.t(), rtol=tol, atol=tol * 10)
            self.assertSame(kiln.nn.functional.linear(k(a), k(b)), torch.nn.functional.linear(a, b), rtol=tol,
                            atol=tol * 10)


    # ---- linear: decode kernel (<= 8 rows), GEMM path, fp8 weights ----
    def test_linear_against_torch(self):
        F = torch.nn.functional
        for dt, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
            for (n, kk) in [(37, 256), (128, 2048), (1000, 1024), (64, 100)]:  # K=100: unaligned fallback
                w = torch.randn(n, kk, device=DEV, dtype=dt) / kk ** 0.5
                b = torch.randn(n, device=DEV, dtype=dt)
                for shape in [(1, kk), (1, 1, kk), (3, kk), (2, 4, kk), (9, kk), (40, kk)]:
                    x = torch.randn(*shape, device=DEV, dtype=dt)
                    msg = f"{dt} {n}x{kk} {shape}"
                    self.assertSame(kiln.nn.functional.linear(k(x), k(w)), F.linear(x, w), rtol=tol, atol=tol, msg=msg)
                    self.assertSame(kiln.nn.functional.linear(k(x), k(w), k(b)), F.linear(x, w, b), rtol=tol, atol=tol,
                                    msg=msg + " bias")

    def test_linear_fp8_weights(self):
        F = torch.nn.functional
        n, kk = 300, 1024
        w8 = (torch.randn(n, kk, device=DEV) * 60).to(torch.float8_e4m3fn)
        for scale in (torch.rand(n, device=DEV) * 0.01, torch.tensor(0.003, device=DEV), torch.rand(n, 1, device=DEV)):
            ws = w8.float() * (scale.reshape(-1, 1) if scale.numel() > 1 else scale)
            for rows in (1, 4, 8, 20):
                x = torch.randn(rows, kk, device=DEV, dtype=torch.bfloat16)
                ref = F.linear(x.float(), ws).to(torch.bfloat16)
                got = kiln.nn.functional.linear(k(x), k(w8), weight_scale=k(scale))
                self.assertSame(got, ref, rtol=2e-2, atol=2e-2 * float(ref.float().abs().max()),
                                msg=f"rows {rows} scale {tuple(scale.shape)}")


    def test_linear_silu_and_mul_against_torch(self):
        F = torch.nn.functional
        KF = kiln.nn.functional

        def ref(p):  # silu_and_mul of the product as rounded to its dtype
            g, u = p.float().chunk(2, dim=-1)
            return (F.silu(g) * u).to(p.dtype)

        for dt, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
            # H = 12288 (Qwen3-8B's, several blocks a row); odd H; K = 100: the unaligned fallback
            for (h, kk) in [(37, 256), (12288, 512), (1000, 1024), (64, 100)]:
                w = torch.randn(2 * h, kk, device=DEV, dtype=dt) / kk ** 0.5
                b = torch.randn(2 * h, device=DEV, dtype=dt)
                for shape in [(1, kk), (1, 1, kk), (3, kk), (9, kk)]:
                    x = torch.randn(*shape, device=DEV, dtype=dt)
                    msg = f"{dt} 2x{h}x{kk} {shape}"
                    self.assertSame(KF.linear_silu_and_mul(k(x), k(w)), ref(F.linear(x, w)), rtol=tol, atol=tol, msg=msg)
                    got = KF.linear_silu_and_mul(k(x), k(w), k(b))
                    if dt == torch.float32:
                        self.assertSame(got, ref(F.linear(x, w, b)), rtol=tol, atol=tol, msg=msg + " bias")
                        continue
                    # With a bias, kiln and torch may round the half-precision product once or
                    # twice (the bias added before or after), a unit in the last place apart, which
                    # silu(g) * u carries on: held to the float32 result within what one such
                    # rounding of g and of u, and the output's own, can move it.
                    xw = F.linear(x.float(), w.float())
                    g, u = (xw + b.float()).chunk(2, dim=-1)
                    # a rounding of x w before the bias moves the sum by up to eps |x w|
                    dg, du = ((xw.abs() + (xw + b.float()).abs()) * torch.finfo(dt).eps).chunk(2, dim=-1)
                    sg = torch.sigmoid(g)
                    silu_grad = sg * (1 + g * (1 - sg))
                    exact = g * sg * u
                    bound = (silu_grad * u).abs() * dg + (g * sg).abs() * du + torch.finfo(dt).eps * exact.abs() + tol * 0.01
                    err = (torch.from_dlpack(got).float() - exact).abs()
                    self.assertTrue(bool((err <= bound).all()), f"{msg} bias: {int((err > bound).sum())} outside the "
                                    f"rounding bound, worst excess {float((err - bound).max()):.3g}")
        # fp8 weights with per-row and per-tensor scales: 1..8 rows run the fused kernel
        h, kk = 300, 1024
        w8 = (torch.randn(2 * h, kk, device=DEV) * 60).to(torch.float8_e4m3fn)
        for scale in (torch.rand(2 * h, device=DEV) * 0.01, torch.tensor(0.003, device=DEV)):
            ws = w8.float() * (scale.reshape(-1, 1) if scale.numel() > 1 else scale)
            for rows in (1, 4, 8, 20):
                x = torch.randn(rows, kk, device=DEV, dtype=torch.bfloat16)
                want = ref(F.linear(x.float(), ws).to(torch.bfloat16))
                got = KF.linear_silu_and_mul(k(x), k(w8), weight_scale=k(scale))
                self.assertSame(got, want, rtol=2e-2, atol=2e-2 * float(want.float().abs().max()),
                                msg=f"fp8 rows {rows} scale {tuple(scale.shape)}")

    # ---- softmax / log_softmax: rows, split long rows, other dims, special values ----
    def test_softmax_against_torch(self):
        shapes = [(1, 7), (37, 1000), (8, 4096), (3, 5000), (1, 32000), (1, 128256), (1, 151936), (2, 262144),
                  (1, 100003), (4, 3, 50)]
        for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1e-2), (torch.float16, 1e-3)):
            for shape in shapes:
                x = (torch.randn(*shape, device=DEV) * 4).to(dt)
                for dim in ([-1, 0] if len(shape) == 2 else [-1, 1, 0]):
                    msg = f"{dt} {shape} dim {dim}"
                    self.assertSame(kiln.softmax(k(x), dim), torch.softmax(x, dim), rtol=tol, atol=tol * 1e-2, msg=msg)
                    self.assertSame(kiln.log_softmax(k(x), dim), torch.log_softmax(x, dim), rtol=tol, atol=tol,
                                    msg=msg + " log")
        x = torch.randn(4, 300, device=DEV)
        x[0] = -float("inf")
        x[1, :10] = -float("inf")
        x[2, 5] = 1e30
        x[3, 7] = float("nan")
        for f, g in ((kiln.softmax, torch.softmax), (kiln.log_softmax, torch.log_softmax)):
            self.assertSame(f(k(x), -1), g(x, -1), rtol=1e-5, atol=1e-6)
        self.assertSame(kiln.softmax(k(x.half()), -1, kiln.float32), torch.softmax(x.half(), -1, dtype=torch.float32),
                        rtol=1e-5, atol=1e-6)


    # ---- scaled_dot_product_attention (math path): GQA, masks, causal, broadcasting ----
    def test_sdpa_against_torch_math(self):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        F, KF = torch.nn.functional, kiln.nn.functional
        for dt, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2), (torch.float16, 3e-3)):
            for hd in (40, 64, 80, 128, 256):
                q = torch.randn(2, 8, 9, hd, device=DEV, dtype=dt)
                kk, v = (torch.randn(2, 2, 13, hd, device=DEV, dtype=dt) for _ in range(2))
                bmask = torch.rand(9, 13, device=DEV) > 0.4
                bmask[3] = False  # a query with no key: 0 in the math path
                fmask = torch.randn(1, 8, 9, 13, device=DEV, dtype=dt)
                cases = [dict(), dict(is_causal=True), dict(attn_mask=bmask), dict(attn_mask=fmask), dict(scale=0.3)]
                for kw in cases:
                    with sdpa_kernel(SDPBackend.MATH):
                        ref = F.scaled_dot_product_attention(q, kk, v, enable_gqa=True, **kw)
                    kkw = {n: (k(x) if torch.is_tensor(x) else x) for n, x in kw.items()}
                    got = KF.scaled_dot_product_attention(k(q), k(kk), k(v), enable_gqa=True, **kkw)
                    self.assertSame(got, ref, rtol=tol, atol=tol, msg=f"{dt} hd {hd} {list(kw)}")
        # batch and head broadcasting of k and v (no GQA)
        q = torch.randn(3, 4, 6, 64, device=DEV)
        kk, v = torch.randn(1, 4, 10, 64, device=DEV), torch.randn(3, 1, 10, 64, device=DEV)
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q, kk.expand(3, 4, 10, 64), v.expand(3, 4, 10, 64))
        self.assertSame(KF.scaled_dot_product_attention(k(q), k(kk), k(v)), ref, rtol=1e-4, atol=1e-4)


    # ---- topk: router-sized rows (warp path) and long rows (block path) ----
    def test_topk_against_torch(self):
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            for m, n, kk in [(1, 128, 8), (512, 128, 8), (7, 8, 2), (33, 64, 6), (5, 512, 32), (3, 1000, 50),
                             (2, 151936, 20), (4, 3000, 100), (9, 9, 9), (3, 24, 16), (17, 64, 64), (2, 100, 31),
                             (11, 256, 32), (2, 333, 200), (3, 700, 12), (2, 1024, 1024)]:
                x = torch.randn(m, n, device=DEV).to(dt)
                for largest in (True, False):
                    got_v, got_i = kiln.topk(k(x), kk, -1, largest)
                    ref_v, ref_i = torch.topk(x, kk, -1, largest)
                    msg = f"{dt} {m}x{n} k={kk} largest={largest}"
                    self.assertSame(got_v, ref_v, msg=msg)
                    # ties (likely in bf16) may order indices differently: check they select the same values
                    self.assertTrue(torch.equal(x.gather(-1, T(got_i)), ref_v), msg)
        # ties everywhere, NaNs and signed zeros, k > 8 (the warp sort): the same indices as kiln's CPU path
        # (lower index first among equals, NaN largest), which the CPU tests check against numpy
        for n, kk in [(300, 20), (40, 40), (1000, 32), (129, 100)]:
            x = torch.randint(0, 6, (6, n), device=DEV).float()
            x[2, 17] = x[2, n - 3] = x[4, 0] = float("nan")
            x[1, :8] = torch.tensor([0.0, -0.0] * 4)
            for largest in (True, False):
                v, i = kiln.topk(k(x), kk, -1, largest)
                cv, ci = kiln.topk(k(x.cpu()), kk, -1, largest)
                self.assertTrue(torch.equal(T(i).cpu(), T(ci)), f"n={n} k={kk} largest={largest}")
                self.assertTrue(bool(((T(v).cpu() == T(cv)) | (T(v).cpu().isnan() & T(cv).isnan())).all()))
        x = torch.randn(4, 50, device=DEV)
        x[1, 7] = float("nan")
        v, i = kiln.topk(k(x), 5)
        tv, ti = torch.topk(x, 5)
        self.assertSame(v, tv)
        self.assertSame(i, ti)
        # a NaN at index 0 ranks first (the k-pass warp kernel and the long-row block kernel)
        for n, kk in [(50, 5), (128, 8), (5000, 4)]:
            x = torch.randn(3, n, device=DEV)
            x[:, 0] = float("nan")
            v, i = kiln.topk(k(x), kk)
            tv, ti = torch.topk(x, kk)
            self.assertSame(v, tv, msg=f"n={n} k={kk}")
            self.assertSame(i, ti, msg=f"n={n} k={kk}")


if __name__ == "__main__":
    unittest.main()
