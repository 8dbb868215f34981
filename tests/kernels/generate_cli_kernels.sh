#!/usr/bin/env bash
# `tlaloc generate --kernels MAPPING.json` runs the mapped layers as kernels (the universal
# RMSNorm and the cpu SiluAndMul from local kernel folders) and prints the same tokens as without
# kernels; a missing mapping and a non-interpreter target are refused by name.
# Usage: generate_cli_kernels.sh TLALOC_BINARY SILU_CPU_SO SOURCE_DIR
# Uses the checkout's Qwen3 tokenizer (data/qwen3/); fails naming it when it is missing.
set -euo pipefail
TLALOC=$1 SILU_SO=$2 SOURCE_DIR=$3
source "$(dirname "$0")/../cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
EX=$SOURCE_DIR/examples/kernels

# Two local kernel folders (trusted as local paths), sealed with their digests.
mkdir -p "$WORK/rms/build/tlaloc-universal"
cp "$EX/rmsnorm/universal/"* "$WORK/rms/build/tlaloc-universal/"
cpu_variant="tlaloc1-cpu-$(uname -m)-linux"
mkdir -p "$WORK/silu/build/$cpu_variant"
cp "$EX/silu_and_mul/cpu/metadata.json" "$SILU_SO" "$WORK/silu/build/$cpu_variant/"
"$TLALOC" kernels seal "$WORK/rms/build/tlaloc-universal" "$WORK/silu/build/$cpu_variant" >/dev/null
printf '{"RMSNorm": {"cpu": "%s"}, "SiluAndMul": {"cpu": "%s"}}\n' "$WORK/rms" "$WORK/silu" \
  >"$WORK/mapping.json"

ids() {
  "$TLALOC" generate --model "$MODEL" --prompt "Kernels replace layers" \
    --max-new-tokens 6 --json "$@" 2>"$WORK/stderr" | tee "$WORK/out.json" |
    grep -o '"generated_ids":\[[^]]*\]' || { cat "$WORK/stderr" >&2; return 1; }
}

status=0
plain=$(ids)
kernelized=$(ids --kernels "$WORK/mapping.json")
calls=$(grep -o '"kernel_calls":[0-9]*' "$WORK/out.json" | cut -d: -f2)
if [ -z "$calls" ] || [ "$calls" -eq 0 ]; then
  echo "FAIL: no layer ran as a kernel"; cat "$WORK/stderr"; status=1
fi
if [ -n "$plain" ] && [ "$plain" = "$kernelized" ]; then
  echo "PASS: same tokens with $calls kernel calls: $kernelized"
else
  echo "FAIL: without kernels $plain, with kernels $kernelized"; status=1
fi

expect_error() {  # message, then generate arguments
  local want=$1
  shift
  if "$TLALOC" generate --model "$MODEL" --prompt hi --max-new-tokens 1 "$@" \
    >/dev/null 2>"$WORK/err"; then
    echo "FAIL: generate $* succeeded"; status=1
  elif grep -q -- "$want" "$WORK/err"; then
    echo "PASS: refused: $(cat "$WORK/err")"
  else
    echo "FAIL: expected '$want', got: $(cat "$WORK/err")"; status=1
  fi
}
expect_error "cannot read" --kernels "$WORK/missing.json"
expect_error "interpreter only" --kernels "$WORK/mapping.json" --target cpu
exit $status
