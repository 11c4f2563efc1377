"""kiln's Qwen3 / Qwen3-MoE engine on the CPU against the independent numpy
forward pass (qwen3_reference) on tiny checkpoints written here."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import kiln
import qwen3_reference as ref


def e4m3_value(codes):
    """float64 values of float8_e4m3fn codes (no NaN codes among them)."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exp, man = (c >> 3) & 0xF, c & 0x7
    mag = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    return sign * mag


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


class Qwen3Cpu(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def folder(self, cfg, weights, name="m", **kw):
        path = os.path.join(self.dir.name, name)
        ref.save(path, cfg, weights, **kw)
        return path

    def check_prefill_and_decode(self, cfg, weights, folder, dtype="fp32", tol=1e-4):
        prompt = [3, 17, 42, 99, 5, 150, 7, 64]
        steps = 32
        cont = ref.greedy(cfg, weights, prompt, steps)
        want = ref.logits(cfg, weights, prompt + cont)
        model = kiln.Qwen3Model.load(folder, "cpu", dtype, max_context=64)
        got = np.from_dlpack(model.forward(prompt, all_logits=True).to(kiln.float32))
        self.assertEqual(got.shape, (len(prompt), cfg["vocab_size"]))
        self.assertLess(rel_err(got, want[:len(prompt)]), tol, "prefill")
        for i, tok in enumerate(cont[:-1]):  # each decode step against the full-sequence reference
            got = np.from_dlpack(model.forward([tok]).to(kiln.float32))[0]
            self.assertLess(rel_err(got, want[len(prompt) + i]), tol, f"decode step {i}")
        self.assertEqual(model.length, len(prompt) + steps - 1)
        return model, prompt, cont

    def test_dense_fp32_logits_and_greedy_tokens(self):
        w = ref.random_weights(ref.DENSE, seed=1)
        folder = self.folder(ref.DENSE, w)
        model, prompt, cont = self.check_prefill_and_decode(ref.DENSE, w, folder)
        self.assertEqual(kiln.generate(model, prompt, len(cont)), cont)
        # a prompt in two chunks (the second attends to the cached first): the masked path
        model.reset()
        model.forward(prompt[:5])
        got = np.from_dlpack(model.forward(prompt[5:] + cont[:4], all_logits=True))
        want = ref.logits(ref.DENSE, w, prompt + cont[:4])[5:]
        self.assertLess(rel_err(got, want), 1e-4)

    def test_moe_fp32_both_expert_layouts_and_shards(self):
        for fused, shards in ((False, 1), (True, 3)):
            w = ref.random_weights(ref.MOE, seed=2, fused_experts=fused)
            folder = self.folder(ref.MOE, w, name=f"moe{fused}", shards=shards)
            model, prompt, cont = self.check_prefill_and_decode(ref.MOE, w, folder)
            self.assertEqual(kiln.generate(model, prompt, len(cont)), cont)

    def test_bf16_and_fp8_weights_stay_close(self):
        w = ref.random_weights(ref.MOE, seed=3)
        folder = self.folder(ref.MOE, w)
        self.check_prefill_and_decode(ref.MOE, w, folder, dtype="bf16", tol=3e-2)
        self.check_prefill_and_decode(ref.MOE, w, folder, dtype="fp8", tol=8e-2)

    def test_fp8_checkpoint_with_block_scales(self):
        cfg = ref.DENSE
        w = ref.random_weights(cfg, seed=4)
        rng = np.random.default_rng(5)
        stored, dtypes = dict(w), {}
        for name in [n for n in w if n.endswith(("q_proj.weight", "down_proj.weight"))]:
            n, k = w[name].shape
            codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
            codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN codes: 1.0 instead
            scale = (rng.uniform(0.5, 2.0, (2, 2)) / 448 * 8).astype(np.float32)  # 2 x 2 blocks
            bn, bk = -(-n // 2), -(-k // 2)
            full = np.repeat(np.repeat(scale, bn, 0), bk, 1)[:n, :k]
            w[name] = (e4m3_value(codes) * full).astype(np.float64)
            stored[name] = codes
            dtypes[name] = "F8_E4M3"
            stored[name[:-len(".weight")] + ".weight_scale_inv"] = scale
        folder = self.folder(cfg, stored, dtypes=dtypes)
        self.check_prefill_and_decode(cfg, w, folder)

    def test_bad_checkpoints_name_the_tensor(self):
        w = ref.random_weights(ref.DENSE, seed=6)
        broken = dict(w)
        del broken["model.layers.1.self_attn.k_norm.weight"]
        with self.assertRaisesRegex(kiln.Error, "no tensor 'model.layers.1.self_attn.k_norm.weight'"):
            kiln.Qwen3Model.load(self.folder(ref.DENSE, broken, name="a"), "cpu", "fp32")
        broken = dict(w, **{"model.layers.0.mlp.up_proj.weight": np.zeros((5, 64), np.float32)})
        with self.assertRaisesRegex(kiln.Error, r"'model.layers.0.mlp.up_proj.weight' has shape \[5, 64\], the "
                                    r"config needs \[96, 64\]"):
            kiln.Qwen3Model.load(self.folder(ref.DENSE, broken, name="b"), "cpu", "fp32")
        model = kiln.Qwen3Model.load(self.folder(ref.DENSE, w, name="c"), "cpu", "fp32", max_context=8)
        with self.assertRaisesRegex(kiln.Error, r"token ids must lie in \[0, 160\), got 160"):
            model.forward([1, 160])
        with self.assertRaisesRegex(kiln.Error, "9 tokens after 0 cached ones exceed the context of 8"):
            model.forward(list(range(9)))
        with self.assertRaisesRegex(kiln.Error, "'fp4' is not one of"):
            kiln.Qwen3Model.load(self.folder(ref.DENSE, w, name="c"), "cpu", "fp4")


TOKENIZER = os.environ.get("KILN_QWEN3_TOKENIZER", "")
CLI = os.environ.get("KILN_CLI", "")


@unittest.skipUnless(os.path.exists(TOKENIZER) and os.path.exists(CLI), "needs the kiln CLI and the Qwen3 tokenizer")
class GenerateCli(unittest.TestCase):
    def test_generate_streams_the_reference_greedy_text(self):
        cfg = dict(ref.DENSE, vocab_size=151936)
        w = ref.random_weights(cfg, seed=7)
        with tempfile.TemporaryDirectory() as d:
            ref.save(d, cfg, w)
            shutil.copy(TOKENIZER, os.path.join(d, "tokenizer.json"))
            text = "The capital of France is"
            run = lambda *a, **kw: subprocess.run([CLI, *a], capture_output=True, check=True, **kw)
            prompt = [int(t) for t in run("tokenize", "--tokenizer", d, input=text.encode()).stdout.split()]
            cont = ref.greedy(cfg, w, prompt, 12)
            want = run("detokenize", "--tokenizer", d, "--skip-special",
                       input=" ".join(map(str, cont)).encode()).stdout
            out = run("generate", "-m", d, "--raw", "-p", text, "-n", "12", "--ignore-eos", "--device", "cpu")
            self.assertEqual(out.stdout, want + b"\n")
            self.assertIn(b"12 new tokens", out.stderr)
            # options out of range are errors naming them, not defaults (-1 once meant "not given")
            n = len(prompt)
            for args, msg in [(["-n", "-5"], "--max-new-tokens must be >= 0, got -5"),
                              (["--max-context", str(n + 1), "-n", "3"],
                               f"--max-context {n + 1} positions cannot hold the {n}-token prompt and 3 new tokens"),
                              (["-t", "-1"], "temperature -1, top_k 0, top_p 1 out of range"),
                              (["-t", "nan"], "temperature nan"),
                              (["-t", "0.7", "--top-p", "-1"], "top_p -1 out of range"),
                              (["-t", "0.7", "--top-k", "-3"], "top_k -3, top_p 1 out of range")]:
                bad = subprocess.run([CLI, "generate", "-m", d, "--raw", "-p", text, "--device", "cpu", *args],
                                     capture_output=True)
                self.assertNotEqual(bad.returncode, 0, args)
                self.assertIn(msg, bad.stderr.decode(), args)
            # a context that holds the prompt and all but the last new token is enough
            out = run("generate", "-m", d, "--raw", "-p", text, "-n", "3", "--ignore-eos", "--device", "cpu",
                      "--max-context", str(n + 2))
            self.assertIn(b"3 new tokens", out.stderr)


@unittest.skipUnless(os.path.exists(CLI), "needs the kiln CLI")
class BenchArguments(unittest.TestCase):
    def test_out_of_range_options_are_errors(self):
        # --repeats 0 took the median of no timings (a crash); --scale 0, NaN or 1e12 sized the
        # cases as empty or wrapped tensors
        for args, msg in [(["--repeats", "0"], "bench: --repeats must be at least 1, got 0"),
                          (["--scale", "0"], "bench: --scale must be a number in (0, 1024], got 0"),
                          (["--scale", "nan"], "got nan"), (["--scale", "1e12"], "got 1e+12")]:
            bad = subprocess.run([CLI, "bench", "--device", "cpu", "--filter", "copy f32", *args], capture_output=True)
            self.assertEqual(bad.returncode, 1, args)
            self.assertIn(msg, bad.stderr.decode(), args)


if __name__ == "__main__":
    unittest.main()
