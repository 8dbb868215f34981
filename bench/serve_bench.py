#!/usr/bin/env python3
"""Aggregate generation throughput of a running `tlaloc serve`: R greedy requests of N new
tokens each ("benchmark request i" as the prompt, POST /v1/completions, not streamed), C at a
time, and the tokens/s they add up to. Prints one JSON line:
  {"concurrency", "requests", "prompt_tokens", "tokens", "seconds", "tokens_per_s"}

usage: python3 bench/serve_bench.py BASE_URL CONCURRENCY REQUESTS NEW_TOKENS

Standard library only (one thread per concurrent client), so any python3 runs it.
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request


def main(argv):
    if len(argv) != 4:
        raise ValueError("expected BASE_URL CONCURRENCY REQUESTS NEW_TOKENS")
    base = argv[0].rstrip("/")
    concurrency, requests, new_tokens = (int(a) for a in argv[1:])
    lock = threading.Lock()
    state = {"next": 0, "tokens": 0, "prompt_tokens": 0, "error": None}

    def client():
        while True:
            with lock:
                if state["next"] >= requests or state["error"]:
                    return
                i = state["next"]
                state["next"] += 1
            body = json.dumps({"prompt": f"benchmark request {i}", "max_tokens": new_tokens,
                               "temperature": 0}).encode()
            req = urllib.request.Request(f"{base}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=600) as res:
                    reply = json.load(res)
            except urllib.error.HTTPError as e:
                with lock:
                    state["error"] = f"request {i}: HTTP {e.code}: {e.read().decode()[:500]}"
                return
            except (urllib.error.URLError, OSError) as e:
                with lock:
                    state["error"] = f"request {i}: {e}"
                return
            with lock:
                state["tokens"] += reply["usage"]["completion_tokens"]
                state["prompt_tokens"] += reply["usage"]["prompt_tokens"]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if state["error"]:
        raise RuntimeError(state["error"])
    print(json.dumps({"concurrency": concurrency, "requests": requests,
                      "prompt_tokens": state["prompt_tokens"], "tokens": state["tokens"],
                      "seconds": round(seconds, 2),
                      "tokens_per_s": round(state["tokens"] / seconds, 1)}), flush=True)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (RuntimeError, ValueError) as e:
        print(f"serve_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
