#!/usr/bin/env bash
# `tlaloc generate --target <Tlaloc's plugin>` prints the same tokens as the in-process
# interpreter (`--target interp`) for the tiny preset with the real Qwen3 tokenizer, greedy and
# sampled with a seed. Usage: generate_cli_parity.sh TLALOC_BINARY PLUGIN_PATH SOURCE_DIR
# (PLUGIN_PATH may also be a target name: tests/cli/xla_cpu_cli.sh passes xla-cpu).
# Fails when the checkout lacks data/qwen3/tokenizer.json (cli_test_lib.sh).
set -euo pipefail
TLALOC=$1 PLUGIN=$2 SOURCE_DIR=$3
source "$(dirname "$0")/../cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 3

ids() {  # target, then sampling options: the generated_ids array of --json
  local target=$1
  shift
  "$TLALOC" generate --model "$MODEL" --prompt "Tlaloc brings the rain" \
    --max-new-tokens 6 --json --target "$target" "$@" 2>"$WORK/stderr" |
    grep -o '"generated_ids":\[[^]]*\]' || { cat "$WORK/stderr" >&2; return 1; }
}

status=0
for mode in greedy sampled; do
  opts=()
  [ "$mode" = sampled ] && opts=(--temperature 0.9 --top-k 50 --top-p 0.9 --seed 17)
  local_ids=$(ids interp "${opts[@]}")
  plugin_ids=$(ids "$PLUGIN" "${opts[@]}")
  grep -q "on pjrt:cpu" "$WORK/stderr" || { echo "FAIL: $mode did not run on the plugin"; status=1; }
  if [ -n "$local_ids" ] && [ "$local_ids" = "$plugin_ids" ]; then
    echo "PASS $mode: $plugin_ids"
  else
    echo "FAIL $mode: interp $local_ids, plugin $plugin_ids"
    status=1
  fi
done
exit $status
