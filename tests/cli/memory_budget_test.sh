#!/usr/bin/env bash
# The memory budget (runtime/memory_budget.h) under `ulimit -v` 3 GB: a fine-tune whose
# train_step cannot fit (batch 64 x 512 tokens of finetune-demo's model, ~3.5 GiB predicted) and
# a generation whose KV cache cannot (8M positions, 4 GiB) are refused before the first step,
# exit 1, naming the predicted and the available bytes, with no loss_log.jsonl row written;
# the same runs made small enough fit and run.
# Usage: memory_budget_test.sh TLALOC
set -uo pipefail
tlaloc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
limit=3000000  # KiB

"$tlaloc" finetune-demo --out "$work/demo" --steps 1 --train-size 40 --held-out 2 --batch 2 \
  --seq-len 32 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
base=$work/demo/base
data=$work/demo/train.jsonl

# run NAME ARGS...: runs tlaloc ARGS under the limit; stderr in $work/NAME.err, rc in $rc.
run() {
  local name=$1
  shift
  (
    ulimit -v $limit
    "$tlaloc" "$@" >"$work/$name.out" 2>"$work/$name.err"
  )
  rc=$?
}

run big finetune --model "$base" --data "$data" --out "$work/big" --steps 1 --batch 64 --seq-len 512
if [ "$rc" -ne 1 ]; then
  fail "finetune batch 64 x 512 under ulimit -v $limit exited $rc, expected 1: $(cat "$work/big.err")"
else
  grep -q "train_step (batch 64 x seq_len 512) program needs about" "$work/big.err" ||
    fail "no predicted peak in: $(cat "$work/big.err")"
  grep -q "is available" "$work/big.err" || fail "no available bytes in: $(cat "$work/big.err")"
  grep -q "smaller batch" "$work/big.err" || fail "no way to fit in: $(cat "$work/big.err")"
  [ ! -s "$work/big/loss_log.jsonl" ] || fail "a refused fine-tune wrote loss_log.jsonl rows"
  echo "ok: $(grep -o 'the train_step.*available' "$work/big.err")"
fi

run small finetune --model "$base" --data "$data" --out "$work/small" --steps 1 --batch 2 --seq-len 32
[ "$rc" -eq 0 ] || fail "finetune batch 2 x 32 under ulimit -v $limit exited $rc: $(cat "$work/small.err")"
[ "$(wc -l <"$work/small/loss_log.jsonl" 2>/dev/null)" = 1 ] || fail "the fitting fine-tune logged no step"

# The demo model with room for a long context: 8M positions of KV cache is 4 GiB in f32.
mkdir "$work/long"
cp "$base"/* "$work/long/"
python3 - "$work/long/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = 8388608
json.dump(c, open(sys.argv[1], "w"))
PY
run gen generate -m "$work/long" -p ab -n 8000000 --temp 0
if [ "$rc" -ne 1 ]; then
  fail "generate -n 8000000 under ulimit -v $limit exited $rc, expected 1: $(head -c 300 "$work/gen.err")"
else
  grep -q "the KV cache .* needs .* but only .* is available" "$work/gen.err" ||
    fail "no cache and available bytes in: $(cat "$work/gen.err")"
  grep -q -- "--ctx-size" "$work/gen.err" || fail "no way to fit in: $(cat "$work/gen.err")"
  [ -z "$(tr -d '[:space:]' <"$work/gen.out")" ] || fail "a refused generation printed tokens"
  echo "ok: $(grep -o 'the KV cache.*available' "$work/gen.err")"
fi
run gen_small generate -m "$work/long" -p ab -n 4 --temp 0
[ "$rc" -eq 0 ] || fail "generate -n 4 under ulimit -v $limit exited $rc: $(cat "$work/gen_small.err")"

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
