"""rms_norm, layer_norm, silu_and_mul and apply_rotary on CUDA against PyTorch (GPU machine)."""
import unittest

import kiln
import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, TorchParityBase, k, torch


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class LayerOps(TorchParityBase):
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
