#!/usr/bin/env python3
"""llama.cpp's side of bench/serve_vs_llama.sh: R greedy requests of N new tokens, C at a time,
decoded together in ONE llama.cpp context of C sequences, as a server built on llama.cpp
(llama-server's continuous batching) runs them. llama.cpp is the natively built one
(llama-cpp-python in third_party_py/, GGML_NATIVE=ON), driven through its low-level API.

Each step is one llama_decode of one batch: a token of every sequence that is decoding, plus the
whole prompt of every request that just took a free sequence (its KV cells cleared first with
llama_memory_seq_rm). Each sequence's next token is the greedy pick of its logits
(llama_sampler_init_greedy). Request i's prompt is the text "benchmark request i" (llama.cpp's
tokenizer), the same as bench/serve_bench.py sends `tlaloc serve`. End tokens do not stop a
request. llama.cpp's defaults otherwise (f16 KV cache, flash attention "auto", n_batch 2048,
n_ubatch 512, a KV cache of --context cells per sequence), the given threads and one persistent
ggml thread pool. One warm-up request of 4 tokens runs first, untimed, in a context of its own.
A request's time to first token runs from the start of the step that takes it into a free
sequence (the moment its client's previous request ended) to the end of the step that samples
its first token. Prints one JSON line per concurrency:
  {"concurrency", "requests", "prompt_tokens", "tokens", "seconds", "tokens_per_s",
   "ttft_p50_s", "ttft_p90_s", ...}

usage: third_party_py/bin/python bench/llama_multiseq.py --model FILE.gguf [--threads T]
           [--concurrency "1 4 16"] [--requests R] [--new-tokens N] [--context L]
"""
import ctypes
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_lowlevel  # noqa: E402
from serve_bench import ttft_percentiles  # noqa: E402  (the same percentiles for both sides)

USAGE = __doc__[__doc__.index("usage:"):]


def tokenize(ll, vocab, text):
    raw = text.encode()
    buf = (ll.llama_token * (len(raw) + 8))()
    n = ll.llama_tokenize(vocab, raw, len(raw), buf, len(buf), True, False)
    if n < 0:
        raise RuntimeError(f"llama_tokenize needs {-n} tokens for {text!r}")
    return list(buf[:n])


def measure(ll, model, opts, concurrency, requests, new_tokens):
    """`requests` requests, `concurrency` at a time, in one context of `concurrency`
    sequences; returns the JSON row."""
    cparams = ll.llama_context_default_params()
    cparams.n_ctx = opts["context"] * concurrency  # --context cells for each sequence
    cparams.n_seq_max = concurrency
    cparams.n_threads = opts["threads"]
    cparams.n_threads_batch = opts["threads"]
    ctx = ll.llama_init_from_model(model, cparams)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not make a context of {concurrency} sequences")
    pool, _ = llama_lowlevel.attach_threadpool(ll, ctx, opts["threads"])
    vocab = ll.llama_model_get_vocab(model)
    mem = ll.llama_get_memory(ctx)
    capacity = ll.llama_n_batch(ctx)
    batch = ll.llama_batch_init(capacity, 0, 1)
    sampler = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    ll.llama_sampler_chain_add(sampler, ll.llama_sampler_init_greedy())

    # Per sequence: None when free, else {"pos", "last", "generated", "out"}.
    slots = [None] * concurrency
    next_request = tokens = prompt_tokens = 0
    ttft = []
    t0 = time.perf_counter()
    while next_request < requests or any(slots):
        step_start = time.perf_counter()
        batch.n_tokens = 0
        for seq in range(concurrency):
            slot = slots[seq]
            if slot is None and next_request < requests:
                ids = tokenize(ll, vocab, f"benchmark request {next_request}")
                next_request += 1
                if len(ids) + new_tokens > opts["context"]:
                    raise RuntimeError(f"--context {opts['context']} holds fewer than the "
                                       f"{len(ids)} prompt + {new_tokens} new tokens")
                if batch.n_tokens + len(ids) > capacity:
                    raise RuntimeError(f"the prompts exceed the batch of {capacity} tokens")
                ll.llama_memory_seq_rm(mem, seq, -1, -1)
                for i, t in enumerate(ids):
                    llama_lowlevel.batch_add(batch, t, i, seq, i == len(ids) - 1)
                prompt_tokens += len(ids)
                slots[seq] = {"pos": len(ids), "generated": 0, "out": batch.n_tokens - 1,
                              "admitted": step_start}
            elif slot is not None:
                slot["out"] = batch.n_tokens
                llama_lowlevel.batch_add(batch, slot["last"], slot["pos"], seq, True)
                slot["pos"] += 1
        rc = ll.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed at concurrency {concurrency} (returned {rc})")
        for seq, slot in enumerate(slots):
            if slot is None:
                continue
            slot["last"] = ll.llama_sampler_sample(sampler, ctx, slot["out"])
            slot["generated"] += 1
            if slot["generated"] == 1:
                ttft.append(time.perf_counter() - slot["admitted"])
            if slot["generated"] >= new_tokens:
                tokens += slot["generated"]
                slots[seq] = None
    seconds = time.perf_counter() - t0

    ll.llama_sampler_free(sampler)
    ll.llama_batch_free(batch)
    llama_lowlevel.free_threadpool(ll, ctx, pool)
    ll.llama_free(ctx)
    return {"concurrency": concurrency, "requests": requests, "prompt_tokens": prompt_tokens,
            "tokens": tokens, "seconds": round(seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1), **ttft_percentiles(ttft)}


def main(argv):
    opts = llama_lowlevel.parse_flags(
        argv, {"model": None, "threads": 2, "concurrency": "1 4 16", "requests": 16,
               "new_tokens": 64, "context": 512},
        ["threads", "requests", "new_tokens", "context"], USAGE)
    try:
        levels = [int(c) for c in opts["concurrency"].split()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise ValueError(f'--concurrency "{opts["concurrency"]}": expected positive integers')
    ll = llama_lowlevel.load_llama_cpp()
    logs = llama_lowlevel.Logs(ll)
    ll.llama_backend_init()
    model = llama_lowlevel.load_model(ll, opts["model"])
    measure(ll, model, opts, 1, 1, 4)  # warm-up, untimed
    version = llama_lowlevel.package_version()
    header = {"engine": f"llama.cpp (llama-cpp-python {version}, native build)",
              "llama_cpp_commit": llama_lowlevel.llama_cpp_commit(version),
              "kv_type": {0: "f32", 1: "f16", 30: "bf16"}.get(  # enum ggml_type (ggml.h)
                  ll.llama_context_default_params().type_k, "?"),
              "flash_attention": f"auto: {logs.flash_attention()}"}
    for c in levels:
        print(json.dumps({**measure(ll, model, opts, c, opts["requests"], opts["new_tokens"]),
                          **header}), flush=True)
    ll.llama_model_free(model)
    ll.llama_backend_free()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (RuntimeError, ValueError, OSError, ctypes.ArgumentError) as e:
        print(f"llama_multiseq.py: {e}", file=sys.stderr)
        sys.exit(1)
