#!/usr/bin/env bash
# Builds Tlaloc and runs the whole test suite (then the core tests again under ASan + UBSan).
# Usage: scripts/test.sh [ctest args...]   Set TLALOC_SKIP_SANITIZE=1 to skip the sanitizer pass.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
jobs="$(nproc)"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" "$@"

if [ "${TLALOC_SKIP_SANITIZE:-0}" != "1" ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTLALOC_SANITIZE=ON \
    -DTLALOC_BUILD_BENCH=OFF >/dev/null
  # The core layers' tests under the sanitizers (the conformance sweep runs once, above).
  core_targets=()
  for layer in support ir ops interp stablehlo builder; do
    [ -d "tests/$layer" ] && core_targets+=(--target "tlaloc_${layer}_tests")
  done
  cmake --build build-asan -j "$jobs" "${core_targets[@]}"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L core -E '^Conformance\.'
fi
