#!/usr/bin/env python3
"""Test oracle for tests/train/moe_grad_test.cc: Qwen3-MoE's sparse block in plain PyTorch
(transformers' loop over experts: softmax in f32, torch.topk, optional renormalisation, each
expert's SwiGLU on the tokens that chose it, index_add_ of the weighted outputs) and the
gradients of sum(out * ct) by autograd, in float64.

usage: moe_torch_reference.py IN.safetensors OUT.safetensors TOP_K NORM_TOPK_PROB(0|1)
IN holds f32 "x" [N, H], "router" [E, H], "gate" and "up" [E, I, H], "down" [E, H, I], "ct"
[N, H]. OUT receives "out" and "grad.<name>" for x, router, gate, up and down (f64)."""
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_reference import read_safetensors, write_safetensors  # noqa: E402


def main():
    src, dst, top_k, norm = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=(k != "ct"))
         for k, v in read_safetensors(src).items()}
    x, router, gate, up, down = t["x"], t["router"], t["gate"], t["up"], t["down"]
    probs = F.softmax(x @ router.T, dim=-1)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    if norm:
        weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(router.shape[0]):
        token, slot = torch.where(experts == e)
        if token.numel() == 0:
            continue
        h = x[token]
        y = (F.silu(h @ gate[e].T) * (h @ up[e].T)) @ down[e].T
        out = out.index_add(0, token, y * weights[token, slot, None])
    (out * t["ct"]).sum().backward()
    res = {"out": out.detach().numpy()}
    for name in ("x", "router", "gate", "up", "down"):
        res["grad." + name] = t[name].grad.numpy()
    write_safetensors(dst, res)


if __name__ == "__main__":
    main()
