#!/usr/bin/env bash
# The bring-up session rehearsed with TARGET=cpu, as CI can (docs/BRINGUP.md): the tarball built
# from this build tree by scripts/bringup/prepare.sh, unpacked in a temporary folder, its
# session.sh run there. Checks: the bundle loads its libraries from its own lib/; preflight
# passes; every lane runs or skips by name; the summary, environment.txt (dump flags removed)
# and the results tarball are produced; a lane whose tests all skip is NO TEST PASSED (exit 1),
# and a lane filter pattern that selects no test (a renamed suite) fails naming it (exit 1);
# a forced preflight failure stops before the lanes with the reason (exit 2), as TARGET=tpu does
# on a machine without a TPU, and a chip another process holds (a fake device node); `tlaloc aot`
# compiles the programs the lanes recorded for cpu:4.
# Lane filters are narrowed (BRINGUP_LANE_*) to keep it to a minute or two on two cores.
# Usage: bringup_rehearsal_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
# shellcheck source=../cli_test_lib.sh
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test  # $work (removed on exit), fail, $failures

echo "--- prepare.sh"
BRINGUP_OUT=$work/bringup-session.tar.gz bash "$src/scripts/bringup/prepare.sh" "$build" ||
  { echo "FAIL: prepare.sh"; exit 1; }
# shellcheck disable=SC2015  # either failing is fatal
mkdir -p "$work/unpacked" && tar -C "$work/unpacked" -xzf "$work/bringup-session.tar.gz" ||
  { echo "FAIL: the tarball does not unpack"; exit 1; }
bundle=$work/unpacked/bringup-session
for f in session.sh versions MANIFEST bin/tlaloc lib/libtlaloc_pjrt_cpu.so bin/tlaloc_pjrt_tests; do
  [ -e "$bundle/$f" ] || fail "the tarball has no $f"
