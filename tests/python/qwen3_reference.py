"""An independent numpy (float64) Qwen3 / Qwen3-MoE forward pass, written from
transformers' modeling_qwen3 / modeling_qwen3_moe, and tiny random checkpoints
in Hugging Face's layout for it and kiln to read.

The reference runs the whole sequence at once (no cache): causal attention makes
position t's logits those an incremental decoder gives after t + 1 tokens.
"""
import json
import os

import numpy as np

from safetensors_io import write

DENSE = dict(model_type="qwen3", hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=160, max_position_embeddings=256, rms_norm_eps=1e-6,
             rope_theta=10000.0, tie_word_embeddings=False, torch_dtype="float32")
MOE = dict(DENSE, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
           norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], tie_word_embeddings=True)


def is_moe_layer(cfg, i):
    return (cfg.get("num_experts", 0) > 0 and i not in cfg.get("mlp_only_layers", [])
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def random_weights(cfg, seed=0, fused_experts=False):
    """name -> float32 array; weights scaled by 1/sqrt(fan_in) so activations stay O(1)."""
    rng = np.random.default_rng(seed)
    H, D, hq, hkv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]

    def lin(n, k):
        return (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((cfg["vocab_size"], H)).astype(np.float32),
         "model.norm.weight": norm(H)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = lin(cfg["vocab_size"], H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = lin(hq * D, H)
        w[p + "self_attn.k_proj.weight"] = lin(hkv * D, H)
        w[p + "self_attn.v_proj.weight"] = lin(hkv * D, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, hq * D)
        w[p + "self_attn.q_norm.weight"] = norm(D)
        w[p + "self_attn.k_norm.weight"] = norm(D)
        if is_moe_layer(cfg, i):
            E, I = cfg["num_experts"], cfg["moe_intermediate_size"]
            w[p + "mlp.gate.weight"] = lin(E, H)
            gate = [lin(I, H) for _ in range(E)]
            up = [lin(I, H) for _ in range(E)]
            down = [lin(H, I) for _ in range(E)]
            if fused_experts:  # transformers 5: [E, 2I, H] (gate rows, then up) and [E, H, I]
                w[p + "mlp.experts.gate_up_proj"] = np.stack([np.concatenate([g, u]) for g, u in zip(gate, up)])
                w[p + "mlp.experts.down_proj"] = np.stack(down)
            else:
                for e in range(E):
                    w[p + f"mlp.experts.{e}.gate_proj.weight"] = gate[e]
                    w[p + f"mlp.experts.{e}.up_proj.weight"] = up[e]
                    w[p + f"mlp.experts.{e}.down_proj.weight"] = down[e]
        else:
            I = cfg["intermediate_size"]
            w[p + "mlp.gate_proj.weight"] = lin(I, H)
            w[p + "mlp.up_proj.weight"] = lin(I, H)
            w[p + "mlp.down_proj.weight"] = lin(H, I)
    return w


def save(folder, cfg, weights, shards=1, dtypes=None):
    """config.json and the weights, in one file or in shards with an index."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    if shards == 1:
        write(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"}, dtypes=dtypes)
        return
    names = sorted(weights)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for n in names[s::shards]}
        write(os.path.join(folder, file), part, {"format": "pt"}, dtypes=dtypes)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, positions, theta):
    """x [T, heads, D]: transformers' rotate_half form (pairs i, i + D/2)."""
    D = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    ang = positions[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :]
    rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
    return x * cos + rot * sin


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def logits(cfg, w, ids):
    """Logits [T, vocab] (float64) of the token sequence ids from an empty context."""
    ids = np.asarray(ids)
    T = len(ids)
    H, D, hq, hkv = cfg["hidden_size"], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    pos = np.arange(T, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids].astype(np.float64)
    causal = np.tril(np.ones((T, T), bool))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, hq, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, hkv, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, hkv, D)
        q = _rope(_rms(q, w[p + "self_attn.q_norm.weight"], eps), pos, theta)
        k = _rope(_rms(k, w[p + "self_attn.k_norm.weight"], eps), pos, theta)
        group = hq // hkv
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # q head j reads kv head j // group
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
        scores = np.where(causal[None], scores, -np.inf)
        o = np.einsum("hts,shd->thd", _softmax(scores), v).reshape(T, hq * D)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        if is_moe_layer(cfg, i):
            probs = _softmax(h @ w[p + "mlp.gate.weight"].T)
            kk = cfg["num_experts_per_tok"]
            out = np.zeros_like(h)
            for t in range(T):
                top = np.argsort(-probs[t], kind="stable")[:kk]
                wt = probs[t, top]
                if cfg.get("norm_topk_prob", True):
                    wt = wt / wt.sum()
                for e, we in zip(top, wt):
                    gate, up, down = expert(w, p, e, cfg)
                    out[t] += we * (down @ (_silu(gate @ h[t]) * (up @ h[t])))
        else:
            out = (_silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) \
                @ w[p + "mlp.down_proj.weight"].T
        x = x + out
    x = _rms(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def expert(w, p, e, cfg):
    """(gate [I, H], up [I, H], down [H, I]) of expert e, from either checkpoint layout."""
    if p + "mlp.experts.gate_up_proj" in w:
        I = cfg["moe_intermediate_size"]
        gu = w[p + "mlp.experts.gate_up_proj"][e]
        return gu[:I], gu[I:], w[p + "mlp.experts.down_proj"][e]
    x = p + f"mlp.experts.{e}."
    return w[x + "gate_proj.weight"], w[x + "up_proj.weight"], w[x + "down_proj.weight"]


def greedy(cfg, w, prompt, n):
    """n greedy continuation ids of prompt, rerunning the whole sequence each step."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(logits(cfg, w, ids)[-1])))
    return ids[len(prompt):]
