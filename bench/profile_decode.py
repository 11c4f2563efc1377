"""Where a decode step of kiln's engine spends its time on the GPU: the kernels
of one token (count, total and mean GPU time per kernel name) against the
step's wall time, for a config.json with random weights.

    PYTHONPATH=<kiln module> python3 bench/profile_decode.py bench/configs/qwen3-30b-a3b.json [--context 128]
"""
import argparse
import collections
import time

import torch
from torch.profiler import ProfilerActivity, profile

import kiln


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    model = kiln.Qwen3Model.random(args.config, "cuda", args.dtype, max_context=args.context + 64)
    model.forward(list(range(args.context)))
    tok = [1]
    for _ in range(3):
        model.forward(tok)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        kiln.argmax(model.forward(tok)).item()
    wall = (time.perf_counter() - t0) / args.steps
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            kiln.argmax(model.forward(tok)).item()
    per = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name].append(e.device_time)
    gpu = sum(sum(v) for v in per.values()) / args.steps
    print(f"decode step: wall {wall * 1e3:.3f} ms, kernels {gpu / 1e3:.3f} ms "
          f"({sum(len(v) for v in per.values()) // args.steps} launches)")
    for name, v in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:25]:
        print(f"  {sum(v) / args.steps:9.1f} us  {len(v) // args.steps:5d} x {sum(v) / len(v):7.2f} us  {name[:90]}")


if __name__ == "__main__":
    main()
