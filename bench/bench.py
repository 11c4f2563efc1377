"""kiln and PyTorch side by side, in one process, on the same tensors.

Each case builds its inputs once with torch, hands them to kiln through DLPack
(no copy), and times both sides with CUDA events on one stream (kiln enqueues on
torch's current stream): median over --repeats of the mean of 10 back-to-back calls,
enqueued behind a GPU-side spin so that the time is the GPU's, not the host's. It prints both
times, the speed-up (torch time / kiln time), the bandwidth kiln reached and its
share of the card's copy bandwidth measured at the start of the same run.

    PYTHONPATH=build/python python3 bench/bench.py [--filter TEXT|TEXT...] [--targets] [--repeats N]

After the table it checks the cases that have a target in the issues (bench/targets.py:
H200 figures) and prints met or NOT MET for each; --targets runs only those cases.

Cases marked [graph] (the decode kernels) are timed as replays of a CUDA graph, for
both sides, because their host launch cost would otherwise exceed their GPU time.

Later issues add their cases to CASES (a function returning Case objects).
"""
import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Callable

import torch

import kiln
import targets


@dataclass
class Case:
    family: str
    name: str
    bytes: float  # fewest bytes the op must move
    kiln_fn: Callable[[], object]
    torch_fn: Callable[[], object]
    flops: float = 0.0
    graph: bool = False  # time replays of a CUDA graph: the GPU's time without host launch cost


SPIN_CYCLES = 1_000_000  # about 0.5 ms at the H200's clock


def time_us(fn, repeats, stream, inner=10):
    """Median over `repeats` of the mean time of `inner` back-to-back calls: the queue
    stays full, so host-side launch cost hides behind the GPU as it does in a model."""
    for _ in range(3):
        fn()

    def batch():
        for _ in range(inner):
            fn()

    return median_event_us(batch, repeats, stream) / inner


def median_event_us(run, repeats, stream=None):
    """Median over `repeats` of the CUDA-event time of run() on `stream`, in microseconds."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # a GPU-side spin ahead of the start event: the host enqueues the timed calls
        # meanwhile, so the first call's host launch latency (tens of microseconds
        # through Python) is not counted as GPU time, for either side
        with torch.cuda.stream(stream or torch.cuda.current_stream()):
            torch.cuda._sleep(SPIN_CYCLES)
        start.record(stream)
        run()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def time_graph_us(fn, repeats, inner=20):
    """Median over `repeats` of one replay of a CUDA graph holding `inner` calls, per call.
    Decode steps run as CUDA graphs (issue 4), so for few-microsecond kernels this is the
    time that counts. Outputs stay referenced until the graph is done, so no memory a
    replay writes is handed out meanwhile."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), kiln.cuda.use_torch_stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g, keep = torch.cuda.CUDAGraph(), []
    with torch.cuda.graph(g, stream=s, capture_error_mode="relaxed"), kiln.cuda.use_torch_stream(s):
        for _ in range(inner):
            keep.append(fn())
    us = median_event_us(g.replay, repeats) / inner
    del g, keep
    return us


def k(t):
    return kiln.from_dlpack(t)


# ---- cases: elementwise and reductions (issue 2) ----
def core_cases():
    N = (1 << 26) // 4096 * 4096
    dev = "cuda"
    x32, y32 = torch.randn(N, device=dev), torch.randn(N, device=dev)
    x16, y16 = (torch.randn(N, device=dev, dtype=torch.bfloat16) for _ in range(2))
    m32, m16 = x32.view(-1, 4096), x16.view(-1, 4096)
    row = torch.randn(4096, device=dev)
    kx32, ky32, kx16, ky16, km32, km16, krow = map(k, (x32, y32, x16, y16, m32, m16, row))
    F, KF = torch.nn.functional, kiln.nn.functional
    f4, f2 = 4.0 * N, 2.0 * N
    c = [
        Case("copy", "copy f32 (clone)", 2 * f4, lambda: kx32.clone(), lambda: x32.clone()),
        Case("elementwise", "add f32", 3 * f4, lambda: kx32 + ky32, lambda: x32 + y32),
        Case("elementwise", "mul bf16", 3 * f2, lambda: kx16 * ky16, lambda: x16 * y16),
        Case("elementwise", "add f32 row-broadcast", 2 * f4, lambda: km32 + krow, lambda: m32 + row),
        Case("elementwise", "mul f32 by scalar", 2 * f4, lambda: kx32 * 0.5, lambda: x32 * 0.5),
        Case("elementwise", "exp f32", 2 * f4, lambda: kiln.exp(kx32), lambda: x32.exp()),
        Case("elementwise", "silu bf16", 2 * f2, lambda: KF.silu(kx16), lambda: F.silu(x16)),
        Case("elementwise", "gelu f32", 2 * f4, lambda: KF.gelu(kx32), lambda: F.gelu(x32)),
        Case("elementwise", "lt f32 -> bool", 2 * f4 + N, lambda: kx32 < ky32, lambda: x32 < y32),
        Case("cast", "cast f32->bf16", f4 + f2, lambda: kx32.to(kiln.bfloat16), lambda: x32.to(torch.bfloat16)),
        Case("cast", "cast bf16->fp8e4m3", f2 + N, lambda: kx16.to(kiln.float8_e4m3fn),
             lambda: x16.to(torch.float8_e4m3fn)),
        Case("reduce", "sum f32 all", f4, lambda: kx32.sum(), lambda: x32.sum()),
        Case("reduce", "sum f32 [R,4096] dim=-1", f4, lambda: km32.sum(-1), lambda: m32.sum(-1)),
        Case("reduce", "sum f32 [R,4096] dim=0", f4, lambda: km32.sum(0), lambda: m32.sum(0)),
        Case("reduce", "amax bf16 dim=-1", f2, lambda: km16.amax(-1), lambda: m16.amax(-1)),
        Case("reduce", "argmax f32 dim=-1", f4, lambda: km32.argmax(-1), lambda: m32.argmax(-1)),
        Case("reduce", "mean bf16 all", f2, lambda: kx16.mean(), lambda: x16.mean()),
        Case("reduce", "max f32 all", f4, lambda: kx32.max(), lambda: x32.max()),
        Case("copy", "transpose copy f32", 2 * f4, lambda: km32.t().contiguous(), lambda: m32.t().contiguous()),
    ]
    n = 4096
    A, B = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    A32, B32 = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    kA, kB, kA32, kB32 = map(k, (A, B, A32, B32))
    c.append(Case("matmul", f"matmul bf16 {n}", 6.0 * n * n, lambda: kiln.matmul(kA, kB), lambda: A @ B,
                  flops=2.0 * n ** 3))
    c.append(Case("matmul", f"matmul f32 {n}", 12.0 * n * n, lambda: kiln.matmul(kA32, kB32), lambda: A32 @ B32,
                  flops=2.0 * n ** 3))
    return c


