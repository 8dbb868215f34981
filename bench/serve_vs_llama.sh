#!/usr/bin/env bash
# Aggregate decode throughput of `tlaloc serve` at concurrency 1, 4 and 16 against llama.cpp
# decoding the same number of sequences in ONE context (llama.cpp built natively by
# llama-cpp-python in third_party_py/, driven through its low-level API: bench/llama_multiseq.py,
# one llama_decode per step holding a token of every sequence) and against Tlaloc's own sequential generation (`tlaloc
# generate`, one request after another), in one command:
#
#   bash bench/serve_vs_llama.sh [--preset qwen3-0.6b | --model DIR] [--requests 16]
#        [--new-tokens 64] [--threads 2] [--concurrency "1 4 16"] [--sequential 4]
#        [--work DIR] [--tlaloc BIN]
#
# Every request is greedy, with the prompt "benchmark request i" (a few tokens; both sides
# tokenize the same text with the same tokenizer, and the table shows the prompt tokens each
# counted) and the same new tokens; both engines get the same threads. Per concurrency level,
# Tlaloc serve (bench/serve_bench.py; warmed up first with one untimed round of the same requests, so that compiling
# its step programs is not timed) and llama.cpp (llama.cpp's defaults: f16 KV cache, flash
# attention "auto") run back to back, which one goes first alternating. --sequential requests
# then run through `tlaloc generate`, timed by their own prefill + decode seconds (each process
# loads and compiles, which a server pays once; its rate does not depend on how many run, so a
# few keep the command short). Without --model it creates the preset (random weights, bf16)
# in --work once; the GGUF comes from `tlaloc export gguf`. A benchmark, not a test: it prints
# the CPU, the load average, the command and one table with the ratios (docs/SERVING.md keeps
# the figures). The defaults are the full benchmark (about 10 minutes on two idle cores); a
# quick look: bash bench/serve_vs_llama.sh --preset tiny --requests 4 --new-tokens 8
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="bash bench/serve_vs_llama.sh $*"
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
PRESET=qwen3-0.6b
MODEL=""
REQUESTS=16
NEW=64
THREADS=2
LEVELS="1 4 16"
SEQUENTIAL=4
WORK="${TMPDIR:-/tmp}/tlaloc-serve-vs-llama"
TLALOC=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preset) PRESET="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --requests) REQUESTS="$2"; shift 2 ;;
    --new-tokens) NEW="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --concurrency) LEVELS="$2"; shift 2 ;;
    --sequential) SEQUENTIAL="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tlaloc) TLALOC="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "serve_vs_llama.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in REQUESTS NEW THREADS SEQUENTIAL; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "serve_vs_llama.sh: --${v,,} ${!v}: expected a positive integer" >&2; exit 2; }
done
MAX_LEVEL=0
for c in $LEVELS; do
  [[ "$c" =~ ^[1-9][0-9]*$ ]] ||
    { echo "serve_vs_llama.sh: --concurrency \"$LEVELS\": expected positive integers" >&2; exit 2; }
  ((c > MAX_LEVEL)) && MAX_LEVEL=$c
done
TLALOC=$(bench_tlaloc serve_vs_llama.sh "$TLALOC")
PYTHON=$(bench_python serve_vs_llama.sh llama_cpp)

mkdir -p "$WORK"
if [[ -z "$MODEL" ]]; then
  MODEL="$WORK/$PRESET-bf16"
  if [[ ! -f "$MODEL/config.json" ]]; then
    echo "== creating the $PRESET preset (bf16) in $MODEL" >&2
    "$TLALOC" init-model --preset "$PRESET" --dtype bf16 "$MODEL" >&2
  fi
fi
[[ -f "$MODEL/config.json" ]] || { echo "serve_vs_llama.sh: $MODEL has no config.json" >&2; exit 1; }
GGUF="$WORK/$(basename "$MODEL").gguf"
if [[ ! -f "$GGUF" || "$MODEL/config.json" -nt "$GGUF" ]]; then
  echo "== exporting $GGUF" >&2
  "$TLALOC" export gguf "$MODEL" "$GGUF" >&2
