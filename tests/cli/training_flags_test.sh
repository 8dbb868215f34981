#!/usr/bin/env bash
# Bad values of finetune's, finetune-demo's, init-model's and export's flags are usage errors:
# exit code 2, a message naming the flag, and nothing written. A finetune --out holding an earlier
# run is refused (exit 2, naming the folder and --overwrite, the run left as it was) unless
# --overwrite is given or the run is a --resume of it. Needs no oracle package: the model
# is a config.json beside a dummy tokenizer (the checks run before anything else loads).
# Usage: training_flags_test.sh TLALOC
set -uo pipefail
tlaloc=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# A model folder whose config.json allows 4096 positions (the tiny preset).
echo '{}' >"$work/tok.json"
"$tlaloc" init-model --preset tiny --tokenizer "$work/tok.json" "$work/model" >"$work/init.log" 2>&1 ||
  { cat "$work/init.log"; exit 1; }
grep -q '"max_position_embeddings": 4096' "$work/model/config.json" ||
  { echo "FAIL: the tiny preset's config.json does not say max_position_embeddings 4096"; exit 1; }
echo '{"text": "hello"}' >"$work/data.jsonl"

# expect CODE WHAT... -- ARGS: runs tlaloc ARGS, wants exit CODE and every WHAT in stderr.
expect() {
  local code=$1
  shift
  local wants=()
  while [ "$1" != "--" ]; do wants+=("$1"); shift; done
  shift
  "$tlaloc" "$@" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL: tlaloc $* exited $rc, expected $code: $(cat "$work/stderr")"
    failures=$((failures + 1))
    return
  fi
  for want in "${wants[@]}"; do
    if ! grep -qF -- "$want" "$work/stderr"; then
      echo "FAIL: tlaloc $*: the message does not say '$want': $(cat "$work/stderr")"
      failures=$((failures + 1))
      return
    fi
  done
  echo "ok ($rc): tlaloc $* -> $(head -c 200 "$work/stderr" | tr '\n' ' ')"
}

ft=(finetune --model "$work/model" --data "$work/data.jsonl" --out "$work/out")
expect 2 --grad-clip -- "${ft[@]}" --grad-clip=-1
expect 2 --grad-clip -- "${ft[@]}" --grad-clip nan
expect 2 --warmup "longer than the run" -- "${ft[@]}" --warmup 50 --steps 5
expect 2 --warmup --schedule-steps -- "${ft[@]}" --warmup 50 --steps 5 --schedule-steps 20
expect 2 --lr -- "${ft[@]}" --lr 0
expect 2 --lr -- "${ft[@]}" --lr=-1e-3
expect 2 --lr -- "${ft[@]}" --lr nan
expect 2 --lr -- "${ft[@]}" --lr inf
expect 2 --seq-len -- "${ft[@]}" --seq-len 1
expect 2 --seq-len max_position_embeddings 4096 -- "${ft[@]}" --seq-len 5000
expect 2 --batch -- "${ft[@]}" --batch 0
expect 2 --steps -- "${ft[@]}" --steps 0
expect 2 --steps -- "${ft[@]}" --steps=-3
expect 2 --epochs -- "${ft[@]}" --epochs 0
expect 2 --weight-decay -- "${ft[@]}" --weight-decay=-0.1
expect 2 --schedule-steps -- "${ft[@]}" --schedule-steps 0
expect 2 --print-every -- "${ft[@]}" --print-every=-1
[ ! -e "$work/out" ] || { echo "FAIL: a refused finetune created $work/out"; failures=$((failures + 1)); }

# An earlier run's folder (its trainer state and loss log; the checks run before these are read).
prev=$work/prev
mkdir -p "$prev/checkpoint-3"
echo '{"global_step": 3}' >"$prev/trainer_state.json"
echo '{"step": 1, "loss": 5.0}' >"$prev/loss_log.jsonl"
cp "$prev/trainer_state.json" "$prev/checkpoint-3/"
fprev=(finetune --model "$work/model" --data "$work/data.jsonl" --out "$prev" --steps 5)
expect 2 "--out $prev" "not empty" --overwrite -- "${fprev[@]}"
[ "$(cat "$prev/loss_log.jsonl")" = '{"step": 1, "loss": 5.0}' ] ||
  { echo "FAIL: a refused finetune touched $prev"; failures=$((failures + 1)); }
# --overwrite lifts the refusal; --resume of that run (the folder or one of its checkpoints) never
# meets it. Each then fails further on (the dummy tokenizer, the fake state), not on --out.
for args in "${fprev[*]} --overwrite" \
    "finetune --resume $prev --data $work/data.jsonl --out $prev --steps 5" \
    "finetune --resume $prev/checkpoint-3/ --data $work/data.jsonl --out $prev --steps 5"; do
  # shellcheck disable=SC2086  # the paths have no spaces (mktemp -d)
  "$tlaloc" $args >/dev/null 2>"$work/stderr"
  if grep -q -- "--overwrite" "$work/stderr"; then
    echo "FAIL: tlaloc $args: refused for a non-empty --out: $(cat "$work/stderr")"
    failures=$((failures + 1))
  else
    echo "ok: tlaloc $args: not refused for --out"
  fi
done

demo=(finetune-demo --out "$work/demo")
expect 2 --steps -- "${demo[@]}" --steps 0
expect 2 --batch -- "${demo[@]}" --batch 0
expect 2 --seq-len -- "${demo[@]}" --seq-len 1
expect 2 --seq-len max_position_embeddings -- "${demo[@]}" --seq-len 100000
expect 2 --lr -- "${demo[@]}" --lr nan
expect 2 --held-out -- "${demo[@]}" --held-out 0
expect 2 --train-size -- "${demo[@]}" --train-size 0
expect 2 nope -- "${demo[@]}" --task nope
[ ! -e "$work/demo" ] || { echo "FAIL: a refused finetune-demo created $work/demo"; failures=$((failures + 1)); }

expect 2 nope -- init-model --preset nope --tokenizer "$work/tok.json" "$work/m2"
expect 2 --preset --config -- init-model "$work/m2"
expect 2 --tokenizer "$work/missing.json" -- init-model --preset tiny --tokenizer "$work/missing.json" "$work/m2"
[ ! -e "$work/m2" ] || { echo "FAIL: a refused init-model created $work/m2"; failures=$((failures + 1)); }
# TLALOC_QWEN3_TOKENIZER set to a missing file: a failure that lists where it looked.
TLALOC_QWEN3_TOKENIZER=$work/nowhere.json expect 1 "$work/nowhere.json" TLALOC_QWEN3_TOKENIZER \
  -- init-model --preset tiny "$work/m3"

expect 2 --dtype -- export gguf "$work/model" "$work/m.gguf" --dtype s8
expect 1 "no such checkpoint folder" -- export gguf "$work/none" "$work/m.gguf"

if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all flag checks passed"
