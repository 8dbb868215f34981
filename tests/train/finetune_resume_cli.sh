#!/usr/bin/env bash
# `tlaloc finetune --resume` keeps the saved hyperparameters: giving one of them as well is an
# error that names each such flag, instead of a run that silently ignores it.
set -euo pipefail
tlaloc="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo '{"text": "hello"}' > "$work/data.jsonl"

set +e
"$tlaloc" finetune --data "$work/data.jsonl" --out "$work/out" --resume "$work/prev" \
  --lr 1e-3 --batch 2 > "$work/stdout" 2> "$work/stderr"
rc=$?
set -e
if [[ $rc -ne 2 ]]; then echo "expected exit code 2, got $rc"; cat "$work/stderr"; exit 1; fi
for flag in --lr --batch; do
  grep -q -- "$flag" "$work/stderr" || { echo "the error does not name $flag"; cat "$work/stderr"; exit 1; }
done
if grep -q -- "--seed" "$work/stderr"; then echo "the error names --seed, which was not given"; exit 1; fi
[[ ! -e "$work/out" ]] || { echo "a refused run wrote $work/out"; exit 1; }
echo "refused: $(cat "$work/stderr")"
