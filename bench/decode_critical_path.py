"""Where a decode step's time goes on the critical path (GPU machine): the kernels of a
few one-token steps of kiln's engine (random weights of a config.json) from a torch.profiler
trace, sorted by start. With chained launches (PDL) a kernel starts before the one ahead of
it ends, so its own duration (the own/call column, what bench/profile_decode.py lists)
counts its waiting too; its increment is how far it moves the latest end seen so far,
and the increments add up to the step. "idle before" is time with no kernel running
(the host's turn between steps).

    PYTHONPATH=<kiln module> python3 bench/decode_critical_path.py bench/configs/qwen3-30b-a3b.json bf16 128
"""
import collections
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import kiln

cfg, dtype, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = kiln.Qwen3Model.random(cfg, "cuda", dtype, max_context=ctx + 64)
model.forward(list(range(ctx)))
tok = [1]
for _ in range(5): kiln.argmax(model.forward(tok)).item()
torch.cuda.synchronize()
steps = 4
with profile(activities=[ProfilerActivity.CUDA]) as p:
    for _ in range(steps): kiln.argmax(model.forward(tok)).item()
p.export_chrome_trace("/tmp/tl.json")
ev = [e for e in json.load(open("/tmp/tl.json"))["traceEvents"] if e.get("cat") == "kernel"]
ev.sort(key=lambda e: e["ts"])
inc, cnt, own = collections.defaultdict(float), collections.Counter(), collections.defaultdict(float)
last_end, gaps = None, 0.0
gap_before = collections.defaultdict(float)
prev = None
for e in ev:
    s, d = e["ts"], e["dur"]
    end = s + d
    short = e["name"].replace("void kiln::cuda_backend::(anonymous namespace)::", "").replace("kiln::", "").split("(")[0][:60]
    if last_end is None: last_end = s
    if s > last_end:
        gaps += s - last_end  # idle: nothing running
        gap_before[short] += s - last_end
    inc[short] += max(0.0, end - max(last_end, s)) + max(0.0, s - last_end)
    cnt[short] += 1
    own[short] += d
    last_end = max(last_end, end)
total = sum(inc.values())
print(f"{cfg} {dtype} ctx {ctx}: {len(ev)/steps:.0f} kernels a step, critical path {total/steps:.0f} us a step (idle gaps {gaps/steps:.0f} us)")
print(f"{'kernel':60s} {'n/step':>7s} {'incr us/step':>12s} {'incr/call':>9s} {'own/call':>9s} {'idle before/step':>16s}")
for k, v in sorted(inc.items(), key=lambda kv: -kv[1]):
    print(f"{k:60s} {cnt[k]/steps:7.0f} {v/steps:12.1f} {v/cnt[k]:9.2f} {own[k]/cnt[k]:9.2f} {gap_before[k]/steps:16.1f}")
