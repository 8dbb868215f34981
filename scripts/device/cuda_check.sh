#!/usr/bin/env bash
# Tlaloc on a GPU machine through XLA:CUDA's PJRT plugin (jax-cuda13-pjrt's xla_cuda_plugin.so):
#   1. configure and build Tlaloc there (Ninja when present, else Unix Makefiles);
#   2. `tlaloc doctor --load` shows which plugin the cuda target resolves to, and opens it;
#   3. a tiny random Qwen3 generates with --target cuda and --target interp, greedy and sampled,
#      and the tokens are compared;
#   4. the session, backend parity and generation tests, then the conformance programs, through
#      it (TLALOC_TEST_PJRT_TARGET=cuda), compared with the interpreter.
# Everything is logged under $OUT (default ./device-out); $OUT/summary.txt has one line a step.
# Run from the repository root, e.g. through the device tool, after
#   cp -r ../shared/conformance/stablehlo-testdata build-conformance   (7 MB, git-ignored)
# with
#   carry: build-conformance
#   command: bash scripts/device/cuda_check.sh
# Environment: TLALOC_CONFORMANCE_DIR (the .mlir programs; default build-conformance, else
# ../shared/conformance/stablehlo-testdata), TLALOC_PJRT_PLUGIN_PATH (a plugin to use instead of
# the resolved one), JOBS (build parallelism, default: all cores), SKIP_CONFORMANCE=1.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
BUILD=${BUILD:-$ROOT/build-device}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
FAILED=0

say() { printf '\n=== %s ===\n' "$*"; }
note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
# step NAME LOG CMD...: runs a step, its output to $OUT/LOG, and records PASS/FAIL with the time.
step() {
  local name=$1 log=$OUT/$2
  shift 2
  say "$name"
  local t0=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  tail -n 25 "$log"
  if [ $rc -eq 0 ]; then
    note "PASS  $name ($((SECONDS - t0)) s, log $(basename "$log"))"
  else
    note "FAIL  $name: exit $rc ($((SECONDS - t0)) s, log $(basename "$log"))"
    FAILED=1
  fi
  return $rc
}

say "machine"
{
  date -u
  uname -a
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "nvidia-smi: not available"
  command -v cmake ninja make g++ c++ python3 2>&1
  python3 -c 'import sys; print(sys.version)' 2>&1
} | tee "$OUT/machine.txt"
note "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || echo 'no nvidia-smi')"

# 1. Build.
if ! command -v cmake >/dev/null; then
  note "FAIL  build: cmake is not installed on this machine"
  exit 1
fi
GENERATOR="Unix Makefiles"
command -v ninja >/dev/null && GENERATOR=Ninja
note "build: $GENERATOR, $JOBS jobs, in $BUILD"
TESTS=1
# shellcheck disable=SC2317  # called through step
configure() {
  cmake -S "$ROOT" -B "$BUILD" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release \
    -DTLALOC_BUILD_BENCH=OFF -DTLALOC_BUILD_TESTS="$1"
}
if ! step "configure ($GENERATOR, with tests)" configure.log configure ON; then
  grep -iE "could not find|not found|missing" "$OUT/configure.log" | head -n 20 | tee -a "$SUMMARY"
  # Without GoogleTest the CLI still runs the generation comparison.
  TESTS=0
  rm -rf "$BUILD"
  step "configure ($GENERATOR, without tests)" configure_no_tests.log configure OFF || {
    grep -iE "could not find|not found|missing" "$OUT/configure_no_tests.log" | head -n 20 |
      tee -a "$SUMMARY"
    exit 1
  }
fi
TARGETS=(tlaloc_cli tlaloc_pjrt_cpu)
[ $TESTS = 1 ] && TARGETS+=(tlaloc_pjrt_tests tlaloc_plugin_tests)
step "build ${TARGETS[*]}" build.log cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" ||
  exit 1
TLALOC=$BUILD/apps/tlaloc

# 2. Which plugin the cuda target resolves to, and what it reports once loaded.
step "tlaloc doctor --target cuda --load" doctor.log "$TLALOC" doctor --target cuda --load
PLUGIN=$(sed -n 's/^target cuda: //p' "$OUT/doctor.log" | head -n1)
if [ -z "$PLUGIN" ] || [ "$PLUGIN" = "NOT FOUND" ]; then
  note "FAIL  no XLA:CUDA plugin resolves (see doctor.log); set TLALOC_PJRT_PLUGIN_PATH"
  exit 1
