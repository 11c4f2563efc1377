"""Where a benchmark case's time goes on the GPU: the kernels each call launches,
their mean durations, and the span of 10 back-to-back calls per call (so the gaps
between kernels show as span minus kernel time). Uses the cases of bench.py.

    PYTHONPATH=build/python python3 bench/kernel_profile.py --filter "mean bf16"
"""
import argparse
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import kiln
from bench import CASES


def kernel_report(fn, calls=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not events:
        return "no kernels recorded"
    per_name = collections.defaultdict(list)
    for e in events:
        per_name[e.name].append(e.device_time)
    begin = min(e.time_range.start for e in events)
    end = max(e.time_range.end for e in events)
    busy = sum(e.device_time for e in events) / calls
    lines = [f"  span/call {(end - begin) / calls:8.1f} us, kernels/call {busy:8.1f} us"]
    for name, times in sorted(per_name.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"    {len(times) / calls:4.1f}x {sum(times) / len(times):8.1f} us  {name[:90]}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", required=True, help="cases whose family or name contains this")
    args = ap.parse_args()
    if not torch.cuda.is_available() or not kiln.cuda.is_available():
        sys.exit("kernel_profile.py needs CUDA in both torch and kiln")
    torch.manual_seed(0)
    with kiln.cuda.use_torch_stream(torch.cuda.current_stream()):
        for make in CASES:
            for c in make():
                if args.filter not in c.name and args.filter not in c.family:
                    continue
                print(f"{c.name}\n kiln:\n{kernel_report(c.kiln_fn)}\n torch:\n{kernel_report(c.torch_fn)}", flush=True)


if __name__ == "__main__":
    main()
