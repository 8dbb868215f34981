#!/usr/bin/env bash
# Training throughput: `tlaloc finetune` against the same fine-tune in PyTorch 2.x (the venv's
# torch, third_party_py/, made by scripts/setup.sh), both eager and with torch.compile (inductor
# on the CPU, its C++ kernels built with the system's g++), plain cross-entropy over the whole
# vocabulary, AdamW (bench/torch_finetune.py); same model, same token ids, same batch shape, same
# threads, alternating in one run:
#
#   bash bench/finetune_vs_torch.sh [--runs R] [--steps S] [--batch B] [--seq-len L]
#                                   [--threads T] [--preset tiny] [--torch-modes "eager compile"]
#                                   [--work DIR] [--tlaloc BIN] [--baseline BIN]
#
# The model is an init-model preset (default tiny: hidden 64, 2 layers, the real 151,936-id
# vocabulary, f32) with the Qwen3 tokenizer in data/qwen3/. Each side's figure is the median step
# time over steps 2..S (step 1 compiles or warms up; torch.compile's compile time is left out
# the same way and shown apart), as tokens/s; the script prints the medians over the runs and
# Tlaloc/PyTorch for each PyTorch mode. If torch.compile fails, its row says why. TLALOC_PROFILE=1
# on one extra Tlaloc run breaks its step time down by op kind (profile.txt in the results
# folder). Defaults: 3 runs of 12 steps of 4 x 128 tokens on 2 threads; a quick look:
#   bash bench/finetune_vs_torch.sh --runs 1 --steps 4 --batch 1 --seq-len 32
# --baseline BIN adds another Tlaloc binary (an earlier build) to the rotation, as its own row
# (before/after figures of a change in one run).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="bash bench/finetune_vs_torch.sh $*"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
RUNS=3 STEPS=12 BATCH=4 SEQ=128 THREADS=2 PRESET=tiny MODES="eager compile"
WORK="${TMPDIR:-/tmp}/tlaloc-finetune-vs-torch"
TLALOC="" BASELINE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq-len) SEQ="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --preset) PRESET="$2"; shift 2 ;;
    --torch-modes) MODES="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tlaloc) TLALOC="$2"; shift 2 ;;
    --baseline) BASELINE="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "finetune_vs_torch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in RUNS STEPS BATCH SEQ THREADS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] ||
    { echo "finetune_vs_torch.sh: $v ${!v}: expected a positive integer" >&2; exit 2; }
done
(( STEPS >= 3 )) || { echo "finetune_vs_torch.sh: --steps must be at least 3" >&2; exit 2; }
for m in $MODES; do
  [[ "$m" == eager || "$m" == compile ]] ||
    { echo "finetune_vs_torch.sh: --torch-modes \"$MODES\": expected eager and/or compile" >&2; exit 2; }
done
TLALOC=$(bench_tlaloc finetune_vs_torch.sh "$TLALOC")
[[ -z "$BASELINE" || -x "$BASELINE" ]] ||
  { echo "finetune_vs_torch.sh: --baseline $BASELINE: not an executable" >&2; exit 2; }
PYTHON=$(bench_python finetune_vs_torch.sh torch numpy)
TORCH_VERSION=$("$PYTHON" -c 'import torch; print(torch.__version__)')
TOKENIZER="$ROOT/data/qwen3/tokenizer.json"
[[ -f "$TOKENIZER" ]] || { echo "finetune_vs_torch.sh: $TOKENIZER is missing" >&2; exit 1; }

RESULTS="$WORK/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"
MODEL="$WORK/model-$PRESET"
[[ -f "$MODEL/config.json" ]] ||
  "$TLALOC" init-model --preset "$PRESET" --dtype f32 --seed 1 --tokenizer "$TOKENIZER" "$MODEL" >/dev/null

# The documents: seeded pseudo-English, as {"text"} rows for Tlaloc and as token ids (each
# document followed by end-of-text, as Tlaloc packs them) for PyTorch.
DATA="$WORK/data.jsonl" IDS="$WORK/ids.txt"
if [[ ! -f "$IDS" ]]; then
  "$PYTHON" - "$DATA" <<'PY'
import json, random, sys
rng = random.Random(7)
words = ("the model reads every weight once per token and the cache holds keys and values for "
         "each layer while training updates moments of the optimizer across steps of data").split()
