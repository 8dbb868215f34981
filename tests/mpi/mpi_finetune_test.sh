#!/usr/bin/env bash
# `mpirun -np 2 tlaloc finetune --mesh data=2 --plan dp|fsdp` (issue 20), on loopback:
#  - logs the same per-step losses and writes the same checkpoint bytes as one process with two
#    in-process devices (the collectives reduce in the same device order: bit for bit), and
#    dp_tp on 2 processes x 2 devices as one process with four;
#  - only rank 0 prints progress; step times of both runs are printed for the record;
#  - killing rank 1 mid-run ends the job within a time limit, naming the lost rank, and leaves
#    no half-written file;
#  - ranks given another plan, mesh or model are refused before the first step, naming it;
#  - `mpirun -np 2 tlaloc generate --mesh model=2` prints the 1-process text once (greedy and
#    sampled with a seed).
# Where mpirun cannot run: fails in CI (CI=true), skips (77) elsewhere.
# Usage: mpi_finetune_test.sh TLALOC MPIRUN
set -uo pipefail
tlaloc=$1 mpirun=${2:-mpirun}
source "$(dirname "$0")/mpi_test_lib.sh"
require_mpirun "$mpirun" || exit $?
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
mpi() { timeout -k 5 "$1" "$mpirun" "${MPIRUN_FLAGS[@]}" "${@:2}"; }
unset TLALOC_CPU_DEVICES

"$tlaloc" finetune-demo --out "$work/demo" --steps 1 --train-size 64 --held-out 1 --batch 4 \
  --seq-len 32 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
common=(--data "$work/demo/train.jsonl" --batch 4 --seq-len 32 --lr 1e-3 --print-every 1)
ft=(finetune --model "$work/demo/base" "${common[@]}" --steps 4)
field() { grep -o "\"$2\":[-0-9.e]*" "$1/loss_log.jsonl" | cut -d: -f2; }
mean_seconds() { field "$1" seconds | awk '{ s += $1; n++ } END { if (n) printf "%.3f", s / n }'; }

# dp_tp: 2 processes x 2 devices (model groups inside a process, data groups across them).
for run in "dp data=2" "fsdp data=2" "dp_tp data=2,model=2"; do
  read -r plan mesh <<<"$run"
  one="$work/one-$plan" two="$work/two-$plan"
  "$tlaloc" "${ft[@]}" --out "$one" --mesh "$mesh" --plan "$plan" >"$one.log" 2>&1 ||
    { fail "$plan, 1 process: $(cat "$one.log")"; continue; }
  mpi 120 -np 2 "$tlaloc" "${ft[@]}" --out "$two" --mesh "$mesh" --plan "$plan" \
    >"$two.out" 2>"$two.log" || { fail "$plan, mpirun -np 2: $(cat "$two.log")"; continue; }
  for f in loss grad_norm lr; do
    [ "$(field "$one" $f)" = "$(field "$two" $f)" ] && [ -n "$(field "$one" $f)" ] ||
      fail "$plan: $f per step differs: $(field "$one" $f | tr '\n' ' ')" \
        "vs $(field "$two" $f | tr '\n' ' ')"
  done
  for f in model.safetensors optimizer.safetensors config.json; do
    cmp -s "$one/$f" "$two/$f" || fail "$plan: $f differs between 1 process and 2 processes"
  done
  # Only rank 0 speaks: one header, one progress line per step.
  [ "$(grep -c "across 2 processes" "$two.log")" -eq 1 ] ||
    fail "$plan: want one header naming 2 processes: $(cat "$two.log")"
  [ "$(grep -c "^step " "$two.log")" -eq 4 ] ||
    fail "$plan: want 4 progress lines: $(cat "$two.log")"
  echo "ok: $plan over $mesh: mpirun -np 2 logs the losses $(field "$two" loss | tr '\n' ' ')" \
    "and writes the checkpoint of 1 process; mean step time: 1 process" \
    "$(mean_seconds "$one") s, 2 processes $(mean_seconds "$two") s"
done

# mpirun -np 2 tlaloc generate --mesh model=2 (the engine, each rank holding its device's heads
# and KV pool): one rank prints the 1-process text, greedy and sampled with a seed.
for sampling in "--temp 0" "--temp 0.9 --seed 7"; do
  # shellcheck disable=SC2086
  "$tlaloc" generate -m "$work/one-dp" -p hello -n 10 $sampling >"$work/gen1" 2>/dev/null ||
    fail "generate on one device failed"
  # shellcheck disable=SC2086
  mpi 120 -np 2 "$tlaloc" generate -m "$work/one-dp" -p hello -n 10 $sampling --mesh model=2 \
    >"$work/gen2" 2>"$work/gen2.err" || fail "mpirun generate --mesh model=2: $(cat "$work/gen2.err")"
  if cmp -s "$work/gen1" "$work/gen2"; then
    echo "ok: mpirun -np 2 generate --mesh model=2 $sampling prints the 1-device text" \
      "($(wc -c <"$work/gen2") bytes)"
  else
    fail "mpirun generate $sampling printed '$(cat "$work/gen2")', 1 device '$(cat "$work/gen1")'"
  fi
