"""load_safetensors against files written here by an independent writer (struct + json + numpy)."""
import json
import os
import struct
import tempfile
import unittest

import numpy as np

import kiln

from safetensors_io import write


class Safetensors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "model.safetensors")

    def tearDown(self):
        self.dir.cleanup()

    def test_round_trip_views_and_metadata(self):
        rng = np.random.default_rng(0)
        ts = {"w": rng.standard_normal((4, 6)).astype(np.float32), "b": rng.standard_normal(5).astype(np.float16),
              "ids": np.arange(7, dtype=np.int64), "empty": np.zeros((0, 3), np.float32), "s": np.array(3, np.int32)}
        for pad in (0, 3):  # pad 3: tensors land unaligned for their dtype and are copied
            write(self.path, ts, {"format": "pt"}, pad=pad)
            tensors, meta = kiln.load_safetensors(self.path)
            self.assertEqual(meta, {"format": "pt"})
            self.assertEqual(set(tensors), set(ts))
            for name, a in ts.items():
                np.testing.assert_array_equal(np.from_dlpack(tensors[name]), a, name)
        bf = np.array([0x3F80, 0xC000], dtype=np.uint16)  # bf16 1.0, -2.0 as raw codes
        write(self.path, {"x": bf}, header_override=lambda h: h["x"].update(dtype="BF16"))
        self.assertEqual(kiln.load_safetensors(self.path)[0]["x"].to(kiln.float32).tolist(), [1.0, -2.0])

    def test_every_bad_header_is_a_clear_error(self):
        a = np.ones((2, 2), np.float32)
        cases = [
            (lambda h: h["a"].update(data_offsets=[0, 20]), r"'a': data_offsets \[0, 20\] exceed the 16 data bytes"),
            (lambda h: h["a"].update(shape=[2, 3]), r"'a': 16 bytes for shape \[2, 3\] of float32, which needs 24"),
            (lambda h: h["a"].update(dtype="F64"), "'a' has dtype 'F64'"),
            (lambda h: h["a"].update(shape=[-1, 4]), "non-negative integers"),
            (lambda h: h["a"].pop("dtype"), "needs dtype, shape and data_offsets"),
            (lambda h: h.update(c={"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}), "overlaps"),
        ]
        for override, message in cases:
            write(self.path, {"a": a}, header_override=override)
            with self.assertRaisesRegex(kiln.Error, message):
                kiln.load_safetensors(self.path)
        write(self.path, {"a": a}, extra=b"xx")
        with self.assertRaisesRegex(kiln.Error, "2 data bytes at the end belong to no tensor"):
            kiln.load_safetensors(self.path)
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", 1000) + b"{}")
        with self.assertRaisesRegex(kiln.Error, "header length 1000 does not fit the file"):
            kiln.load_safetensors(self.path)
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", 5) + b"{nope")
        with self.assertRaisesRegex(kiln.Error, "not valid JSON"):
            kiln.load_safetensors(self.path)
        with self.assertRaisesRegex(kiln.Error, "cannot open"):
            kiln.load_safetensors(os.path.join(self.dir.name, "missing.safetensors"))

    def test_writes_do_not_reach_the_file(self):
        write(self.path, {"a": np.zeros(4, np.float32)})
        with open(self.path, "rb") as f:
            before = f.read()
        t = kiln.load_safetensors(self.path)[0]["a"]
        t[1] = 5.0
        self.assertEqual(t.tolist(), [0.0, 5.0, 0.0, 0.0])
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_sharded_checkpoint(self):
        a, b, c = np.ones(3, np.float32), np.arange(4, dtype=np.int32), np.zeros((2, 2), np.float16)
        write(os.path.join(self.dir.name, "m-1.safetensors"), {"a": a, "b": b})
        write(os.path.join(self.dir.name, "m-2.safetensors"), {"c": c})
        index = os.path.join(self.dir.name, "model.safetensors.index.json")

        def write_index(weight_map):
            with open(index, "w") as f:
                json.dump({"metadata": {}, "weight_map": weight_map}, f)
        write_index({"a": "m-1.safetensors", "b": "m-1.safetensors", "c": "m-2.safetensors"})
        got = kiln.load_checkpoint(self.dir.name)
        self.assertEqual(set(got), {"a", "b", "c"})
        np.testing.assert_array_equal(np.from_dlpack(got["b"]), b)
        write_index({"a": "m-1.safetensors", "c": "m-1.safetensors"})
        with self.assertRaisesRegex(kiln.Error, "puts 'c' in m-1.safetensors, which does not hold it"):
            kiln.load_checkpoint(self.dir.name)
        write_index({"a": "../m-1.safetensors"})
        with self.assertRaisesRegex(kiln.Error, "must be a file name in the folder"):
            kiln.load_checkpoint(self.dir.name)
        os.remove(index)
        with self.assertRaisesRegex(kiln.Error, "neither model.safetensors nor"):
            kiln.load_checkpoint(self.dir.name)


if __name__ == "__main__":
    unittest.main()