with open(sys.argv[1], "w") as f:
    for _ in range(24):
        f.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(400))}) + "\n")
PY
  eot=$("$TLALOC" tokenize --tokenizer "$TOKENIZER" --ids '<|endoftext|>')
  : >"$IDS.tmp"
  while IFS= read -r line; do
    text=$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["text"])' "$line")
    { "$TLALOC" tokenize --tokenizer "$TOKENIZER" --ids "$text"; echo "$eot"; } >>"$IDS.tmp"
  done <"$DATA"
  mv "$IDS.tmp" "$IDS"
fi

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run_tlaloc() {  # run_tlaloc BIN NAME OUT_DIR: appends the median step seconds over steps 2..S to NAME.txt
  rm -rf "$3"
  TLALOC_NUM_THREADS=$THREADS "$1" finetune --model "$MODEL" --data "$DATA" --out "$3" \
    --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ" --print-every 1000 >"$3.log" 2>&1 ||
    { cat "$3.log" >&2; exit 1; }
  "$PYTHON" -c 'import json,sys; print("\n".join(str(json.loads(l)["seconds"]) for l in open(sys.argv[1]) if json.loads(l)["step"] > 1))' \
    "$3/loss_log.jsonl" | median >>"$RESULTS/$2.txt"
}
run_torch() {  # run_torch MODE OUT.json: appends the median step seconds over steps 2..S to MODE.txt
  local rc=0
  "$PYTHON" "$ROOT/bench/torch_finetune.py" "$MODEL" "$IDS" "$STEPS" "$BATCH" "$SEQ" "$THREADS" \
    "$2" "$1" >"$2.log" 2>&1 || rc=$?
  if ((rc == 3)); then  # torch.compile failed: its reason goes in the table, the run goes on
    "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"])' "$2" >"$RESULTS/$1.error"
    echo "torch.compile failed (log: $2.log): $(cat "$RESULTS/$1.error")" >&2
    return 0
  fi
  ((rc == 0)) || { cat "$2.log" >&2; exit 1; }
  "$PYTHON" -c 'import json,sys; print("\n".join(str(s) for s in json.load(open(sys.argv[1]))["step_seconds"][1:]))' "$2" |
    median >>"$RESULTS/$1.txt"
  "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_seconds"][0])' "$2" >>"$RESULTS/$1.first.txt"
}

