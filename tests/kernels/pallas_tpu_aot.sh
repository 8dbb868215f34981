#!/usr/bin/env bash
# Pallas-made Mosaic kernels through libtpu on a machine without a TPU (docs/BRINGUP.md): the tiny
# Qwen3 paged decode step kernelized with them (13 tpu_custom_call: RMSNorm, SiluAndMul and
# decode attention), nn::PagedAttention kernelized with jax's paged attention kernel (the
# jax-paged-attention adapter), and jax's paged attention as Tlaloc prints it, compile with
# `tlaloc aot --plugin tpu --topology v6e:1x1`.
# The programs come from tlaloc_kernels_tests' PallasTpuKernels.* (TLALOC_PALLAS_AOT_DIR).
# Skips (exit 77) without jax or libtpu in the venv; fails under CI=true.
# Usage: pallas_tpu_aot.sh TLALOC KERNELS_TESTS SOURCE_DIR
set -euo pipefail
tlaloc=$1 tests=$2 source_dir=$3
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" jax libtpu
venv=$("$ORACLE_PYTHON" -c 'import sys; print(sys.prefix)')
start_cli_test

TLALOC_PALLAS_AOT_DIR=$work/programs "$tests" --gtest_filter='PallasTpuKernels.*' \
  >"$work/gtest.log" 2>&1 || { tail -30 "$work/gtest.log"; exit 1; }
[ "$(wc -l <"$work/programs/index.tsv")" = 3 ] ||
  fail "expected 3 programs, got: $(cat "$work/programs/index.tsv")"
calls=$(grep -o '@tpu_custom_call' "$work/programs/tiny_decode_pallas.mlir" | wc -l)
[ "$calls" = 13 ] || fail "the kernelized decode step holds $calls tpu_custom_call, expected 13"

export VIRTUAL_ENV=$venv
"$tlaloc" aot --plugin tpu --topology v6e:1x1 --out "$work/aot" "$work/programs" \
  >"$work/aot.log" 2>&1 ||
  fail "aot v6e:1x1 exited non-zero: $(grep -v '^WARNING' "$work/aot.log" | tail -5)"
summary=$work/aot/summary.tsv
ok=$(awk -F'\t' 'NR > 1 && $11 == "ok" && $6 > 0' "$summary" | wc -l)
[ "$ok" = 3 ] ||
  fail "$ok of 3 programs compiled: $(cat "$summary") $(cat "$work"/aot/errors/* 2>/dev/null)"
grep -q "platform tpu" "$work/aot.log" ||
  fail "libtpu's platform is not tpu: $(tail -1 "$work/aot.log")"
cat "$summary"
[ "$failures" -eq 0 ] || exit 1
echo "PASS"
