"""kiln against Hugging Face transformers on tiny random Qwen3 and Qwen3-MoE
checkpoints that transformers itself makes and saves (run on the GPU machine):

    PYTHONPATH=<kiln module> python3 scripts/parity_qwen3.py [--device cuda] [--keep DIR]

For each model and dtype: transformers' prefill and 32 cached decode steps give
the reference logits; kiln loads the saved folder and is fed the same tokens
(so positions match even if greedy choices would differ); then both decode
greedily on their own and the token sequences are compared. Exits non-zero when
a tolerance is missed (fp32: 1e-4 of the logits' largest magnitude; bf16: 3e-2),
the fp32 greedy tokens differ, or in bf16 more than 2 of the 32 same-prefix
argmax choices differ.
"""
import argparse
import sys
import tempfile

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

import kiln

COMMON = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, vocab_size=512, max_position_embeddings=256, rms_norm_eps=1e-6,
              rope_theta=1e6, attention_dropout=0.0)
MODELS = {
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(COMMON, tie_word_embeddings=False)),
    "qwen3-tied": (Qwen3Config, Qwen3ForCausalLM, dict(COMMON, tie_word_embeddings=True)),
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM,
                  dict(COMMON, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, norm_topk_prob=True,
                       decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False)),
}
STEPS = 32
TOL = {"fp32": 1e-4, "bf16": 3e-2}


def hf_decode(model, prompt, steps, device):
    """Logits of the prompt's last position and of each cached decode step, greedy tokens."""
    ids = torch.tensor([prompt], device=device)
    out = model(ids, use_cache=True)
    past, logits, tokens = out.past_key_values, [out.logits[0, -1].float()], []
    for _ in range(steps):
        tokens.append(int(logits[-1].argmax()))
        out = model(torch.tensor([[tokens[-1]]], device=device), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits.append(out.logits[0, -1].float())
    return torch.stack(logits), tokens, out


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--keep", default="", help="save the checkpoints here instead of a temporary folder")
    args = ap.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}")
    failures = 0
    root = args.keep or tempfile.mkdtemp()
    for name, (Config, Model, kw) in MODELS.items():
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            torch.manual_seed(0)
            cfg = Config(**kw)
            cfg._attn_implementation = "eager"
            model = Model(cfg).to(device=args.device, dtype=dtype).eval()
            # the default init (std 0.02) gives logits near 0 everywhere: widen it so argmax is decisive
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() >= 2:
                        p.normal_(0, 1.0 / p.shape[-1] ** 0.5)
            folder = f"{root}/{name}-{dtype_name}"
            model.save_pretrained(folder)
            if dtype_name == "fp32":
                from safetensors import safe_open
                import glob
                keys = []
                for f in glob.glob(folder + "/*.safetensors"):
                    with safe_open(f, "pt") as sf:
                        keys += list(sf.keys())
                print(f"  {name}: {len(keys)} tensors saved, e.g. {sorted(k for k in keys if 'layers.0.mlp' in k)[:4]}")
                with open(folder + "/config.json") as f:
                    print("  config.json:", f.read().replace("\n", " "))
            g = torch.Generator().manual_seed(1)
            prompt = torch.randint(0, cfg.vocab_size, (12,), generator=g).tolist()
            with torch.no_grad():
                want, hf_tokens, _ = hf_decode(model, prompt, STEPS, args.device)
                want_prefill = model(torch.tensor([prompt], device=args.device)).logits[0].float()
            km = kiln.Qwen3Model.load(folder, args.device, dtype_name, max_context=64)
            got_prefill = torch.from_dlpack(km.forward(prompt, all_logits=True).to(kiln.float32))
            got = [got_prefill[-1]]
            for t in hf_tokens[:-1]:
                got.append(torch.from_dlpack(km.forward([t]).to(kiln.float32))[0])
            got = torch.stack(got)
            kiln_tokens = kiln.generate(km, prompt, STEPS)
            e_prefill, e_decode = rel(got_prefill, want_prefill), rel(got[:STEPS], want[:STEPS])
            same = sum(a == b for a, b in zip(kiln_tokens, hf_tokens))
            # with the same prefix (teacher forcing), the step's argmax: bf16 rounding may flip a near tie, after
            # which free-running greedy sequences part ways for good
            agree = int((got[:STEPS].argmax(-1) == want[:STEPS].argmax(-1)).sum())
            ok = (e_prefill <= TOL[dtype_name] and e_decode <= TOL[dtype_name] and
                  (same == STEPS if dtype_name == "fp32" else agree >= STEPS - 2))
            failures += not ok
            print(f"{name:11s} {dtype_name}: prefill rel err {e_prefill:.2e}, decode rel err {e_decode:.2e} over "
                  f"{STEPS} steps, greedy tokens equal {same}/{STEPS}, same-prefix argmax equal {agree}/{STEPS}  "
                  f"{'ok' if ok else 'FAIL'}")
            del model, km
            torch.cuda.empty_cache()
    print("parity:", "all ok" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
