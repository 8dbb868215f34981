#!/usr/bin/env python3
"""Test oracle for tests/train/torch_parity_test.cc: a Qwen3 causal LM written in plain PyTorch
(no transformers), its loss gradients by autograd, and the losses of a few torch.optim.AdamW
steps with torch.nn.utils.clip_grad_norm_ and a LambdaLR warmup + cosine schedule.

usage: torch_reference.py CONFIG.json IN.safetensors OUT.safetensors OPTIONS.json
IN holds the weights (Hugging Face names) and int32 "input_ids" / "labels" [B, T] (labels
already shifted, -100 ignored). OUT receives "grad.<name>" (f32) and "losses" (f64 [steps + 1]:
the loss before each step, then after the last)."""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(raw[8 + n + start:8 + n + end], dtype=DTYPES[info["dtype"]])
        out[name] = data.reshape(info["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    names = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward_loss(cfg, w, ids, labels):
    bsz, t = ids.shape
    hq, hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    freqs = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]  # [1, 1, T, D]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    x = w["model.embed_tokens.weight"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(bsz, t, hq, d)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(bsz, t, hkv, d)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(bsz, t, hkv, d)
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps).transpose(1, 2)
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps).transpose(1, 2)
        v = v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores.float(), dim=-1) @ v
        attn = attn.transpose(1, 2).reshape(bsz, t, hq * d)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        n = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = n @ w[p + "mlp.gate_proj.weight"].T
        up = n @ w[p + "mlp.up_proj.weight"].T
        x = x + (F.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    logits = (x @ head.T).float()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1).long(),
                           ignore_index=-100)


def lr_factor(opt, step):
    """LearningRateAt(step) / lr for a 1-based step, as trainer.h defines the schedule."""
    warmup, total, min_ratio = opt["warmup_steps"], opt["total_steps"], opt["min_lr_ratio"]
    if warmup > 0 and step <= warmup:
        return step / warmup
    if total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def main():
    cfg = json.load(open(sys.argv[1]))
    data = read_safetensors(sys.argv[2])
    opt = json.load(open(sys.argv[4]))
    ids = torch.from_numpy(data.pop("input_ids")).long()
    labels = torch.from_numpy(data.pop("labels")).long()
    params = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in data.items()}
    out = {}
    loss = forward_loss(cfg, params, ids, labels)
    loss.backward()
    for k, p in params.items():
        out["grad." + k] = p.grad.detach().numpy().astype(np.float32)
        p.grad = None
    optimizer = torch.optim.AdamW(list(params.values()), lr=opt["lr"],
                                  betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                                  weight_decay=opt["weight_decay"])
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: lr_factor(opt, k + 1))
    losses = []
    for _ in range(opt["steps"]):
        optimizer.zero_grad()
        loss = forward_loss(cfg, params, ids, labels)
        losses.append(loss.item())
        loss.backward()
        if opt["grad_clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), opt["grad_clip_norm"])
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        losses.append(forward_loss(cfg, params, ids, labels).item())
    out["losses"] = np.array(losses, dtype=np.float64)
    write_safetensors(sys.argv[3], out)


if __name__ == "__main__":
    main()