fi
RESULTS=$(mktemp -d)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# The server, with a slot per request of the highest concurrency.
log="$RESULTS/serve.log"
"$TLALOC" serve -m "$MODEL" --port 0 --max-batch "$MAX_LEVEL" --max-context 512 -t "$THREADS" \
  2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$RESULTS"' EXIT
port=""
for _ in $(seq 1 3000); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
  [[ -n "$port" ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$log" >&2; exit 1; }
url="http://127.0.0.1:$port"

run_serve() {
  echo "== concurrency $1: tlaloc serve" >&2
  # The same round once untimed: every step program this level uses gets compiled.
  "$PYTHON" "$ROOT/bench/serve_bench.py" "$url" "$1" "$1" "$NEW" >/dev/null
  "$PYTHON" "$ROOT/bench/serve_bench.py" "$url" "$1" "$REQUESTS" "$NEW" >"$RESULTS/serve-$1.json"
}
run_llama() {
  echo "== concurrency $1: llama.cpp, one context of $1 sequences" >&2
  "$PYTHON" "$ROOT/bench/llama_multiseq.py" --model "$GGUF" --threads "$THREADS" \
    --concurrency "$1" --requests "$REQUESTS" --new-tokens "$NEW" >"$RESULTS/llama-$1.json"
}
turn=0
for c in $LEVELS; do
  if ((turn++ % 2 == 0)); then run_serve "$c"; run_llama "$c"; else run_llama "$c"; run_serve "$c"; fi
done
kill -TERM "$pid"
wait "$pid" || true

echo "== $SEQUENTIAL requests one after another: tlaloc generate" >&2
for i in $(seq 0 $((SEQUENTIAL - 1))); do
  "$TLALOC" generate -m "$MODEL" --prompt "benchmark request $i" -n "$NEW" --temp 0 \
    -t "$THREADS" --json 2>/dev/null
done >"$RESULTS/sequential.jsonl"

echo "CPU: $(bench_cpu) ($(nproc) cores);" \
  "load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command: $COMMAND"
echo "llama.cpp: $(bench_llama_cpp "$PYTHON")"
echo "Model: $MODEL ($(sed -n 's/.*"torch_dtype": *"\([a-z0-9]*\)".*/\1/p' "$MODEL/config.json"))," \
  "GGUF $GGUF; $THREADS threads; greedy; $REQUESTS requests x $NEW new tokens per level"
echo
"$PYTHON" - "$RESULTS" "$LEVELS" "$REQUESTS" "$NEW" <<'EOF'
import json, sys
results, levels, requests, new = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
def load(name):
    with open(f"{results}/{name}") as f:
        return json.loads(f.read().strip().splitlines()[-1])
rows = [json.loads(l) for l in open(f"{results}/sequential.jsonl") if l.strip()]
seq_tokens = sum(len(r["generated_ids"]) for r in rows)
seq_s = sum(r["timings"]["prefill_s"] + r["timings"]["decode_s"] for r in rows)
seq_rate = seq_tokens / seq_s
def ttft(row):
    p50 = row.get("ttft_p50_s")
    return "-" if p50 is None else f"{1000 * p50:.0f}"


print("| concurrency | Tlaloc serve: prompt tok, new tok, s, tok/s | llama.cpp one context: "
      "prompt tok, new tok, s, tok/s | serve / llama.cpp | TTFT p50 ms: serve, llama.cpp | "
      "serve / Tlaloc sequential |")
print("| --- | --- | --- | --- | --- | --- |")
for c in levels:
    s, l = load(f"serve-{c}.json"), load(f"llama-{c}.json")
    print(f"| {c} | {s['prompt_tokens']}, {s['tokens']}, {s['seconds']}, {s['tokens_per_s']} "
          f"| {l['prompt_tokens']}, {l['tokens']}, {l['seconds']}, {l['tokens_per_s']} "
          f"| {s['tokens_per_s'] / l['tokens_per_s']:.2f}x | {ttft(s)}, {ttft(l)} "
          f"| {s['tokens_per_s'] / seq_rate:.2f}x |")
print(f"| Tlaloc sequential (`tlaloc generate`, {len(rows)} requests, prefill + decode time) "
      f"| -, {seq_tokens}, {seq_s:.2f}, {seq_rate:.1f} | | | | 1.00x |")
EOF
