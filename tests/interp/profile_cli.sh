#!/usr/bin/env bash
# TLALOC_PROFILE=1: `tlaloc example` prints the per-op table at exit, its call counts add up to
# the ops the run reports executing, and without the variable no table is printed.
set -euo pipefail
tlaloc="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

TLALOC_PROFILE=1 "$tlaloc" example > "$work/out" 2> "$work/err"
grep -q '^tlaloc profile: ' "$work/err" || { echo "no profile table on stderr"; cat "$work/err"; exit 1; }
executed="$(sed -n 's/^ops executed: \([0-9]*\),.*/\1/p' "$work/out")"
[[ -n "$executed" ]] || { echo "no 'ops executed' line"; cat "$work/out"; exit 1; }
# Rows are "  <op> <calls> <seconds> <share>% <us/call> <GB/s>"; every op kind is listed.
# Kinds under 0.1% of the time share one "(N more kinds, ...)" row, counted too.
calls="$(awk '/^  [a-z]+\.[a-z_]+ / { s += $2 } /^  \([0-9]+ more kinds/ { s += $(NF-4) } END { print s + 0 }' "$work/err")"
if [[ "$calls" != "$executed" ]]; then
  echo "profile counts $calls calls, the run executed $executed ops"
  cat "$work/err"
  exit 1
fi
grep -q '^  stablehlo.add ' "$work/err" || { echo "no stablehlo.add row"; exit 1; }

"$tlaloc" example > /dev/null 2> "$work/err_off"
if grep -q 'tlaloc profile' "$work/err_off"; then echo "table printed without TLALOC_PROFILE"; exit 1; fi
echo "profile table: $calls calls over $(grep -c '^  [a-z]' "$work/err") op kinds"
