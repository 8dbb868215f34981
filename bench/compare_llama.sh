#!/usr/bin/env bash
# Tlaloc's interpreter against llama.cpp built natively for this CPU (llama-cpp-python, built by
# scripts/setup.sh with GGML_NATIVE=ON into third_party_py/) on the same model, dtype, threads and
# machine, in one command:
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
# with `tlaloc export gguf`, then alternates `tlaloc bench --json` and bench/llama_bench.py R
# times (which one goes first alternates too), each under /usr/bin/time -v for peak RSS, and
# prints medians and Tlaloc/llama.cpp ratios for prefill and decode speed, peak RSS and load
# time.
# Both engines are timed as llama-bench times: an untimed warm-up request first (for Tlaloc
# `tlaloc bench`'s default; its first request's prefill rate is printed too), the prompt as one
# batch, decode one token at a time after it. llama.cpp runs with its defaults (f16 KV cache,
# flash attention "auto" as llama.cpp resolves it): that is the main row. A second line per
# decode figure runs it with the KV cache in the model's dtype, as Tlaloc's is (bf16 for int8);
# the f32 model runs in Tlaloc a second time with a bf16 KV cache (--kv-dtype bf16, the "Tlaloc
# bf16 KV" lines), llama.cpp's default f16 cache's match. Decode is measured after the full prompt
# and after a short one (--short-prompt, 4 tokens). Each dtype ends with the rate at which each
# engine reads the weights while decoding, as a share of the machine's read bandwidth measured
# by `tlaloc probe` just before each timed run (the median of the runs' shares; the probes'
# range is printed, a wide one says the machine's memory was not steady).
# The int8 row quantizes the bf16 preset with `tlaloc quantize --dtype int8` and exports it as
# GGUF Q8_0 (the same blocks): Tlaloc int8 (bf16 activations and KV cache) against llama.cpp
# Q8_0, in the exact form (--int8-form exact) and again in the default q8_0 form (activations
# rounded to 8 bits per block as llama.cpp does, VNNI products): the "q8_0 activations" lines.
# Defaults: 3 runs, 512 prompt tokens, 128 new tokens, 2 threads, qwen3-0.6b; a quick look:
#   bash bench/compare_llama.sh --runs 1 --prompt-tokens 64 --new-tokens 16
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="bash bench/compare_llama.sh $*"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
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
PYTHON=$(bench_python compare_llama.sh llama_cpp)
[[ -x /usr/bin/time ]] || { echo "compare_llama.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

# tlaloc bench itself re-runs with the OpenBLAS core type this CPU fits (see its stderr), so a
# forced or mis-detected OPENBLAS_CORETYPE does not measure old kernels.

mkdir -p "$WORK"
RESULTS="$WORK/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"

# Runs a command under /usr/bin/time -v; its stdout (one JSON line) gets the measured peak RSS
# added as time_peak_rss_bytes and goes to $1. Just before it, `tlaloc probe` reads the machine's
# bandwidth into $1.probe (under a second): this VM's read bandwidth swings between moments
# (34.9 and 58.1 GB/s in one run), so each run's decode is divided by the probe next to it.
measure() {
  local out="$1"; shift
  local timing="$out.time"
  "$TLALOC" probe --json --threads "$THREADS" > "$out.probe"
  /usr/bin/time -v -o "$timing" "$@" > "$out.raw"
  local kib
  kib="$(awk -F': ' '/Maximum resident set size/ {print $2}' "$timing")"
  "$PYTHON" -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
j["time_peak_rss_bytes"] = int(sys.argv[2]) * 1024
open(sys.argv[3], "w").write(json.dumps(j) + "\n")' "$out.raw" "$kib" "$out"
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
      # int8: the exact form here (dequantised weights), the q8_0 form (the default since the
      # composite tlaloc.int8_linear: activations rounded as llama.cpp's Q8_0, VNNI) below.
      local exact=()
      [[ "$dt" == int8 ]] && exact=(--int8-form exact)
      measure "$RESULTS/tlaloc-$1$tag-$r.json" "$TLALOC" bench --model "$model" "${dtype_flag[@]}" \
        "${exact[@]}" --prompt-tokens "$2" --new-tokens "$NEW" --threads "$THREADS" --seed "$r" \
        --json --no-probes  # the probe's buffer would count in the peak RSS /usr/bin/time sees
      if [[ "$dt" == int8 ]]; then
        echo "== run $r/$RUNS $tag ${2}-token prompt: tlaloc, --int8-form q8_0" >&2
        measure "$RESULTS/tlalocq8-$1$tag-$r.json" "$TLALOC" bench --int8-form q8_0 \
          --model "$model" --prompt-tokens "$2" --new-tokens "$NEW" --threads "$THREADS" \
          --seed "$r" --json --no-probes
      fi
      if [[ "$dt" == f32 ]]; then
        echo "== run $r/$RUNS $tag ${2}-token prompt: tlaloc, --kv-dtype bf16" >&2
        measure "$RESULTS/tlalockv-$1$tag-$r.json" "$TLALOC" bench --kv-dtype bf16 \
          --model "$model" "${dtype_flag[@]}" --prompt-tokens "$2" --new-tokens "$NEW" \
          --threads "$THREADS" --seed "$r" --json --no-probes
      fi
    }
    # llama.cpp with its default KV cache and attention, then with the KV cache in $kv.
    run_llama() {
      echo "== run $r/$RUNS $tag ${2}-token prompt: llama.cpp (default KV, then $kv KV)" >&2
      measure "$RESULTS/llama-$1$tag-$r.json" "$PYTHON" "$ROOT/bench/llama_bench.py" \
        --model "$gguf" --threads "$THREADS" --prompt-tokens "$2" --new-tokens "$NEW" \
        --kv default --seed "$r"
      measure "$RESULTS/llamakv-$1$tag-$r.json" "$PYTHON" "$ROOT/bench/llama_bench.py" \
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
  # The machine's read bandwidth and multiply-add peak, once per dtype, for decode's and
  # prefill's shares of them.
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

echo
echo "CPU: $(bench_cpu) ($(nproc) cores);" \
  "load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command: $COMMAND"
echo "llama.cpp: $(bench_llama_cpp "$PYTHON")"
"$PYTHON" - "$RESULTS" "$TAGS" "$THREADS" "$PROMPT" "$NEW" "$RUNS" "$SHORT" <<'EOF'
import json, os, statistics, sys
results, tags, threads, prompt, gen, runs, short = sys.argv[1:]


def load(engine, dt):
    """Result files are ENGINE-DTYPE-RUN.json, ENGINE being tlaloc, tlalocq8 (int8 with q8_0
    activations), tlalockv (f32 with a bf16 KV cache), llama (default KV) or llamakv (KV in the
    model's dtype), with "short-" before
    DTYPE for the short-prompt runs."""
    out = []
    for f in sorted(os.listdir(results)):
        if f.startswith(f"{engine}-{dt}-") and f.endswith(".json") and f[len(engine) + len(dt) + 2:-5].isdigit():
            with open(os.path.join(results, f)) as fh:
                j = json.loads(fh.read())
            probe = os.path.join(results, f + ".probe")
            if os.path.exists(probe):
                with open(probe) as fh:
                    j["probe_read_bytes_per_s"] = json.load(fh)["read_bytes_per_s"]["median"]
            out.append(j)
    return out


def kv_name(js):
    """What llama.cpp's context ended up with, as llama_bench.py reports it."""
    if not js:
        return "?"
    j = js[0]
    return f"{j.get('kv_key_type', j.get('kv_type'))} KV, FA {j.get('flash_attention', '?')}"


rows, shares = [], []
dec = "decode_tokens_per_s"
for dt in tags.split():
    t, l, lkv = load("tlaloc", dt), load("llama", dt), load("llamakv", dt)
    ts, ls, lkvs = load("tlaloc", f"short-{dt}"), load("llama", f"short-{dt}"), load("llamakv", f"short-{dt}")
    tq, tqs = load("tlalocq8", dt), load("tlalocq8", f"short-{dt}")
    tk, tks = load("tlalockv", dt), load("tlalockv", f"short-{dt}")
    if not t or not l:
        continue

    def metric(name, key, scale, higher_better, a, b):
        if a and b:
            x = statistics.median(j[key] for j in a) * scale
            y = statistics.median(j[key] for j in b) * scale
            rows.append((dt, name, x, y, x / y, higher_better))

    metric(f"prefill {prompt} tok/s", "prefill_tokens_per_s", 1, True, t, l)
    metric(f"decode {gen} tok/s after {prompt} (llama.cpp {kv_name(l)})", dec, 1, True, t, l)
    metric(f"- same, llama.cpp {kv_name(lkv)}", dec, 1, True, t, lkv)
    metric(f"decode {gen} tok/s after {short} (llama.cpp {kv_name(ls)})", dec, 1, True, ts, ls)
    metric(f"- same, llama.cpp {kv_name(lkvs)}", dec, 1, True, ts, lkvs)
    q8 = "Tlaloc q8_0 activations"
    metric(f"prefill {prompt} tok/s, {q8}", "prefill_tokens_per_s", 1, True, tq, l)
    metric(f"decode {gen} tok/s after {prompt}, {q8} (llama.cpp {kv_name(l)})", dec, 1, True, tq, l)
    metric(f"decode {gen} tok/s after {short}, {q8} (llama.cpp {kv_name(ls)})", dec, 1, True, tqs, ls)
    bkv = "Tlaloc bf16 KV"
    metric(f"prefill {prompt} tok/s, {bkv}", "prefill_tokens_per_s", 1, True, tk, l)
    metric(f"decode {gen} tok/s after {prompt}, {bkv} (llama.cpp {kv_name(l)})", dec, 1, True, tk, l)
    metric(f"decode {gen} tok/s after {short}, {bkv} (llama.cpp {kv_name(ls)})", dec, 1, True, tks, ls)
    metric("peak RSS MiB", "time_peak_rss_bytes", 1 / 1048576, False, t, l)
    metric(f"peak RSS MiB, {q8}", "time_peak_rss_bytes", 1 / 1048576, False, tq, l)
    metric(f"peak RSS MiB, {bkv}", "time_peak_rss_bytes", 1 / 1048576, False, tk, l)
    metric("load s", "load_s", 1, False, t, l)
    f = os.path.join(results, f"bandwidth-{dt}.json")
    if not os.path.exists(f):
        continue
    with open(f) as fh:
        bw = json.load(fh)
    if not bw.get("machine_read_bytes_per_s"):
        continue
    # Both engines read the same weights per token (the GGUF holds the same tensors).
    gb, peak = bw["weight_bytes_per_token"] / 1e9, bw["machine_read_bytes_per_s"] / 1e9
    # The probes taken just before each timed run of this dtype (measure()).
    probes = [j["probe_read_bytes_per_s"] / 1e9 for js in (t, l, lkv, ts, ls, lkvs, tq, tqs, tk, tks)
              for j in js if j.get("probe_read_bytes_per_s")]

    def share(js):
        """The median run's rate, as a share of the median of each run's own probe."""
        if not js:
            return "-"
        rate = statistics.median(j[dec] for j in js) * gb
        own = [j[dec] * gb / (j["probe_read_bytes_per_s"] / 1e9) for j in js
               if j.get("probe_read_bytes_per_s")]
        pct = statistics.median(own) if own else rate / peak
        return f"{rate:.1f} GB/s ({100 * pct:.0f}%)"

    measured = (f"{statistics.median(probes):.1f} GB/s (median of {len(probes)} probes, one "
                f"before each timed run, {min(probes):.1f} to {max(probes):.1f})" if probes
                else f"{peak:.1f} GB/s (measured once in this run)")
    text = (f"{dt}: decode reads {gb:.2f} GB of weights per token; this machine reads "
            f"{measured}, {threads} threads; each share divides a run by its own probe.\n"
            f"  decode after {prompt}: Tlaloc {share(t)}; llama.cpp {share(l)}, "
            f"with {kv_name(lkv)} {share(lkv)}\n"
            f"  decode after {short}: Tlaloc {share(ts)}; llama.cpp {share(ls)}, "
            f"with {kv_name(lkvs)} {share(lkvs)}")
    if tq:
        text += f"\n  {q8}: decode after {prompt} {share(tq)}, after {short} {share(tqs)}"
    if tk:
        text += f"\n  {bkv}: decode after {prompt} {share(tk)}, after {short} {share(tks)}"
    # Prefill's multiply-adds per token (the same model for both engines) against the peak of
    # the units Tlaloc's products use, probed in the same run (tlaloc bench).
    peak_flops = bw.get("machine_peak_flops_per_s")
    per_token = t[0].get("prefill_flops_per_token") if t else None
    if peak_flops and per_token:

        def peak_share(js):
            if not js:
                return "-"
            rate = statistics.median(j["prefill_tokens_per_s"] for j in js) * per_token
            return f"{rate / 1e9:.1f} GFLOP/s ({100 * rate / peak_flops:.0f}%)"

        text += (f"\n  prefill {prompt}: {per_token / 1e9:.2f} GFLOP per token; the peak of "
                 f"{bw.get('machine_peak_unit', '?')} here is {peak_flops / 1e9:.1f} GFLOP/s: "
                 f"Tlaloc {peak_share(t)}; llama.cpp {peak_share(l)}")
        if tq:
            text += f"; {q8} {peak_share(tq)}"
    # Both engines are timed after one untimed warm-up request; Tlaloc's warm-up is timed too.
    first = [j["first_prefill_tokens_per_s"] for j in t if j.get("first_prefill_tokens_per_s")]
    if first:
        text += (f"\n  prefill {prompt}, Tlaloc's first (warm-up) request: "
                 f"{statistics.median(first):.1f} tok/s (timed: "
                 f"{statistics.median(j['prefill_tokens_per_s'] for j in t):.1f})")
    shares.append(text)

print(f"\nmedians of {runs} runs, {threads} threads, results in {results}\n")
for line in shares:
    print(line)
print("")
print("| dtype | figure | Tlaloc | llama.cpp | Tlaloc/llama.cpp |")
print("|---|---|---:|---:|---:|")
for dt, name, a, b, ratio, higher_better in rows:
    print(f"| {dt} | {name} | {a:.2f} | {b:.2f} | {ratio:.2f}x{'' if higher_better else ' (lower is better)'} |")

# bench/moe_bench: median wall ms of the MoE block (ragged_dot form) and of the dense SwiGLU of
# the same active width, per token count.
moe_file = os.path.join(results, "moe_layer.json")
if os.path.exists(moe_file):
    with open(moe_file) as fh:
        bms = [b for b in json.load(fh)["benchmarks"] if b.get("run_type", "iteration") == "iteration"]

    def ms(prefix):
        xs = [b["real_time"] for b in bms if b["name"].startswith(prefix)]
        return statistics.median(xs) if xs else float("nan")

    print("\nMoE block / dense SwiGLU of the same active parameters (bench/moe_bench: "
          "Qwen3-30B-A3B widths, ragged_dot form, median wall ms):\n")
    print("| dtype | tokens | MoE block ms | dense MLP (width 6144) ms | MoE/dense |")
    print("|---|---:|---:|---:|---:|")
    for dt, suffix in (("f32", ""), ("bf16", "Bf16")):
        for n in (1, 16, 256):
            a, b = ms(f"BM_MoeForm{suffix}/1/{n}/"), ms(f"BM_DenseMlp{suffix}/tokens:{n}/")
            print(f"| {dt} | {n} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")
EOF
