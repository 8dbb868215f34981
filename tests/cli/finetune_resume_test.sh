#!/usr/bin/env bash
# `tlaloc finetune --resume DIR` is the run it resumes (issue 38): after Ctrl-C the hint is
# `--resume OUT` alone, and that command continues with every recorded setting (data, out,
# steps, batch, seq-len, lr, warmup, seed, --save-every, --keep-last...) to losses bit-equal
# to an unbroken run's, saving where that run would; flags given override and are named in a
# notice; other data is warned about; a folder with no save is one clear error (exit 2), and a
# run without --resume still needs --data and --out.
# Usage: finetune_resume_test.sh TLALOC
set -euo pipefail
tlaloc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$tlaloc" finetune-demo --out "$work/demo" --steps 1 --train-size 200 --held-out 2 --batch 2 \
  --seq-len 32 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
base=$work/demo/base
data=$work/demo/train.jsonl
steps=40
ft=(finetune --model "$base" --data "$data" --steps $steps --batch 8 --seq-len 64 --lr 1e-3
    --warmup 2 --seed 5 --save-every 7 --keep-last 10 --print-every 1)
losses() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    print(j["step"], json.dumps(j["loss"]))' "$1"; }

"$tlaloc" "${ft[@]}" --out "$work/ref" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
losses "$work/ref/loss_log.jsonl" >"$work/ref.losses"

# Interrupted after a few steps.
"$tlaloc" "${ft[@]}" --out "$work/int" >/dev/null 2>"$work/int.err" &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$work/int/loss_log.jsonl" ] && [ "$(wc -l <"$work/int/loss_log.jsonl")" -ge 3 ] && break
  sleep 0.1
done
kill -INT $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 130 ] || fail "SIGINT: exit $rc, expected 130: $(tail -3 "$work/int.err")"
hint=$(sed -n 's/^resume with: //p' "$work/int.err")
[ "$hint" = "tlaloc finetune --resume $work/int" ] || fail "the resume hint is '$hint'"
echo "ok: the hint after Ctrl-C is: $hint"

# The hint as printed, run as it is.
"$tlaloc" ${hint#tlaloc } >/dev/null 2>"$work/res.err" || fail "$hint: $(tail -3 "$work/res.err")"
! grep -q "settings other than the run's" "$work/res.err" || fail "a plain resume named overrides: $(cat "$work/res.err")"
losses "$work/int/loss_log.jsonl" >"$work/int.losses"
cmp -s "$work/ref.losses" "$work/int.losses" ||
  { diff "$work/ref.losses" "$work/int.losses" | head -5; fail "the resumed run's losses differ from the unbroken run's"; }
for n in 7 14 21 28 35 40; do
  [ -f "$work/int/checkpoint-$n/trainer_state.json" ] || fail "no checkpoint-$n: --save-every 7 / --keep-last 10 not continued"
done
echo "ok: --resume alone reached step $steps with the unbroken run's $steps losses and saves"

# A flag given overrides the recorded value and is named.
"$tlaloc" finetune --resume "$work/int" --steps 43 --lr 5e-4 >/dev/null 2>"$work/over.err" ||
  fail "resume with overrides: $(tail -3 "$work/over.err")"
grep "settings other than the run's" "$work/over.err" | grep -q -- "--lr 0.0005 (the run's: 0.001)" ||
  fail "the notice does not name --lr: $(cat "$work/over.err")"
grep "settings other than the run's" "$work/over.err" | grep -q -- "--steps 43 (the run's: 40)" ||
  fail "the notice does not name --steps: $(cat "$work/over.err")"
[ "$(wc -l <"$work/int/loss_log.jsonl")" -eq 43 ] || fail "--steps 43 did not train to step 43"
echo "ok: overrides are named: $(grep "settings other" "$work/over.err")"

# Other data than the run's: a warning.
cp "$data" "$work/other.jsonl"
"$tlaloc" finetune --resume "$work/ref" --data "$work/other.jsonl" --out "$work/other" --steps 41 \
  >/dev/null 2>"$work/data.err" || fail "resume with other data: $(tail -3 "$work/data.err")"
grep -q "warning: --data $work/other.jsonl is not the data this run trained on" "$work/data.err" ||
  fail "no warning for other data: $(cat "$work/data.err")"
echo "ok: other data is warned about"

# Nothing saved: one error, exit 2, no "resuming ... at step 0".
mkdir "$work/empty"
rc=0
"$tlaloc" finetune --resume "$work/empty" >/dev/null 2>"$work/empty.err" || rc=$?
[ $rc -eq 2 ] || fail "--resume of a folder with no save: exit $rc, expected 2"
[ "$(wc -l <"$work/empty.err")" -eq 1 ] && grep -q "nothing saved there to resume" "$work/empty.err" ||
  fail "--resume of a folder with no save: $(cat "$work/empty.err")"
echo "ok: $(cat "$work/empty.err")"

# A new run still needs --data and --out.
rc=0
"$tlaloc" finetune --model "$base" --out "$work/new" >/dev/null 2>"$work/nodata.err" || rc=$?
[ $rc -eq 2 ] && grep -q -- "--data is required" "$work/nodata.err" || fail "no --data: exit $rc: $(cat "$work/nodata.err")"
echo "PASS"
