#!/usr/bin/env bash
# Tlaloc's interpreter against llama.cpp (node-llama-cpp's prebuilt CPU build) on the same
# model, dtype, threads and machine, in one command:
#
#   bash bench/compare_llama.sh [--runs R] [--prompt-tokens N] [--new-tokens M] [--threads T]
#                               [--dtypes "f32 bf16 int8"] [--models "qwen3-0.6b"] [--work DIR]
#                               [--tlaloc BIN] [--short-prompt N] [--moe-bench BIN]
#
# --models takes init-model presets; qwen3-30b-a3b-2l adds the MoE row (Qwen3-30B-A3B's layers,
# 2 of 48, as llama.cpp's qwen3moe; --dtypes "bf16 int8" for it: f32 does not fit 24 GiB with
# its GGUF; int8 quantizes its experts too, exported as Q8_0). With a MoE preset the table ends with the MoE block's time against a dense SwiGLU of
# the same active width (8 x 768), from build/bench/moe_bench (--moe-bench) in the same run at
# the same threads, at 1 token (decode) and 16 and 256 (prefill), in f32 and in bf16.
# It creates each preset (random weights, real shapes) once per dtype, exports it
# with `tlaloc export gguf`, then alternates `tlaloc bench --json` and bench/llama_bench.mjs R
# times (which one goes first alternates too), each under /usr/bin/time -v for peak RSS, and
# prints medians and Tlaloc/llama.cpp ratios for prefill and decode speed, peak RSS and load
# time.
# llama.cpp runs as its users run it (node-llama-cpp's defaults: f16 KV cache, flash attention
# "auto"): that is the main row. A second line per decode figure runs it with the KV cache in
# the model's dtype, as Tlaloc's is (bf16 for int8). Decode is measured after the full prompt
# and after a short one (--short-prompt, 4 tokens). Each dtype ends with the rate at which each
# engine reads the weights while decoding, as a share of the machine's read bandwidth measured
# in the same run (`tlaloc bench`'s probe).
# The int8 row quantizes the bf16 preset with `tlaloc quantize --dtype int8` and exports it as
# GGUF Q8_0 (the same blocks): Tlaloc int8 (bf16 activations and KV cache) against llama.cpp
# Q8_0, in the default exact mode and again with TLALOC_INT8_ACTIVATIONS=q8_0 (activations
# rounded to 8 bits per block as llama.cpp does, VNNI products): the "q8_0 activations" lines.
# Defaults: 3 runs, 512 prompt tokens, 128 new tokens, 2 threads, qwen3-0.6b; a quick look:
#   bash bench/compare_llama.sh --runs 1 --prompt-tokens 64 --new-tokens 16
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
NODE=$(bench_node)
RUNS=3
PROMPT=512
NEW=128
THREADS=2
DTYPES="f32 bf16 int8"
MODELS="qwen3-0.6b"
WORK="${TMPDIR:-/tmp}/tlaloc-compare"
TLALOC=""
SHORT=4
MOE_BENCH=""
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
    --short-prompt) SHORT="$2"; shift 2 ;;
    --moe-bench) MOE_BENCH="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "compare_llama.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
TLALOC=$(bench_tlaloc compare_llama.sh "$TLALOC")
if [[ -z "$MOE_BENCH" ]]; then
  for candidate in "$(dirname "$TLALOC")/../bench/moe_bench" "$ROOT/build/bench/moe_bench"; do
    if [[ -x "$candidate" ]]; then MOE_BENCH="$candidate"; break; fi
  done
