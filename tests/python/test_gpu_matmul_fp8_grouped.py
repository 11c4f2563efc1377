"""scaled_mm and grouped_mm on CUDA against PyTorch's on the same tensors (GPU machine)."""
import time
import unittest

import kiln
import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, T, TorchParityBase, k, torch


def fp8(shape, scale=1.0):
    return (torch.randn(*shape, device=DEV) * scale).to(torch.float8_e4m3fn)


def torch_grouped_mm(a, b, offs=None, out_dtype=None):
    fn = getattr(torch.nn.functional, "grouped_mm", None) or torch._grouped_mm
    return fn(a, b, offs=offs, out_dtype=out_dtype)


def offsets(counts):
    return torch.tensor(counts, device=DEV, dtype=torch.int32).cumsum(0).to(torch.int32)


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class ScaledMm(TorchParityBase):
    def check(self, m, kk, n, rowwise, out_dtype, bias=False, a=None, msg=""):
        a = fp8((m, kk)) if a is None else a
        w = fp8((n, kk), 0.5)  # b = w.t(): column-major, as torch requires
        if rowwise:
            sa = torch.rand(m, 1, device=DEV) + 0.5
            sb = torch.rand(1, n, device=DEV) + 0.5
        else:
            sa, sb = torch.tensor(0.7, device=DEV), torch.tensor(1.3, device=DEV)
        bv = torch.randn(n, device=DEV).to(out_dtype) if bias else None
        ref = torch._scaled_mm(a, w.t(), sa, sb, bias=bv, out_dtype=out_dtype)
        got = kiln._scaled_mm(k(a), k(w).t(), k(sa), k(sb), bias=k(bv) if bias else None, out_dtype=k_dtype(out_dtype))
        self.assertEqual(T(got).dtype, ref.dtype)
        # Exact: fp8 decodes exactly, so float64 gives the true product. kiln must be as close to it as
        # torch is (torch's fp32-out cuBLASLt path is the less accurate one, measured: 1.4e-2 vs kiln 1.5e-5
        # at 1x4096x4096), plus one rounding of the output dtype.
        exact = (a.double() @ w.double().t()) * sa.double() * sb.double() + (bv.double() if bias else 0)
        step = 2.0 ** -8 if out_dtype == torch.bfloat16 else 2.0 ** -23
        scale = float(exact.abs().max().nan_to_num(0)) + 1e-30
        torch_err = float((ref.double() - exact).abs().nan_to_num(0).max())
        kiln_err = float((T(got).double() - exact).abs().nan_to_num(0).max())
        self.assertLessEqual(kiln_err, 1.01 * torch_err + 2 * step * scale,
                             f"{m}x{kk}x{n} rowwise={rowwise} {out_dtype} {msg}: kiln {kiln_err} torch {torch_err}")
        self.assertTrue(torch.equal(torch.isnan(T(got)), torch.isnan(ref)), msg)
        return got

    def test_shapes_scales_and_outputs(self):
        for m, kk, n in [(1, 4096, 4096), (3, 64, 32), (16, 4096, 4096), (16, 1024, 48), (17, 256, 64),
                         (256, 512, 1024), (4096, 1024, 512)]:
            for rowwise in (False, True):
                for out_dtype in (torch.bfloat16, torch.float32):
                    if rowwise and out_dtype != torch.bfloat16:
                        continue  # torch 2.11 supports rowwise scales with bfloat16 output only
                    self.check(m, kk, n, rowwise, out_dtype)
            self.check(m, kk, n, False, torch.bfloat16, bias=True, msg="bias")

    def test_adversarial_values(self):
        # every element at the format's largest finite value
        a = torch.full((5, 128), 448.0, device=DEV).to(torch.float8_e4m3fn)
        self.check(5, 128, 64, False, torch.float32, a=a, msg="448")
        self.check(5, 128, 64, True, torch.bfloat16, a=a, msg="448")
        # a NaN in a row makes that output row NaN, on both paths (kiln's kernel: 1 row tensorwise and
        # 7 rows rowwise; cuBLASLt: 40 rows)
        for m, rowwise, od in [(1, False, torch.float32), (7, True, torch.bfloat16), (40, False, torch.float32)]:
            a = fp8((m, 128))
            a[m // 2, 17] = float("nan")
            got = T(self.check(m, 128, 64, rowwise, od, a=a, msg="nan"))
            self.assertTrue(bool(torch.isnan(got[m // 2]).all()))

    def test_bad_layouts_raise(self):
        a, w = fp8((4, 64)), fp8((32, 64))
        one = torch.tensor(1.0, device=DEV)
        with self.assertRaisesRegex(kiln.Error, "column-major"):
            kiln._scaled_mm(k(a), k(w.t().contiguous()), k(one), k(one))
        with self.assertRaisesRegex(kiln.Error, "multiples of 16"):
            kiln._scaled_mm(k(fp8((4, 40))), k(fp8((32, 40))).t(), k(one), k(one))
        with self.assertRaisesRegex(kiln.Error, "rowwise"):
            kiln._scaled_mm(k(a), k(w).t(), k(torch.ones(4, device=DEV)), k(one))


def k_dtype(td):
    return {torch.bfloat16: kiln.bfloat16, torch.float32: kiln.float32, torch.float16: kiln.float16}[td]


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class GroupedMm(TorchParityBase):
    def check_2d3d(self, counts, kk, n, out_dtype=None, msg=""):
        g = len(counts)
        rows = sum(counts)
        a = torch.randn(rows, kk, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(g, n, kk, device=DEV, dtype=torch.bfloat16) / kk ** 0.5  # weights [G, N, K]
        offs = offsets(counts)
        got = T(KF.grouped_mm(k(a), k(w).transpose(-2, -1), offs=k(offs),
                              out_dtype=None if out_dtype is None else k_dtype(out_dtype)))
        if rows == 0:
            self.assertEqual(tuple(got.shape), (0, n))
            return
        if out_dtype == torch.float32:  # torch 2.11 gives only the inputs' dtype: a float32 loop is the reference
            bounds = [0] + offs.tolist()
            ref = torch.cat([a[s:e].float() @ w[g].float().t() for g, (s, e) in enumerate(zip(bounds, bounds[1:]))])
        else:
            ref = torch_grouped_mm(a, w.transpose(-2, -1), offs=offs)
        tol = 1e-4 if out_dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got, ref, rtol=tol, atol=tol, msg=f"{counts[:8]}... K={kk} N={n} {msg}")

    def test_decode_and_prefill_routings(self):
        gen = torch.Generator().manual_seed(1)
        for tokens in (1, 4, 512):  # top-8 of 128 experts
            experts = torch.stack([torch.randperm(128, generator=gen)[:8] for _ in range(tokens)]).flatten()
            counts = torch.bincount(experts, minlength=128).tolist()
            self.check_2d3d(counts, 2048, 1536, msg=f"{tokens} tokens")
        self.check_2d3d([3, 0, 5, 0, 0, 9], 256, 80, msg="empty groups, N not a multiple of 32")
        self.check_2d3d([0, 0, 100, 0], 512, 64, msg="every token in one group")
        self.check_2d3d([40, 0, 70], 512, 64, out_dtype=torch.float32, msg="float32 out")
        # the prefill tiles: k not a whole number of pipeline stages, N not a whole tile, a group of two row chunks
        self.check_2d3d([70, 0, 33, 5], 200, 200, msg="prefill tiles, ragged K and N")
        self.check_2d3d([70, 0, 33, 5], 200, 200, out_dtype=torch.float32, msg="prefill tiles, float32 out")
        self.check_2d3d([0, 0, 0], 128, 64, msg="zero tokens")
        few = [1, 0, 2, 0, 0, 1, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0]  # rows <= groups: the matrix-vector path
        self.check_2d3d(few, 640, 200, msg="few rows per group, N not a multiple of 8")
        self.check_2d3d(few, 640, 200, out_dtype=torch.float32, msg="few rows, float32 out")

    def check_fp8(self, counts, kk, n, out_dtype=None, per_group=False, weights_kn=False, msg=""):
        """fp8 e4m3fn weights with their scale against the float32 product with the dequantised weights."""
        g, rows = len(counts), sum(counts) + 3  # three rows past the last offset
        a = torch.randn(rows, kk, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(g, n, kk, device=DEV) / kk ** 0.5  # weights [G, N, K]
        s = (w.abs().amax((1, 2)) if per_group else w.abs().amax(-1)) / 448
        full = s[:, None, None] if per_group else s[:, :, None]
        w8 = (w / full).to(torch.float8_e4m3fn)
        deq = w8.float() * full
        offs = offsets(counts)
        kb = k(w8.transpose(-2, -1).contiguous()) if weights_kn else k(w8).transpose(-2, -1)
        got = T(KF.grouped_mm(k(a), kb, offs=k(offs), b_scale=k(s),
                              out_dtype=None if out_dtype is None else k_dtype(out_dtype)))
        bounds = [0] + offs.tolist()
        ref = torch.zeros(rows, n, device=DEV)
        for e, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
            ref[lo:hi] = a[lo:hi].float() @ deq[e].t()
        self.assertEqual(got.dtype, out_dtype or torch.bfloat16)
        tol = 1e-4 if out_dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got.float(), ref, rtol=tol, atol=tol,
                                   msg=lambda m: f"{m}\n{counts[:8]}... K={kk} N={n} {msg}")

    def test_fp8_weights(self):
        gen = torch.Generator().manual_seed(2)
        for tokens in (1, 4, 512):  # top-8 of 128: the matrix-vector kernel, then the TMA tiles widening fp8
            experts = torch.stack([torch.randperm(128, generator=gen)[:8] for _ in range(tokens)]).flatten()
            counts = torch.bincount(experts, minlength=128).tolist()
            self.check_fp8(counts, 2048, 1536, msg=f"{tokens} tokens")
        few = [1, 0, 2, 0, 0, 1, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0]
        self.check_fp8(few, 768, 200, msg="few rows, 1.5 k-steps a lane, N not a multiple of 8")
        self.check_fp8(few, 640, 64, out_dtype=torch.float32, msg="few rows, float32 out")
        self.check_fp8(few, 256, 48, per_group=True, msg="few rows, per-group scale")
        self.check_fp8([70, 0, 33, 5], 208, 200, msg="prefill tiles, ragged N")
        self.check_fp8([70, 0, 33, 5], 208, 200, out_dtype=torch.float32, per_group=True, msg="prefill, float32 out")
        self.check_fp8([10, 0, 7, 5], 256, 72, msg="rows between G and 8G: widened once, the rows kernel")
        self.check_fp8([3, 0, 5, 0], 40, 24, weights_kn=True, msg="weights stored [G, K, N]: the plain kernel")
        self.check_fp8([0, 0, 0], 128, 64, msg="zero tokens")

    def test_rows_past_the_last_offset_are_zero(self):
        a = torch.randn(10, 64, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(2, 32, 64, device=DEV, dtype=torch.bfloat16)
        got = T(KF.grouped_mm(k(a), k(w).transpose(-2, -1), offs=k(offsets([3, 4]))))
        ref = torch_grouped_mm(a, w.transpose(-2, -1), offs=offsets([3, 4]))
        torch.testing.assert_close(got[:7], ref[:7], rtol=1e-2, atol=1e-2)
        self.assertTrue(bool((got[7:] == 0).all()))
        # the same on the few-rows path (rows <= groups)
        w8 = torch.randn(8, 32, 64, device=DEV, dtype=torch.bfloat16)
        offs = offsets([1, 0, 1, 0, 1, 0, 0, 0])
        got = T(KF.grouped_mm(k(a[:5]), k(w8).transpose(-2, -1), offs=k(offs)))
        ref = torch_grouped_mm(a[:5], w8.transpose(-2, -1), offs=offs)
        torch.testing.assert_close(got[:3], ref[:3], rtol=1e-2, atol=1e-2)
        self.assertTrue(bool((got[3:] == 0).all()))

    def test_other_layouts_3d3d_and_2d2d(self):
        # b stored [G, K, N] (N contiguous): the plain kernel
        a = torch.randn(20, 48, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(3, 48, 32, device=DEV, dtype=torch.bfloat16)
        offs = offsets([5, 0, 15])
        torch.testing.assert_close(T(KF.grouped_mm(k(a), k(b), offs=k(offs))), torch_grouped_mm(a, b, offs=offs),
                                   rtol=1e-2, atol=1e-2)
        a3 = torch.randn(4, 16, 64, device=DEV, dtype=torch.bfloat16)
        b3 = torch.randn(4, 32, 64, device=DEV, dtype=torch.bfloat16).transpose(-2, -1)
        torch.testing.assert_close(T(KF.grouped_mm(k(a3), k(b3))), torch_grouped_mm(a3, b3), rtol=1e-2, atol=1e-2)
        # 2-D x 2-D: k split by offs (weight gradients)
        x = torch.randn(64, 24, device=DEV, dtype=torch.bfloat16)  # [M, Ktot] as grad.t()
        y = torch.randn(24, 48, device=DEV, dtype=torch.bfloat16)
        offs = offsets([8, 0, 16])
        got = T(KF.grouped_mm(k(x), k(y), offs=k(offs)))
        ref = torch.stack([x[:, 0:8] @ y[0:8], torch.zeros(64, 48, device=DEV, dtype=torch.bfloat16),
                           x[:, 8:24] @ y[8:24]])
        torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)

    def test_no_host_sync(self):
        # offs written behind ~0.2 s of queued GPU work: the call returns at once, the result is right
        a = torch.randn(16, 256, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(4, 64, 256, device=DEV, dtype=torch.bfloat16)
        offs = torch.zeros(4, device=DEV, dtype=torch.int32)
        ka, kb, ko = k(a), k(w).transpose(-2, -1), k(offs)
        KF.grouped_mm(ka, kb, offs=ko)  # warm up
        real = offsets([4, 4, 4, 4])  # made before the sleep: a host-to-device copy would wait for it
        torch.cuda.synchronize()
        torch.cuda._sleep(400_000_000)
        offs.copy_(real)
        t0 = time.perf_counter()
        got = KF.grouped_mm(ka, kb, offs=ko)
        host_s = time.perf_counter() - t0
        self.assertFalse(torch.cuda.current_stream().query(), "the sleep ended before the check")
        self.assertLess(host_s, 0.05)
        torch.testing.assert_close(T(got), torch_grouped_mm(a, w.transpose(-2, -1), offs=real),
                                   rtol=1e-2, atol=1e-2)
