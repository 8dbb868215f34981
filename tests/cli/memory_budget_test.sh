#!/usr/bin/env bash
# The memory budget (runtime/memory_budget.h) under `ulimit -v` 3 GB: a fine-tune whose
# train_step cannot fit (batch 128 x 512 tokens of finetune-demo's model, ~4.7 GiB predicted) and
# a generation whose KV cache cannot (8M positions, 4 GiB) are refused before the first step,
# exit 1, naming the predicted and the available bytes, with no loss_log.jsonl row written;
# the same runs made small enough fit and run.
# Also: a 2-device data-parallel fine-tune too big for its share is refused before step 1;
# Tlaloc's PJRT plugin with a device limit (TLALOC_PLUGIN_MEMORY_BYTES) refuses a train step over
# it from PJRT_Device_MemoryStats; a 3.5M-position generation near the limit either is refused
# before running or runs (never fails after passing the check); with the check off, running out
# inside the interpreter (the batch 128 x 512 fine-tune) is a ResourceExhausted naming the op and
# the bytes, not an abort.
# Usage: memory_budget_test.sh TLALOC PLUGIN
set -uo pipefail
tlaloc=$1
plugin=$2
# shellcheck source=../cli_test_lib.sh
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test  # $work (removed on exit), fail, $failures
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

run big finetune --model "$base" --data "$data" --out "$work/big" --steps 1 --batch 128 --seq-len 512
if [ "$rc" -ne 1 ]; then
  fail "finetune batch 128 x 512 under ulimit -v $limit exited $rc, expected 1: $(cat "$work/big.err")"
else
  grep -q "train_step (batch 128 x seq_len 512) program needs about" "$work/big.err" ||
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

# Two devices, data parallel: each holds the whole state and half the batch (64 x 512).
run dp finetune --model "$base" --data "$data" --out "$work/dp" --steps 1 --batch 128 --seq-len 512 \
  --mesh data=2 --plan dp
if [ "$rc" -ne 1 ]; then
  fail "finetune --mesh data=2 --plan dp batch 128 x 512 exited $rc, expected 1: $(cat "$work/dp.err")"
else
  grep -q "train_step on device 0 (plan dp over mesh data=2, batch 128 x seq_len 512, 64 row(s)" \
    "$work/dp.err" || fail "no device program in: $(cat "$work/dp.err")"
  grep -q "needs about .* at its peak.* is available" "$work/dp.err" ||
    fail "no predicted and available bytes in: $(cat "$work/dp.err")"
  grep -q -- "--plan fsdp" "$work/dp.err" || fail "no fsdp hint in: $(cat "$work/dp.err")"
  [ ! -s "$work/dp/loss_log.jsonl" ] || fail "a refused sharded fine-tune wrote loss_log.jsonl rows"
  echo "ok: $(grep -o 'the train_step on device 0.*available' "$work/dp.err")"
fi
run dp_small finetune --model "$base" --data "$data" --out "$work/dp_small" --steps 1 --batch 4 \
  --seq-len 32 --mesh data=2 --plan dp
[ "$rc" -eq 0 ] || fail "finetune --mesh data=2 batch 4 x 32 exited $rc: $(cat "$work/dp_small.err")"

# Tlaloc's PJRT plugin with an 8 MB device: the weights and moments (1.2 MiB) fit, a step of
# batch 8 x 64 (16 MiB of temporaries) does not.
TLALOC_PLUGIN_MEMORY_BYTES=8000000 "$tlaloc" finetune --model "$base" --data "$data" \
  --out "$work/pjrt" --steps 1 --batch 8 --seq-len 64 --target "$plugin" >"$work/pjrt.out" \
  2>"$work/pjrt.err"
rc=$?
if [ "$rc" -ne 1 ]; then
  fail "finetune on the plugin with an 8 MB device exited $rc, expected 1: $(cat "$work/pjrt.err")"
else
  grep -q "on pjrt:cpu" "$work/pjrt.err" || fail "did not run on the plugin: $(cat "$work/pjrt.err")"
  grep -q "train_step (batch 8 x seq_len 64) program needs about" "$work/pjrt.err" ||
    fail "no predicted peak in: $(cat "$work/pjrt.err")"
  # The limit less the 1,287,168 bytes of weights and moments already on the device.
  grep -q "only 6.4 MiB (6712832 bytes) is available" "$work/pjrt.err" ||
    fail "available is not the plugin's limit less its buffers: $(cat "$work/pjrt.err")"
  echo "ok: $(grep -o 'the train_step.*available' "$work/pjrt.err")"
fi
"$tlaloc" finetune --model "$base" --data "$data" --out "$work/pjrt_small" --steps 1 --batch 2 \
  --seq-len 32 --target "$plugin" >"$work/pjrt_small.out" 2>"$work/pjrt_small.err" ||
  fail "finetune on the plugin without a limit failed: $(cat "$work/pjrt_small.err")"
grep -q "memory budget not checked" "$work/pjrt_small.err" &&
  fail "the plugin's device memory was not read: $(cat "$work/pjrt_small.err")"

# 3.5M positions (1.7 GiB of KV cache) at limits around what its prefill and decode steps need:
# each run is either refused before its first step or generates; none fails after passing.
# run_for NAME LIMIT ARGS...: like run with another limit, stopped after 20 s (it generates
# for minutes when it fits). TLALOC_MEMORY_CHECK passes through.
run_for() {
  local name=$1 kib=$2
  shift 2
  (
    ulimit -v "$kib"
    timeout 20 "$tlaloc" "$@" >"$work/$name.out" 2>"$work/$name.err"
  )
  rc=$?
}
refused=0 ran=0
for kib in 2800000 2950000 3100000 3250000; do
  run_for "sweep$kib" "$kib" generate -m "$work/long" -p ab -n 3500000 --temp 0 -t 2
  if [ "$rc" -eq 1 ] && grep -q "program needs about .* is available" "$work/sweep$kib.err"; then
    refused=$((refused + 1))
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 0 ]; } && [ -n "$(tr -d '[:space:]' <"$work/sweep$kib.out")" ]; then
    ran=$((ran + 1))
  else
    fail "generate -n 3500000 under ulimit -v $kib: exit $rc after passing the check: $(tail -c 400 "$work/sweep$kib.err")"
  fi
done
echo "ok: 3.5M positions near the limit: $refused refused before running, $ran ran"
[ "$refused" -ge 1 ] && [ "$ran" -ge 1 ] || fail "the sweep did not straddle the limit ($refused refused, $ran ran)"

# The check off: running out inside the interpreter names the op and the bytes. The batch
# 128 x 512 fine-tune refused above needs 4.5 GiB of temporaries; let it run out at the limit.
export TLALOC_MEMORY_CHECK=0
run oom finetune --model "$base" --data "$data" --out "$work/oom" --steps 1 --batch 128 --seq-len 512
if [ "$rc" -ne 1 ]; then
  fail "finetune with the check off under ulimit -v $limit exited $rc, expected 1: $(tail -c 400 "$work/oom.err")"
else
  grep -q "stablehlo\.[a-z_]*: out of memory: allocating .* ([0-9]* bytes) failed" "$work/oom.err" ||
    fail "no op and bytes in: $(tail -c 400 "$work/oom.err")"
  grep -qi "bad_alloc\|abort" "$work/oom.err" && fail "an abort or bad_alloc: $(tail -c 400 "$work/oom.err")"
  echo "ok: $(grep -o 'stablehlo.*process' "$work/oom.err" | head -1)"
fi
unset TLALOC_MEMORY_CHECK

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
