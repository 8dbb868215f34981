#!/usr/bin/env bash
# Models that cannot fit are refused before allocating, with the figures, instead of aborting
# with std::bad_alloc (exit 134): a bare {"model_type": "qwen3"} config (transformers' 8B-class
# defaults) on any machine here, and the 0.6B preset in f32 under `ulimit -v` 2 GB.
# Usage: memory_refusal_test.sh TLALOC
set -uo pipefail
tlaloc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/err"; exit 1; }
echo '{"model_type": "qwen3"}' >"$work/bare.json"
"$tlaloc" init-model --config "$work/bare.json" --tokenizer "$work/bare.json" "$work/bare" 2>"$work/err"
rc=$?
[ "$rc" -eq 1 ] || fail "bare config exited $rc, expected 1"
grep -q "parameters needs about" "$work/err" || fail "no figures in the refusal"
grep -q "is available" "$work/err" || fail "available memory not named"
[ ! -e "$work/bare" ] || fail "a refused model left a folder behind"
(
  ulimit -v 2000000
  "$tlaloc" init-model --preset qwen3-0.6b --dtype f32 --tokenizer "$work/bare.json" "$work/q" 2>"$work/err"
)
rc=$?
[ "$rc" -eq 1 ] || fail "0.6B f32 under ulimit -v 2 GB exited $rc, expected 1"
grep -Eq "needs about|out of memory" "$work/err" || fail "no memory message"
echo "PASS"
