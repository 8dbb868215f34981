#!/usr/bin/env bash
# A short tour of the binary's commands for the sanitized tree (ctest label cli_asan, which
# scripts/test.sh step 2 runs with the ASan + UBSan build): init-model, inspect, quantize, export
# gguf, generate a few tokens, fine-tune 2 steps, and malformed inputs refused by name. Every
# command must succeed or be refused with its exit code and message; under the sanitizers any
# report ends the process (exit 1 with the report on stderr), which fails its step here.
# Runs in the plain tree too (seconds). Usage: asan_smoke_test.sh TLALOC
set -uo pipefail
tlaloc=$1
# shellcheck source=../cli_test_lib.sh
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test  # $work (removed on exit), fail, $failures
# step NAME WANT_RC ARGS...: runs tlaloc ARGS, output in $work/NAME.{out,err}; checks the exit
# code and that no sanitizer report was printed.
step() {
  local name=$1 want=$2
  shift 2
  "$tlaloc" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, expected $want: $(tail -c 600 "$work/$name.err")"
  elif grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$work/$name.err"; then
    fail "$name: sanitizer report: $(head -c 2000 "$work/$name.err")"
  else
    echo "ok: $name (exit $rc)"
  fi
}

step demo 0 finetune-demo --out "$work/demo" --steps 1 --train-size 16 --held-out 2 --batch 2 \
  --seq-len 16
base=$work/demo/base
step init 0 init-model --preset tiny "$work/tiny" --seed 3
step inspect 0 inspect "$base"
grep -q "check: *OK" "$work/inspect.out" || fail "inspect: no 'check: OK' in $(cat "$work/inspect.out")"
step quantize 0 quantize "$base" "$work/int8" --dtype int8
step inspect_int8 0 inspect "$work/int8"
step export 0 export gguf "$base" "$work/model.gguf"
step inspect_gguf 0 inspect "$work/model.gguf"
step generate 0 generate -m "$base" -p ab -n 3 --temp 0
step generate_int8 0 generate -m "$work/int8" -p ab -n 3 --temp 0
step finetune 0 finetune --model "$base" --data "$work/demo/train.jsonl" --out "$work/ft" \
  --steps 2 --batch 2 --seq-len 16
[ "$(wc -l <"$work/ft/loss_log.jsonl" 2>/dev/null)" = 2 ] || fail "finetune: not 2 loss rows"

# Malformed inputs: a truncated GGUF, a config.json that is not JSON, a JSONL row that is not.
head -c 200 "$work/model.gguf" >"$work/cut.gguf"
step cut_gguf 1 inspect "$work/cut.gguf"
grep -q "cut.gguf" "$work/cut_gguf.err" || fail "truncated GGUF: the file is not named"
mkdir "$work/broken"
cp "$base"/* "$work/broken/"
echo '{"model_type": "qwen3", "hidden_size": ' >"$work/broken/config.json"
step bad_config 1 generate -m "$work/broken" -p ab -n 2
grep -q "config.json" "$work/bad_config.err" || fail "bad config.json is not named"
printf '{"text": "fine"}\n{"text": \n' >"$work/bad.jsonl"
step bad_jsonl 1 finetune --model "$base" --data "$work/bad.jsonl" --out "$work/ft_bad" --steps 1 \
  --batch 1 --seq-len 16
grep -q "bad.jsonl" "$work/bad_jsonl.err" || fail "bad JSONL is not named"

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
