#!/usr/bin/env bash
# Runs Tlaloc's programs on StableHLO's reference interpreter (tlaloc_refinterp_tests) when a
# stablehlo-translate is found: $TLALOC_STABLEHLO_TRANSLATE, else on PATH. Without one it skips
# (exit 77), also under CI=true: CI does not build the reference interpreter (docs/PJRT.md,
# "StableHLO's reference interpreter", says how it was built).
# Usage: reference_interpreter_test.sh TLALOC_REFINTERP_TESTS [gtest arguments...]
set -euo pipefail
tests=${1:?usage: reference_interpreter_test.sh TLALOC_REFINTERP_TESTS [gtest args...]}
shift
translate=${TLALOC_STABLEHLO_TRANSLATE:-}
if [[ -z "$translate" ]]; then
  translate=$(command -v stablehlo-translate || true)
fi
if [[ -z "$translate" || ! -x "$translate" ]]; then
  echo "SKIP: no StableHLO reference interpreter (set TLALOC_STABLEHLO_TRANSLATE)"
  exit 77
fi
echo "reference interpreter: $translate"
export TLALOC_STABLEHLO_TRANSLATE="$translate"
exec "$tests" "$@"
