#!/usr/bin/env bash
# Tlaloc's interpreter against XLA's own CPU compiler (XLA:CPU, the lammps-jax-pjrt-cpu PJRT
# plugin in the checkout's venv, `--target xla-cpu`) on the same programs, model, dtype and
# threads, alternating in one run (issue 34's "speed" anchor: what a JAX user gets on this CPU):
#
#   bash bench/compare_xla.sh [--runs R] [--threads T] [--prompt-tokens N] [--new-tokens M]
#                             [--models "qwen3-0.6b"] [--dtypes "bf16 f32"]
#                             [--moe qwen3-30b-a3b-2l] [--moe-dtypes bf16]
#                             [--train-preset tiny] [--train-steps S] [--batch B] [--seq-len L]
#                             [--work DIR] [--tlaloc BIN]
#
# Rows: each --models preset in each --dtypes, and the --moe preset in each --moe-dtypes, by
# `tlaloc bench --target interp|xla-cpu --json` (random weights, real shapes, a random prompt of
# N tokens then M greedy tokens): prefill and decode tokens/s; then the --train-preset's train
# step by `tlaloc finetune --target interp|xla-cpu` on a small seeded JSONL: the median step
# time over steps 2..S (step 1 compiles), as tokens/s. XLA's compile time is excluded from every
# figure (`tlaloc bench` reports it apart: the compile column) as it is from the interpreter's.
# The table gives medians of R runs and interp / XLA:CPU (above 1: the interpreter is faster).
#
# Threads: the interpreter takes --threads T (TLALOC_NUM_THREADS for finetune). XLA:CPU's PJRT
# plugin has no thread-count option (its create options are cpu_device_count and the like), and
# XLA_FLAGS=--xla_cpu_multi_thread_eigen=false gives 1 thread, not T. So both engines run under
# `taskset -c` on the first T CPUs the script may use: T cores each. Counted on lammps-jax-pjrt-cpu
# 0.11.2: XLA's parallel-for pool (tf_foreach) follows the affinity (1 thread on 1 CPU, 2 on 2),
# its Eigen pool (tf_XLAEigen) keeps 4 threads (one per client device), which then share the T
# CPUs; NPROC and TLALOC_CPU_DEVICES=1 change neither.
# --moe none or --train-preset none leaves that row out. XLA:CPU refuses chlo.ragged_dot, so on
# it the MoE experts run as Tlaloc's expansion (a dot over a one-hot group mask: G times the
# expert arithmetic, docs/PJRT.md); the MoE row measures that, the program a JAX user's
# ragged_dot falls back to on XLA:CPU as well.
# Defaults: 3 runs, 2 threads, prefill 512 and 32 new tokens, qwen3-0.6b in bf16 and f32,
# qwen3-30b-a3b-2l in bf16, tiny's train step over 8 steps of 4 x 128 tokens; a quick look:
#   bash bench/compare_xla.sh --runs 1 --models tiny --dtypes f32 --moe tiny-moe \
#     --prompt-tokens 32 --new-tokens 8 --train-steps 3 --batch 2 --seq-len 32
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COMMAND="bash bench/compare_xla.sh $*"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck source=bench/bench_lib.sh
source "$ROOT/bench/bench_lib.sh"
RUNS=3 THREADS=2 PROMPT=512 NEW=32
MODELS="qwen3-0.6b" DTYPES="bf16 f32" MOE="qwen3-30b-a3b-2l" MOE_DTYPES="bf16"
TRAIN=tiny STEPS=8 BATCH=4 SEQ=128
WORK="${TMPDIR:-/tmp}/tlaloc-compare-xla"
TLALOC=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --prompt-tokens) PROMPT="$2"; shift 2 ;;
    --new-tokens) NEW="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --dtypes) DTYPES="$2"; shift 2 ;;
    --moe) MOE="$2"; shift 2 ;;
    --moe-dtypes) MOE_DTYPES="$2"; shift 2 ;;
    --train-preset) TRAIN="$2"; shift 2 ;;
    --train-steps) STEPS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --seq-len) SEQ="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tlaloc) TLALOC="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "compare_xla.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$STEPS" -ge 2 ]] || { echo "compare_xla.sh: --train-steps must be at least 2 (step 1 compiles)" >&2; exit 2; }
TLALOC=$(bench_tlaloc compare_xla.sh "$TLALOC")
PYTHON=$(bench_python compare_xla.sh json)
# The XLA:CPU plugin as --target xla-cpu resolves it; without it there is nothing to compare.
PLUGIN=$("$TLALOC" doctor --target xla-cpu 2>&1 | sed -n 's/^target xla-cpu: //p' | head -n 1)
if [[ -z "$PLUGIN" || "$PLUGIN" == "NOT FOUND" ]]; then
  echo "compare_xla.sh: no XLA:CPU plugin resolves (tlaloc doctor --target xla-cpu; run scripts/setup.sh)" >&2
  exit 1
fi
TOKENIZER="$ROOT/data/qwen3/tokenizer.json"
[[ -f "$TOKENIZER" ]] || { echo "compare_xla.sh: $TOKENIZER is missing" >&2; exit 1; }

# The first THREADS CPUs this process may run on: both engines are pinned to them.
CPUS=$("$PYTHON" -c 'import os, sys; print(",".join(map(str, sorted(os.sched_getaffinity(0))[:int(sys.argv[1])])))' "$THREADS")
[[ $(tr ',' '\n' <<<"$CPUS" | wc -l) -eq "$THREADS" ]] ||
  { echo "compare_xla.sh: --threads $THREADS but this process may run on CPUs $CPUS only" >&2; exit 2; }
PIN=(taskset -c "$CPUS")