fi
note "cuda plugin: $PLUGIN"
if grep -q "session: FAILED" "$OUT/doctor.log"; then
  note "FAIL  the cuda plugin does not open: $(grep 'session: FAILED' "$OUT/doctor.log" | head -n1)"
  exit 1
fi
grep -E "platform|device 0" "$OUT/doctor.log" | head -n 3 | sed 's/^ */  /' | tee -a "$SUMMARY"

# 3. A tiny Qwen3 through --target cuda and --target interp (first: the quickest answer).
MODEL=$OUT/tiny-qwen3
TOKENIZER=$ROOT/data/qwen3/tokenizer.json
if [ ! -f "$TOKENIZER" ]; then
  note "SKIP  generation: no tokenizer.json at $TOKENIZER (the checkout carries it)"
else
  rm -rf "$MODEL"
  step "tlaloc init-model --preset tiny" init_model.log \
    "$TLALOC" init-model --preset tiny --seed 7 --tokenizer "$TOKENIZER" "$MODEL"
  for mode in greedy sampled; do
    extra=()
    [ "$mode" = sampled ] && extra=(--temperature 0.8 --top-k 40 --top-p 0.95 --seed 11)
    for target in interp cuda; do
      step "generate --target $target ($mode)" "generate_${target}_${mode}.log" \
        "$TLALOC" generate --model "$MODEL" --prompt "The quick brown fox" --max-new-tokens 16 \
        --json --target "$target" "${extra[@]}"
      grep -o '"generated_ids":\[[^]]*\]' "$OUT/generate_${target}_${mode}.log" \
        >"$OUT/ids_${target}_${mode}.txt" || true
      grep "tokens/s" "$OUT/generate_${target}_${mode}.log" | sed 's/^/  /' | tee -a "$SUMMARY"
    done
    if [ -s "$OUT/ids_cuda_${mode}.txt" ] &&
      cmp -s "$OUT/ids_interp_${mode}.txt" "$OUT/ids_cuda_${mode}.txt"; then
      note "PASS  $mode tokens identical on cuda and interp: $(cat "$OUT/ids_cuda_${mode}.txt")"
    else
      note "FAIL  $mode tokens differ: interp $(cat "$OUT/ids_interp_${mode}.txt" 2>/dev/null)" \
        "cuda $(cat "$OUT/ids_cuda_${mode}.txt" 2>/dev/null)"
      FAILED=1
    fi
  done
fi

# 4. Tests through the cuda lane; the conformance programs last (the longest step).
if [ $TESTS = 0 ]; then
  note "SKIP  tests: GoogleTest is missing here (see configure.log)"
else
  export TLALOC_TEST_PJRT_TARGET=cuda
  step "PJRT session and backend parity tests (cuda lane)" pjrt_tests.log \
    "$BUILD/tests/tlaloc_pjrt_tests" --gtest_filter='SessionTest.*:BackendParity.*'
  step "generation through the plugin vs the interpreter (cuda lane)" plugin_generate.log \
    "$BUILD/tests/tlaloc_plugin_tests" --gtest_filter='PluginGenerate.*'
  if [ "${SKIP_CONFORMANCE:-0}" != 1 ]; then
    if [ -z "${TLALOC_CONFORMANCE_DIR:-}" ]; then
      TLALOC_CONFORMANCE_DIR=$ROOT/build-conformance
      [ -d "$TLALOC_CONFORMANCE_DIR" ] ||
        TLALOC_CONFORMANCE_DIR=$ROOT/../shared/conformance/stablehlo-testdata
    fi
    export TLALOC_CONFORMANCE_DIR
    if [ -d "$TLALOC_CONFORMANCE_DIR" ]; then
      step "conformance programs through XLA:CUDA vs the interpreter" conformance.log \
        "$BUILD/tests/tlaloc_plugin_tests" --gtest_filter='PluginConformance.*'
      grep -E "^plugin conformance" "$OUT/conformance.log" | tee -a "$SUMMARY"
    else
      note "SKIP  conformance: no programs at $TLALOC_CONFORMANCE_DIR (set TLALOC_CONFORMANCE_DIR)"
    fi
  fi
  unset TLALOC_TEST_PJRT_TARGET
fi

say "summary ($SUMMARY)"
cat "$SUMMARY"
exit $FAILED