fi
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
  # int8: the bf16 preset quantized; its GGUF is Q8_0, compared with Tlaloc's bf16 KV cache.
  dtype_flag=(--dtype "$dt")
  kv="$dt"
  if [[ "$dt" == int8 ]]; then
    dtype_flag=()
    kv=bf16
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
  # Both files read once before any timed run, so that neither engine's first run pays for
  # reading its file from disk (the 7 GB MoE files made llama.cpp's first prefill half as fast
  # as its second) and both run from the page cache as a user's repeated runs do.
  cat "$model"/*.safetensors "$gguf" >/dev/null
  for ((r = 1; r <= RUNS; r++)); do
    # $1: result name prefix ("" or "short-"), $2: prompt tokens.
    run_tlaloc() {
      echo "== run $r/$RUNS $tag ${2}-token prompt: tlaloc" >&2
      measure "$RESULTS/tlaloc-$1$tag-$r.json" "$TLALOC" bench --model "$model" "${dtype_flag[@]}" \
        --prompt-tokens "$2" --new-tokens "$NEW" --threads "$THREADS" --seed "$r" --json \
        --no-bandwidth  # the probe's buffer would count in the peak RSS /usr/bin/time sees
      # int8 also in the opt-in mode that rounds activations as llama.cpp's Q8_0 does (VNNI).
      if [[ "$dt" == int8 ]]; then
        echo "== run $r/$RUNS $tag ${2}-token prompt: tlaloc, TLALOC_INT8_ACTIVATIONS=q8_0" >&2
        measure "$RESULTS/tlalocq8-$1$tag-$r.json" env TLALOC_INT8_ACTIVATIONS=q8_0 "$TLALOC" bench \
          --model "$model" --prompt-tokens "$2" --new-tokens "$NEW" --threads "$THREADS" \
          --seed "$r" --json --no-bandwidth
      fi
    }
    # llama.cpp with its default KV cache and attention, then with the KV cache in $kv.
    run_llama() {
      echo "== run $r/$RUNS $tag ${2}-token prompt: llama.cpp (default KV, then $kv KV)" >&2
      measure "$RESULTS/llama-$1$tag-$r.json" "$NODE" "$ROOT/bench/llama_bench.mjs" \
        --model "$gguf" --threads "$THREADS" --prompt-tokens "$2" --new-tokens "$NEW" \
        --kv default --seed "$r"
      measure "$RESULTS/llamakv-$1$tag-$r.json" "$NODE" "$ROOT/bench/llama_bench.mjs" \
        --model "$gguf" --threads "$THREADS" --prompt-tokens "$2" --new-tokens "$NEW" \
        --kv "$kv" --seed "$r"
    }
    for spec in ":$PROMPT" "short-:$SHORT"; do
      if ((r % 2)); then
        run_tlaloc "${spec%%:*}" "${spec#*:}"; run_llama "${spec%%:*}" "${spec#*:}"
      else
        run_llama "${spec%%:*}" "${spec#*:}"; run_tlaloc "${spec%%:*}" "${spec#*:}"
      fi
    done
  done
  # The machine's read bandwidth, once per dtype, for decode's share of it.
  "$TLALOC" bench --model "$model" "${dtype_flag[@]}" --prompt-tokens 1 --new-tokens 1 \
    --threads "$THREADS" --json > "$RESULTS/bandwidth-$tag.json"
  TAGS="${TAGS:-} $tag"
  grep -q '"num_experts"' "$model/config.json" && MOE=1
done
done

# The MoE block against a dense SwiGLU of the same active parameters, once, at the same threads.
if [[ -n "${MOE:-}" ]]; then
  [[ -x "$MOE_BENCH" ]] ||
    { echo "compare_llama.sh: no moe_bench (build the moe_bench target, or pass --moe-bench BIN)" >&2; exit 1; }
  echo "== MoE block against a dense layer of the same active width: $MOE_BENCH" >&2
  TLALOC_NUM_THREADS="$THREADS" "$MOE_BENCH" \
    --benchmark_filter='^BM_(MoeForm(Bf16)?/1/(1|16|256)|DenseMlp(Bf16)?/tokens:(1|16|256))/' \
    --benchmark_repetitions="$RUNS" --benchmark_format=json > "$RESULTS/moe_layer.json"
fi

"$NODE" - "$RESULTS" "$TAGS" "$THREADS" "$PROMPT" "$NEW" "$RUNS" "$SHORT" <<'EOF'
const fs = require("fs");
const path = require("path");
const [dir, dtypes, threads, prompt, gen, runs, short] = process.argv.slice(2);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
// Result files are ENGINE-DTYPE-RUN.json, ENGINE being tlaloc, llama (default KV) or llamakv
// (KV in the model's dtype), with "short-" before DTYPE for the short-prompt runs.
const load = (engine, dt) =>
  fs.readdirSync(dir)
    .filter((f) => f.startsWith(`${engine}-${dt}-`) && f.endsWith(".json"))
    .map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")));
// What llama.cpp's context ended up with, as llama_bench.mjs reports it.
const kvName = (js) => {
  if (!js.length) return "?";
  const j = js[0];
  const kv = j.kv_key_type === undefined ? j.kv_type : `${j.kv_key_type}`.toLowerCase();
  return `${kv} KV${j.flash_attention === undefined ? "" : `, FA ${j.flash_attention}`}`;
};
const rows = [];
const shares = [];
for (const dt of dtypes.split(/\s+/).filter(Boolean)) {
  const t = load("tlaloc", dt), l = load("llama", dt), lkv = load("llamakv", dt);
  const ts = load("tlaloc", `short-${dt}`), ls = load("llama", `short-${dt}`);
  const lkvs = load("llamakv", `short-${dt}`);
  if (!t.length || !l.length) continue;
  const metric = (name, key, scale, higherBetter, a, b) => {
    if (!a.length || !b.length) return;
    const x = median(a.map((j) => j[key])) * scale, y = median(b.map((j) => j[key])) * scale;
    rows.push({ dt, name, a: x, b: y, ratio: x / y, higherBetter });
  };
  const dec = "decode_tokens_per_s";
  metric(`prefill ${prompt} tok/s`, "prefill_tokens_per_s", 1, true, t, l);
  metric(`decode ${gen} tok/s after ${prompt} (llama.cpp ${kvName(l)})`, dec, 1, true, t, l);
  metric(`- same, llama.cpp ${kvName(lkv)}`, dec, 1, true, t, lkv);
  metric(`decode ${gen} tok/s after ${short} (llama.cpp ${kvName(ls)})`, dec, 1, true, ts, ls);
  metric(`- same, llama.cpp ${kvName(lkvs)}`, dec, 1, true, ts, lkvs);
  // int8: Tlaloc with q8_0 activations (TLALOC_INT8_ACTIVATIONS=q8_0) against the same runs.
  const tq = load("tlalocq8", dt), tqs = load("tlalocq8", `short-${dt}`);
  const q8 = "Tlaloc q8_0 activations";
  metric(`prefill ${prompt} tok/s, ${q8}`, "prefill_tokens_per_s", 1, true, tq, l);
  metric(`decode ${gen} tok/s after ${prompt}, ${q8} (llama.cpp ${kvName(l)})`, dec, 1, true, tq,
         l);
  metric(`decode ${gen} tok/s after ${short}, ${q8} (llama.cpp ${kvName(ls)})`, dec, 1, true, tqs,
         ls);
  metric("peak RSS MiB", "time_peak_rss_bytes", 1 / 1048576, false, t, l);
  metric("load s", "load_s", 1, false, t, l);
  const f = path.join(dir, `bandwidth-${dt}.json`);
  if (!fs.existsSync(f)) continue;
  const bw = JSON.parse(fs.readFileSync(f, "utf8"));
  if (!bw.machine_read_bytes_per_s) continue;
  // Both engines read the same weights per token (the GGUF holds the same tensors).
  const gb = bw.weight_bytes_per_token / 1e9, peak = bw.machine_read_bytes_per_s / 1e9;
  const share = (js) => {
    if (!js.length) return "-";
    const rate = median(js.map((j) => j[dec])) * gb;
    return `${rate.toFixed(1)} GB/s (${(100 * rate / peak).toFixed(0)}%)`;
  };
  shares.push(`${dt}: decode reads ${gb.toFixed(2)} GB of weights per token; this machine ` +
              `reads ${peak.toFixed(1)} GB/s (${threads} threads, measured in this run).\n` +
              `  decode after ${prompt}: Tlaloc ${share(t)}; llama.cpp ${share(l)}, ` +
              `with ${kvName(lkv)} ${share(lkv)}\n` +
              `  decode after ${short}: Tlaloc ${share(ts)}; llama.cpp ${share(ls)}, ` +
              `with ${kvName(lkvs)} ${share(lkvs)}` +
              (tq.length ? `\n  ${q8}: decode after ${prompt} ${share(tq)}, after ${short} ` +
                           `${share(tqs)}` : ""));
}
console.log(`\nmedians of ${runs} runs, ${threads} threads, results in ${dir}\n`);
for (const line of shares) console.log(line);
console.log("");
console.log("| dtype | figure | Tlaloc | llama.cpp | Tlaloc/llama.cpp |");
console.log("|---|---|---:|---:|---:|");
for (const r of rows)
  console.log(`| ${r.dt} | ${r.name} | ${r.a.toFixed(2)} | ${r.b.toFixed(2)} | ${r.ratio.toFixed(2)}x${r.higherBetter ? "" : " (lower is better)"} |`);
// bench/moe_bench: median wall ms of the MoE block (ragged_dot form) and of the dense SwiGLU of
// the same active width, per token count.
const moeFile = path.join(dir, "moe_layer.json");
if (fs.existsSync(moeFile)) {
  const bms = JSON.parse(fs.readFileSync(moeFile, "utf8")).benchmarks
    .filter((b) => (b.run_type || "iteration") === "iteration");
  const ms = (prefix) => {
    const xs = bms.filter((b) => b.name.startsWith(prefix)).map((b) => b.real_time);
    return xs.length ? median(xs) : NaN;
  };
  console.log("\nMoE block / dense SwiGLU of the same active parameters (bench/moe_bench: " +
              "Qwen3-30B-A3B widths, ragged_dot form, median wall ms):\n");
  console.log("| dtype | tokens | MoE block ms | dense MLP (width 6144) ms | MoE/dense |");
  console.log("|---|---:|---:|---:|---:|");
  for (const [dt, suffix] of [["f32", ""], ["bf16", "Bf16"]]) {
    for (const n of [1, 16, 256]) {
      const a = ms(`BM_MoeForm${suffix}/1/${n}/`), b = ms(`BM_DenseMlp${suffix}/tokens:${n}/`);
      console.log(`| ${dt} | ${n} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(a / b).toFixed(2)}x |`);
    }
  }
}
EOF
