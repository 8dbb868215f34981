#!/usr/bin/env bash
# `tlaloc finetune --resume DIR` where DIR holds no save: one usage error (exit 2) naming the
# folder and saying nothing is saved there, before anything loads or is written. (Flags given
# with a --resume of a real save override the recorded settings and are named in a notice:
# tests/cli/finetune_resume_test.sh.)
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
grep -q -- "--resume $work/prev: nothing saved there to resume" "$work/stderr" ||
  { echo "the error does not say that $work/prev holds no save"; cat "$work/stderr"; exit 1; }
[[ $(wc -l < "$work/stderr") -eq 1 ]] || { echo "more than one message:"; cat "$work/stderr"; exit 1; }
[[ ! -e "$work/out" ]] || { echo "a refused run wrote $work/out"; exit 1; }
echo "refused: $(cat "$work/stderr")"
