"""Decode speed of kiln and Hugging Face transformers on the same config with
random weights, in one run (GPU machine):

    python3 bench/bench_decode.py --kiln /path/to/kiln --config bench/configs/qwen3-30b-a3b.json

kiln runs first (`kiln bench-decode`, its own process, so its memory is free
again), then transformers' eager decode of the same config (greedy, cached,
the token read back each step, as kiln's loop does). Prints both tables and the
ratio per context length.
"""
import argparse
import json
import re
import subprocess
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def kiln_decode(args):
    cmd = [args.kiln, "bench-decode", "--config", args.config, "--contexts", args.contexts, "--tokens",
           str(args.tokens), "--dtype", args.dtype]
    out = subprocess.run(cmd, capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    if out.returncode != 0:
        raise SystemExit(f"kiln bench-decode failed ({out.returncode})")
    rates = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m:
            rates[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return rates


def hf_decode(args, contexts):
    with open(args.config) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(**raw)
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    t0 = time.time()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype).eval()
    print(f"transformers {transformers.__version__}: {type(model).__name__} random init {time.time() - t0:.1f} s")
    rates = {}
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for ctx in contexts:
            prompt = torch.randint(0, cfg.vocab_size, (1, ctx), generator=g).cuda()
            for timed in (False, True):
                torch.cuda.synchronize()
                t0 = time.time()
                out = model(prompt, use_cache=True)
                tok = int(out.logits[0, -1].argmax())
                prefill = time.time() - t0
                past = out.past_key_values
                n = args.hf_tokens if timed else 2
                t1 = time.time()
                for _ in range(n):
                    out = model(torch.tensor([[tok]], device="cuda"), past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    tok = int(out.logits[0, -1].argmax())
                decode = (time.time() - t1) / n
            rates[ctx] = (ctx / prefill, 1.0 / decode)
            print(f"  transformers context {ctx}: prefill {ctx / prefill:.1f} tok/s, decode {1.0 / decode:.2f} tok/s")
    del model
    torch.cuda.empty_cache()
    return rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True, help="the kiln CLI")
    ap.add_argument("--config", required=True)
    ap.add_argument("--contexts", default="128,2048")
    ap.add_argument("--tokens", type=int, default=64, help="kiln decode steps per context")
    ap.add_argument("--hf-tokens", type=int, default=8, help="transformers decode steps per context")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--no-hf", action="store_true")
    args = ap.parse_args()
    k = kiln_decode(args)
    if args.no_hf:
        return
    h = hf_decode(args, [int(c) for c in args.contexts.split(",")])
    print(f"{'context':>8} {'kiln tok/s':>11} {'hf tok/s':>9} {'decode x':>9} {'kiln prefill':>13} {'hf prefill':>11} "
          f"{'prefill x':>9}")
    for ctx in sorted(k):
        if ctx in h:
            print(f"{ctx:8d} {k[ctx][1]:11.1f} {h[ctx][1]:9.2f} {k[ctx][1] / h[ctx][1]:9.1f} {k[ctx][0]:13.1f} "
                  f"{h[ctx][0]:11.1f} {k[ctx][0] / h[ctx][0]:9.2f}")


if __name__ == "__main__":
    main()