: >"$RESULTS/tlaloc.txt"
[[ -z "$BASELINE" ]] || : >"$RESULTS/baseline.txt"
for m in $MODES; do : >"$RESULTS/$m.txt"; : >"$RESULTS/$m.first.txt"; done
for ((r = 1; r <= RUNS; r++)); do
  # Which engine goes first rotates from run to run.
  read -r -a engines <<<"tlaloc ${BASELINE:+baseline} $MODES"
  for ((i = 0; i < ${#engines[@]}; i++)); do
    e=${engines[$(((i + r - 1) % ${#engines[@]}))]}
    if [[ "$e" == tlaloc ]]; then
      run_tlaloc "$TLALOC" tlaloc "$RESULTS/tlaloc-$r"
    elif [[ "$e" == baseline ]]; then
      run_tlaloc "$BASELINE" baseline "$RESULTS/baseline-$r"
    else
      run_torch "$e" "$RESULTS/torch-$e-$r.json"
    fi
  done
  line="run $r: tlaloc $(tail -n1 "$RESULTS/tlaloc.txt") s/step"
  [[ -z "$BASELINE" ]] || line+=", baseline $(tail -n1 "$RESULTS/baseline.txt") s/step"
  for m in $MODES; do line+=", torch $m $(tail -n1 "$RESULTS/$m.txt" 2>/dev/null || true) s/step"; done
  echo "$line" >&2
done
TLALOC_PROFILE=1 TLALOC_NUM_THREADS=$THREADS "$TLALOC" finetune --model "$MODEL" --data "$DATA" \
  --out "$RESULTS/profiled" --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ" --print-every 1000 \
  >"$RESULTS/profile.txt" 2>&1 || true

# The machine on as many pinned threads, for each engine's share of its f32 multiply-add peak.
"$TLALOC" probe --threads "$THREADS" --json >"$RESULTS/probe.json"

echo "CPU: $(bench_cpu) ($(nproc) cores);" \
  "load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command: $COMMAND"
echo "PyTorch: torch $TORCH_VERSION ($PYTHON); inductor's C++ compiler: $(g++ --version 2>/dev/null | head -n1 || echo "no g++")"
echo "Tlaloc: $TLALOC${BASELINE:+; baseline: $BASELINE}"
"$PYTHON" - "$RESULTS" "$MODES" "$((BATCH * SEQ))" "$RUNS" "$THREADS" \
  "$PRESET, batch $BATCH x $SEQ tokens, AdamW, steps 2..$STEPS" "$MODEL/config.json" "$SEQ" \
  <<'PY' | tee "$RESULTS/summary.md"
import json, os, statistics, sys
results, modes, tokens, runs, threads, shape, config_path, seq = sys.argv[1:]
tokens, seq = int(tokens), int(seq)


def train_flops_per_token(c):
    """Multiply-adds (x2) of one trained token: the forward pass (every matrix, the LM head on
    every position, attention's two products over the causal pairs) and a backward pass of twice
    that, as training FLOPs are counted (6 x parameters, plus attention)."""
    h, layers, heads = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kv, d = c["num_key_value_heads"], c.get("head_dim", h // heads)
    moe = "num_experts" in c
    inter = c["moe_intermediate_size"] if moe else c["intermediate_size"]
    active = c.get("num_experts_per_tok", 1) if moe else 1
    per_layer = 2 * h * heads * d + 2 * h * kv * d + 3 * h * inter * active
    if moe:
        per_layer += h * c["num_experts"]
    forward = 2 * (per_layer * layers + c["vocab_size"] * h) + 4 * layers * heads * d * (seq + 1) / 2
    return 3 * forward


def read(name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return []
    return [float(x) for x in open(path).read().split()]


t = statistics.median(read("tlaloc.txt"))
print(f"training throughput ({shape}; {threads} threads; median of {runs} runs)")
print("| engine | s/step | tokens/s | Tlaloc / engine |")
print("|---|---:|---:|---:|")
print(f"| Tlaloc finetune | {t:.4f} | {tokens / t:.0f} | 1.00x |")
if read("baseline.txt"):
    b = statistics.median(read("baseline.txt"))
    print(f"| Tlaloc baseline (--baseline) | {b:.4f} | {tokens / b:.0f} | {b / t:.2f}x |")
names = {"eager": "PyTorch eager", "compile": "PyTorch torch.compile (inductor)"}
for m in modes.split():
    error = os.path.join(results, f"{m}.error")
    if os.path.exists(error):
        print(f"| {names[m]} | failed: {open(error).read().strip()} | - | - |")
        continue
    p = statistics.median(read(f"{m}.txt"))
    first = statistics.median(read(f"{m}.first.txt"))
    note = f" (step 1: {first:.1f} s, compiling)" if m == "compile" else ""
    print(f"| {names[m]}{note} | {p:.4f} | {tokens / p:.0f} | {p / t:.2f}x |")

# Each engine's share of the machine's f32 multiply-add peak, probed in this run.
probe = json.load(open(os.path.join(results, "probe.json")))
peak = probe["peak_flops_per_s"]["f32"]
per_token = train_flops_per_token(json.load(open(config_path)))
print(f"\nshares of the f32 peak ({peak['median'] / 1e9:.1f} GFLOP/s of {peak['what']}, median of "
      f"{peak['passes']} passes, {peak['low'] / 1e9:.1f} to {peak['high'] / 1e9:.1f}; "
      f"{per_token / 1e6:.2f} MFLOP per trained token):")
rows = [("Tlaloc finetune", t)]
if read("baseline.txt"):
    rows.append(("Tlaloc baseline", statistics.median(read("baseline.txt"))))
rows += [(names[m], statistics.median(read(f"{m}.txt"))) for m in modes.split() if read(f"{m}.txt")]
for name, seconds in rows:
    rate = tokens / seconds * per_token
    print(f"- {name}: {rate / 1e9:.2f} GFLOP/s, {100 * rate / peak['median']:.1f}%")
PY
echo "per-op breakdown of Tlaloc's step: $RESULTS/profile.txt" >&2
