"""kiln and PyTorch side by side, in one process, on the same tensors.

Each case builds its inputs once with torch, hands them to kiln through DLPack
(no copy), and times both sides with CUDA events on one stream (kiln enqueues on
torch's current stream): median over --repeats of the mean of 10 back-to-back calls. It prints both
times, the speed-up (torch time / kiln time), the bandwidth kiln reached and its
share of the card's copy bandwidth measured at the start of the same run.

    PYTHONPATH=build/python python3 bench/bench.py [--filter TEXT] [--repeats N]

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


@dataclass
class Case:
    family: str
    name: str
    bytes: float  # fewest bytes the op must move
    kiln_fn: Callable[[], object]
    torch_fn: Callable[[], object]
    flops: float = 0.0


def time_us(fn, repeats, stream, inner=10):
    """Median over `repeats` of the mean time of `inner` back-to-back calls: the queue
    stays full, so host-side launch cost hides behind the GPU as it does in a model."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(inner):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / inner)
    return statistics.median(times)


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


CASES = [core_cases]


def measured_copy_gbs(repeats, stream):
    """The card's copy ceiling in this run: the faster of torch's and kiln's 1 GiB device copy."""
    n = 1 << 28
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    ks, kd = k(src), k(dst)
    best = min(time_us(lambda: dst.copy_(src), repeats, stream), time_us(lambda: kd.copy_(ks), repeats, stream))
    return 2 * 4 * n / best / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", default="", help="only cases whose family or name contains this")
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
        ratios = []
        for make in CASES:
            for c in make():
                if args.filter and args.filter not in c.name and args.filter not in c.family:
                    continue
                tk = time_us(c.kiln_fn, args.repeats, stream)
                tt = time_us(c.torch_fn, args.repeats, stream)
                gbs = c.bytes / tk / 1e3
                ratios.append(tt / tk)
                tf = f"{c.flops / tk / 1e6:8.1f}" if c.flops else f"{'-':>8}"
                print(f"{c.name:34} {tk:10.1f} {tt:10.1f} {tt / tk:8.2f}x {gbs:10.0f} {100 * gbs / ceiling:5.0f}% {tf}",
                      flush=True)
        if ratios:
            print(f"geometric-mean speed-up over torch: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x")


if __name__ == "__main__":
    main()
