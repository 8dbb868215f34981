"""Hugging Face transformers as an oracle for Tlaloc's Qwen3 and Qwen3-MoE.

Loads a Hugging Face folder (config.json, model.safetensors) with
transformers.AutoModelForCausalLM in float32 with eager attention and the eager (loop over
experts) MoE implementation, evaluates the prompt token ids in one forward pass, and greedily
continues it with transformers' KV cache. Prints one JSON object on stdout:

  {"architecture", "n_vocab", "prompt_ids", "greedy_ids", "logits_file", "cached_vs_full",
   "logits_max_abs", "model", "torch", "transformers", "load_seconds", "prompt_seconds",
   "generate_seconds"}

With --logits-out FILE, the logits after every prompt position go to FILE as little-endian
float32 [prompt_len, n_vocab]. "cached_vs_full" is the largest |logit| difference between
transformers' own KV-cached steps and a full forward pass over prompt + continuation (a check
of the oracle itself). "model" is what transformers made of config.json (rope base, epsilon,
whether the head is the embedding's storage, routing, which layers are sparse), so a caller can
tell a field read differently from a computation that differs. Greedy decoding never stops early: end tokens are ordinary tokens here,
as in Tlaloc's run with no eos_token_ids. A checkpoint whose tensors do not all load (missing,
unexpected or mis-shaped names, which transformers would otherwise fill with random values) is
an error.

  third_party_py/bin/python hf_oracle.py --model DIR --tokens 1,2,3 [--generate N]
                                          [--logits-out FILE] [--threads N]
"""

import argparse
import json
import sys
import time

import numpy as np
import torch
import transformers


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="Hugging Face folder")
    p.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
    p.add_argument("--generate", type=int, default=32, help="greedy tokens to produce")
    p.add_argument("--logits-out", help="file for float32 [prompt, vocab] logits")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = p.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t != ""]
    except ValueError:
        p.error("--tokens must be a comma-separated list of token ids")
    if not args.tokens or min(args.tokens) < 0:
        p.error("--tokens must be a non-empty list of non-negative token ids")
    return args


def load(model_dir):
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir,
        dtype=torch.float32,
        attn_implementation="eager",
        experts_implementation="eager",
        output_loading_info=True,
    )
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"}
    if info.get("error_msgs"):
        problems["error_msgs"] = info["error_msgs"]
    if problems:
        raise SystemExit(f"hf_oracle: {model_dir} did not load cleanly: {problems}")
    model.eval()
    return model


def model_summary(model):
    """What transformers took from config.json, as the model it built uses it."""
    config = model.config
    rope = getattr(config, "rope_parameters", None) or {}
    layers = model.model.layers
    return {
        "rope_type": rope.get("rope_type", "default"),
        "rope_theta": float(rope.get("rope_theta", getattr(config, "rope_theta", 0.0))),
        "rms_norm_eps": float(layers[0].input_layernorm.variance_epsilon),
        "head_dim": int(layers[0].self_attn.head_dim),
        "lm_head_is_embedding": model.lm_head.weight.data_ptr()
        == model.model.embed_tokens.weight.data_ptr(),
        "norm_topk_prob": bool(getattr(config, "norm_topk_prob", False)),
        "num_experts_per_tok": int(getattr(config, "num_experts_per_tok", 0) or 0),
        "sparse_layers": [i for i, layer in enumerate(layers) if hasattr(layer.mlp, "experts")],
        "attn_implementation": config._attn_implementation,
        "experts_implementation": getattr(config, "_experts_implementation", None),
    }


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = load(args.model)
    vocab = model.config.vocab_size
    if max(args.tokens) >= vocab:
        raise SystemExit(f"hf_oracle: token id {max(args.tokens)} is not below vocab_size {vocab}")
    t1 = time.perf_counter()

    with torch.no_grad():
        prompt = torch.tensor([args.tokens], dtype=torch.long)
        out = model(input_ids=prompt, use_cache=True)
        logits = out.logits[0].to(torch.float32).numpy()  # [T, V]
        if args.logits_out:
            logits.astype("<f4").tofile(args.logits_out)
        t2 = time.perf_counter()

        greedy = []
        cache = out.past_key_values
        step_logits = [out.logits[0, -1]]
        next_id = int(torch.argmax(out.logits[0, -1]))
        while len(greedy) < args.generate:
            greedy.append(next_id)
            if len(greedy) == args.generate:
                break
            step = model(input_ids=torch.tensor([[next_id]]), past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            step_logits.append(step.logits[0, -1])
            next_id = int(torch.argmax(step.logits[0, -1]))
        t3 = time.perf_counter()

        # The cached steps against one full pass over everything they saw.
        cached_vs_full = 0.0
        if greedy:
            seen = torch.tensor([args.tokens + greedy[:-1]], dtype=torch.long)
            full = model(input_ids=seen, use_cache=False).logits[0, len(args.tokens) - 1 :]
            cached = torch.stack(step_logits)
            cached_vs_full = float((full - cached).abs().max())

    json.dump(
        {
            "architecture": type(model).__name__,
            "n_vocab": int(logits.shape[1]),
            "prompt_ids": args.tokens,
            "greedy_ids": greedy,
            "logits_file": args.logits_out,
            "cached_vs_full": cached_vs_full,
            "logits_max_abs": float(np.abs(logits).max()),
            "model": model_summary(model),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "load_seconds": t1 - t0,
            "prompt_seconds": t2 - t1,
            "generate_seconds": t3 - t2,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
