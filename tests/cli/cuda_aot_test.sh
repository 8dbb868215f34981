#!/usr/bin/env bash
# `tlaloc aot --plugin cuda` with the venv's jax-cuda13-pjrt on a machine without a GPU
# (docs/BRINGUP.md, "XLA:CUDA on a machine without a GPU"): the plugin's own H100 target config
# (scripts/bringup/cuda_target_config.py) makes PJRT_TopologyDescription_Create deviceless, and
# programs recorded from real runs (finetune-demo's train step, eval loss, prefill and decode on
# one device; the dp plan's per-device train step and tensor-parallel generation on two) compile
# for 1x1x1 and 1x1x2 with no refusal. Without the target config the plugin's refusal is named.
# Skips (exit 77) without jax_plugins.xla_cuda13 in the venv; fails under CI=true.
# Usage: cuda_aot_test.sh TLALOC PLUGIN SOURCE_DIR
set -euo pipefail
tlaloc=$1 plugin=$2 source_dir=$3
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" jax_plugins.xla_cuda13
venv=$("$ORACLE_PYTHON" -c 'import sys; print(sys.prefix)')
so=$("$ORACLE_PYTHON" -c 'import jax_plugins.xla_cuda13 as m, os; print(os.path.join(os.path.dirname(m.__file__), "xla_cuda_plugin.so"))')
start_cli_test

run() {  # run LOG COMMAND...: the command's output goes to $work/LOG, shown when it fails
  local log=$1
  shift
  if ! "$@" >"$work/$log" 2>&1; then
    fail "$* exited non-zero: $(tail -5 "$work/$log")"
    exit 1
  fi
}

run config.log "$ORACLE_PYTHON" "$source_dir/scripts/bringup/cuda_target_config.py" \
  --plugin "$so" --device "NVIDIA H100 80GB HBM3" --out "$work/h100.txtpb"
grep -q 'major: 9' "$work/h100.txtpb" || fail "the H100 target config has no compute capability 9"

TLALOC_PROGRAMS_DIR=$work/one run demo.log "$tlaloc" finetune-demo --out "$work/demo" \
  --target "$plugin" --steps 1 --train-size 16 --held-out 1 --batch 2 --seq-len 32
TLALOC_PROGRAMS_DIR=$work/two run dp.log "$tlaloc" finetune --model "$work/demo/base" \
  --data "$work/demo/train.jsonl" --steps 1 --batch 4 --seq-len 32 --mesh data=2 --plan dp \
  --target "$plugin" --out "$work/dp"
TLALOC_PROGRAMS_DIR=$work/two run tp.log "$tlaloc" generate -m "$work/demo/base" -p ab -n 2 \
  --mesh model=2 --target "$plugin"

export VIRTUAL_ENV=$venv
check_summary() {  # check_summary FOLDER TOPOLOGY AOT_OUT: every program compiled
  local dir=$1 topology=$2 out=$3 summary=$3/summary.tsv want ok
  want=$(wc -l <"$dir/index.tsv")
  [ "$want" -ge 2 ] || fail "$dir recorded $want program(s), expected at least 2"
  [ -s "$summary" ] || { fail "$topology: no $summary"; return; }
  ok=$(awk -F'\t' 'NR > 1 && $11 == "ok" && $6 > 0 && $10 > 0' "$summary" | wc -l)
  [ "$ok" = "$want" ] || fail "$topology: $ok of $want programs compiled: $(cat "$summary") $(cat "$out"/errors/* 2>/dev/null | head -c 2000)"
  grep -q "platform cuda" "$out.log" || fail "$topology: the plugin's platform is not cuda: $(tail -1 "$out.log")"
  grep -q "deviceless compilation" "$out.log" ||
    fail "$topology: XLA:CUDA did not say it compiled deviceless: $(grep -v '^WARNING' "$out.log" | head -3)"
}
for t in "one 1x1x1" "two 1x1x2"; do
  read -r dir topology <<<"$t"
  "$tlaloc" aot --plugin cuda --topology "$topology" --target-config "$work/h100.txtpb" \
    --out "$work/aot-$dir" "$work/$dir" >"$work/aot-$dir.log" 2>&1 ||
    fail "aot $topology exited non-zero: $(grep -v '^WARNING' "$work/aot-$dir.log" | tail -5)"
  check_summary "$work/$dir" "$topology" "$work/aot-$dir"
done
[ -n "$(awk -F'\t' 'NR > 1 && $2 == "train_step" && $8 > 0' "$work/aot-one/summary.tsv")" ] ||
  fail "no train step with donated arguments aliased: $(cat "$work/aot-one/summary.tsv")"
[ -n "$(awk -F'\t' 'NR > 1 && $4 == 2 && $5 ~ /all_reduce/' "$work/aot-two/summary.tsv")" ] ||
  fail "1x1x2: no two-partition program with all_reduce: $(cat "$work/aot-two/summary.tsv")"

# Without a target config, the plugin wants a GPU, and says so.
if "$tlaloc" aot --plugin cuda --topology 1x1x1 --out "$work/aot-none" "$work/one" \
  >"$work/aot-none.log" 2>&1; then
  fail "XLA:CUDA created a topology with no GPU and no target config"
fi
grep -q "No visible GPU devices" "$work/aot-none.log" ||
  fail "the refusal without a target config: $(grep -v '^WARNING' "$work/aot-none.log" | tail -3)"

echo "--- 1x1x1 (H100)"
cat "$work/aot-one/summary.tsv"
echo "--- 1x1x2 (H100)"
cat "$work/aot-two/summary.tsv"
[ "$failures" -eq 0 ] || exit 1
echo "PASS"
