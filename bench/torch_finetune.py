#!/usr/bin/env python3
"""PyTorch's side of bench/finetune_vs_torch.sh (torch 2.x, the venv's: third_party_py/): the
same Qwen3 (tests/train/torch_reference.py's plain-torch forward, the one the gradient parity
tests check against Tlaloc), the same token ids packed into the same [batch, seq_len] rows, plain
cross-entropy over the whole vocabulary, torch.optim.AdamW with gradient clipping, as a PyTorch
user writes a fine-tune; in eager mode, or with torch.compile (inductor, on the CPU: C++ kernels
built with the system's g++) applied to the forward + loss (its backward compiled with it by
AOTAutograd) and to the optimizer step, as PyTorch's tutorials compile both.

usage: torch_finetune.py MODEL_DIR IDS.txt STEPS BATCH SEQ_LEN THREADS OUT.json [eager|compile]
IDS.txt: whitespace-separated token ids (documents already joined with end-of-text).
OUT.json receives {"mode", "torch", "step_seconds": [...], "losses": [...]}; when torch.compile
fails, {"mode", "torch", "error"} instead, and the exit status is 3."""
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "train"))
from torch_reference import forward_loss, read_safetensors  # noqa: E402


def main():
    model_dir, ids_path = sys.argv[1], sys.argv[2]
    steps, batch, seq_len, threads = (int(a) for a in sys.argv[3:7])
    out_path = sys.argv[7]
    mode = sys.argv[8] if len(sys.argv) > 8 else "eager"
    if mode not in ("eager", "compile"):
        raise SystemExit(f"torch_finetune.py: mode {mode!r}: expected eager or compile")
    torch.set_num_threads(threads)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    params = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True)
              for k, v in weights.items()}
    ids = np.array(open(ids_path).read().split(), dtype=np.int64)
    row = seq_len + 1  # inputs and their next-token labels
    need = steps * batch * row
    if ids.size < need:
        ids = np.resize(ids, need)  # wraps around, as a second epoch would
    optimizer = torch.optim.AdamW(list(params.values()), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    loss_fn, optimizer_step = forward_loss, optimizer.step
    if mode == "compile":
        loss_fn = torch.compile(forward_loss)
        optimizer_step = torch.compile(optimizer.step)
    step_seconds, losses = [], []
    try:
        for step in range(steps):
            chunk = torch.from_numpy(ids[step * batch * row:(step + 1) * batch * row])
            chunk = chunk.view(batch, row)
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = loss_fn(cfg, params, chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
            optimizer_step()
            losses.append(loss.item())
            step_seconds.append(time.perf_counter() - start)
    except Exception as e:  # torch.compile's failures come in many types; report, do not hide
        if mode != "compile":
            raise
        traceback.print_exc()
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        json.dump({"mode": mode, "torch": torch.__version__,
                   "error": f"{type(e).__name__}: {reason}"}, open(out_path, "w"))
        sys.exit(3)
    json.dump({"mode": mode, "torch": torch.__version__, "step_seconds": step_seconds,
               "losses": losses}, open(out_path, "w"))


if __name__ == "__main__":
    main()
