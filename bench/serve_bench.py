#!/usr/bin/env python3
"""Aggregate generation throughput of a running `tlaloc serve`: R greedy requests of N new
tokens each ("benchmark request i" as the prompt, POST /v1/completions, streamed as clients
stream), C at a time, the tokens/s they add up to, and each request's time to its first token
(from sending it to the first streamed choice). Prints one JSON line:
  {"concurrency", "requests", "prompt_tokens", "tokens", "seconds", "tokens_per_s",
   "ttft_p50_s", "ttft_p90_s"}

usage: python3 bench/serve_bench.py BASE_URL CONCURRENCY REQUESTS NEW_TOKENS

Standard library only (one thread per concurrent client), so any python3 runs it.
"""
import json
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request


def ttft_percentiles(seconds):
    """p50 and p90 of the requests' times to first token (statistics' inclusive quantiles)."""
    if len(seconds) < 2:
        return {"ttft_p50_s": round(seconds[0], 4) if seconds else None, "ttft_p90_s": None}
    q = statistics.quantiles(seconds, n=10, method="inclusive")
    return {"ttft_p50_s": round(statistics.median(seconds), 4), "ttft_p90_s": round(q[8], 4)}


def main(argv):
    if len(argv) != 4:
        raise ValueError("expected BASE_URL CONCURRENCY REQUESTS NEW_TOKENS")
    base = argv[0].rstrip("/")
    concurrency, requests, new_tokens = (int(a) for a in argv[1:])
    lock = threading.Lock()
    state = {"next": 0, "tokens": 0, "prompt_tokens": 0, "error": None, "ttft": []}

    def client():
        while True:
            with lock:
                if state["next"] >= requests or state["error"]:
                    return
                i = state["next"]
                state["next"] += 1
            body = json.dumps({"prompt": f"benchmark request {i}", "max_tokens": new_tokens,
                               "temperature": 0, "stream": True,
                               "stream_options": {"include_usage": True}}).encode()
            req = urllib.request.Request(f"{base}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            sent = time.perf_counter()
            first, usage = None, None
            try:
                with urllib.request.urlopen(req, timeout=600) as res:
                    for raw in res:  # server-sent events: "data: {...}" lines, then [DONE]
                        line = raw.decode().strip()
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = json.loads(line[len("data: "):])
                        if first is None and chunk.get("choices"):
                            first = time.perf_counter() - sent
                        if chunk.get("usage"):
                            usage = chunk["usage"]
            except urllib.error.HTTPError as e:
                with lock:
                    state["error"] = f"request {i}: HTTP {e.code}: {e.read().decode()[:500]}"
                return
            except (urllib.error.URLError, OSError) as e:
                with lock:
                    state["error"] = f"request {i}: {e}"
                return
            with lock:
                if usage is None or first is None:
                    state["error"] = f"request {i}: the stream had no choice or no usage"
                    return
                state["tokens"] += usage["completion_tokens"]
                state["prompt_tokens"] += usage["prompt_tokens"]
                state["ttft"].append(first)

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
                      "tokens_per_s": round(state["tokens"] / seconds, 1),
                      **ttft_percentiles(state["ttft"])}), flush=True)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (RuntimeError, ValueError) as e:
        print(f"serve_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