# ---- cases: decode linear (issue 3) ----
MODELS = {  # hidden, q_dim, kv_dim, mlp intermediate, vocab, experts (router rows)
    "Qwen3-0.6B": (1024, 2048, 1024, 3072, 151936, 0),
    "Qwen3-8B": (4096, 4096, 1024, 12288, 151936, 0),
    "Qwen3-30B-A3B": (2048, 4096, 512, 768, 151936, 128),
    "Llama-3-8B": (4096, 4096, 1024, 14336, 128256, 0),
}


def linear_shapes():
    """(N, K) of every projection of the models above, deduplicated, with the models using it."""
    shapes = {}
    for name, (h, q, kv, inter, vocab, experts) in MODELS.items():
        for nk in [(q, h), (kv, h), (h, q), (inter, h), (h, inter), (vocab, h)] + ([(experts, h)] if experts else []):
            shapes.setdefault(nk, []).append(name)
    return shapes


def linear_cases():
    dev, F = "cuda", torch.nn.functional
    c = []
    x1 = {}
    for (n, kk), models in linear_shapes().items():
        x = x1.setdefault(kk, torch.randn(1, 1, kk, device=dev, dtype=torch.bfloat16))
        w = torch.randn(n, kk, device=dev, dtype=torch.bfloat16) / kk ** 0.5
        kx, kw = k(x), k(w)
        c.append(Case("linear", f"linear bf16 1x{kk} -> {n}", 2.0 * n * kk + 2 * kk + 2 * n,
                      lambda kx=kx, kw=kw: kiln.nn.functional.linear(kx, kw), lambda x=x, w=w: F.linear(x, w)))
    for n, kk in [(128, 2048), (768, 2048)]:
        x = torch.randn(1, 1, kk, device=dev, dtype=torch.bfloat16)
        w, b = torch.randn(n, kk, device=dev, dtype=torch.bfloat16), torch.randn(n, device=dev, dtype=torch.bfloat16)
        kx, kw, kb = k(x), k(w), k(b)
        c.append(Case("linear", f"linear+bias bf16 1x{kk} -> {n} (MoE gate)", 2.0 * n * kk,
                      lambda kx=kx, kw=kw, kb=kb: kiln.nn.functional.linear(kx, kw, kb),
                      lambda x=x, w=w, b=b: F.linear(x, w, b)))
    n, kk = 4096, 14336
    x = torch.randn(1, 1, kk, device=dev, dtype=torch.bfloat16)
    w, b = torch.randn(n, kk, device=dev, dtype=torch.bfloat16), torch.randn(n, device=dev, dtype=torch.bfloat16)
    w8 = (w * 20).to(torch.float8_e4m3fn)
    s8 = torch.full((n,), 0.05, device=dev)
    kx, kw, kb, kw8, ks8 = k(x), k(w), k(b), k(w8), k(s8)
    c.append(Case("linear", f"linear+bias bf16 1x{kk} -> {n}", 2.0 * n * kk,
                  lambda kx=kx, kw=kw, kb=kb: kiln.nn.functional.linear(kx, kw, kb),
                  lambda x=x, w=w, b=b: F.linear(x, w, b)))
    for rows in (2, 4, 8):
        xr = torch.randn(rows, kk, device=dev, dtype=torch.bfloat16)
        kxr = k(xr)
        c.append(Case("linear", f"linear bf16 {rows}x{kk} -> {n}", 2.0 * n * kk,
                      lambda kxr=kxr, kw=kw: kiln.nn.functional.linear(kxr, kw),
                      lambda xr=xr, w=w: F.linear(xr, w)))
    c.append(Case("linear-fp8", f"linear fp8-weight 1x{kk} -> {n} (vs torch bf16)", 1.0 * n * kk,
                  lambda kx=kx, kw8=kw8, ks8=ks8: kiln.nn.functional.linear(kx, kw8, weight_scale=ks8),
                  lambda x=x, w=w: F.linear(x, w)))
    # a dense MLP's gate|up with its activation (kiln: one kernel; torch: the product, then silu * up)
    for h, inter in [(4096, 12288), (1024, 3072)]:
        x = torch.randn(1, 1, h, device=dev, dtype=torch.bfloat16)
        w = torch.randn(2 * inter, h, device=dev, dtype=torch.bfloat16) / h ** 0.5
        kx, kw = k(x), k(w)

        def torch_swiglu(x=x, w=w, inter=inter):
            p = F.linear(x, w)
            return F.silu(p[..., :inter]) * p[..., inter:]
        c.append(Case("linear", f"linear_silu_and_mul bf16 1x{h} -> 2x{inter}", 2.0 * 2 * inter * h,
                      lambda kx=kx, kw=kw: kiln.nn.functional.linear_silu_and_mul(kx, kw), torch_swiglu))
    for case in c:
        case.graph = True
    return c