done
grep -q '^commit: ' "$bundle/MANIFEST" || fail "MANIFEST names no commit"
grep -q '^plugin_pin: LIBTPU_VERSION=' "$bundle/MANIFEST" || fail "MANIFEST pins no libtpu"
grep -q '^plugin_pin: JAX_CUDA13_PJRT_VERSION=' "$bundle/MANIFEST" || fail "MANIFEST pins no jax-cuda13-pjrt"
grep -q '^glibc_required: GLIBC_' "$bundle/MANIFEST" || fail "MANIFEST has no glibc_required"
# Every library but glibc's and the C++ runtime's (lib/compat, taken only where the machine's
# is too old) comes from the bundle.
[ -f "$bundle/lib/compat/libstdc++.so.6" ] || fail "the tarball has no lib/compat/libstdc++.so.6"
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  # glibc's objects, the same list as prepare.sh's is_glibc (libresolv comes with libcurl).
  case "$name" in linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | \
    libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libmvec.so.* | \
    libstdc++.so.* | libgcc_s.so.*) continue ;; esac
  case "$path" in "$bundle"/lib/*) ;; *) fail "bin/tlaloc loads $name from $path, not the bundle" ;; esac
done < <(LD_LIBRARY_PATH=$bundle/lib ldd "$bundle/bin/tlaloc")

# The Pallas-made TPU kernels and their kernelized programs travel in the tarball (the
# checkout's venv has jax; without it prepare.sh says so in the MANIFEST and this fails under CI),
# and a TPU session's kernels lane runs the PallasTpuKernels tests on them and compiles aot/.
if grep -q '^pallas_tpu: kernels/pallas-tpu: ' "$bundle/MANIFEST"; then
  pallas=$bundle/kernels/pallas-tpu
  for f in build/tlaloc-tpu/metadata.json build/tlaloc-tpu/paged_attention_qwen3-0.6b.mosaic \
    check/index.tsv check/paged_attention.kernel_out0.npy aot/index.tsv; do
    [ -e "$pallas/$f" ] || fail "the tarball has no kernels/pallas-tpu/$f"
  done
  for program in tiny_decode_pallas paged_attention_qwen3_0_6b paged_attention_kernelized; do
    grep -q "^$program.mlir" "$pallas/aot/index.tsv" || fail "kernels/pallas-tpu/aot has no $program"
  done
  grep -q '@tpu_custom_call' "$pallas/aot/paged_attention_kernelized.mlir" ||
    fail "the kernelized paged attention holds no tpu_custom_call"
  dry=$(TARGET=tpu bash "$bundle/session.sh" --dry-run kernels)
  echo "$dry"
  grep -q $'^kernels\ttlaloc_kernels_tests=PallasTpuKernels\.\*$' <<<"$dry" ||
    fail "TARGET=tpu's kernels lane does not run PallasTpuKernels.*"
  grep -qF "aot --plugin tpu --topology v6e:1x1 --out \"\$LANE_DIR/pallas-aot\" \"$pallas/aot\"" \
    <<<"$dry" || fail "TARGET=tpu's kernels lane does not compile kernels/pallas-tpu/aot"
elif [ "${CI:-}" = true ]; then
  fail "the tarball carries no kernels/pallas-tpu: $(grep '^pallas_tpu:' "$bundle/MANIFEST")"
else
  echo "SKIP (part): $(grep '^pallas_tpu:' "$bundle/MANIFEST")"
fi

# Narrow lanes: each still runs real tests of its kind.
export BRINGUP_LANE_training='tlaloc_train_tests=TrainerPjrt.*:AdamW.*;tlaloc_pjrt_tests=BackendParity.*'
export BRINGUP_LANE_suite='tlaloc_runtime_tests=*;tlaloc_support_tests=AtomicFileNames.*:MemoryInfo.*'
export FINETUNE_ARGS='--steps 2 --train-size 40 --held-out 2 --batch 2 --seq-len 64'

echo "--- session.sh, TARGET=cpu, every lane"
results=$work/results
TARGET=cpu MIN_FREE_GB=0 RESULTS_DIR=$results RECORD_PROGRAMS=1 \
  XLA_FLAGS='--xla_dump_to=/tmp/nowhere --xla_cpu_enable_fast_math=false' \
  LIBTPU_INIT_ARGS='--xla_dump_hlo_as_text' TLALOC_REHEARSAL_MARK=1 \
  bash "$bundle/session.sh" >"$work/session.out" 2>&1
rc=$?
cat "$work/session.out"
[ $rc -eq 0 ] || fail "session.sh TARGET=cpu exited $rc, expected 0"
grep -q '^preflight passed for TARGET=cpu' "$work/session.out" || fail "preflight did not pass"
run=$(find "$results" -maxdepth 1 -type d -name 'bringup-results-*' | head -n 1)
[ -n "$run" ] || { echo "FAIL: no bringup-results-* folder"; exit 1; }
ls "$results"/bringup-results-*.tar.gz >/dev/null 2>&1 || fail "no bringup-results-*.tar.gz"
for lane in g2b kernels training multichip serving finetune suite; do
  line=$(grep -E "^$lane " "$run/summary.txt")
  case "$line" in
  *" PASSED "* | *" SKIPPED "*) ;;
  *) fail "lane $lane: '$line'" ;;
  esac
  [[ "$line" == *" PASSED "* ]] && [ ! -s "$run/lanes/$lane/tests.tsv" ] && fail "lane $lane lists no tests"
done
# Tests that cannot run here skip by name: the TPU's first-run questions on this CPU.
grep -q "^skipped	tlaloc_plugin_tests: TpuFirstRun.PlatformNameReportsTpu" "$run/lanes/g2b/tests.tsv" ||
  fail "TpuFirstRun.PlatformNameReportsTpu is not listed as skipped in g2b"
grep -q 'no TPU here' "$run"/lanes/g2b/tlaloc_plugin_tests*.log || fail "the TPU skip gives no reason"
# Dump flags removed, the rest recorded.
env_txt=$run/environment.txt
grep -q '^XLA_FLAGS=--xla_cpu_enable_fast_math=false$' "$env_txt" || fail "XLA_FLAGS not scrubbed: $(grep XLA_FLAGS "$env_txt")"
grep -q '^# removed from LIBTPU_INIT_ARGS.*--xla_dump_hlo_as_text' "$env_txt" || fail "LIBTPU_INIT_ARGS removal not recorded"
grep -q '^TLALOC_REHEARSAL_MARK=1$' "$env_txt" || fail "TLALOC_* not recorded in environment.txt"
grep -q '^TLALOC_TEST_PJRT_TARGET=.*/lib/libtlaloc_pjrt_cpu.so$' "$env_txt" || fail "the lanes' plugin is not the bundle's"
tar -tzf "$results"/bringup-results-*.tar.gz >"$work/results.list" || fail "the results tarball does not list"
for f in summary.txt environment.txt preflight.txt MANIFEST lanes/g2b/tests.tsv; do
  grep -q "/$f\$" "$work/results.list" || fail "the results tarball has no $f"
done

echo "--- tlaloc aot on the programs the lanes recorded"
[ -s "$run/programs/index.tsv" ] || fail "RECORD_PROGRAMS=1 recorded no program"
LD_LIBRARY_PATH=$bundle/lib "$bundle/bin/tlaloc" aot --plugin "$bundle/lib/libtlaloc_pjrt_cpu.so" \
  --topology cpu:4 --out "$work/aot" "$run/programs" >"$work/aot.out" 2>&1
tail -n 3 "$work/aot.out"
[ -s "$work/aot/summary.tsv" ] || fail "tlaloc aot wrote no summary.tsv"
ok_rows=$(awk -F'\t' 'NR > 1 && $11 == "ok"' "$work/aot/summary.tsv" | wc -l)
[ "$ok_rows" -ge 3 ] || fail "tlaloc aot compiled $ok_rows programs, expected the lanes' (>= 3)"
refused=$(awk -F'\t' 'NR > 1 && $11 != "ok"' "$work/aot/summary.tsv" | wc -l)
errors=$(find "$work/aot/errors" -type f | wc -l)
[ "$refused" -eq "$errors" ] || fail "$refused refused rows but $errors files in errors/"

