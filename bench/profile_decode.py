"""Where a decode step of kiln's engine spends its time on the GPU, for a config.json
with random weights: the kernels of one token (count, total and mean GPU time per
kernel name) against the step's wall time; then each kernel's share of the step's
critical path. With chained launches (PDL) a kernel starts before the one ahead of it
ends, so its own duration counts its waiting too (a norm of a 2048 row shows 10 us);
its increment is how far it moves the latest end of the kernels started before it,
and the increments add up to the span of the steps. "idle before" is time with no
kernel running (the host's turn between steps).

    PYTHONPATH=<kiln module> python3 bench/profile_decode.py bench/configs/qwen3-30b-a3b.json [--context 128]
"""
import argparse
import collections
import json
import os
import tempfile
import time


def short_name(name):
    """A kernel's name without kiln's namespaces and its parameter list."""
    return name.replace("void kiln::cuda_backend::(anonymous namespace)::", "").replace("kiln::", "").split("(")[0][:60]


def critical_path(kernels):
    """kernels: (name, start, duration) in any order. Returns ({name: [calls, increment,
    own time, idle before]}, the total of the increments, the idle time): a kernel's
    increment is how far its end moves the latest end of the kernels that started
    before it, plus the idle time before it; the increments add up to the span."""
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    last_end, idle = None, 0.0
    for name, start, dur in sorted(kernels, key=lambda k: k[1]):
        end = start + dur
        if last_end is None:
            last_end = start
        row = rows[name]
        gap = max(0.0, start - last_end)  # nothing running
        row[0] += 1
        row[1] += max(0.0, end - max(last_end, start)) + gap
        row[2] += dur
        row[3] += gap
        idle += gap
        last_end = max(last_end, end)
    return dict(rows), sum(r[1] for r in rows.values()), idle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    import kiln

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
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(trace)
        with open(trace) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    rows, total, idle = critical_path([(short_name(e["name"]), e["ts"], e["dur"]) for e in events])
    n = args.steps
    print(f"\ncritical path: {total / n:.0f} us a step (idle gaps {idle / n:.0f} us)")
    print(f"  {'kernel':60s} {'n/step':>7s} {'incr us/step':>12s} {'incr/call':>9s} {'own/call':>9s} "
          f"{'idle before/step':>16s}")
    for name, (calls, inc, own, gap) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:60s} {calls / n:7.0f} {inc / n:12.1f} {inc / calls:9.2f} {own / calls:9.2f} {gap / n:16.1f}")


if __name__ == "__main__":
    main()
