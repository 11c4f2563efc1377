"""bench/targets.py, the issues' figures that bench.py checks its results against:
the verdicts for made-up results on either side of each kind of target."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import targets  # noqa: E402

COPY_GBS = 3000.0
L2 = 50 << 20


def result(kiln_us, torch_us, nbytes=1.0):
    return targets.Result(kiln_us, torch_us, nbytes, COPY_GBS)


def verdicts(results):
    """{(case, target text): verdict}"""
    return {(name, what): verdict for name, _, what, verdict in targets.check(results, L2)}


class BenchTargets(unittest.TestCase):
    def test_time_and_speedup_targets_on_either_side(self):
        v = verdicts({
            "sdpa decode 32q/8kv d80 ctx 4096": result(6.0, 9.5),  # <= 6 us, at the limit
            "inv 1M x 4x4 f32": result(60.5, 2000.0),  # <= 60 us, just past
            "grouped_mm 512 tok top-8/128 2048->1536": result(100.0, 120.0),  # >= 1.2x, at the limit
            "sdpa prefill 16q/16kv d40 4096x4096 float16 causal": result(110.0, 108.0),  # >= 1.0x, below
        })
        self.assertEqual(v[("sdpa decode 32q/8kv d80 ctx 4096", "<= 6 us")], "met")
        self.assertEqual(v[("inv 1M x 4x4 f32", "<= 60 us")], "NOT MET")
        self.assertEqual(v[("grouped_mm 512 tok top-8/128 2048->1536", ">= 1.2x torch")], "met")
        self.assertEqual(v[("sdpa prefill 16q/16kv d40 4096x4096 float16 causal", ">= 1x torch")], "NOT MET")

    def test_share_of_copy(self):
        nbytes = 2.0 * 2 * 8 * 32768 * 80  # the 32K decode case's K and V bytes
        at_70 = nbytes / (0.70 * COPY_GBS) / 1e3  # microseconds at exactly 70% of copy
        v = verdicts({"sdpa decode 32q/8kv d80 ctx 32768": result(at_70 * 0.99, 30.0, nbytes)})
        self.assertEqual(v[("sdpa decode 32q/8kv d80 ctx 32768", ">= 70% of copy")], "met")
        v = verdicts({"sdpa decode 32q/8kv d80 ctx 32768": result(at_70 * 1.05, 30.0, nbytes)})
        self.assertEqual(v[("sdpa decode 32q/8kv d80 ctx 32768", ">= 70% of copy")], "NOT MET")

    def test_linear_bandwidth_only_past_16_mb_and_twice_the_l2(self):
        big = 2.0 * 14336 * 4096  # 117 MB of weights: past 2 x 50 MB
        mid = 2.0 * 4096 * 4096  # 33.5 MB: past 16 MB, but within twice the L2
        small = 2.0 * 2048 * 1024  # 4 MB: the target does not name it
        us = lambda nbytes, gbs: nbytes / gbs / 1e3  # noqa: E731
        v = verdicts({
            "linear bf16 1x4096 -> 14336": result(us(big, 3900.0), 40.0, big),
            "linear bf16 1x14336 -> 4096": result(us(big, 3700.0), 40.0, big),
            "linear bf16 1x4096 -> 4096": result(us(mid, 5000.0), 10.0, mid),
            "linear bf16 1x1024 -> 2048": result(us(small, 1000.0), 4.0, small),
        })
        bw = ">= 3800 GB/s of weights"
        self.assertEqual(v[("linear bf16 1x4096 -> 14336", bw)], "met")
        self.assertEqual(v[("linear bf16 1x14336 -> 4096", bw)], "NOT MET")
        self.assertEqual(v[("linear bf16 1x4096 -> 4096", bw)], "n/a (fits twice in L2)")
        self.assertNotIn(("linear bf16 1x1024 -> 2048", bw), v)

    def test_geometric_mean_of_the_linears(self):
        speedups = [2.0, 0.8, 1.1]
        gm = math.exp(sum(math.log(s) for s in speedups) / 3)  # 1.208: below 1.3
        res = {f"linear bf16 1x{k} -> 1024": result(1.0, s) for k, s in zip((64, 128, 256), speedups)}
        rows = [(name, verdict) for name, r, _, verdict in targets.check(res, L2) if r is None]
        self.assertEqual(rows, [(f"geometric mean of linear bf16 1x... (3 cases): {gm:.2f}x", "NOT MET")])
        res["linear bf16 1x512 -> 1024"] = result(1.0, 3.0)  # now 1.47
        rows = [verdict for _, r, _, verdict in targets.check(res, L2) if r is None]
        self.assertEqual(rows, ["met"])
        self.assertEqual(len(targets.report(res, L2)), 1 + 1)  # the header and the mean's row

    def test_wanted_selects_the_cases_with_figures(self):
        self.assertTrue(targets.wanted("topk f32 [1,8] k=2"))
        self.assertTrue(targets.wanted("lu_factor 1024 x 64x64 complex64"))
        self.assertTrue(targets.wanted("linear bf16 1x4096 -> 4096"))
        self.assertFalse(targets.wanted("matmul bf16 4096"))
        self.assertFalse(targets.wanted("linear bf16 2x14336 -> 4096"))
        self.assertFalse(targets.wanted("lu_factor 1024 x 64x64 float32"))


if __name__ == "__main__":
    unittest.main()
