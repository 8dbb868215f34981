#!/usr/bin/env bash
# Developer check (not part of CI): prints programs with Tlaloc's printer and asks StableHLO's
# own stablehlo-opt to parse and verify each one. Build stablehlo-opt outside the project (see
# ../shared/docs/FACTS-PJRT.md) and pass its path.
# Usage: scripts/check_printed_with_stablehlo_opt.sh STABLEHLO_OPT [TLALOC_BINARY]
set -uo pipefail
opt="$1"
tlaloc="${2:-build/apps/tlaloc}"
root="$(cd "$(dirname "$0")/.." && pwd)"
conformance="$root/../shared/conformance/stablehlo-testdata"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
check() {  # $1: name, $2: file holding printed text
  if "$opt" --allow-unregistered-dialect=false "$2" >/dev/null 2>"$work/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $1: $(head -c 300 "$work/err")"
  fi
}
# The builder's own program.
"$tlaloc" example | sed -n '/^module /,/^}$/p' >"$work/example.mlir"
check example "$work/example.mlir"
# Every conformance program, parsed and printed back by Tlaloc.
for f in "$conformance"/*.mlir; do
  name="$(basename "$f")"
  "$tlaloc" run --print "$f" 2>/dev/null | sed -n '/^module /,/^}$/p' >"$work/p.mlir"
  [ -s "$work/p.mlir" ] || continue
  check "$name" "$work/p.mlir"
done
echo "stablehlo-opt: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
