"""kiln.sample on the CPU against a numpy reference fed the same uniform draws."""
import unittest

import numpy as np

import kiln

RNG = np.random.default_rng(11)


def reference(logits, u, temperature, top_k, top_p):
    """Hugging Face's warpers (temperature, top-k, top-p keeping the crossing token), then the
    inverse CDF of the kept tokens, most probable first, at u times their mass; float64."""
    out = []
    for row, ur in zip(logits.astype(np.float64), u.astype(np.float64)):
        z = row / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        order = np.lexsort((np.arange(len(p)), -p))  # by probability, then id
        k = len(p) if top_k == 0 else min(top_k, len(p))
        ps = p[order[:k]]
        before = np.concatenate([[0.0], np.cumsum(ps)[:-1]])
        n = k if top_p >= 1 else int(np.sum(before < top_p))
        c = np.cumsum(ps[:n])
        j = int(np.searchsorted(c, ur * c[-1], side="right"))
        out.append(order[min(j, n - 1)])
    return np.array(out)


class Sampling(unittest.TestCase):
    def draws(self, seed, b):
        return np.from_dlpack(kiln.rand(b, generator=kiln.Generator(seed)))

    def test_matches_reference_with_the_same_draws(self):
        b, v = 64, 1000
        logits = (RNG.standard_normal((b, v)) * 3).astype(np.float32)
        for temperature, top_k, top_p in [(1.0, 0, 1.0), (0.7, 50, 1.0), (1.3, 0, 0.9), (0.8, 20, 0.5), (2.0, 5, 0.99)]:
            got = np.from_dlpack(kiln.sample(kiln.tensor(logits), temperature, top_k, top_p, kiln.Generator(5)))
            want = reference(logits, self.draws(5, b), temperature, top_k, top_p)
            # float32 against float64 sums: a draw within rounding of a boundary may land on the neighbour
            self.assertGreaterEqual(np.mean(got == want), 0.95, (temperature, top_k, top_p))
            self.assertEqual(got.dtype, np.int64)

    def test_distribution_and_seed(self):
        # 20000 draws of one 5-token row: frequencies follow the kept, renormalised probabilities
        p = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
        logits = np.tile(np.log(p).astype(np.float32), (20000, 1))
        toks = np.from_dlpack(kiln.sample(kiln.tensor(logits), 1.0, 0, 0.8, kiln.Generator(1)))
        freq = np.bincount(toks, minlength=5) / len(toks)
        np.testing.assert_allclose(freq, [0.5 / 0.85, 0.2 / 0.85, 0.15 / 0.85, 0, 0], atol=0.015)
        toks_k2 = np.from_dlpack(kiln.sample(kiln.tensor(logits), 1.0, 2, 1.0, kiln.Generator(1)))
        np.testing.assert_allclose(np.bincount(toks_k2, minlength=5) / len(toks_k2), [5 / 7, 2 / 7, 0, 0, 0], atol=0.015)
        g1, g2 = kiln.Generator(9), kiln.Generator(9)
        a = kiln.sample(kiln.tensor(logits[:100]), generator=g1).tolist()
        self.assertEqual(a, kiln.sample(kiln.tensor(logits[:100]), generator=g2).tolist())
        self.assertNotEqual(a, kiln.sample(kiln.tensor(logits[:100]), generator=g1).tolist())  # the counter moved

    def test_greedy_edges_and_errors(self):
        logits = RNG.standard_normal((8, 300)).astype(np.float32)
        want = logits.argmax(1)
        for kw in ({"temperature": 0.0}, {"top_k": 1}, {"top_p": 1e-6}):
            got = np.from_dlpack(kiln.sample(kiln.tensor(logits), **kw, generator=kiln.Generator(3)))
            np.testing.assert_array_equal(got, want, str(kw))
        one = kiln.sample(kiln.tensor(logits[0]).to(kiln.bfloat16), 0.0)
        self.assertEqual(tuple(one.shape), ())
        self.assertEqual(one.item(), int(np.from_dlpack(kiln.tensor(logits[0]).to(kiln.bfloat16).to(kiln.float32)).argmax()))
        # a -inf logit is never drawn
        masked = logits.copy()
        masked[:, :299] = -np.inf
        np.testing.assert_array_equal(np.from_dlpack(kiln.sample(kiln.tensor(masked), 1.0)), np.full(8, 299))
        for bad, msg in [({"temperature": -1.0}, "temperature"), ({"top_k": -2}, "top_k"), ({"top_p": 0.0}, "top_p"),
                         ({"top_p": 1.5}, "top_p")]:
            with self.assertRaisesRegex(Exception, "sample: " + msg):
                kiln.sample(kiln.tensor(logits), **bad)
        with self.assertRaisesRegex(Exception, "sample: logits must be"):
            kiln.sample(kiln.zeros((2, 3, 4)))
        with self.assertRaisesRegex(Exception, "sample: the vocabulary is empty"):
            kiln.sample(kiln.zeros((2, 0)))
        with self.assertRaisesRegex(Exception, "sample"):
            kiln.sample(kiln.zeros((2, 3), dtype=kiln.int32))


if __name__ == "__main__":
    unittest.main()
