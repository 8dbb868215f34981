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
