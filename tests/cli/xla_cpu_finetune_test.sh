#!/usr/bin/env bash
# `tlaloc finetune-demo --target xla-cpu` learns as the interpreter does: 50 steps of the demo
# task (same seed) on XLA's CPU plugin and on the interpreter; every step's loss agrees within a
# relative 1e-3, the last is under a fifth of the first, and both print their held-out scores.
# Slow (XLA compiles the train step and the generation programs): label xla_slow, not the
# CI lane. Usage: xla_cpu_finetune_test.sh TLALOC_BINARY
# Exits 77 (skipped) when no XLA:CPU plugin resolves; fails instead under CI=true.
set -euo pipefail
TLALOC=$1
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test

if ! "$TLALOC" doctor --target xla-cpu >/dev/null 2>&1; then
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI=true and no XLA:CPU plugin resolves"; exit 1; }
  echo "SKIP: no XLA:CPU plugin resolves (run scripts/setup.sh)"
  exit 77
fi
for target in interp xla-cpu; do
  "$TLALOC" finetune-demo --target "$target" --steps 50 --out "$work/$target" \
    >"$work/$target.log" 2>&1 || { cat "$work/$target.log"; fail "finetune-demo --target $target"; }
  grep "held-out answers" "$work/$target.log" | sed "s/^/$target: /"
done
python3 - "$work/interp/tuned/loss_log.jsonl" "$work/xla-cpu/tuned/loss_log.jsonl" <<'PY' ||
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(a) == len(b) == 50, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"losses: interpreter {a[0]:.4f} -> {a[-1]:.4f}, xla-cpu {b[0]:.4f} -> {b[-1]:.4f}, "
      f"largest relative difference {worst:.2e}")
assert worst <= 1e-3, worst
assert b[-1] < b[0] / 5, (b[0], b[-1])
PY
  fail "the losses differ or XLA:CPU did not learn"
[ "$failures" -eq 0 ] && echo "PASS: finetune-demo learns on xla-cpu as on the interpreter"
exit $((failures > 0))
