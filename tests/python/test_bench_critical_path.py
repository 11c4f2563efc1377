"""bench/profile_decode.py's critical-path accounting: made-up kernel timelines with chained
(overlapping) launches and idle gaps, against increments worked out by hand."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import profile_decode as cp  # noqa: E402


class CriticalPath(unittest.TestCase):
    def test_overlap_gap_and_nested_kernels(self):
        # a [0, 10); b starts early (chained) and ends at 15; idle until c [20, 22);
        # d inside c adds nothing; a again [21, 30) past c's end
        kernels = [("c", 20.0, 2.0), ("a", 0.0, 10.0), ("b", 5.0, 10.0), ("d", 20.5, 0.5), ("a", 21.0, 9.0)]
        rows, total, idle = cp.critical_path(kernels)
        self.assertEqual(rows["b"], [1, 5.0, 10.0, 0.0])
        self.assertEqual(rows["c"], [1, 7.0, 2.0, 5.0])  # its 2 us and the 5 idle before it
        self.assertEqual(rows["d"], [1, 0.0, 0.5, 0.0])
        self.assertEqual(rows["a"], [2, 10.0 + 8.0, 19.0, 0.0])
        self.assertEqual(idle, 5.0)
        self.assertEqual(total, 30.0)  # the span, first start to last end

    def test_short_names(self):
        self.assertEqual(cp.short_name("void kiln::cuda_backend::(anonymous namespace)::rms_norm_vec_kernel"
                                       "<kiln::BFloat16, false>(kiln::BFloat16*, int)"),
                         "rms_norm_vec_kernel<BFloat16, false>")


if __name__ == "__main__":
    unittest.main()
