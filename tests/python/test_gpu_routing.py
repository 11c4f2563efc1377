"""index_select and the MoE router and combine on CUDA against PyTorch (GPU machine)."""
import unittest

import kiln
import kiln.nn.functional as KF
from gpu_common import DEV, HAVE, T, TorchParityBase, k, torch


def torch_route(logits, kk):
    w, experts = torch.topk(torch.softmax(logits.float(), -1), kk, -1)
    return w / w.sum(-1, keepdim=True), experts


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class Routing(TorchParityBase):
    def test_index_select_and_embedding(self):
        for dt in (torch.float32, torch.bfloat16, torch.int8):
            x = torch.randn(50, 7, 33, device=DEV).to(dt)
            for dim in range(3):
                idx = torch.randint(-x.shape[dim], x.shape[dim], (40,), device=DEV)
                self.assertSame(kiln.index_select(k(x), dim, k(idx)), torch.index_select(x, dim, idx % x.shape[dim]))
        w = torch.randn(151936, 1024, device=DEV, dtype=torch.bfloat16)
        ids = torch.randint(0, 151936, (3, 5), device=DEV, dtype=torch.int32)
        self.assertSame(KF.embedding(k(ids), k(w)), torch.nn.functional.embedding(ids, w))

    def test_router_against_torch(self):
        # one token: an expert a thread; up to 32 tokens one block routes and places; past that three
        # kernels (zeroing, routing, placing)
        for tokens, E, kk in [(1, 128, 8), (512, 128, 8), (64, 256, 8), (5, 1024, 32), (9, 20, 3), (32, 128, 8),
                              (33, 64, 4), (32, 1024, 32), (1, 20, 3), (1, 1024, 32), (1, 256, 8), (1, 32, 32)]:
            for dt in (torch.float32, torch.bfloat16):
                logits = torch.randn(tokens, E, device=DEV).to(dt)
                bias = torch.randn(E, device=DEV) * 0.1
                for sigmoid, b, renorm in [(False, None, True), (False, None, False), (True, bias, True)]:
                    r = kiln.moe_route(k(logits), kk, scoring="sigmoid" if sigmoid else "softmax",
                                       selection_bias=None if b is None else k(b), renormalize=renorm)
                    msg = f"{tokens}x{E} k={kk} {dt} sigmoid={sigmoid} renorm={renorm}"
                    # bfloat16 logits tie often and torch.topk orders ties as it likes: compare the chosen
                    # scores (best first), then the weights of kiln's own choice
                    p = torch.sigmoid(logits.float()) if sigmoid else torch.softmax(logits.float(), -1)
                    sel = p + b if b is not None else p
                    e_ref = T(r.experts).long()
                    self.assertTrue(torch.equal(sel.gather(-1, e_ref), torch.topk(sel, kk, -1).values), msg)
                    self.assertTrue(bool((e_ref.sort(-1).values.diff(dim=-1) > 0).all()), msg)  # distinct
                    w_ref = p.gather(-1, e_ref)
                    if renorm:
                        w_ref = w_ref / w_ref.sum(-1, keepdim=True)
                    torch.testing.assert_close(T(r.weights), w_ref, rtol=1e-5, atol=1e-6, msg=msg)
                    counts = torch.bincount(e_ref.flatten(), minlength=E)
                    self.assertTrue(torch.equal(T(r.offs).long(), counts.cumsum(0)), msg)
                    pos, tok = T(r.sorted_pos).long(), T(r.token_of).long()
                    self.assertTrue(torch.equal(pos.flatten().sort().values, torch.arange(tokens * kk, device=DEV)))
                    self.assertTrue(torch.equal(tok[pos], torch.arange(tokens, device=DEV)[:, None].expand(-1, kk)))
                    ends = counts.cumsum(0)[e_ref]
                    self.assertTrue(bool(((pos < ends) & (pos >= ends - counts[e_ref])).all()), msg)

    def test_combine_rms_norm_residual_equals_the_ops_in_sequence(self):
        for tokens, E, kk, N in [(1, 128, 8, 2048), (5, 16, 4, 300), (40, 64, 8, 512)]:
            logits = torch.randn(tokens, E, device=DEV)
            y = torch.randn(tokens * kk, N, device=DEV, dtype=torch.bfloat16)
            res = torch.randn(tokens, N, device=DEV, dtype=torch.bfloat16)
            w = torch.randn(N, device=DEV, dtype=torch.bfloat16)
            r = kiln.moe_route(k(logits), kk)
            h, res_out = kiln.moe_combine_rms_norm_residual(k(y), r, k(res), k(w), 1e-6)
            h_seq, res_seq = kiln.rms_norm_residual(kiln.moe_combine(k(y), r), k(res), k(w), 1e-6)
            msg = f"{tokens} tokens, N {N}"
            torch.testing.assert_close(T(res_out), T(res_seq), rtol=0, atol=0, msg=msg)
            torch.testing.assert_close(T(h), T(h_seq), rtol=0, atol=0, msg=msg)
            # and against torch: the combine from the routing's weights and positions, then the norm
            wr, pos = T(r.weights), T(r.sorted_pos).long()
            comb = (wr[:, :, None] * y[pos].float()).sum(1).to(torch.bfloat16)
            s = (comb.float() + res.float()).to(torch.bfloat16)
            torch.testing.assert_close(T(res_out), s, rtol=1e-2, atol=1e-2, msg=msg)
            ref = torch.nn.functional.rms_norm(s.float(), (N,), w.float(), 1e-6)
            torch.testing.assert_close(T(h).float(), ref, rtol=2e-2, atol=2e-2, msg=msg)

    def test_moe_layer_against_torch(self):
        tokens, E, kk, H, N = 37, 16, 4, 256, 128
        x = torch.randn(tokens, H, device=DEV, dtype=torch.bfloat16)
        logits = torch.randn(tokens, E, device=DEV)
        w = torch.randn(E, N, H, device=DEV, dtype=torch.bfloat16) / H ** 0.5
        r = kiln.moe_route(k(logits), kk)
        y = KF.grouped_mm(kiln.index_select(k(x), 0, r.token_of), k(w).transpose(-2, -1), offs=r.offs)
        got = T(kiln.moe_combine(y, r)).float()
        wr, er = torch_route(logits, kk)
        ref = torch.einsum("tj,tjn->tn", wr, torch.einsum("tjnh,th->tjn", w[er].float(), x.float()))
        torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2)

    def test_fused_experts_equal_the_ops_in_sequence(self):
        F = torch.nn.functional

        def quantize(w):  # per-row e4m3fn in torch: (codes, scale, the dequantised float32 weights)
            s = w.float().abs().amax(-1) / 448
            w8 = (w.float() / s[..., None]).to(torch.float8_e4m3fn)
            return w8, s, w8.float() * s[..., None]

        for tokens, E, kk, H, I, fp8 in [(1, 128, 8, 2048, 768, False), (4, 64, 8, 256, 128, False),
                                         (2, 16, 4, 512, 96, False), (40, 16, 4, 256, 64, False),
                                         (1, 128, 8, 2048, 768, True), (4, 64, 8, 256, 128, True),
                                         (40, 16, 4, 256, 64, True), (2, 32, 12, 256, 64, False),
                                         (2, 32, 12, 256, 64, True)]:
            msg = f"{tokens} tokens, {E} experts, {'fp8' if fp8 else 'bf16'}"
            x = torch.randn(tokens, H, device=DEV, dtype=torch.bfloat16)
            logits = torch.randn(tokens, E, device=DEV)
            gate_up = torch.randn(E, 2 * I, H, device=DEV, dtype=torch.bfloat16) / H ** 0.5
            down = torch.randn(E, H, I, device=DEV, dtype=torch.bfloat16) / I ** 0.5
            r = kiln.moe_route(k(logits), kk)
            if fp8:
                (gu8, gus, gate_up_f), (dn8, dns, down_f) = quantize(gate_up), quantize(down)
                kgu, kdn, scales = k(gu8), k(dn8), (k(gus), k(dns))
            else:
                gate_up_f, down_f, kgu, kdn, scales = gate_up.float(), down.float(), k(gate_up), k(down), (None, None)
            got = T(kiln.moe_experts(k(x), kgu, kdn, r, *scales))  # fused when tokens * kk <= E
            h = KF.grouped_mm(kiln.index_select(k(x), 0, r.token_of), kgu.transpose(-2, -1), offs=r.offs,
                              b_scale=scales[0])
            seq = T(KF.grouped_mm(kiln.silu_and_mul(h), kdn.transpose(-2, -1), offs=r.offs, b_scale=scales[1]))
            torch.testing.assert_close(got, seq, rtol=0, atol=0, msg=lambda m: f"{m}\n{msg}")
            rows = T(r.token_of).long()
            e_of = torch.repeat_interleave(torch.arange(E, device=DEV), torch.diff(T(r.offs).long(), prepend=torch.zeros(1, dtype=torch.long, device=DEV)))
            gu = torch.einsum("rnh,rh->rn", gate_up_f[e_of], x[rows].float()).to(torch.bfloat16).float()
            act = (F.silu(gu[:, :I]) * gu[:, I:]).to(torch.bfloat16).float()
            ref = torch.einsum("rhi,ri->rh", down_f[e_of], act).to(torch.bfloat16)
            torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2, msg=lambda m: f"{m}\n{msg}")
            # the combine fused into the down kernel: the bits of moe_combine after moe_experts
            combined = T(kiln.moe_experts_combine(k(x), kgu, kdn, r, *scales))
            torch.testing.assert_close(combined, T(kiln.moe_combine(k(got), r)), rtol=0, atol=0,
                                       msg=lambda m: f"{m}\ncombine, {msg}")
            w, pos = T(r.weights), T(r.sorted_pos).long()
            ref_c = (ref.float()[pos] * w[..., None]).sum(1).to(torch.bfloat16)
            torch.testing.assert_close(combined, ref_c, rtol=3e-2, atol=3e-2, msg=lambda m: f"{m}\ncombine, {msg}")
            # the add and norm begun by the down kernel: the sum bit for bit the add after the
            # combine, scaled the sum times the norm's weight, the parts adding up to the row's sum
            # of squares; then the projection that takes them, against torch's rms_norm and linear
            res = torch.randn(tokens, H, device=DEV, dtype=torch.bfloat16)
            g = torch.rand(H, device=DEV, dtype=torch.bfloat16) + 0.5
            p = kiln.moe_experts_combine_rms_norm(k(x), kgu, kdn, r, k(res), k(g), 1e-6, *scales)
            s = combined + res
            torch.testing.assert_close(T(p.sum), s, rtol=0, atol=0, msg=lambda m: f"{m}\nsum, {msg}")
            torch.testing.assert_close(T(p.scaled), (s.float() * g.float()).to(torch.bfloat16), rtol=0, atol=0,
                                       msg=lambda m: f"{m}\nscaled, {msg}")
            torch.testing.assert_close(T(p.sq_parts).sum(-1), (s.float() ** 2).sum(-1), rtol=1e-5, atol=0,
                                       msg=lambda m: f"{m}\nsq_parts, {msg}")
            wq = torch.randn(640, H, device=DEV, dtype=torch.bfloat16) / H ** 0.5
            y = F.rms_norm(s.float(), (H,), g.float(), 1e-6) @ wq.float().t()
            torch.testing.assert_close(T(kiln.pending_rms_norm_linear(p, k(wq))).float(), y, rtol=2e-2, atol=2e-2,
                                       msg=lambda m: f"{m}\npending_rms_norm_linear, {msg}")