done

# A rank that dies mid-run ends the job, naming the lost rank, within the limit; one that hangs
# (stopped) makes the others fail after TLALOC_COLLECTIVE_TIMEOUT_S; nothing is left
# half-written. The ranks carry a marker in their environment so that exactly ours are found.
# lose_rank1 SIGNAL NAME: starts a long run, sends SIGNAL to rank 1 after a logged step.
lose_rank1() {
  local signal=$1 name=$2 marker="tlaloc-mpi-test-$$-$2" out="$work/$2" rank1="" job rc took
  TLALOC_TEST_RUN=$marker TLALOC_COLLECTIVE_TIMEOUT_S=3 mpi 90 -np 2 "$tlaloc" finetune \
    --model "$work/demo/base" "${common[@]}" --steps 400 --out "$out" --mesh data=2 --plan dp \
    >"$out.out" 2>"$out.log" &
  job=$!
  for _ in $(seq 600); do
    if [ -s "$out/loss_log.jsonl" ]; then
      for env in /proc/[0-9]*/environ; do
        if grep -qz "^TLALOC_TEST_RUN=$marker$" "$env" 2>/dev/null &&
          grep -qz "^OMPI_COMM_WORLD_RANK=1$" "$env" 2>/dev/null; then
          rank1=$(basename "$(dirname "$env")")
        fi
      done
      [ -n "$rank1" ] && break
    fi
    sleep 0.1
  done
  if [ -z "$rank1" ]; then
    fail "$name: no step logged or rank 1 not found: $(cat "$out.log")"
    kill "$job" 2>/dev/null
    return
  fi
  local start=$SECONDS
  kill "-$signal" "$rank1"
  wait "$job"
  rc=$?
  took=$((SECONDS - start))
  [ "$signal" = STOP ] && kill -KILL "$rank1" 2>/dev/null  # in case mpirun left it behind
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 60 ]; then
    fail "$name: mpirun exited $rc after ${took}s (want a failure within 60 s)"
  elif ! grep -q "$3" "$out.log"; then
    fail "$name: the error does not say '$3': $(cat "$out.log")"
  else
    echo "ok: $name rank 1 ended the job in ${took}s (exit $rc): $(grep -m1 "$3" "$out.log")"
  fi
  local leftovers
  leftovers=$(find "$out" -name '*.tmp-*' -o -name 'model.safetensors' -o -name 'checkpoint-*')
  [ -z "$leftovers" ] || fail "$name: files left behind: $leftovers"
}
lose_rank1 KILL killed "process rank 1 .*exited on signal 9"
# Rank 1 stops in its compute (then named: "for rank(s) 1, which never arrived") or inside
# the exchange (then "for the other ranks"): either way rank 0 fails after the timeout.
stuck="rank 0 waited 3000 ms at .* for \\(rank(s) 1, which never arrived\\|the other ranks\\)"
lose_rank1 STOP stopped "$stuck"

# Mismatched ranks (mpirun's MPMD form: one command per rank) are refused before any step.
refused() {
  local want=$1 out="$work/mismatch"
  rm -rf "$out"
  shift
  mpi 60 "$@" >/dev/null 2>"$work/mismatch.log"
  local rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -qF -- "$want" "$work/mismatch.log" ||
    ! grep -q "refused before the first step" "$work/mismatch.log"; then
    fail "mismatch: exit $rc, want '$want': $(cat "$work/mismatch.log")"
  elif [ -e "$out/loss_log.jsonl" ]; then
    fail "mismatch: a step was logged"
  else
    echo "ok: refused: $(grep -m1 -o "refused before the first step.*" "$work/mismatch.log")"
  fi
}
base=("$tlaloc" "${ft[@]}" --out "$work/mismatch")
refused "plan: rank 1 has fsdp, rank 0 has dp" \
  -np 1 "${base[@]}" --mesh data=2 --plan dp : -np 1 "${base[@]}" --mesh data=2 --plan fsdp
refused "mesh: rank 1 has model=2, rank 0 has data=2" \
  -np 1 "${base[@]}" --mesh data=2 --plan dp : -np 1 "${base[@]}" --mesh model=2 --plan tp
other=("$tlaloc" finetune --model "$work/one-dp" "${common[@]}" --steps 4 --out "$work/mismatch")
refused "weights: rank 1 has" \
  -np 1 "${base[@]}" --mesh data=2 --plan dp : -np 1 "${other[@]}" --mesh data=2 --plan dp

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all multi-process CLI checks passed"
