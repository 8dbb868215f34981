#!/usr/bin/env bash
# Aggregate decode throughput of `tlaloc serve` at concurrency 1, 4 and 16 against the same
# requests run one after another by `tlaloc generate` (Tlaloc's sequential generation). A
# benchmark, not a test: it prints a table (docs/SERVING.md keeps the figures).
# Usage: bench/serve_throughput.sh TLALOC MODEL_DIR [NEW_TOKENS (64)] [REQUESTS (16)]
set -euo pipefail
tlaloc=$1 model=$2 tokens=${3:-64} requests=${4:-16}
root="$(cd "$(dirname "$0")/.." && pwd)"
# bench/serve_bench.py needs only the standard library: the venv's python, else the system's.
python=python3
[ -x "$root/third_party_py/bin/python" ] && python="$root/third_party_py/bin/python"
log=$(mktemp)
"$tlaloc" serve -m "$model" --port 0 --max-batch 16 --max-context 512 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 1200); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; exit 1; }
# One request first so that compilation is not timed.
"$python" "$root/bench/serve_bench.py" "http://127.0.0.1:$port" 1 1 4 >/dev/null
echo "| concurrency | requests x new tokens | tokens | seconds | tokens/s |"
echo "| --- | --- | --- | --- | --- |"
for c in 1 4 16; do
  "$python" "$root/bench/serve_bench.py" "http://127.0.0.1:$port" "$c" "$requests" "$tokens" |
    "$python" -c "import json,sys; j=json.load(sys.stdin); print(f\"| serve, {j['concurrency']} | $requests x $tokens | {j['tokens']} | {j['seconds']} | {j['tokens_per_s']} |\")"
done
kill -TERM "$pid"; wait "$pid" || true
# Sequential: each request alone through `tlaloc generate`, timed by its own prefill + decode
# seconds (load and compilation, which a server pays once, left out).
for i in $(seq 0 $((requests - 1))); do
  "$tlaloc" generate -m "$model" --prompt "benchmark request $i" -n "$tokens" --temp 0 --json \
    2>/dev/null
done | "$python" -c "
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
n = sum(len(r['generated_ids']) for r in rows)
s = sum(r['timings']['prefill_s'] + r['timings']['decode_s'] for r in rows)
print(f'| generate, one after another | $requests x $tokens | {n} | {s:.2f} | {n / s:.1f} |')"