mkdir -p "$WORK"
RESULTS="$WORK/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RESULTS"

model_dir() {  # model_dir PRESET DTYPE: creates the preset once (random weights) and names it
  local dir="$WORK/$1-$2"
  if [[ ! -f "$dir/config.json" ]]; then
    echo "== creating the $1 preset ($2) in $dir" >&2
    "$TLALOC" init-model --preset "$1" --dtype "$2" --seed 1 --tokenizer "$TOKENIZER" "$dir" >&2
  fi
  echo "$dir"
}

run_bench() {  # run_bench TARGET MODEL DTYPE OUT.json
  echo "== $(basename "$2") on $1" >&2
  "${PIN[@]}" "$TLALOC" bench --target "$1" --model "$2" --dtype "$3" --prompt-tokens "$PROMPT" \
    --new-tokens "$NEW" --threads "$THREADS" --json --no-probes >"$4.raw" 2>"$4.log" ||
    { cat "$4.log" >&2; exit 1; }
  tail -n 1 "$4.raw" >"$4"
}

# Generation rows: ROW-TARGET-RUN.json; the order alternates run by run.
ROWS=""
for spec in $(for m in $MODELS; do for d in $DTYPES; do echo "$m:$d"; done; done) \
  $([[ "$MOE" == none ]] || for d in $MOE_DTYPES; do echo "$MOE:$d"; done); do
  preset=${spec%%:*} dt=${spec#*:}
  model=$(model_dir "$preset" "$dt")
  cat "$model"/*.safetensors >/dev/null  # from the page cache for both engines
  for ((r = 1; r <= RUNS; r++)); do
    order=(interp xla-cpu)
    ((r % 2)) || order=(xla-cpu interp)
    for t in "${order[@]}"; do run_bench "$t" "$model" "$dt" "$RESULTS/$preset-$dt-$t-$r.json"; done
  done
  ROWS="$ROWS $preset-$dt"
done

# The train step: the same seeded documents, model and batch on both targets.
if [[ "$TRAIN" != none ]]; then
  model=$(model_dir "$TRAIN" f32)
  data="$WORK/train.jsonl"
  "$PYTHON" - "$data" <<'PY'
import json, random, sys
rng = random.Random(7)
words = ("the model reads every weight once per token and the cache holds keys and values for "
         "each layer while training updates moments of the optimizer across steps of data").split()
with open(sys.argv[1], "w") as f:
    for _ in range(48):
        f.write(json.dumps({"text": " ".join(rng.choice(words) for _ in range(400))}) + "\n")
PY
  for ((r = 1; r <= RUNS; r++)); do
    order=(interp xla-cpu)
    ((r % 2)) || order=(xla-cpu interp)
    for t in "${order[@]}"; do
      out="$RESULTS/train-$t-$r"
      echo "== $TRAIN train step on $t" >&2
      TLALOC_NUM_THREADS=$THREADS "${PIN[@]}" "$TLALOC" finetune --target "$t" --model "$model" \
        --data "$data" --out "$out" --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ" \
        --print-every 1000 >"$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
    done
  done
fi

echo
echo "CPU: $(bench_cpu) ($(nproc) cores); both engines pinned to CPUs $CPUS (taskset);" \
  "load average before $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command: $COMMAND"
echo "XLA:CPU: $PLUGIN"
"$PYTHON" - "$RESULTS" "$ROWS" "$TRAIN" "$RUNS" "$THREADS" "$PROMPT" "$NEW" "$STEPS" "$BATCH" "$SEQ" <<'EOF'
import json, os, statistics, sys
results, rows, train, runs, threads, prompt, new, steps, batch, seq = sys.argv[1:]
runs, batch, seq = int(runs), int(batch), int(seq)


def bench(row, target, key):
    """The figure `key` of every run's `tlaloc bench --json` for ROW on TARGET."""
    out = []
    for r in range(1, runs + 1):
        with open(os.path.join(results, f"{row}-{target}-{r}.json")) as fh:
            out.append(json.load(fh)[key])
    return out


def train_rates(target):
    """Tokens/s of each run: batch x seq over the median step time of steps 2.. (step 1
    compiles XLA's program and warms the interpreter's plans)."""
    out = []
    for r in range(1, runs + 1):
        with open(os.path.join(results, f"train-{target}-{r}", "loss_log.jsonl")) as fh:
            secs = [json.loads(line)["seconds"] for line in fh if json.loads(line)["step"] > 1]
        out.append(batch * seq / statistics.median(secs))
    return out


table = []
for row in rows.split():
    for name, key in ((f"prefill {prompt} tok/s", "prefill_tokens_per_s"),
                      (f"decode {new} tok/s", "decode_tokens_per_s")):
        a, b = bench(row, "interp", key), bench(row, "xla-cpu", key)
        compile_s = statistics.median(bench(row, "xla-cpu", "compile_s"))
        table.append((row, name, statistics.median(a), statistics.median(b), compile_s))
if train != "none":
    a, b = train_rates("interp"), train_rates("xla-cpu")
    table.append((f"{train}-f32", f"train step {batch}x{seq} tok/s (steps 2..{steps})",
                  statistics.median(a), statistics.median(b), float("nan")))

print(f"\nmedians of {runs} runs, {threads} threads each, results in {results}\n")
print("| model | figure | interp | XLA:CPU | interp / XLA:CPU | XLA compile s |")
print("|---|---|---:|---:|---:|---:|")
for row, name, a, b, c in table:
    ratio = a / b if b > 0 else float("nan")
    comp = "-" if c != c else f"{c:.1f}"
    print(f"| {row} | {name} | {a:.2f} | {b:.2f} | {ratio:.2f}x | {comp} |")
EOF
