"""The ids Hugging Face `tokenizers` gives for tests/data/tokenizer_sample.txt with the Qwen3
tokenizer.json (run on a machine that has `tokenizers`, the GPU one):

    python3 scripts/tokenizer_reference_ids.py TOKENIZER_JSON > tests/data/tokenizer_sample.qwen3.ids
"""
import pathlib
import sys

from tokenizers import Tokenizer

root = pathlib.Path(__file__).resolve().parent.parent
text = (root / "tests/data/tokenizer_sample.txt").read_text(encoding="utf-8")
tok = Tokenizer.from_file(sys.argv[1])
ids = tok.encode(text, add_special_tokens=False).ids
assert tok.decode(ids, skip_special_tokens=False) == text, "the reference does not round-trip"
print(" ".join(map(str, ids)))
