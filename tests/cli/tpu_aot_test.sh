#!/usr/bin/env bash
# `tlaloc aot --plugin tpu` with the venv's libtpu on a machine without a TPU (docs/BRINGUP.md):
# programs recorded from real runs (finetune-demo's train step, eval loss, prefill and decode on
# one device; the dp plan's per-device train step and tensor-parallel generation on two) compile
# for v6e:1x1 and v6e:2x2 with no refusal, summary.tsv carries each program's collectives,
# compiled memory and compile seconds, and a two-partition program given to v6e:1x1 is refused
# with libtpu's reason in errors/. Skips (exit 77) without libtpu in the venv; fails under CI=true.
# Usage: tpu_aot_test.sh TLALOC PLUGIN SOURCE_DIR
set -euo pipefail
tlaloc=$1 plugin=$2 source_dir=$3
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" libtpu
venv=$("$ORACLE_PYTHON" -c 'import sys; print(sys.prefix)')
start_cli_test

run() {  # run LOG COMMAND...: the command's output goes to $work/LOG, shown when it fails
  local log=$1
  shift
  if ! "$@" >"$work/$log" 2>&1; then
    fail "$* exited non-zero: $(tail -5 "$work/$log")"
    exit 1
  fi
}

# One device: finetune-demo's byte-level model (259 tokens: each program compiles in seconds;
# a 151,936-token vocabulary takes 20 s a program) through Tlaloc's plugin, recording.
TLALOC_PROGRAMS_DIR=$work/one run demo.log "$tlaloc" finetune-demo --out "$work/demo" \
  --target "$plugin" --steps 1 --train-size 16 --held-out 1 --batch 2 --seq-len 32
# Two devices: the dp plan's per-device step and tensor-parallel prefill and decode.
TLALOC_PROGRAMS_DIR=$work/two run dp.log "$tlaloc" finetune --model "$work/demo/base" \
  --data "$work/demo/train.jsonl" --steps 1 --batch 4 --seq-len 32 --mesh data=2 --plan dp \
  --target "$plugin" --out "$work/dp"
TLALOC_PROGRAMS_DIR=$work/two run tp.log "$tlaloc" generate -m "$work/demo/base" -p ab -n 2 \
  --mesh model=2 --target "$plugin"

check_summary() {  # check_summary FOLDER TOPOLOGY AOT_OUT: every program compiled
  local dir=$1 topology=$2 out=$3 summary=$3/summary.tsv
  local want
  want=$(wc -l <"$dir/index.tsv")
  [ "$want" -ge 2 ] || fail "$dir recorded $want program(s), expected at least 2"
  [ -s "$summary" ] || { fail "$topology: no $summary"; return; }
  [ "$(head -1 "$summary" | cut -f11-13)" = "$(printf 'status\tcompile_s\tpeak_bytes')" ] ||
    fail "$topology: summary header $(head -1 "$summary")"
  local ok
  ok=$(awk -F'\t' 'NR > 1 && $11 == "ok" && $6 > 0 && $7 > 0 && $10 > 0 && $12 > 0' "$summary" |
    wc -l)
  [ "$ok" = "$want" ] || fail "$topology: $ok of $want programs compiled: $(cat "$summary")"
  grep -q "platform tpu" "$out.log" || fail "$topology: libtpu's platform is not tpu: $(tail -1 "$out.log")"
  # A donated train step: its weights and moments come back in place (alias > 0).
  [ -n "$(awk -F'\t' 'NR > 1 && $2 == "train_step" && $8 > 0' "$summary")" ] ||
    fail "$topology: no train step with donated arguments aliased: $(cat "$summary")"
}

export VIRTUAL_ENV=$venv
"$tlaloc" aot --plugin tpu --topology v6e:1x1 --out "$work/aot1" "$work/one" >"$work/aot1.log" 2>&1 ||
  fail "aot v6e:1x1 exited non-zero: $(grep -v '^WARNING' "$work/aot1.log" | tail -5)"
check_summary "$work/one" v6e:1x1 "$work/aot1"
"$tlaloc" aot --plugin tpu --topology v6e:2x2 --out "$work/aot4" "$work/two" >"$work/aot4.log" 2>&1 ||
  fail "aot v6e:2x2 exited non-zero: $(grep -v '^WARNING' "$work/aot4.log" | tail -5)"
check_summary "$work/two" v6e:2x2 "$work/aot4"
# The per-device programs keep their partition count and their collectives.
[ -n "$(awk -F'\t' 'NR > 1 && $4 == 2 && $5 ~ /all_reduce/' "$work/aot4/summary.tsv")" ] ||
  fail "v6e:2x2: no two-partition program with all_reduce: $(cat "$work/aot4/summary.tsv")"

# A refusal is explained: two partitions do not fit one chip, and errors/ says so.
if "$tlaloc" aot --plugin tpu --topology v6e:1x1 --out "$work/aot1x2" "$work/two" \
  >"$work/aot1x2.log" 2>&1; then
  fail "two-partition programs compiled for v6e:1x1"
fi
refused=$(awk -F'\t' 'NR > 1 && $11 ~ /^refused/' "$work/aot1x2/summary.tsv" | wc -l)
[ "$refused" = "$(wc -l <"$work/two/index.tsv")" ] ||
  fail "v6e:1x1 refused $refused two-partition program(s): $(cat "$work/aot1x2/summary.tsv")"
# grep -L: the error files that do not say so (a pipe into grep -q would fail on SIGPIPE).
unnamed=$(grep -L "do not fit the topology's 1 device(s)" "$work"/aot1x2/errors/*.txt || true)
[ -z "$unnamed" ] || fail "refusals that do not name the devices: $(cat $unnamed)"

echo "--- v6e:1x1"
cat "$work/aot1/summary.tsv"
echo "--- v6e:2x2"
cat "$work/aot4/summary.tsv"
[ "$failures" -eq 0 ] || exit 1
echo "PASS"
