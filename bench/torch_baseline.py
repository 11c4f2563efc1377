"""PyTorch's times for the cases of `kiln bench` (same shapes, same median-of-events
timing), run on the GPU machine until the Python module lets bench.py put both in one
process. Usage: python3 bench/torch_baseline.py"""
import torch

N = (1 << 26) // 4096 * 4096
dev = "cuda"
x32, y32 = torch.randn(N, device=dev), torch.randn(N, device=dev)
x16, y16 = torch.randn(N, device=dev, dtype=torch.bfloat16), torch.randn(N, device=dev, dtype=torch.bfloat16)
m32, m16 = x32.view(-1, 4096), x16.view(-1, 4096)
row = torch.randn(4096, device=dev)
A, B = (torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) for _ in range(2))
A32, B32 = torch.randn(4096, 4096, device=dev), torch.randn(4096, 4096, device=dev)
f4, f2 = 4.0 * N, 2.0 * N
cases = [
    ("copy f32 (clone)", 2 * f4, lambda: x32.clone()),
    ("add f32", 3 * f4, lambda: x32 + y32),
    ("mul bf16", 3 * f2, lambda: x16 * y16),
    ("add f32 row-broadcast", 2 * f4, lambda: m32 + row),
    ("mul f32 by scalar", 2 * f4, lambda: x32 * 0.5),
    ("exp f32", 2 * f4, lambda: x32.exp()),
    ("silu bf16", 2 * f2, lambda: torch.nn.functional.silu(x16)),
    ("gelu f32", 2 * f4, lambda: torch.nn.functional.gelu(x32)),
    ("lt f32 -> bool", 2 * f4 + N, lambda: x32 < y32),
    ("cast f32->bf16", f4 + f2, lambda: x32.to(torch.bfloat16)),
    ("cast bf16->fp8e4m3", f2 + N, lambda: x16.to(torch.float8_e4m3fn)),
    ("sum f32 all", f4, lambda: x32.sum()),
    ("sum f32 [R,4096] dim=-1", f4, lambda: m32.sum(-1)),
    ("sum f32 [R,4096] dim=0", f4, lambda: m32.sum(0)),
    ("amax bf16 dim=-1", f2, lambda: m16.amax(-1)),
    ("argmax f32 dim=-1", f4, lambda: m32.argmax(-1)),
    ("mean bf16 all", f2, lambda: x16.mean()),
    ("transpose copy f32", 2 * f4, lambda: m32.t().contiguous()),
    ("matmul bf16 4096", 6.0 * 4096**2, lambda: A @ B),
    ("matmul f32 4096", 12.0 * 4096**2, lambda: A32 @ B32),
]
print(f"{'case':28s} {'torch us':>12s} {'GB/s':>10s}")
for name, nbytes, fn in cases:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000)
    ts.sort()
    us = ts[len(ts) // 2]
    print(f"{name:28s} {us:12.1f} {nbytes / us / 1e3:10.1f}")
