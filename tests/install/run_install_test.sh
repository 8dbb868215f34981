#!/usr/bin/env bash
# Installs the built library into a temporary prefix, then builds and runs a tiny consumer
# project that uses find_package(Tlaloc) — the way a C++ user would.
set -euo pipefail
src="$1"
bin="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$bin" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"

# The installed CLI works outside the checkout: init-model finds the Qwen3 tokenizer installed in
# <prefix>/share/tlaloc (found from the binary's own location, here a moved prefix).
tokenizer="$src/data/qwen3/tokenizer.json"
tlaloc="$work/prefix/bin/tlaloc"
[ -x "$tlaloc" ] || { echo "FAIL: the install has no bin/tlaloc"; exit 1; }
[ -f "$tokenizer" ] || { echo "FAIL: the checkout lacks $tokenizer"; exit 1; }
{
  cmp -s "$tokenizer" "$work/prefix/share/tlaloc/qwen3-tokenizer.json" ||
    { echo "FAIL: the install lacks share/tlaloc/qwen3-tokenizer.json"; exit 1; }
  mv "$work/prefix" "$work/moved"
  tlaloc="$work/moved/bin/tlaloc"
  (cd "$work" && env -u TLALOC_QWEN3_TOKENIZER "$tlaloc" init-model --preset tiny tiny) ||
    { echo "FAIL: the installed tlaloc init-model --preset tiny"; exit 1; }
  cmp -s "$tokenizer" "$work/tiny/tokenizer.json" ||
    { echo "FAIL: init-model copied another tokenizer.json"; exit 1; }
  [ -f "$work/tiny/tokenizer_config.json" ] || { echo "FAIL: no tokenizer_config.json"; exit 1; }
  # Without the installed copy the error lists every place it looked.
  rm "$work/moved/share/tlaloc/qwen3-tokenizer.json"
  set +e
  (cd "$work" && env -u TLALOC_QWEN3_TOKENIZER "$tlaloc" init-model --preset tiny tiny2) \
    2>"$work/err"
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || { echo "FAIL: exit $rc without a tokenizer, expected 1"; exit 1; }
  grep -q "$work/moved/share/tlaloc/qwen3-tokenizer.json" "$work/err" &&
    grep -q "data/qwen3/tokenizer.json" "$work/err" ||
    { echo "FAIL: the error does not list the places looked:"; cat "$work/err"; exit 1; }
  echo "installed tlaloc init-model: ok"
}
