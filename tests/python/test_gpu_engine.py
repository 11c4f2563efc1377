"""The decode step's KV cache ops and the engine's CUDA graph on the GPU, against
PyTorch and against kiln's own eager launches (GPU machine)."""
import json
import os
import tempfile
import unittest

import kiln
from gpu_common import DEV, HAVE, TorchParityBase, k, torch

TINY_MOE = dict(model_type="qwen3_moe", hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=1000,
                max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=1e6, num_experts=16,
                num_experts_per_tok=4, moe_intermediate_size=128, norm_topk_prob=True, mlp_only_layers=[1])


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class KvCacheOps(TorchParityBase):
    def test_qkv_rotary_cache_against_torch(self):
        F = torch.nn.functional
        for dt, tol in ((torch.float32, 1e-5), (torch.bfloat16, 1.6e-2)):
            for hq, hkv, d, half, norms in [(32, 8, 128, 64, True), (16, 2, 80, 40, True), (4, 4, 256, 32, False),
                                            (8, 1, 64, 32, True)]:
                T, cap, eps = 5, 64, 1e-6
                qkv = torch.randn(T, (hq + 2 * hkv) * d, device=DEV, dtype=dt)
                qn, kn = torch.randn(d, device=DEV, dtype=dt), torch.randn(d, device=DEV, dtype=dt)
                ang = torch.arange(cap, device=DEV)[:, None].float() * torch.rand(half, device=DEV)[None]
                cos, sin = ang.cos(), ang.sin()
                pos = torch.tensor([3, 0, 63, 17, 9], device=DEV, dtype=torch.int32)
                kc = torch.zeros(hkv, cap, d, device=DEV, dtype=dt)
                vc = torch.zeros(hkv, cap, d, device=DEV, dtype=dt)
                q = kiln.qkv_rotary_cache(k(qkv), hq, hkv, k(qn) if norms else None, k(kn) if norms else None, eps,
                                          k(cos), k(sin), k(pos), k(kc), k(vc))

                def ref(x, w):  # x [T, heads, d]: torch's rms_norm (rounded to dt), then the rotation in float32
                    if norms:
                        x = F.rms_norm(x.float(), (d,), w.float(), eps).to(dt)
                    x = x.float()
                    c, s = cos[pos.long()][:, None], sin[pos.long()][:, None]
                    out = x.clone()
                    out[..., :half] = x[..., :half] * c - x[..., half:2 * half] * s
                    out[..., half:2 * half] = x[..., half:2 * half] * c + x[..., :half] * s
                    return out.to(dt)

                heads = qkv.view(T, hq + 2 * hkv, d)
                msg = f"{dt} {hq}/{hkv} d={d}"
                self.assertSame(q, ref(heads[:, :hq], qn), rtol=tol, atol=tol, msg=msg)
                want_k = torch.zeros_like(kc)
                want_k[:, pos.long()] = ref(heads[:, hq:hq + hkv], kn).transpose(0, 1)
                want_v = torch.zeros_like(vc)
                want_v[:, pos.long()] = heads[:, hq + hkv:].transpose(0, 1)
                torch.testing.assert_close(kc, want_k, rtol=tol, atol=tol, msg=msg)
                torch.testing.assert_close(vc, want_v, rtol=0, atol=0, msg=msg)

    def test_attention_decode_cache_against_torch(self):
        F = torch.nn.functional
        for dt in (torch.bfloat16, torch.float16):
            for hq, hkv, d, cap in [(32, 8, 80, 4096), (16, 2, 128, 300), (8, 8, 64, 33), (32, 4, 256, 1000)]:
                B = 4
                q = torch.randn(B, hq, d, device=DEV, dtype=dt)
                kc = torch.randn(B, hkv, cap, d, device=DEV, dtype=dt)
                vc = torch.randn(B, hkv, cap, d, device=DEV, dtype=dt)
                # 128: one block step, all of it in split 0 and the other splits empty, beside lengths
                # that several splits share
                lens = torch.tensor([cap, 1, cap // 2 + 3, min(cap, 128)], device=DEV, dtype=torch.int32)
                got = torch.from_dlpack(kiln.attention_decode_cache(k(q), k(kc), k(vc), k(lens), 0.125))
                for b in range(B):
                    s = int(lens[b])
                    want = F.scaled_dot_product_attention(q[b:b + 1, :, None], kc[b:b + 1, :, :s], vc[b:b + 1, :, :s],
                                                          scale=0.125, enable_gqa=True)[:, :, 0]
                    torch.testing.assert_close(got[b:b + 1], want, rtol=2e-2, atol=2e-2, msg=f"{hq}/{hkv} d={d} b={b}")
            zero = kiln.attention_decode_cache(k(q), k(kc), k(vc), k(torch.zeros(B, device=DEV, dtype=torch.int32)))
            self.assertEqual(float(torch.from_dlpack(zero).abs().max()), 0.0)

    def test_attention_decode_cache_right_after_a_chained_write_of_the_lengths(self):
        # The kernel reads seq_lens before it waits for the kernel before it, and again after: here that
        # kernel is a chained fill_ that changes the lengths, which the first read may or may not see
        F = torch.nn.functional
        hq, hkv, d, cap = 32, 8, 80, 4096
        q = torch.randn(1, hq, d, device=DEV, dtype=torch.bfloat16)
        kc = torch.randn(1, hkv, cap, d, device=DEV, dtype=torch.bfloat16)
        vc = torch.randn(1, hkv, cap, d, device=DEV, dtype=torch.bfloat16)
        kq, kkc, kvc = k(q), k(kc), k(vc)
        lens = kiln.full([1], 1, dtype=kiln.int32, device=kiln.device("cuda"))
        want = {s: F.scaled_dot_product_attention(q[:, :, None], kc[:, :, :s], vc[:, :, :s], scale=0.125,
                                                  enable_gqa=True)[:, :, 0] for s in (37, 4096, 1000)}
        outs = []
        for _ in range(20):
            for s in want:
                lens.fill_(s)
                outs.append((s, kiln.attention_decode_cache(kq, kkc, kvc, lens, 0.125)))
        for s, got in outs:
            torch.testing.assert_close(torch.from_dlpack(got), want[s], rtol=2e-2, atol=2e-2, msg=f"length {s}")

    def test_attention_decode_qkv_equals_the_two_ops_and_torch(self):
        # One kernel (d <= 128) or the two ops (d 256): the output and both caches bit for bit equal to
        # qkv_rotary_cache then attention_decode_cache, and the output near torch's rms_norm, rotation and
        # sdpa; the lengths put the new row first, at a block step's edge, in a middle split and last
        F = torch.nn.functional
        for dt in (torch.bfloat16, torch.float16):
            for hq, hkv, d, half, cap, norms in [(32, 8, 80, 40, 4096, True), (32, 4, 128, 64, 2048, True),
                                                 (16, 2, 64, 16, 300, False), (8, 8, 128, 64, 33, True),
                                                 (16, 4, 256, 64, 200, True)]:
                eps, scale = 1e-6, 0.125
                qkv = torch.randn(1, (hq + 2 * hkv) * d, device=DEV, dtype=dt)
                qn, kn = torch.randn(d, device=DEV, dtype=dt), torch.randn(d, device=DEV, dtype=dt)
                ang = torch.arange(cap, device=DEV)[:, None].float() * torch.rand(half, device=DEV)[None]
                cos, sin = ang.cos(), ang.sin()
                old_k = torch.randn(hkv, cap, d, device=DEV, dtype=dt)
                old_v = torch.randn(hkv, cap, d, device=DEV, dtype=dt)
                for length in sorted({1, min(cap, 128), min(cap, 129), cap // 2 + 3, cap}):
                    lens = torch.tensor([length], device=DEV, dtype=torch.int32)
                    msg = f"{dt} {hq}/{hkv} d={d} length {length}"
                    kc2, vc2 = old_k.clone(), old_v.clone()
                    q = kiln.qkv_rotary_cache(k(qkv), hq, hkv, k(qn) if norms else None, k(kn) if norms else None,
                                              eps, k(cos), k(sin), k(lens - 1), k(kc2), k(vc2))
                    want = torch.from_dlpack(kiln.attention_decode_cache(q, k(kc2[None]), k(vc2[None]), k(lens),
                                                                         scale))
                    for settled in (False, True):
                        kc, vc = old_k.clone(), old_v.clone()
                        got = kiln.attention_decode_qkv(k(qkv), hq, hkv, k(qn) if norms else None,
                                                        k(kn) if norms else None, eps, k(cos), k(sin), k(lens), k(kc),
                                                        k(vc), scale, cache_settled=settled)
                        got = torch.from_dlpack(got)
                        self.assertEqual(tuple(got.shape), (1, hq, d))
                        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=f"{msg} settled={settled}")
                        torch.testing.assert_close(kc, kc2, rtol=0, atol=0, msg=msg)
                        torch.testing.assert_close(vc, vc2, rtol=0, atol=0, msg=msg)
                    heads = qkv.view(hq + 2 * hkv, d)

                    def norm_rope(x, w):
                        if norms:
                            x = F.rms_norm(x.float(), (d,), w.float(), eps).to(dt)
                        x, c, s = x.float(), cos[length - 1], sin[length - 1]
                        out = x.clone()
                        out[:, :half] = x[:, :half] * c - x[:, half:2 * half] * s
                        out[:, half:2 * half] = x[:, half:2 * half] * c + x[:, :half] * s
                        return out.to(dt)

                    kk, vv = old_k.clone(), old_v.clone()
                    kk[:, length - 1], vv[:, length - 1] = norm_rope(heads[hq:hq + hkv], kn), heads[hq + hkv:]
                    ref = F.scaled_dot_product_attention(norm_rope(heads[:hq], qn)[None, :, None],
                                                         kk[None, :, :length], vv[None, :, :length], scale=scale,
                                                         enable_gqa=True)[:, :, 0]
                    torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2, msg=msg)

    def test_attention_decode_qkv_right_after_a_chained_write_of_the_length(self):
        # As for attention_decode_cache: the length read before the wait may be stale; the new row then
        # moves with the length read after it
        hq, hkv, d, cap = 32, 8, 80, 4096
        qkv = torch.randn(1, (hq + 2 * hkv) * d, device=DEV, dtype=torch.bfloat16)
        ang = torch.arange(cap, device=DEV)[:, None].float() * torch.rand(40, device=DEV)[None]
        cos, sin = k(ang.cos()), k(ang.sin())
        old_k = torch.randn(hkv, cap, d, device=DEV, dtype=torch.bfloat16)
        old_v = torch.randn(hkv, cap, d, device=DEV, dtype=torch.bfloat16)
        # the caches with all three new rows written, as they stand after the first round
        sizes = (37, 4096, 1000)
        ref_k, ref_v = old_k.clone(), old_v.clone()
        pos = torch.tensor([s - 1 for s in sizes], device=DEV, dtype=torch.int32)
        q3 = torch.from_dlpack(kiln.qkv_rotary_cache(k(qkv.expand(3, -1).contiguous()), hq, hkv, None, None, 1e-6,
                                                     cos, sin, k(pos), k(ref_k), k(ref_v)))
        want = {s: torch.from_dlpack(kiln.attention_decode_cache(
            k(q3[i:i + 1].contiguous()), k(ref_k[None]), k(ref_v[None]),
            k(torch.tensor([s], device=DEV, dtype=torch.int32)), 0.125)) for i, s in enumerate(sizes)}
        lens = kiln.full([1], 1, dtype=kiln.int32, device=kiln.device("cuda"))
        kc, vc = k(ref_k.clone()), k(ref_v.clone())
        outs = []
        for _ in range(20):
            for s in want:
                lens.fill_(s)
                outs.append((s, kiln.attention_decode_qkv(k(qkv), hq, hkv, None, None, 1e-6, cos, sin, lens, kc, vc,
                                                          0.125)))
        for s, got in outs:
            torch.testing.assert_close(torch.from_dlpack(got), want[s], rtol=0, atol=0, msg=f"length {s}")


@unittest.skipUnless(HAVE, "needs torch with CUDA and a CUDA device for kiln")
class EngineGraph(TorchParityBase):
    def test_graph_replays_equal_eager_launches(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump(TINY_MOE, f)
            models = [kiln.Qwen3Model.random(path, DEV, dt, max_context=128, seed=3) for dt in ("bf16", "bf16")]
        models[1].cuda_graphs = False
        prompt = list(range(5, 45))
        outs = []
        for m in models:
            logits, tok, seen = m.forward(prompt), None, []
            for step in range(24):
                tok = int(torch.from_dlpack(logits).float().argmax())
                seen.append(torch.from_dlpack(logits).clone())
                logits = m.forward([tok])
                if step == 5:
                    kiln.cuda.empty_cache()  # the graph's memory stays reserved
            outs.append(torch.stack(seen))
        torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
        self.assertEqual(models[0].length, 40 + 24)
        # a new prompt after reset replays the same graph at other positions
        models[0].reset()
        models[1].reset()
        a = [models[0].forward(prompt[:7])] + [models[0].forward([t]) for t in (1, 2, 3)]
        b = [models[1].forward(prompt[:7])] + [models[1].forward([t]) for t in (1, 2, 3)]
        for x, y in zip(a, b):
            torch.testing.assert_close(torch.from_dlpack(x), torch.from_dlpack(y), rtol=0, atol=0)


    def test_a_prompt_in_chunks_equals_it_whole(self):
        # the second chunk runs the flash kernel's lower-right causal mask over the cached keys; fp8 as well
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "config.json")
            with open(path, "w") as f:
                json.dump(TINY_MOE, f)
            for dt in ("bf16", "fp8"):
                m = kiln.Qwen3Model.random(path, DEV, dt, max_context=256, seed=4)
                prompt = list(range(3, 200))
                whole = torch.from_dlpack(m.forward(prompt, all_logits=True)).float()
                m.reset()
                m.forward(prompt[:77])
                tail = torch.from_dlpack(m.forward(prompt[77:], all_logits=True)).float()
                scale = whole.abs().max().item()
                torch.testing.assert_close(tail, whole[77:], rtol=0, atol=0.03 * scale, msg=lambda s: f"{dt}: {s}")


if __name__ == "__main__":
    unittest.main()
