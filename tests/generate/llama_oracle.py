"""llama.cpp as an oracle, through PyPI's llama-cpp-python.

llama-cpp-python 0.3.36 (scripts/python/requirements.lock), built from source into the checkout's
venv (third_party_py/) with GGML_NATIVE=ON by scripts/setup.sh. It carries llama.cpp at commit
ggml-org/llama.cpp@0c1e57098 (its CHANGELOG.md, [0.3.36]: "update llama.cpp to
ggml-org/llama.cpp@0c1e57098"; the sdist's vendor/llama.cpp has no git metadata).

Loads a GGUF file, evaluates the given prompt token ids and prints one JSON object on stdout:
  {"n_vocab", "prompt_ids", "greedy_ids", "logits_file", "text_ids"?, "load_seconds",
   "prompt_seconds", "generate_seconds"}
With --logits-out FILE, the raw logits after every prompt position go to FILE as little-endian
float32 [prompt_len, n_vocab] (binary, since JSON would be slow and lossy for 150k floats);
"logits_file" is that path, or null without it. "greedy_ids" are --generate N new tokens chosen
by argmax (llama.cpp's greedy choice, first index on a tie), with no stop on end tokens. With
--text-file FILE, "text_ids" are llama.cpp's tokens for the file's UTF-8 text (special tokens
such as <|im_start|> recognised, no BOS added), which checks the tokenizer the GGUF carries.

  python llama_oracle.py --model M.gguf --tokens 1,2,3 [--generate N] [--logits-out FILE]
                         [--text-file FILE] [--threads N] [--context N]

Loading lives in open_model(): CPU only, an f32 KV cache and no flash attention, so f32 models
are computed in f32 end to end.
"""

import argparse
import json
import sys
import time

import llama_cpp
import numpy as np


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--tokens", required=True, help="prompt token ids, comma separated")
    parser.add_argument("--generate", type=int, default=32, help="greedy new tokens")
    parser.add_argument("--logits-out", help="where the prompt's f32 logits go")
    parser.add_argument("--text-file", help="UTF-8 text to tokenize into text_ids")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=0, help="context size (0: as needed)")
    args = parser.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t != ""]
    except ValueError:
        args.tokens = []
    if not args.tokens or any(t < 0 for t in args.tokens):
        parser.error("--tokens must be a comma-separated list of token ids")
    if args.generate < 0:
        parser.error("--generate must be at least 0")
    return args


def open_model(model, threads, context, tokens_needed):
    """One place for how the oracle loads llama.cpp (see the module docstring)."""
    n_ctx = context if context > 0 else max(64, tokens_needed)
    return llama_cpp.Llama(
        model_path=model,
        n_gpu_layers=0,
        use_mmap=True,
        n_ctx=n_ctx,
        n_batch=min(n_ctx, 512),
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        flash_attn=False,
        offload_kqv=False,
        type_k=llama_cpp.GGML_TYPE_F32,
        type_v=llama_cpp.GGML_TYPE_F32,
        verbose=False,
    )


def main(argv):
    args = parse_args(argv)
    t0 = time.perf_counter()
    llm = open_model(args.model, args.threads, args.context, len(args.tokens) + args.generate + 1)
    t1 = time.perf_counter()
    n_vocab = llm.n_vocab()
    bad = [t for t in args.tokens if t >= n_vocab]
    if bad:
        raise ValueError(f"prompt token ids {bad} are not below the model's n_vocab {n_vocab}")
    llm.eval(args.tokens)
    # llm.scores holds one row of logits per evaluated position (logits_all=True).
    prompt_logits = np.ascontiguousarray(llm.scores[: len(args.tokens)], dtype="<f4")
    if prompt_logits.shape != (len(args.tokens), n_vocab):
        raise RuntimeError(
            f"got logits of shape {prompt_logits.shape}, expected ({len(args.tokens)}, {n_vocab})")
    if args.logits_out is not None:
        prompt_logits.tofile(args.logits_out)
    t2 = time.perf_counter()

    greedy = []
    row = prompt_logits[-1]
    while len(greedy) < args.generate:
        greedy.append(int(np.argmax(row)))
        if len(greedy) == args.generate:
            break
        llm.eval([greedy[-1]])
        row = llm.scores[llm.n_tokens - 1]
    t3 = time.perf_counter()

    out = {
        "n_vocab": n_vocab,
        "prompt_ids": args.tokens,
        "greedy_ids": greedy,
        "logits_file": args.logits_out,
    }
    if args.text_file is not None:
        with open(args.text_file, "rb") as f:
            text = f.read()
        text.decode("utf-8")  # refuses a file that is not UTF-8, naming the byte
        out["text_ids"] = llm.tokenize(text, add_bos=False, special=True)
    out.update(load_seconds=t1 - t0, prompt_seconds=t2 - t1, generate_seconds=t3 - t2)
    sys.stdout.write(json.dumps(out) + "\n")
    llm.close()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # one line naming the failure; the test prints it
        sys.stderr.write(f"llama_oracle: {type(e).__name__}: {e}\n")
        sys.exit(1)