echo "--- a lane whose tests all skip"
# TpuFirstRun skips without a TPU (the g2b lane above checked that it does).
BRINGUP_LANE_g2b='tlaloc_plugin_tests=TpuFirstRun.*' TARGET=cpu MIN_FREE_GB=0 \
  RESULTS_DIR=$work/empty bash "$bundle/session.sh" g2b >"$work/empty.out" 2>&1
rc=$?
cat "$work/empty.out"
[ $rc -eq 1 ] || fail "a lane with no test passed exited $rc, expected 1"
grep -qE '^g2b +NO TEST PASSED +0 +0 +[1-9]' "$work/empty.out" ||
  fail "the lane of skipped tests is not NO TEST PASSED"

echo "--- a lane filter pattern that selects no test (a renamed suite)"
BRINGUP_LANE_g2b='tlaloc_pjrt_tests=NoSuchSuite.*:SessionTest.*' TARGET=cpu MIN_FREE_GB=0 \
  RESULTS_DIR=$work/renamed bash "$bundle/session.sh" g2b >"$work/renamed.out" 2>&1
rc=$?
cat "$work/renamed.out"
[ $rc -eq 1 ] || fail "a lane with a pattern selecting nothing exited $rc, expected 1"
grep -qE '^g2b +FAILED +[0-9]+ +1 .*NoSuchSuite\.\* selects no test' "$work/renamed.out" ||
  fail "the lane does not fail naming the pattern that selects nothing"

echo "--- forced preflight failures"
TARGET=cpu MIN_FREE_GB=100000000 RESULTS_DIR=$work/refused bash "$bundle/session.sh" \
  >"$work/refused.out" 2>&1
rc=$?
cat "$work/refused.out"
[ $rc -eq 2 ] || fail "preflight with MIN_FREE_GB=100000000 exited $rc, expected 2"
grep -q 'REFUSED: disk: .*less than MIN_FREE_GB=100000000' "$work/refused.out" || fail "the refusal does not name MIN_FREE_GB"
grep -q '^lane ' "$work/refused.out" && fail "a lane ran after the preflight refused"
[ -d "$(find "$work/refused" -maxdepth 1 -name 'bringup-results-*' -type d | head -n1)/lanes" ] &&
  fail "lanes/ exists after a refusal"
if [ ! -e /dev/accel0 ] && [ ! -d /dev/vfio ]; then
  TARGET=tpu INSTALL_PLUGIN=0 MIN_FREE_GB=0 RESULTS_DIR=$work/tpu bash "$bundle/session.sh" \
    >"$work/tpu.out" 2>&1
  rc=$?
  cat "$work/tpu.out"
  [ $rc -eq 2 ] || fail "TARGET=tpu without a TPU exited $rc, expected 2"
  grep -q 'REFUSED: device nodes: no TPU device node' "$work/tpu.out" || fail "no device-node refusal"
  grep -q 'REFUSED: plugin: no tpu plugin resolves' "$work/tpu.out" || fail "no plugin refusal"
fi
# A chip another process holds is refused naming the process; a daemon named in
# BRINGUP_IGNORE_HOLDERS is not counted.
mkdir -p "$work/dev" && : >"$work/dev/accel0"
sleep 60 3<"$work/dev/accel0" &
holder=$!
BRINGUP_DEV_ROOT=$work/dev TARGET=tpu INSTALL_PLUGIN=0 MIN_FREE_GB=0 RESULTS_DIR=$work/held \
  bash "$bundle/session.sh" g2b >"$work/held.out" 2>&1
grep -q "REFUSED: chips held by another process: $holder (sleep 60 ) holds $work/dev/accel0" \
  "$work/held.out" || fail "a held chip was not refused naming the process: $(cat "$work/held.out")"
grep -q 'device nodes' "$work/held.out" && fail "a present device node was refused"
BRINGUP_IGNORE_HOLDERS=sleep BRINGUP_DEV_ROOT=$work/dev TARGET=tpu INSTALL_PLUGIN=0 MIN_FREE_GB=0 \
  RESULTS_DIR=$work/held2 bash "$bundle/session.sh" g2b >"$work/held2.out" 2>&1
grep -q 'chips held' "$work/held2.out" && fail "an ignored holder was counted"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null

# A damaged bundle is refused before anything runs.
echo corrupt >>"$bundle/versions"
TARGET=cpu MIN_FREE_GB=0 RESULTS_DIR=$work/damaged bash "$bundle/session.sh" g2b >"$work/damaged.out" 2>&1
rc=$?
# shellcheck disable=SC2015  # either failing is a failure
[ $rc -eq 2 ] && grep -q 'REFUSED: bundle: files differ' "$work/damaged.out" ||
  fail "a modified bundle file was not refused (exit $rc): $(cat "$work/damaged.out")"

if [ $failures -gt 0 ]; then
  echo "bringup rehearsal: $failures failure(s)"
  exit 1
fi
echo "bringup rehearsal: ok"