# ---- cases: softmax (issue 3) ----
def softmax_cases():
    c = []
    for v in (32000, 128256, 151936, 262144):
        x = torch.randn(1, v, device="cuda")
        kx = k(x)
        c.append(Case("softmax", f"softmax f32 [1,{v}]", 8.0 * v, lambda kx=kx: kiln.softmax(kx, -1),
                      lambda x=x: torch.softmax(x, -1), graph=True))
    for shape, dt in (((4096, 4096), torch.float32), ((64, 151936), torch.bfloat16), ((32768, 1024), torch.bfloat16)):
        x = torch.randn(*shape, device="cuda", dtype=dt)
        kx = k(x)
        n = x.numel() * x.element_size()
        c.append(Case("softmax", f"softmax {str(dt)[6:]} {list(shape)}", 2.0 * n, lambda kx=kx: kiln.softmax(kx, -1),
                      lambda x=x: torch.softmax(x, -1)))
        c.append(Case("softmax", f"log_softmax {str(dt)[6:]} {list(shape)}", 2.0 * n,
                      lambda kx=kx: kiln.log_softmax(kx, -1), lambda x=x: torch.log_softmax(x, -1)))
    return c


# ---- cases: topk over router-sized rows (issue 3) ----
def topk_cases():
    c = []
    for m, n, kk in [(1, 8, 2), (1, 128, 8), (1, 512, 8), (16, 64, 6), (512, 128, 8), (4096, 256, 8), (1, 64, 16),
                     (1, 256, 32), (1, 512, 32), (64, 512, 32), (512, 128, 32), (4096, 64, 16)]:
        x = torch.randn(m, n, device="cuda")
        kx = k(x)
        c.append(Case("topk", f"topk f32 [{m},{n}] k={kk}", 4.0 * m * n, lambda kx=kx, kk=kk: kiln.topk(kx, kk),
                      lambda x=x, kk=kk: torch.topk(x, kk), graph=True))
    return c


# ---- cases: FP8 scaled_mm (issue 3) ----
def scaled_mm_cases():
    c, dev = [], "cuda"
    for m, kk, n, rowwise in [(1, 4096, 4096, False), (16, 4096, 4096, False), (16, 4096, 4096, True),
                              (8, 4096, 14336, True), (4096, 4096, 4096, False), (4096, 4096, 4096, True)]:
        a = torch.randn(m, kk, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, kk, device=dev).to(torch.float8_e4m3fn)
        sa = torch.rand(m, 1, device=dev) if rowwise else torch.tensor(0.5, device=dev)
        sb = torch.rand(1, n, device=dev) if rowwise else torch.tensor(0.5, device=dev)
        ka, kw, ksa, ksb = k(a), k(w), k(sa), k(sb)
        c.append(Case("scaled_mm", f"scaled_mm {m}x{kk}x{n} {'rowwise' if rowwise else 'tensorwise'}",
                      1.0 * (m * kk + n * kk) + 2.0 * m * n,
                      lambda ka=ka, kw=kw, ksa=ksa, ksb=ksb: kiln._scaled_mm(ka, kw.t(), ksa, ksb, out_dtype=kiln.bfloat16),
                      lambda a=a, w=w, sa=sa, sb=sb: torch._scaled_mm(a, w.t(), sa, sb, out_dtype=torch.bfloat16),
                      flops=2.0 * m * kk * n, graph=m <= 16))
    return c


