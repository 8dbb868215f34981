#!/usr/bin/env bash
# The README's "Kernel examples" commands, extracted from README.md and run as written (in a
# scratch folder whose build/ and data/ are the build tree and the checkout's data/): the
# example repositories the build assembled resolve, verify against their digests and kernelize
# generate. The `cmake --build` line is the build this test runs after, so it is not rerun
# (a build inside ctest could rebuild the binary under test).
# Usage: kernel_examples_test.sh TLALOC SOURCE_DIR BUILD_DIR
set -euo pipefail
TLALOC=$1 SOURCE_DIR=$2 BUILD_DIR=$3
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$SOURCE_DIR/data/qwen3/tokenizer.json" ] || fail "the checkout lacks data/qwen3/tokenizer.json (scripts/setup.sh)"
[ -d "$BUILD_DIR/examples/kernels/rmsnorm/build" ] ||
  fail "$BUILD_DIR/examples/kernels/ is not assembled: build the kernel_examples target"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/out"
ln -s "$TLALOC" "$work/bin/tlaloc"
ln -s "$BUILD_DIR" "$work/build"
ln -s "$SOURCE_DIR/data" "$work/data"
# The lines of the ```bash block after the "### Kernel examples" heading.
awk '/^### Kernel examples/ {s=1} s && /^```bash/ {b=1; next} b && /^```/ {exit} b {print}' \
  "$SOURCE_DIR/README.md" >"$work/commands.txt"
[ "$(grep -c '^tlaloc ' "$work/commands.txt")" -ge 5 ] || fail "README's kernel example block not found: $(cat "$work/commands.txt")"
n=0
while IFS= read -r line; do
  case "$line" in cmake\ *) echo "skip (the build): $line"; continue ;; esac
  n=$((n + 1))
  (cd "$work" && PATH="$work/bin:$PATH" bash -c "$line") >"$work/out.$n" 2>"$work/err.$n" ||
    fail "README line failed: $line
$(cat "$work/out.$n" "$work/err.$n")"
  echo "ok: $line"
done <"$work/commands.txt"
# What they must have said: the layers, every variant verified, the cpu variant chosen, and
# generate running layers as kernels.
grep -q RMSNorm "$work/out.1" || fail "kernels info names no RMSNorm: $(cat "$work/out.1")"
! grep -v ': ok$' "$work/out.2" | grep -q . || fail "kernels verify: $(cat "$work/out.2")"
[ "$(grep -c ': ok$' "$work/out.2")" -ge 2 ] || fail "kernels verify checked fewer than 2 variants: $(cat "$work/out.2")"
grep -q "tlaloc1-cpu" "$work/out.3" || fail "kernels variants --target cpu: $(cat "$work/out.3")"
calls=$(grep -o '"kernel_calls":[0-9]*' "$work/out.$n" | cut -d: -f2)
[ -n "$calls" ] && [ "$calls" -gt 0 ] || fail "generate --kernels ran no kernel: $(cat "$work/out.$n" "$work/err.$n")"
echo "PASS: the README's kernel example commands run as written ($calls kernel calls)"
