"""A bounded load test of `tlaloc serve`: N requests at concurrency C (defaults 64 and 16), each a
short streamed chat with its own length (every 16th one sampled); every one must succeed and end
with a finish_reason, usage and [DONE]. Prints p50/p99 latency, time to the first byte and
aggregate tokens/s. Only loopback servers are accepted; each request has its own timeout and the
whole run a deadline, so a stuck server fails the test instead of hanging it.

Usage: python serve_load.py BASE_URL [N] [C] [MAX_TOKENS]   (BASE_URL: http://127.0.0.1:PORT)
"""

import http.client
import json
import os
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor, wait

REQUEST_TIMEOUT_S = 120
RUN_DEADLINE_S = 300


def one(host, port, i, max_tokens):
    """Sends request i and reads its whole stream; returns (seconds, first-byte seconds, tokens)."""
    body = json.dumps({
        "messages": [{"role": "user", "content": f"request {i} " + "x" * (i % 7)}],
        # Every 16th request samples (its own seed); a sampled row makes the whole step sort
        # candidates, so most stay greedy to keep CI fast.
        "max_tokens": 4 + i % max_tokens,
        "temperature": 0.8 if i % 16 == 0 else 0,
        "seed": i,
        "stream": True,
        "stream_options": {"include_usage": True},
    })
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        if res.status != 200:
            raise AssertionError(f"request {i}: HTTP {res.status} {res.read().decode()!r}")
        first = None
        parts = []
        while True:
            piece = res.read1(65536)
            if not piece:
                break
            if first is None:
                first = time.perf_counter()
            parts.append(piece)
        elapsed = time.perf_counter() - t0
    finally:
        conn.close()
    text = b"".join(parts).decode()
    usage, finish = None, None
    for line in text.split("\n"):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        j = json.loads(line[6:])
        if "error" in j:
            raise AssertionError(f"request {i}: {j['error'].get('message')}")
        if j.get("usage"):
            usage = j["usage"]
        if j.get("choices") and j["choices"][0].get("finish_reason"):
            finish = j["choices"][0]["finish_reason"]
    if not text.endswith("data: [DONE]\n\n"):
        raise AssertionError(f"request {i}: no [DONE] at the end: {text[-200:]!r}")
    if usage is None or finish not in ("stop", "length"):
        raise AssertionError(f"request {i}: usage {usage}, finish_reason {finish}: {text!r}")
    return elapsed, first - t0, usage["completion_tokens"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main():
    base = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    url = urllib.parse.urlsplit(base)
    if url.scheme != "http" or url.hostname != "127.0.0.1" or not url.port:
        sys.exit(f"serve_load.py: BASE_URL must be http://127.0.0.1:PORT, got {base}")
    if not (1 <= total <= 1024 and 1 <= concurrency <= 64):
        sys.exit(f"serve_load.py: N must be 1..1024 and C 1..64, got {total} and {concurrency}")

    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=concurrency)
    futures = [pool.submit(one, url.hostname, url.port, i, max_tokens) for i in range(total)]
    done, pending = wait(futures, timeout=RUN_DEADLINE_S)
    wall = time.perf_counter() - t0
    if pending:
        print(f"FAIL: load: {len(pending)} of {total} requests unfinished after "
              f"{RUN_DEADLINE_S} s", flush=True)
        # The worker threads may still be blocked on the server: do not wait for them at exit.
        os._exit(1)
    pool.shutdown()
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        for e in errors[:5]:
            print(f"FAIL: {type(e).__name__}: {e}")
        sys.exit(f"FAIL: load: {len(errors)} of {total} requests failed")
    results = [f.result() for f in futures]
    tokens = sum(r[2] for r in results)
    print(f"ok: load {total} requests at concurrency {concurrency}: all succeeded in "
          f"{wall:.1f} s; latency p50 {pct([r[0] for r in results], 0.5) * 1000:.0f} ms, "
          f"p99 {pct([r[0] for r in results], 0.99) * 1000:.0f} ms; first byte p50 "
          f"{pct([r[1] for r in results], 0.5) * 1000:.0f} ms; {tokens} tokens, "
          f"{tokens / wall:.1f} tokens/s")


if __name__ == "__main__":
    main()
