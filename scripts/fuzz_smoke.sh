#!/usr/bin/env bash
# Fuzz smoke test: builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan, every report
# fatal) and runs each for N seconds over its seed corpus fuzz/corpus/<target>/. Fails on the
# first crash, sanitizer report, timeout or out-of-memory; the input that did it is saved as
# <out>/<target>/crash-* (or timeout-*, oom-*) and the fuzzer's log is printed.
# Usage: scripts/fuzz_smoke.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
# Env: TLALOC_FUZZ_BUILD_DIR (default build-fuzz; an existing clang tree such as build-clang is
#      reused as configured), TLALOC_FUZZ_OUT (default $build/fuzz-smoke),
#      TLALOC_FUZZ_JOBS (build jobs, default nproc).
# New inputs the fuzzer finds go to a scratch corpus under the output directory, never into
# fuzz/corpus/, so a run leaves the source tree untouched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
secs="${1:-30}"
if [ $# -gt 0 ]; then shift; fi
build="${TLALOC_FUZZ_BUILD_DIR:-build-fuzz}"
out="${TLALOC_FUZZ_OUT:-$build/fuzz-smoke}"
jobs="${TLALOC_FUZZ_JOBS:-$(nproc)}"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi

if [ -f "$build/CMakeCache.txt" ]; then
  # An existing tree (e.g. build-clang) keeps its settings; it must be a clang one.
  grep -q '^CMAKE_CXX_COMPILER:.*clang' "$build/CMakeCache.txt" ||
    { echo "fuzz_smoke: $build is not a clang build" >&2; exit 2; }
  cmake -S . -B "$build" -DTLALOC_FUZZ=ON >/dev/null
else
  # Tests and benchmarks are not needed to fuzz; the libraries get the fuzzer flags.
  CC="${CC:-clang}" CXX="${CXX:-clang++}" cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Debug -DTLALOC_FUZZ=ON -DTLALOC_BUILD_TESTS=OFF -DTLALOC_BUILD_BENCH=OFF \
    >/dev/null
fi
build_start=$SECONDS
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "fuzz_smoke: built ${#targets[@]} targets in $((SECONDS - build_start)) s"

failed=()
for t in "${targets[@]}"; do
  seeds="fuzz/corpus/$t"
  [ -d "$seeds" ] || { echo "fuzz_smoke: $t has no seed corpus $seeds" >&2; exit 2; }
  # A dictionary of the format's keywords, when the target has one.
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  work="$out/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  start=$SECONDS
  # Scratch corpus first: libFuzzer writes what it finds into the first directory.
  if ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$build/fuzz/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 "${dict[@]}" \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds" \
    >"$work/log.txt" 2>&1; then
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || true)"
    echo "fuzz_smoke: $t ok, $((SECONDS - start)) s, ${execs:-?} runs"
  else
    echo "fuzz_smoke: $t FAILED after $((SECONDS - start)) s; log $work/log.txt" >&2
    tail -n 60 "$work/log.txt" >&2
    ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-* 2>/dev/null >&2 || true
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz_smoke: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz_smoke: all ${#targets[@]} targets ran $secs s without a finding"