# ---- cases: grouped_mm for mixture-of-experts layers (issue 3) ----
def grouped_mm_cases():
    c, dev, gen = [], "cuda", torch.Generator().manual_seed(0)
    grouped = getattr(torch.nn.functional, "grouped_mm", None) or torch._grouped_mm
    experts, top = 128, 8
    # Qwen3-30B-A3B's gate/up projection, then its down projection (decode only)
    for kk, n, token_counts in ((2048, 1536, (1, 8, 512)), (768, 2048, (1,))):
        w = torch.randn(experts, n, kk, device=dev, dtype=torch.bfloat16) / kk ** 0.5
        kw = k(w).transpose(-2, -1)
        for tokens in token_counts:
            chosen = torch.stack([torch.randperm(experts, generator=gen)[:top] for _ in range(tokens)]).flatten()
            counts = torch.bincount(chosen, minlength=experts)
            offs = counts.cumsum(0).to(device=dev, dtype=torch.int32)
            a = torch.randn(tokens * top, kk, device=dev, dtype=torch.bfloat16)
            ka, ko = k(a), k(offs)
            used = int((counts > 0).sum())
            c.append(Case("grouped_mm", f"grouped_mm {tokens} tok top-{top}/{experts} {kk}->{n}",
                          2.0 * used * n * kk + 2.0 * a.numel() + 2.0 * tokens * top * n,
                          lambda ka=ka, ko=ko, kw=kw: kiln.nn.functional.grouped_mm(ka, kw, offs=ko),
                          lambda a=a, offs=offs, w=w: grouped(a, w.transpose(-2, -1), offs=offs),
                          flops=2.0 * tokens * top * n * kk, graph=tokens <= 8))
            # fp8 e4m3fn weights with per-row scales (half the bytes) against torch's bf16 grouped_mm
            if kk == 2048 or tokens == 1:
                kw8, ks8 = kiln.quantize_fp8_rows(k(w))
                c.append(Case("grouped_mm", f"grouped_mm fp8-weight {tokens} tok top-{top}/{experts} {kk}->{n} "
                              "(vs torch bf16)", 1.0 * used * n * kk + 2.0 * a.numel() + 2.0 * tokens * top * n,
                              lambda ka=ka, ko=ko, kw8=kw8, ks8=ks8: kiln.nn.functional.grouped_mm(
                                  ka, kw8.transpose(-2, -1), offs=ko, b_scale=ks8),
                              lambda a=a, offs=offs, w=w: grouped(a, w.transpose(-2, -1), offs=offs),
                              flops=2.0 * tokens * top * n * kk, graph=tokens <= 8))
    return c


# ---- cases: the MoE router and combine (issue 3) ----
def torch_route(logits, top):
    """The router in torch ops, graph-capturable: softmax, top-k, renormalise, counts, offsets, permutation."""
    w, e = torch.topk(torch.softmax(logits.float(), -1), top, -1)
    w = w / w.sum(-1, keepdim=True)
    flat = e.flatten()
    counts = torch.zeros(logits.shape[1], device=logits.device, dtype=torch.int32)
    counts.index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    order = torch.argsort(flat, stable=True)
    return w, e, counts.cumsum(0), order // top, torch.argsort(order)


def moe_routing_cases():
    c, experts, top, hidden = [], 128, 8, 2048
    for tokens in (1, 512):
        logits = torch.randn(tokens, experts, device="cuda", dtype=torch.bfloat16)
        kl = k(logits)
        c.append(Case("moe_route", f"moe_route [{tokens},{experts}] top-{top}", 2.0 * logits.numel(),
                      lambda kl=kl: kiln.moe_route(kl, top), lambda logits=logits: torch_route(logits, top),
                      graph=True))
        y = torch.randn(tokens * top, hidden, device="cuda", dtype=torch.bfloat16)
        r = kiln.moe_route(kl, top)
        ky, w, pos = k(y), torch.from_dlpack(r.weights), torch.from_dlpack(r.sorted_pos).long()
        c.append(Case("moe_route", f"moe_combine [{tokens}x{top},{hidden}]", 2.0 * y.numel() + 2.0 * tokens * hidden,
                      lambda ky=ky, r=r: kiln.moe_combine(ky, r),
                      lambda y=y, w=w, pos=pos: (y[pos].float() * w[..., None]).sum(1).to(y.dtype), graph=True))
    # the SwiGLU experts of one decode token (Qwen3-30B-A3B): kiln's two fused kernels against
    # torch's index_select, grouped_mm, silu * up, grouped_mm on the same routing
    F, inter = torch.nn.functional, 768
    grouped = getattr(F, "grouped_mm", None) or torch._grouped_mm
    gate_up = torch.randn(experts, 2 * inter, hidden, device="cuda", dtype=torch.bfloat16) / hidden ** 0.5
    down = torch.randn(experts, hidden, inter, device="cuda", dtype=torch.bfloat16) / inter ** 0.5
    x = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16)
    r = kiln.moe_route(k(torch.randn(1, experts, device="cuda")), top)
    token_of, offs = torch.from_dlpack(r.token_of).long(), torch.from_dlpack(r.offs)

    def torch_experts():
        h = grouped(x[token_of], gate_up.transpose(-2, -1), offs=offs)
        return grouped(F.silu(h[:, :inter]) * h[:, inter:], down.transpose(-2, -1), offs=offs)

    kx, kgu, kd = k(x), k(gate_up), k(down)
    c.append(Case("moe_route", f"moe_experts 1 tok top-{top}/{experts} {hidden}->{inter}->{hidden}",
                  2.0 * top * 3 * inter * hidden, lambda: kiln.moe_experts(kx, kgu, kd, r), torch_experts, graph=True))
    weights, pos = torch.from_dlpack(r.weights), torch.from_dlpack(r.sorted_pos).long()
    c.append(Case("moe_route", f"moe_experts+combine 1 tok top-{top}/{experts} {hidden}->{inter}->{hidden}",
                  2.0 * top * 3 * inter * hidden, lambda: kiln.moe_experts_combine(kx, kgu, kd, r),
                  lambda: (torch_experts()[pos].float() * weights[..., None]).sum(1).to(x.dtype), graph=True))
    # the next layer's add and norm begun by the down kernel (moe_experts_combine_rms_norm), then the
    # q|k|v projection that takes it, against torch's experts, combine, add, rms_norm and linear
    res, g = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16), torch.rand(hidden, device="cuda",
                                                                                       dtype=torch.bfloat16) + 0.5
    wq = torch.randn(5120, hidden, device="cuda", dtype=torch.bfloat16) / hidden ** 0.5
    kres, kg, kwq = k(res), k(g), k(wq)

    def torch_experts_norm_qkv():
        y = (torch_experts()[pos].float() * weights[..., None]).sum(1).to(x.dtype)
        return F.linear(F.rms_norm(y + res, (hidden,), g, 1e-6), wq)

    c.append(Case("moe_route", f"moe_experts+combine+norm -> q|k|v 1 tok top-{top}/{experts} {hidden}->5120",
                  2.0 * (top * 3 * inter + 5120) * hidden,
                  lambda: kiln.pending_rms_norm_linear(
                      kiln.moe_experts_combine_rms_norm(kx, kgu, kd, r, kres, kg, 1e-6), kwq),
                  torch_experts_norm_qkv, graph=True))
    c.append(Case("moe_route", f"moe_experts+combine, add+rms_norm, q|k|v 1 tok top-{top}/{experts} {hidden}->5120",
                  2.0 * (top * 3 * inter + 5120) * hidden,
                  lambda: kiln.linear(kiln.rms_norm_residual(kiln.moe_experts_combine(kx, kgu, kd, r), kres, kg,
                                                             1e-6)[0], kwq),
                  torch_experts_norm_qkv, graph=True))
    (kgu8, kgs), (kd8, kds) = kiln.quantize_fp8_rows(kgu), kiln.quantize_fp8_rows(kd)
    c.append(Case("moe_route", f"moe_experts fp8-weight 1 tok top-{top}/{experts} {hidden}->{inter}->{hidden} "
                  "(vs torch bf16)", 1.0 * top * 3 * inter * hidden,
                  lambda: kiln.moe_experts(kx, kgu8, kd8, r, gate_up_scale=kgs, down_scale=kds), torch_experts,
                  graph=True))
    return c


