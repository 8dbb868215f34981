#!/usr/bin/env python3
"""llama.cpp's side of bench/compare_llama.sh: llama.cpp built natively (llama-cpp-python in
third_party_py/, GGML_NATIVE=ON), driven through its low-level API and timed as llama.cpp's own
llama-bench times "pp N" and "tg M @ dN":

  - load the GGUF (mmap, CPU), make one context of prompt + new tokens with llama.cpp's defaults
    (f16 KV cache, flash attention "auto" as llama.cpp resolves it, n_batch 2048, n_ubatch 512),
    the given threads, and one persistent ggml thread pool (as llama-bench attaches);
  - warm up as llama-bench does: the prompt once, then one generated token; clear the KV cache;
  - prefill: N random token ids in batches of n_batch (one batch for N <= 2048; llama.cpp splits
    it into ubatches of n_ubatch), only the last token's logits, timed to llama_synchronize;
  - decode: M tokens one at a time after those N, each a one-token batch with its logits, timed
    to llama_synchronize after each; the next id is random, not sampled (llama-bench's tg).

Prints one JSON object with the fields of `tlaloc bench --json` (load_s, prefill_tokens_per_s,
decode_tokens_per_s, peak_rss_bytes, ...) and what llama.cpp ended up with (KV types, flash
attention, batch sizes, the llama.cpp commit the package carries).

usage: third_party_py/bin/python bench/llama_bench.py --model FILE.gguf [--threads T]
           [--prompt-tokens N] [--new-tokens M] [--kv default|f16|f32|bf16] [--seed S]

--kv default (the default) keeps llama.cpp's KV cache type (f16); f16, f32 or bf16 set both the
key and the value type. The token ids are a seeded 64-bit LCG over the model's vocabulary.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_lowlevel  # noqa: E402

USAGE = __doc__[__doc__.index("usage:"):__doc__.index("--kv default (the")]
GGML_TYPES = {"f32": 0, "f16": 1, "bf16": 30}  # enum ggml_type (ggml.h)
GGML_TYPE_NAMES = {v: k for k, v in GGML_TYPES.items()}


def random_ids(n, vocab, seed):
    """The same deterministic generator bench/compare_llama.sh's peer always used: the ids only
    need to be valid, not meaningful."""
    mask = (1 << 64) - 1
    state = (seed * 6364136223846793005 + 1442695040888963407) & mask
    ids = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) & mask
        ids.append((state >> 33) % vocab)
    return ids


class Runner:
    """One context and one batch; prompt() and generate() are llama-bench's test_prompt and
    test_gen."""

    def __init__(self, ll, ctx, ids):
        self.ll = ll
        self.ctx = ctx
        self.ids = ids  # consumed in order, like llama-bench's std::rand()
        self.next = 0
        self.n_batch = ll.llama_n_batch(ctx)
        self.batch = ll.llama_batch_init(self.n_batch, 0, 1)

    def token(self):
        t = self.ids[self.next % len(self.ids)]
        self.next += 1
        return t

    def decode(self, what):
        rc = self.ll.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed on the {what} (returned {rc})")

    def prompt(self, n):
        done = 0
        while done < n:
            count = min(n - done, self.n_batch)
            self.batch.n_tokens = 0
            for i in range(count):
                llama_lowlevel.batch_add(self.batch, self.token(), done + i, 0, i == count - 1)
            self.decode("prompt batch")
            done += count
        self.ll.llama_synchronize(self.ctx)

    def generate(self, n):
        mem = self.ll.llama_get_memory(self.ctx)
        pos = self.ll.llama_memory_seq_pos_max(mem, 0) + 1
        token = self.token()
        for _ in range(n):
            self.batch.n_tokens = 0
            llama_lowlevel.batch_add(self.batch, token, pos, 0, True)
            pos += 1
            self.decode("generation batch")
            self.ll.llama_synchronize(self.ctx)
            token = self.token()

    def free(self):
        self.ll.llama_batch_free(self.batch)


def main(argv):
    opts = llama_lowlevel.parse_flags(
        argv, {"model": None, "threads": 2, "prompt_tokens": 512, "new_tokens": 128,
               "kv": "default", "seed": 0}, ["threads", "prompt_tokens", "new_tokens"], USAGE)
    if opts["kv"] not in ("default", "f16", "f32", "bf16"):
        raise ValueError(f"--kv {opts['kv']}: expected default, f16, f32 or bf16")
    ll = llama_lowlevel.load_llama_cpp()
    logs = llama_lowlevel.Logs(ll)
    ll.llama_backend_init()

    t0 = time.perf_counter()
    model = llama_lowlevel.load_model(ll, opts["model"])
    load_s = time.perf_counter() - t0

    cparams = ll.llama_context_default_params()
    # As llama-bench sizes it: the prompt plus the generated tokens (the warm-up needs fewer).
    cparams.n_ctx = opts["prompt_tokens"] + opts["new_tokens"]
    cparams.n_threads = opts["threads"]
    cparams.n_threads_batch = opts["threads"]
    if opts["kv"] != "default":
        cparams.type_k = cparams.type_v = GGML_TYPES[opts["kv"]]
    ctx = ll.llama_init_from_model(model, cparams)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not make a context of {cparams.n_ctx} tokens")
    pool, pool_text = llama_lowlevel.attach_threadpool(ll, ctx, opts["threads"])
    vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model))
    runner = Runner(ll, ctx, random_ids(opts["prompt_tokens"] * 2 + opts["new_tokens"] + 1,
                                        vocab, opts["seed"]))

    runner.prompt(opts["prompt_tokens"])  # warm-up, untimed, as llama-bench's
    runner.generate(1)
    ll.llama_memory_clear(ll.llama_get_memory(ctx), False)

    t0 = time.perf_counter()
    runner.prompt(opts["prompt_tokens"])
    prefill_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    runner.generate(opts["new_tokens"])
    decode_s = time.perf_counter() - t0

    version = llama_lowlevel.package_version()
    out = {
        "engine": f"llama.cpp (llama-cpp-python {version}, native build)",
        "llama_cpp_commit": llama_lowlevel.llama_cpp_commit(version),
        "model": opts["model"],
        "threads": opts["threads"],
        "threadpool": pool_text,
        "kv_type": opts["kv"],
        "kv_key_type": GGML_TYPE_NAMES.get(cparams.type_k, str(cparams.type_k)),
        "kv_value_type": GGML_TYPE_NAMES.get(cparams.type_v, str(cparams.type_v)),
        "flash_attention": f"auto: {logs.flash_attention()}",
        "n_ctx": ll.llama_n_ctx(ctx),
        "n_batch": ll.llama_n_batch(ctx),
        "n_ubatch": ll.llama_n_ubatch(ctx),
        "load_s": load_s,
        "prefill_tokens": opts["prompt_tokens"],
        "prefill_s": prefill_s,
        "prefill_tokens_per_s": opts["prompt_tokens"] / prefill_s,
        "decode_tokens": opts["new_tokens"],
        "decode_s": decode_s,
        "decode_tokens_per_s": opts["new_tokens"] / decode_s,
        "peak_rss_bytes": llama_lowlevel.peak_rss_bytes(),
        "system_info": ll.llama_print_system_info().decode().strip(),
    }
    print(json.dumps(out), flush=True)
    runner.free()
    llama_lowlevel.free_threadpool(ll, ctx, pool)
    ll.llama_free(ctx)
    ll.llama_model_free(model)
    ll.llama_backend_free()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (RuntimeError, ValueError, OSError) as e:
        print(f"llama_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
