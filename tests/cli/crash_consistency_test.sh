#!/usr/bin/env bash
# Crash consistency of fine-tuning saves (issue 22), with deterministic kill points: a 4-step
# fine-tune of finetune-demo's tiny model saving every step is SIGKILLed right after its N-th
# write step (TLALOC_TEST_KILL_AFTER_WRITES, support/atomic_file.h: each half of a file's bytes,
# before and after each rename) for KILLS (default 24) values of N drawn by a seed
# ($CRASH_SEED, default 22) from all the run's write steps. After each kill:
#  - every checkpoint-N folder is complete, the newest one and OUT (when it has
#    trainer_state.json) load in `tlaloc generate`;
#  - `--resume` (or a new run when nothing was saved yet) reaches step 4 with per-step losses
#    bit-equal to the unbroken run's, logging each step once, leaving no temporary file and at
#    most --keep-last 2 checkpoints.
# Usage: crash_consistency_test.sh TLALOC
set -uo pipefail
tlaloc=$1
kills=${KILLS:-24}
seed=${CRASH_SEED:-22}
# shellcheck source=../cli_test_lib.sh
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test  # $work (removed on exit), fail, $failures

"$tlaloc" finetune-demo --out "$work/demo" --steps 1 --train-size 100 --held-out 2 --batch 2 \
  --seq-len 32 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
base=$work/demo/base
data=$work/demo/train.jsonl
steps=4
common=(--data "$data" --steps $steps --save-every 1 --keep-last 2)
start=(finetune "${common[@]}" --model "$base" --batch 4 --seq-len 32 --lr 1e-3 --warmup 1 --seed 5)

losses() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    print(j["step"], json.dumps(j["loss"]))' "$1"; }
saved_step() {  # the highest step of a complete save in OUT, 0 when none
  local best=0 s
  for f in "$1"/trainer_state.json "$1"/checkpoint-*/trainer_state.json; do
    [ -f "$f" ] || continue
    s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$f")
    [ "$s" -gt "$best" ] && best=$s
  done
  echo $best
}

echo "== the unbroken run, counting its write steps"
TLALOC_TEST_KILL_AFTER_WRITES=1000000000 "$tlaloc" "${start[@]}" --out "$work/ref" \
  >/dev/null 2>"$work/ref.err" || { cat "$work/ref.err"; exit 1; }
total=$(sed -n 's/^TLALOC_TEST_KILL_AFTER_WRITES=[0-9]* not reached: \([0-9]*\) write steps$/\1/p' \
  "$work/ref.err")
[ -n "$total" ] && [ "$total" -gt $kills ] || { fail "no write step count in: $(tail -3 "$work/ref.err")"; exit 1; }
losses "$work/ref/loss_log.jsonl" >"$work/ref.losses"
[ "$(wc -l <"$work/ref.losses")" -eq $steps ] || { fail "the unbroken run logged $(wc -l <"$work/ref.losses") steps"; exit 1; }
points=$(python3 -c 'import random, sys
print(" ".join(map(str, sorted(random.Random(int(sys.argv[1])).sample(range(1, int(sys.argv[2]) + 1), int(sys.argv[3]))))))' \
  "$seed" "$total" "$kills")
echo "$total write steps; killing after: $points"

for n in $points; do
  out=$work/kill-$n
  # In a subshell whose stderr is dropped: bash reports the SIGKILL there ("Killed").
  (TLALOC_TEST_KILL_AFTER_WRITES=$n "$tlaloc" "${start[@]}" --out "$out" >/dev/null 2>"$out.err") \
    2>/dev/null
  rc=$?
  [ $rc -eq 137 ] || { fail "N=$n: exit $rc, expected 137 (SIGKILL): $(tail -2 "$out.err")"; continue; }
  for d in "$out"/checkpoint-*; do
    [ -d "$d" ] || continue
    for f in trainer_state.json optimizer.safetensors model.safetensors config.json; do
      [ -f "$d/$f" ] || fail "N=$n: ${d##*/} lacks $f (a half-written checkpoint)"
    done
  done
  newest=$(ls -d "$out"/checkpoint-* 2>/dev/null | sort -t- -k2 -n | tail -1)
  for m in $newest $([ -f "$out/trainer_state.json" ] && echo "$out"); do
    "$tlaloc" generate -m "$m" -p ab -n 1 --temp 0 >/dev/null 2>"$work/gen.err" ||
      fail "N=$n: $m does not load: $(tail -2 "$work/gen.err")"
  done
  saved=$(saved_step "$out")
  if [ "$saved" -eq $steps ]; then
    how="nothing left to resume"
  elif [ "$saved" -gt 0 ]; then
    how="resumed from step $saved"
    "$tlaloc" finetune --resume "$out" "${common[@]}" --out "$out" >/dev/null 2>"$out.res.err" ||
      { fail "N=$n: --resume from step $saved: $(tail -2 "$out.res.err")"; continue; }
  else
    how="no save yet, started again"
    rm -rf "$out"
    "$tlaloc" "${start[@]}" --out "$out" >/dev/null 2>"$out.res.err" ||
      { fail "N=$n: the new run: $(tail -2 "$out.res.err")"; continue; }
  fi
  got=$(losses "$out/loss_log.jsonl")
  [ "$got" = "$(cat "$work/ref.losses")" ] ||
    fail "N=$n ($how): losses differ from the unbroken run's: $(echo $got)"
  if [ "$saved" -lt $steps ]; then
    ls -A "$out" | grep -q '\.tmp-' && fail "N=$n: temporary files left: $(ls -A "$out" | grep '\.tmp-')"
  fi
  [ "$(ls -d "$out"/checkpoint-* | wc -l)" -le 2 ] || fail "N=$n: --keep-last 2 kept $(ls -d "$out"/checkpoint-*)"
  echo "kill after write step $n: newest ${newest##*/}, $how, $steps losses bit-equal"
  rm -rf "$out"
done

if [ $failures -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all $kills kill points left a loadable save that resumes bit-equal"