# ---- cases: attention decode and prefill (issue 3) ----
def attention_cases():
    c, F = [], torch.nn.functional
    for hq, hkv, d, s in [(32, 8, 80, 4096), (32, 8, 80, 32768), (32, 8, 128, 4096), (32, 4, 128, 32768),
                          (32, 4, 128, 128)]:
        q = torch.randn(1, hq, 1, d, device="cuda", dtype=torch.bfloat16)
        kk, v = (torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kq, kkk, kv = k(q), k(kk), k(v)
        c.append(Case("attention", f"sdpa decode {hq}q/{hkv}kv d{d} ctx {s}", 2.0 * 2 * hkv * s * d,
                      lambda kq=kq, kkk=kkk, kv=kv: kiln.nn.functional.scaled_dot_product_attention(
                          kq, kkk, kv, enable_gqa=True),
                      lambda q=q, kk=kk, v=v: F.scaled_dot_product_attention(q, kk, v, enable_gqa=True), graph=True))
    # a decode step's attention after its q|k|v projection: attention_decode_qkv (q/k norm, rotary and the
    # cache row made in the attention kernel, the other rows' copies begun while the projection finishes)
    # against kiln's three ops and torch's, all writing the new cache row
    hidden, eps = 2048, 1e-6
    for hq, hkv, d, s in [(32, 4, 128, 128), (32, 4, 128, 2048), (32, 8, 80, 4096)]:
        half, heads = d // 2, hq + 2 * hkv
        x = torch.randn(1, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(heads * d, hidden, device="cuda", dtype=torch.bfloat16) / hidden ** 0.5
        qn, kn = (torch.rand(d, device="cuda", dtype=torch.bfloat16) + 0.5 for _ in range(2))
        ang = torch.arange(s, device="cuda")[:, None].float() * torch.rand(half, device="cuda")[None]
        cos, sin = ang.cos(), ang.sin()
        kc, vc = (torch.randn(hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.tensor([s], device="cuda", dtype=torch.int32)
        kx, kw, kqn, kkn, kcos, ksin, klens, kpos = (k(t) for t in (x, w, qn, kn, cos, sin, lens, lens - 1))
        kkc, kvc = k(kc.clone()), k(vc.clone())
        kkc4, kvc4 = kkc.unsqueeze(0), kvc.unsqueeze(0)

        def torch_qkv_attention(x=x, w=w, qn=qn, kn=kn, c=cos[s - 1], sn=sin[s - 1], kc=kc, vc=vc, hq=hq, hkv=hkv,
                                d=d, half=half, s=s):
            hd = F.linear(x, w).view(-1, d)

            def norm_rope(t, g):
                t = F.rms_norm(t, (d,), g, eps).float()
                lo, hi = t[:, :half], t[:, half:]
                return torch.cat([lo * c - hi * sn, hi * c + lo * sn], 1).to(x.dtype)

            kc[:, s - 1] = norm_rope(hd[hq:hq + hkv], kn)
            vc[:, s - 1] = hd[hq + hkv:]
            return F.scaled_dot_product_attention(norm_rope(hd[:hq], qn)[None, :, None], kc[None], vc[None],
                                                  enable_gqa=True)

        nbytes = 2.0 * (heads * d * hidden + 2 * hkv * s * d)
        c.append(Case("attention", f"q|k|v {hidden}->{heads * d} + decode attention {hq}q/{hkv}kv d{d} ctx {s}, "
                      "one kernel", nbytes,
                      lambda kx=kx, kw=kw, hq=hq, hkv=hkv, kqn=kqn, kkn=kkn, kcos=kcos, ksin=ksin, klens=klens,
                      kkc=kkc, kvc=kvc: kiln.attention_decode_qkv(kiln.linear(kx, kw), hq, hkv, kqn, kkn, eps, kcos,
                                                                  ksin, klens, kkc, kvc, cache_settled=True),
                      torch_qkv_attention, graph=True))
        c.append(Case("attention", f"q|k|v {hidden}->{heads * d} + decode attention {hq}q/{hkv}kv d{d} ctx {s}, "
                      "rotary kernel first", nbytes,
                      lambda kx=kx, kw=kw, hq=hq, hkv=hkv, kqn=kqn, kkn=kkn, kcos=kcos, ksin=ksin, kpos=kpos,
                      klens=klens, kkc=kkc, kvc=kvc, kkc4=kkc4, kvc4=kvc4: kiln.attention_decode_cache(
                          kiln.qkv_rotary_cache(kiln.linear(kx, kw), hq, hkv, kqn, kkn, eps, kcos, ksin, kpos, kkc,
                                                kvc), kkc4, kvc4, klens),
                      torch_qkv_attention, graph=True))
    # prefill: the flash kernel; FLOPs of the two matmuls over the (causal: lower half of the) score matrix
    for hq, hkv, d, n, dt, causal in [(16, 16, 40, 4096, torch.float16, True), (16, 16, 40, 4096, torch.float16, False),
                                      (32, 8, 128, 2048, torch.bfloat16, True), (16, 16, 64, 4096, torch.float16, True)]:
        q = torch.randn(1, hq, n, d, device="cuda", dtype=dt)
        kk, v = (torch.randn(1, hkv, n, d, device="cuda", dtype=dt) for _ in range(2))
        kq, kkk, kv = k(q), k(kk), k(v)
        flops = 4.0 * hq * n * n * d * (0.5 if causal else 1.0)
        c.append(Case("attention", f"sdpa prefill {hq}q/{hkv}kv d{d} {n}x{n} {str(dt)[6:]}{' causal' if causal else ''}",
                      2.0 * (2 * hq + 2 * hkv) * n * d,
                      lambda kq=kq, kkk=kkk, kv=kv, causal=causal: kiln.nn.functional.scaled_dot_product_attention(
                          kq, kkk, kv, is_causal=causal, enable_gqa=True),
                      lambda q=q, kk=kk, v=v, causal=causal: F.scaled_dot_product_attention(
                          q, kk, v, is_causal=causal, enable_gqa=True), flops=flops))
    # a 512-token chunk after 3584 cached tokens (Qwen3-8B heads): kiln's lower-right causal kernel against
    # torch's causal_lower_right mask (its flash and cuDNN kernels take only the upper-left variant)
    from torch.nn.attention.bias import causal_lower_right
    L, S = 512, 4096
    q = torch.randn(1, 32, L, 128, device="cuda", dtype=torch.bfloat16)
    kk, v = (torch.randn(1, 8, S, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kq, kkk, kv, bias = k(q), k(kk), k(v), causal_lower_right(L, S)
    kr, vr = kk.repeat_interleave(4, 1), v.repeat_interleave(4, 1)  # GQA made plain outside the timing
    c.append(Case("attention", f"sdpa chunk {L} after {S - L} cached 32q/8kv d128 bf16 lower-right causal",
                  2.0 * (2 * 32 * L + 2 * 8 * S) * 128,
                  lambda: kiln.nn.functional.scaled_dot_product_attention(kq, kkk, kv, is_causal=True, enable_gqa=True,
                                                                         causal_variant="lower_right"),
                  lambda: F.scaled_dot_product_attention(q, kr, vr, attn_mask=bias),
                  flops=4.0 * 32 * L * (S - L / 2) * 128))
    return c


# ---- cases: the small ops of a decoder layer (issue 3) ----
def layer_ops_cases():
    c, F, dev, bf = [], torch.nn.functional, "cuda", torch.bfloat16
    for rows, n in [(1, 4096), (512, 2048)]:
        x, r, w = torch.randn(rows, n, device=dev, dtype=bf), torch.randn(rows, n, device=dev, dtype=bf), \
            torch.randn(n, device=dev, dtype=bf)
        kx, kr, kw = k(x), k(r), k(w)
        c.append(Case("layer_ops", f"rms_norm+residual bf16 [{rows},{n}]", 2.0 * 4 * rows * n,
                      lambda kx=kx, kr=kr, kw=kw: kiln.rms_norm_residual(kx, kr, kw, 1e-6),
                      lambda x=x, r=r, w=w, n=n: F.rms_norm(x + r, (n,), w, 1e-6), graph=True))
        if rows == 1:  # the add and norm fused into the projection after them (the MoE router; q|k|v's shape)
            for nout in (128, 5120):
                xs, rs = x[:, :2048].contiguous(), r[:, :2048].contiguous()
                g, wl = torch.randn(2048, device=dev, dtype=bf), torch.randn(nout, 2048, device=dev, dtype=bf)
                kxs, krs, kg, kwl = k(xs), k(rs), k(g), k(wl)
                c.append(Case("layer_ops", f"rms_norm_linear bf16 1x2048 -> {nout}", 2.0 * (nout + 4) * 2048,
                              lambda kxs=kxs, krs=krs, kg=kg, kwl=kwl: kiln.rms_norm_linear(kxs, krs, kg, 1e-6, kwl),
                              lambda xs=xs, rs=rs, g=g, wl=wl: F.linear(F.rms_norm(xs + rs, (2048,), g, 1e-6), wl),
                              graph=True))
        b = torch.randn(n, device=dev, dtype=bf)
        kb = k(b)
        c.append(Case("layer_ops", f"layer_norm bf16 [{rows},{n}]", 2.0 * 2 * rows * n,
                      lambda kx=kx, kw=kw, kb=kb, n=n: kiln.nn.functional.layer_norm(kx, (n,), kw, kb),
                      lambda x=x, w=w, b=b, n=n: F.layer_norm(x, (n,), w, b), graph=True))
        g = torch.randn(rows, 2 * 3 * n, device=dev, dtype=bf)
        kg = k(g)
        c.append(Case("layer_ops", f"silu_and_mul bf16 [{rows},{2 * 3 * n}]", 2.0 * 1.5 * g.numel(),
                      lambda kg=kg: kiln.silu_and_mul(kg),
                      lambda g=g: F.silu(g[:, :g.shape[1] // 2]) * g[:, g.shape[1] // 2:], graph=True))
    q = torch.randn(1, 32, 128, device=dev, dtype=bf)
    cos, sin = torch.randn(1, 64, device=dev), torch.randn(1, 64, device=dev)
    kq, kc, ks = k(q), k(cos), k(sin)

    def torch_rope(q=q, cos=cos, sin=sin):
        a, b = q[..., :64].float(), q[..., 64:].float()
        return torch.cat([a * cos[:, None] - b * sin[:, None], b * cos[:, None] + a * sin[:, None]], -1).to(q.dtype)
    c.append(Case("layer_ops", "rotary bf16 [1,32,128]", 4.0 * q.numel(), lambda: kiln.apply_rotary(kq, kc, ks),
                  torch_rope, graph=True))
    return c


# ---- cases: token sampling (issue 3) ----
def sampling_cases():
    """Temperature 0.7, top-k 50, top-p 0.9 over a vocabulary, against the same steps in torch:
    Hugging Face's warpers, then the inverse CDF at a torch.rand draw (graph-capturable)."""
    c = []
    for b, v in [(1, 151936), (8, 128256)]:
        x = torch.randn(b, v, device="cuda") * 3
        kx, gen = k(x), kiln.Generator(0)

        def torch_sample(x=x):
            z = x / 0.7
            kth = torch.topk(z, 50, -1).values[..., -1:]
            z = z.masked_fill(z < kth, float("-inf"))
            sp, si = torch.sort(z, -1, descending=True)
            p = sp.softmax(-1)
            cum = p.cumsum(-1)
            p = p.masked_fill(cum - p >= 0.9, 0.0)
            cum = p.cumsum(-1)
            r = torch.rand(x.shape[0], 1, device=x.device) * cum[..., -1:]
            j = torch.searchsorted(cum, r).clamp_max(x.shape[1] - 1)
            return si.gather(-1, j)
        c.append(Case("sampling", f"sample T=0.7 k=50 p=0.9 [{b},{v}]", 4.0 * b * v,
                      lambda kx=kx, gen=gen: kiln.sample(kx, 0.7, 50, 0.9, gen), torch_sample, graph=True))
    return c


# ---- cases: linear algebra on the device (issue 5) ----
def linalg_cases():
    c = []
    A = torch.randn(1 << 20, 4, 4, device="cuda") + 4 * torch.eye(4, device="cuda")
    kA = k(A)
    # the singular check reads one number back on both sides, so both include a host sync
    c.append(Case("linalg", "inv 1M x 4x4 f32", 2.0 * A.numel() * 4, lambda: kiln.linalg.inv(kA),
                  lambda: torch.linalg.inv(A)))
    # Gated DeltaNet's chunked form: 4096 lower-triangular systems with 8 right-hand sides
    for n in (16, 32, 64):
        L = torch.randn(4096, n, n, device="cuda").tril() / n ** 0.5 + 2 * torch.eye(n, device="cuda")
        R = torch.randn(4096, n, 8, device="cuda")
        kL, kR = k(L), k(R)
        tri = 4096 * n * (n + 1) // 2  # the triangle is all a solver must read of L
        c.append(Case("linalg", f"solve_triangular 4096 x {n}x{n}, 8 rhs", 4.0 * (tri + 2 * R.numel()),
                      lambda kL=kL, kR=kR: kiln.linalg.solve_triangular(kL, kR, upper=False),
                      lambda L=L, R=R: torch.linalg.solve_triangular(L, R, upper=False)))
    # batched LU of small matrices (lu_factor_ex: no host sync on either side)
    for batch, n in ((1024, 64), (4096, 32), (4096, 16)):
        for dt, size in ((torch.complex64, 8), (torch.float32, 4)):
            M = torch.randn(batch, n, n, device="cuda", dtype=dt)
            kM = k(M)
            c.append(Case("linalg", f"lu_factor {batch} x {n}x{n} {str(dt)[6:]}", 2.0 * M.numel() * size,
                          lambda kM=kM: kiln.linalg.lu_factor_ex(kM), lambda M=M: torch.linalg.lu_factor_ex(M)))
    # large single matrices: cuSOLVER on both sides (FLOP rates: LAPACK's operation counts)
    n = 4096
    G = torch.randn(n, n, device="cuda")
    kG = k(G)
    c.append(Case("linalg", f"lu_factor {n}x{n} f32", 8.0 * n * n, lambda: kiln.linalg.lu_factor_ex(kG),
                  lambda: torch.linalg.lu_factor_ex(G), flops=2.0 / 3.0 * n ** 3))
    n = 2048
    Q = torch.randn(n, n, device="cuda")
    kQ = k(Q)
    c.append(Case("linalg", f"qr {n}x{n} f32", 12.0 * n * n, lambda: kiln.linalg.qr(kQ), lambda: torch.linalg.qr(Q),
                  flops=8.0 / 3.0 * n ** 3))  # geqrf + orgqr
    Qc = torch.randn(1024, 1024, device="cuda", dtype=torch.complex64)
    kQc = k(Qc)
    c.append(Case("linalg", "qr 1024x1024 c64", 24.0 * 1024 * 1024, lambda: kiln.linalg.qr(kQc),
                  lambda: torch.linalg.qr(Qc), flops=4 * 8.0 / 3.0 * 1024 ** 3))
    n = 512
    S = torch.randn(n, n, device="cuda")
    kS = k(S)
    c.append(Case("linalg", f"svd {n}x{n} f32", 16.0 * n * n, lambda: kiln.linalg.svd(kS, full_matrices=False),
                  lambda: torch.linalg.svd(S, full_matrices=False)))
    c.append(Case("linalg", f"svdvals {n}x{n} f32", 4.0 * n * n, lambda: kiln.linalg.svdvals(kS),
                  lambda: torch.linalg.svdvals(S)))
    R = torch.randn(2048, 64, device="cuda")
    kR = k(R)
    # solve's two halves apart
    c.append(Case("linalg", "lu_factor 2048x2048 f32", 8.0 * 2048 * 2048, lambda: kiln.linalg.lu_factor_ex(kQ),
                  lambda: torch.linalg.lu_factor_ex(Q), flops=2.0 / 3.0 * 2048 ** 3))
    LUQ, PQ = torch.linalg.lu_factor(Q)
    kLUQ, kPQ = k(LUQ), k(PQ)
    c.append(Case("linalg", "lu_solve 2048x2048, 64 rhs f32", 4.0 * 2048 * (2048 + 128),
                  lambda: kiln.linalg.lu_solve(kLUQ, kPQ, kR), lambda: torch.linalg.lu_solve(LUQ, PQ, R)))
    c.append(Case("linalg", "solve 2048x2048, 64 rhs f32", 4.0 * 2048 * (2048 + 128),
                  lambda: kiln.linalg.solve(kQ, kR), lambda: torch.linalg.solve(Q, R)))
    return c


CASES = [core_cases, linear_cases, softmax_cases, topk_cases, scaled_mm_cases, grouped_mm_cases, moe_routing_cases,
         attention_cases, layer_ops_cases, sampling_cases, linalg_cases]


def measured_copy_gbs(repeats, stream):
    """The card's copy ceiling in this run: the faster of torch's and kiln's 1 GiB device copy."""
    n = 1 << 28
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    ks, kd = k(src), k(dst)
    best = min(time_us(lambda: dst.copy_(src), repeats, stream), time_us(lambda: kd.copy_(ks), repeats, stream))
    return 2 * 4 * n / best / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", default="",
                    help="only cases whose family or name contains this, or one of A|B|... (case names hold no '|')")
    ap.add_argument("--targets", action="store_true", help="only the cases the issues set a figure for")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available() or not kiln.cuda.is_available():
        sys.exit("bench.py needs CUDA in both torch and kiln: " + kiln.cuda.availability().reason)
    torch.manual_seed(0)
    stream = torch.cuda.current_stream()
    print(f"kiln vs torch {torch.__version__} on {torch.cuda.get_device_name()}")
    with kiln.cuda.use_torch_stream(stream):
        ceiling = measured_copy_gbs(args.repeats, stream)
        print(f"measured copy bandwidth: {ceiling:.0f} GB/s")
        print(f"{'case':34} {'kiln us':>10} {'torch us':>10} {'speed-up':>9} {'kiln GB/s':>10} {'%copy':>6} "
              f"{'TFLOP/s':>8}")
        ratios, families, results = [], {}, {}
        for make in CASES:
            for c in make():
                if args.filter and not any(f in c.name or f in c.family for f in args.filter.split("|")):
                    continue
                if args.targets and not targets.wanted(c.name):
                    continue
                timer = time_graph_us if c.graph else lambda f, r: time_us(f, r, stream)
                tk = timer(c.kiln_fn, args.repeats)
                tt = timer(c.torch_fn, args.repeats)
                gbs = c.bytes / tk / 1e3
                ratios.append(tt / tk)
                families.setdefault(c.family, []).append(tt / tk)
                results[c.name] = targets.Result(tk, tt, c.bytes, ceiling)
                tf = f"{c.flops / tk / 1e6:8.1f}" if c.flops else f"{'-':>8}"
                print(f"{c.name + (' [graph]' if c.graph else ''):34} {tk:10.1f} {tt:10.1f} {tt / tk:8.2f}x {gbs:10.0f} {100 * gbs / ceiling:5.0f}% {tf}",
                      flush=True)
        gm = lambda r: math.exp(sum(map(math.log, r)) / len(r))  # noqa: E731
        for fam, r in families.items():
            print(f"geometric-mean speed-up over torch, {fam}: {gm(r):.2f}x ({len(r)} cases)")
        if ratios:
            print(f"geometric-mean speed-up over torch, all: {gm(ratios):.2f}x")
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)  # older torch: an H200's is 60 MB
        lines = targets.report(results, l2)
        if lines:
            print(f"\nthe issues' figures (set for the H200; this run: {torch.cuda.get_device_name()})")
            print("\n".join(lines))


if __name__ == "__main__":
    main()
