"""The figures the issues set for bench.py's cases (issues 3 and 5; ../shared/SPEC.md
sections 2 and 4), in one place. They are H200 figures: on another card bench.py
still checks them, as a guide, and says which card it ran on.

A target is a test on one case's result (by the case's name), or on the geometric
mean of the speed-ups of a set of cases (by a name prefix)."""
import math
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass
class Result:
    kiln_us: float
    torch_us: float
    bytes: float  # the fewest bytes the op must move
    copy_gbs: float  # the card's measured copy bandwidth in this run

    @property
    def speedup(self):
        return self.torch_us / self.kiln_us

    @property
    def gbs(self):
        return self.bytes / self.kiln_us / 1e3


@dataclass
class Target:
    what: str  # as the issue says it
    met: Callable[[Result], bool]
    # bytes a case must move for its bandwidth to be the memory's, not a cache's (None: any)
    min_bytes: Optional[float] = None


def max_us(us):
    return Target(f"<= {us:g} us", lambda r: r.kiln_us <= us)


def min_speedup(x):
    return Target(f">= {x:g}x torch", lambda r: r.speedup >= x)


def min_share_of_copy(pct):
    return Target(f">= {pct:g}% of copy", lambda r: 100.0 * r.gbs / r.copy_gbs >= pct)


CASE_TARGETS = {
    "linear+bias bf16 1x2048 -> 128 (MoE gate)": max_us(4),
    "linear+bias bf16 1x2048 -> 768 (MoE gate)": max_us(4),
    "scaled_mm 16x4096x4096 tensorwise": max_us(6),
    "scaled_mm 16x4096x4096 rowwise": max_us(6),
    "scaled_mm 4096x4096x4096 rowwise": min_speedup(0.95),
    "softmax f32 [1,128256]": max_us(6),
    "grouped_mm 1 tok top-8/128 2048->1536": max_us(14),
    "grouped_mm 512 tok top-8/128 2048->1536": min_speedup(1.2),
    "sdpa decode 32q/8kv d80 ctx 4096": max_us(6),
    "sdpa decode 32q/8kv d80 ctx 32768": min_share_of_copy(70),
    "sdpa prefill 16q/16kv d40 4096x4096 float16 causal": min_speedup(1.0),
    "inv 1M x 4x4 f32": max_us(60),
    "solve_triangular 4096 x 16x16, 8 rhs": min_speedup(3),
    "solve_triangular 4096 x 32x32, 8 rhs": min_speedup(3),
    "solve_triangular 4096 x 64x64, 8 rhs": max_us(25),
    "lu_factor 1024 x 64x64 complex64": max_us(100),
    "qr 2048x2048 f32": min_speedup(1.0),
    "svd 512x512 f32": min_speedup(1.0),
}

# Targets on every case whose name starts with the prefix: softmax faster than torch for
# every vocabulary size, topk for k <= 32 on router-sized rows, and one-row bf16 linears
# with 16 MB of weights or more at 3.8 TB/s (past twice the L2, so that the weights come
# from memory: bench.py repeats each call on the same tensors).
PREFIX_TARGETS = {
    "softmax f32 [1,": min_speedup(1.0),
    "topk f32 ": min_speedup(1.0),
    "linear bf16 1x": Target(">= 3800 GB/s of weights", lambda r: r.gbs >= 3800, min_bytes=16e6),
}

# Geometric-mean speed-ups: the one-row linears over the layer shapes of Qwen3-0.6B, -8B,
# -30B-A3B and Llama-3-8B.
GEOMEAN_TARGETS = {"linear bf16 1x": 1.3}


def wanted(name):
    """Whether a case has a target (bench.py --targets runs only those)."""
    return name in CASE_TARGETS or any(name.startswith(p) for p in list(PREFIX_TARGETS) + list(GEOMEAN_TARGETS))


def check(results, l2_bytes):
    """(case name, Result or None, target text, verdict) for results {case name: Result};
    geometric-mean rows carry None and the mean in their name."""
    rows = []
    for name, r in results.items():
        targets = ([CASE_TARGETS[name]] if name in CASE_TARGETS else []) + [
            t for p, t in PREFIX_TARGETS.items() if name.startswith(p)]
        for t in targets:
            if t.min_bytes is not None and r.bytes < t.min_bytes:
                continue  # the target names bigger cases
            if t.min_bytes is not None and r.bytes < 2 * l2_bytes:
                rows.append((name, r, t.what, "n/a (fits twice in L2)"))
            else:
                rows.append((name, r, t.what, "met" if t.met(r) else "NOT MET"))
    for prefix, x in GEOMEAN_TARGETS.items():
        s = [r.speedup for n, r in results.items() if n.startswith(prefix)]
        if s:
            gm = math.exp(sum(map(math.log, s)) / len(s))
            rows.append((f"geometric mean of {prefix}... ({len(s)} cases): {gm:.2f}x", None, f">= {x:g}x torch",
                         "met" if gm >= x else "NOT MET"))
    return rows


def report(results, l2_bytes):
    """Lines of the targets table (none when no case has a target)."""
    rows = check(results, l2_bytes)
    if not rows:
        return []
    lines = [f"{'target case':58} {'kiln us':>10} {'torch us':>10} {'speed-up':>9} {'GB/s':>8}  {'target':24} verdict"]
    for name, r, what, verdict in rows:
        nums = (f"{r.kiln_us:10.1f} {r.torch_us:10.1f} {r.speedup:8.2f}x {r.gbs:8.0f}" if r else " " * 41)
        lines.append(f"{name:58} {nums}  {what:24} {verdict}")
    return lines
