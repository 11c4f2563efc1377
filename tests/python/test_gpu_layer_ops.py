"""rms_norm, layer_norm, silu_and_mul and apply_rotary on CUDA against PyTorch (GPU machine)."""
import unittest

import kiln
import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, T, TorchParityBase, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class LayerOps(TorchParityBase):
    def test_rms_norm_linear_against_torch(self):
        # one row: the fused kernel (several warps a row for the narrow router shapes); fp8
        # weights with per-row scales; SwiGLU; and rows it does not take (two rows, an odd K)
        F = torch.nn.functional
        cases = [(1, 2048, 5120, False), (1, 2048, 128, False), (1, 2048, 1536, True), (1, 4096, 2048, False),
                 (1, 1024, 151, False), (2, 2048, 512, False), (1, 1001, 64, False)]
        for dt in (torch.bfloat16, torch.float32):
            tol = 1e-4 if dt == torch.float32 else 2e-2
            for rows, K, N, silu in cases:
                x, r = torch.randn(rows, K, device=DEV, dtype=dt), torch.randn(rows, K, device=DEV, dtype=dt)
                g = torch.rand(K, device=DEV, dtype=dt) + 0.5
                w = torch.randn(N, K, device=DEV, dtype=dt) / K ** 0.5
                for res in (r, None):
                    s = x if res is None else x + res
                    h = F.rms_norm(s.float(), (K,), g.float(), 1e-6)
                    y = h @ w.float().t()
                    if silu:
                        y = F.silu(y[:, :N // 2]) * y[:, N // 2:]
                    msg = f"{dt} rows={rows} K={K} N={N} silu={silu} residual={res is not None}"
                    out, ks, kh = kiln.rms_norm_linear(k(x), None if res is None else k(res), k(g), 1e-6, k(w),
                                                       silu_and_mul=silu, want_normed=True)
                    self.assertSame(ks, s, msg=msg)
                    self.assertSame(kh, h.to(dt), rtol=tol, atol=tol, msg=msg)
                    torch.testing.assert_close(T(out).float(), y, rtol=tol, atol=tol, msg=msg)
                if dt == torch.bfloat16 and not silu:  # fp8 weights, per-row scales
                    w8, sc = kiln.quantize_fp8_rows(k(w))
                    out, _, _ = kiln.rms_norm_linear(k(x), k(r), k(g), 1e-6, w8, weight_scale=sc)
                    wd = T(w8).float() * T(sc)[:, None]
                    y = F.rms_norm((x + r).float(), (K,), g.float(), 1e-6) @ wd.t()
                    torch.testing.assert_close(T(out).float(), y, rtol=tol, atol=tol, msg=f"fp8 K={K} N={N}")

    def test_pending_rms_norm_linear_against_torch(self):
        # one row: the kernel's 1 / rms from partial sums of squares (as many as the experts' kernel
        # leaves, and others), plain, with a bias and with fp8 per-row weights; rows it does not take
        F = torch.nn.functional
        for dt in (torch.bfloat16, torch.float32):
            tol = 1e-4 if dt == torch.float32 else 2e-2
            for rows, K, N, parts in [(1, 2048, 5120, 512), (1, 2048, 151, 3), (1, 4096, 2048, 1),
                                      (1, 1024, 128, 700), (2, 2048, 512, 512), (1, 1001, 64, 2)]:
                s = torch.randn(rows, K, device=DEV, dtype=dt)
                g = torch.rand(K, device=DEV, dtype=dt) + 0.5
                sq = [c.float().pow(2).sum(-1) for c in s.tensor_split(parts, -1)]
                p = kiln.PendingRmsNorm(k(s), k((s.float() * g.float()).to(dt)), k(torch.stack(sq, -1)), k(g), 1e-6)
                w = torch.randn(N, K, device=DEV, dtype=dt) / K ** 0.5
                b = torch.randn(N, device=DEV, dtype=dt)
                h = F.rms_norm(s.float(), (K,), g.float(), 1e-6)
                msg = f"{dt} rows={rows} K={K} N={N} parts={parts}"
                torch.testing.assert_close(T(kiln.pending_rms_norm_linear(p, k(w))).float(), h @ w.float().t(),
                                           rtol=tol, atol=tol, msg=msg)
                torch.testing.assert_close(T(kiln.pending_rms_norm_linear(p, k(w), k(b))).float(),
                                           h @ w.float().t() + b.float(), rtol=tol, atol=tol, msg=msg)
                if dt == torch.bfloat16:
                    w8, sc = kiln.quantize_fp8_rows(k(w))
                    wd = T(w8).float() * T(sc)[:, None]
                    torch.testing.assert_close(T(kiln.pending_rms_norm_linear(p, w8, weight_scale=sc)).float(),
                                               h @ wd.t(), rtol=tol, atol=tol, msg=f"fp8 {msg}")

    def test_against_torch(self):
        F = torch.nn.functional
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            tol = 1e-5 if dt == torch.float32 else 1e-2
            # rows of 16-byte vectors up to 256 x 4 of them go to the register kernel, others to the loop
            for shape in [(1, 2048), (7, 4096), (3, 5, 100), (2, 24), (2, 8192), (1, 8200)]:
                x, r = torch.randn(*shape, device=DEV, dtype=dt), torch.randn(*shape, device=DEV, dtype=dt)
                w = torch.randn(shape[-1], device=DEV, dtype=dt)
                ref = F.rms_norm(x.float(), (shape[-1],), w.float(), 1e-6).to(dt)
                self.assertSame(KF.rms_norm(k(x), (shape[-1],), k(w), 1e-6), ref, rtol=tol, atol=tol)
                self.assertSame(KF.rms_norm(k(x), (shape[-1],), None, 1e-6),
                                F.rms_norm(x.float(), (shape[-1],), None, 1e-6).to(dt), rtol=tol, atol=tol)
                y, s = kiln.rms_norm_residual(k(x), k(r), k(w), 1e-6)
                self.assertSame(s, x + r)
                self.assertSame(y, F.rms_norm((x + r).float(), (shape[-1],), w.float(), 1e-6).to(dt), rtol=tol, atol=tol)
                b = torch.randn(shape[-1], device=DEV, dtype=dt)
                xo = x + 100  # the variance is taken about the mean
                for xin in (x, xo):
                    self.assertSame(KF.layer_norm(k(xin), (shape[-1],), k(w), k(b), 1e-5),
                                    F.layer_norm(xin.float(), (shape[-1],), w.float(), b.float(), 1e-5).to(dt),
                                    rtol=tol, atol=tol * (10 if dt != torch.float32 else 100))
                self.assertSame(KF.layer_norm(k(x), (shape[-1],)), F.layer_norm(x.float(), (shape[-1],)).to(dt),
                                rtol=tol, atol=tol)
                g = torch.randn(*shape[:-1], 2 * shape[-1], device=DEV, dtype=dt)
                a, b = g.float().chunk(2, -1)
                self.assertSame(kiln.silu_and_mul(k(g)), (F.silu(a) * b).to(dt), rtol=tol, atol=tol)
            # rotary: Qwen's half-rotated layout on a [T, H, D] view of q [T, H*D], and GPT-J's interleaved one
            t, h, d = 9, 4, 128
            q = torch.randn(t, h * d, device=DEV, dtype=dt).view(t, h, d)
            pos = torch.arange(t, device=DEV, dtype=torch.float32)
            for rot in (128, 64):
                inv = 1.0 / (1e6 ** (torch.arange(0, rot, 2, device=DEV, dtype=torch.float32) / rot))
                ang = pos[:, None] * inv[None]
                cos, sin = ang.cos(), ang.sin()
                qf = q.float()
                half = rot // 2
                a, b = qf[..., :half], qf[..., half:rot]
                ref = torch.cat([a * cos[:, None] - b * sin[:, None], b * cos[:, None] + a * sin[:, None], qf[..., rot:]],
                                -1).to(dt)
                self.assertSame(kiln.apply_rotary(k(q), k(cos), k(sin)), ref, rtol=tol, atol=tol)
                a, b = qf[..., 0:rot:2], qf[..., 1:rot:2]
                inter = qf.clone()
                inter[..., 0:rot:2], inter[..., 1:rot:2] = a * cos[:, None] - b * sin[:, None], b * cos[:, None] + a * sin[:, None]
                self.assertSame(kiln.apply_rotary(k(q), k(cos), k(sin), True), inter.to(dt), rtol=tol, atol=tol)
