#!/usr/bin/env bash
# The bring-up session: runs inside an unpacked bringup-session/ (scripts/bringup/prepare.sh) on
# the machine being certified, with no compiler and no checkout (docs/BRINGUP.md).
#
#   TARGET=cpu|xla-cpu|cuda|tpu bringup-session/session.sh [LANE...]   (default: every lane)
#
# xla-cpu is XLA's own CPU PJRT plugin (the lammps-jax-pjrt-cpu wheel): the rehearsal of the
# XLA half of a GPU or TPU session on any x86_64 machine, multichip on 4 XLA:CPU devices.
#
# 1. Preflight: refuses, naming each missing thing, before any lane runs (exit 2): the bundle's
#    checksums; the machine's glibc; device nodes for the target (/dev/accel* or /dev/vfio/N for
#    tpu, /dev/nvidia<N> for cuda; none for cpu and xla-cpu); chips held by another process;
#    less than MIN_FREE_GB free in $HOME; the target's plugin (installed from `versions` with
#    pip when missing and INSTALL_PLUGIN allows); the smoke test that the plugin reports the
#    target's platform (and, for xla-cpu, XLA's xla_version attribute).
# 2. --xla_dump* flags are removed from XLA_FLAGS and LIBTPU_INIT_ARGS unless DUMPS=1; the
#    XLA_*, LIBTPU*, TPU_*, JAX_* and TLALOC_* variables are written to environment.txt.
# 3. Lanes (lane_entries below), each under LANE_TIMEOUT seconds, continuing past failures; per
#    lane the passed / failed / skipped counts from the gtest XML; a lane that exits 0 with no
#    test passed is NO TEST PASSED, never green; a filter pattern that selects no test (a
#    renamed suite) counts as a failure naming the pattern.
# 4. summary.txt (printed) and bringup-results-<time>.tar.gz in RESULTS_DIR.
# Exit: 0 every lane PASSED or SKIPPED by name, 1 otherwise, 2 preflight refused.
# --dry-run prints each chosen lane's entries for TARGET (as they would run) and exits 0, with no
# preflight, no results and nothing run.
#
# kernels/pallas-tpu/ (when prepare.sh shipped it): Mosaic kernels made from Pallas on the
# development machine (scripts/kernels/pallas_tpu_kernels.py --check), with the references they
# are checked against and aot/, the kernelized programs; the kernels lane runs PallasTpuKernels.*
# on them (TLALOC_PALLAS_REPO) and, for TARGET=tpu, compiles aot/ with the machine's libtpu
# (`tlaloc aot --plugin tpu --topology $PALLAS_AOT_TOPOLOGY`, default v6e:1x1).
#
# Environment: TARGET (tpu), MIN_FREE_GB (10), LANE_TIMEOUT (1800 s), DUMPS (0), RESULTS_DIR
# ($HOME), INSTALL_PLUGIN (auto: pip-install the pinned plugin when none resolves; 0: never),
# BRINGUP_VENV ($HOME/tlaloc-bringup-venv), RECORD_PROGRAMS=1 (TLALOC_PROGRAMS_DIR under the
# results), FINETUNE_ARGS (the finetune lane's finetune-demo flags), MULTICHIP_MIN_CHIPS (4),
# BRINGUP_LANE_<lane> ('BINARY=GTEST_FILTER;...' or 'cmd:NAME=COMMAND' entries replacing a lane's),
# BRINGUP_IGNORE_HOLDERS (process names whose open device nodes do not count as held chips:
# "nvidia-persistenced nv-hostengine").
set -u -o pipefail

BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$BUNDLE/bin
TARGET=${TARGET:-tpu}
MIN_FREE_GB=${MIN_FREE_GB:-10}
LANE_TIMEOUT=${LANE_TIMEOUT:-1800}
DUMPS=${DUMPS:-0}
RESULTS_DIR=${RESULTS_DIR:-$HOME}
INSTALL_PLUGIN=${INSTALL_PLUGIN:-auto}
MULTICHIP_MIN_CHIPS=${MULTICHIP_MIN_CHIPS:-4}
ALL_LANES=(g2b kernels training multichip serving finetune suite)

usage() {
  sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}
lanes=()
DRY_RUN=0
for a in "$@"; do
  case "$a" in
  -h | --help) usage; exit 0 ;;
  --dry-run) DRY_RUN=1 ;;
  g2b | kernels | training | multichip | serving | finetune | suite) lanes+=("$a") ;;
  *)
    echo "session.sh: unknown lane '$a' (lanes: ${ALL_LANES[*]})" >&2
    exit 2
    ;;
  esac
done
[ ${#lanes[@]} -gt 0 ] || lanes=("${ALL_LANES[@]}")
case "$TARGET" in
cpu | xla-cpu | cuda | tpu) ;;
*) echo "session.sh: TARGET='$TARGET': expected cpu, xla-cpu, cuda or tpu" >&2; exit 2 ;;
esac
case "$MIN_FREE_GB$LANE_TIMEOUT" in
*[!0-9]*) echo "session.sh: MIN_FREE_GB and LANE_TIMEOUT must be whole numbers" >&2; exit 2 ;;
esac

PALLAS_REPO=$BUNDLE/kernels/pallas-tpu
[ -d "$PALLAS_REPO" ] && export TLALOC_PALLAS_REPO=$PALLAS_REPO
PALLAS_AOT_TOPOLOGY=${PALLAS_AOT_TOPOLOGY:-v6e:1x1}
# ------------------------------------------------------------------------------------ lanes
# Each lane is a list of entries: BINARY=GTEST_FILTER, or cmd:NAME=COMMAND (one test, passed
# when it exits 0). The device tests choose their plugin through TLALOC_TEST_PJRT_TARGET.
lane_entries() {
  local override_var=BRINGUP_LANE_$1
  if [ -n "${!override_var:-}" ]; then
    tr ';' '\n' <<<"${!override_var}"
    return
  fi
  case "$1" in
  g2b) # the first questions to a new target: platform, numerics the runbook lists, the ABI
    echo "tlaloc_plugin_tests=TpuFirstRun.*"
    echo "tlaloc_pjrt_tests=PjrtSessionPlatform.*:SessionTest.*:CompileOptions.*:CreateOptions.*:PjrtCApi.*:PjrtApi.*"
    # The same questions (threefry bits, the bf16 convert pair and dot, bytes on the device) on
    # any target's plugin, against the interpreter (docs/PJRT.md, "XLA:CPU").
    [ "$TARGET" = cpu ] || echo "tlaloc_plugin_tests=LaneNumerics.*"
    ;;
  kernels) # kernel variants for the target and mappings; KernelizeTest needs the checkout's
    # examples/kernels (the suite lane runs it)
    echo "tlaloc_kernels_tests=KernelVariants.*:KernelMappingJson.*:MetadataFuzzFindings.*"
    if [ -d "$PALLAS_REPO" ]; then
      # The Pallas-made Mosaic payloads: kernelize claims the tiny decode step and
      # nn::PagedAttention with them, they round-trip the parser, the layers they replace match
      # Pallas' interpret mode; on a TPU the kernelized programs compile with its libtpu.
      echo "tlaloc_kernels_tests=PallasTpuKernels.*"
      [ "$TARGET" = tpu ] &&
        echo "cmd:pallas-aot=\"\$BIN/tlaloc\" aot --plugin tpu --topology $PALLAS_AOT_TOPOLOGY --out \"\$LANE_DIR/pallas-aot\" \"$PALLAS_REPO/aot\""
    fi
    ;;
  training) # the train step through the target's plugin against the interpreter
    echo "tlaloc_train_tests=TrainerPjrt.*:AdamW.*:LmHeadCrossEntropy.*"
    echo "tlaloc_pjrt_tests=BackendParity.*"
    # Gradients with remat, AdamW donation honoured in place, compiled memory against Tlaloc's
    # prediction; the sharding plans are the multichip lane's.
    [ "$TARGET" = cpu ] ||
      echo "tlaloc_train_tests=LaneTrain.*:LaneMemory.*:-LaneTrain.ShardingPlans*:LaneTrain.ShardyGlobal*"
    ;;
  multichip) # collectives across devices (Tlaloc's plugin and interpreter, docs/SHARDING.md)
    echo "tlaloc_plugin_tests=PluginDevices.*"
    echo "tlaloc_runtime_tests=MultiDeviceBackend.*"
    if [ "$TARGET" != cpu ]; then
      # The sharding plans on the target's own devices (2 and 4): tensor-parallel generation,
      # the per-device train steps of dp, fsdp, tp, dp_tp and the Shardy global program that
      # XLA partitions itself (docs/PJRT.md, "XLA:CPU").
      echo "tlaloc_plugin_tests=LaneQwen3.TensorParallel*"
      echo "tlaloc_train_tests=LaneTrain.ShardingPlansGiveTheUnshardedLosses:LaneTrain.ShardyGlobalProgramGivesTheUnshardedStep"
    fi
    ;;
  serving) # Qwen3 generation through the plugin: the interpreter's tokens and logits
    echo "tlaloc_plugin_tests=PluginGenerate.*:PluginMemoryStats.*"
    # Dense, MoE and int8 Qwen3, paged-KV decode and top-k 4,096 sampling against the interpreter.
    [ "$TARGET" = cpu ] || echo "tlaloc_plugin_tests=LaneQwen3.*:-LaneQwen3.TensorParallel*"
    ;;
  finetune) # the whole fine-tuning cycle on the target
    echo "cmd:finetune-demo=\"\$BIN/tlaloc\" finetune-demo --target $TARGET --out \"\$LANE_DIR/finetune-demo\" ${FINETUNE_ARGS:---steps 300}"
    ;;
  suite) # every test binary of the bundle, whole
    local b
    for b in "$BIN"/tlaloc_*_tests; do echo "$(basename "$b")=*"; done
    ;;
  esac
}
# Why a lane cannot run on this machine, or nothing.
lane_skip_reason() {
  case "$1" in
  multichip)
    # Both CPU plugins create the devices a client asks for (cpu_device_count): the lane's
    # tests ask for 2 and 4.
    if [ "$TARGET" != cpu ] && [ "$TARGET" != xla-cpu ] && [ "$CHIPS" -lt "$MULTICHIP_MIN_CHIPS" ]; then
      echo "needs $MULTICHIP_MIN_CHIPS chips (MULTICHIP_MIN_CHIPS), this machine has $CHIPS"
    fi
    ;;
  esac
}

if [ "$DRY_RUN" = 1 ]; then
  for lane in "${lanes[@]}"; do
    while IFS= read -r entry; do
      [ -n "$entry" ] && printf '%s\t%s\n' "$lane" "$entry"
    done < <(lane_entries "$lane")
  done
  exit 0
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$RESULTS_DIR" || { echo "session.sh: cannot create RESULTS_DIR=$RESULTS_DIR" >&2; exit 2; }
WORK=$RESULTS_DIR/bringup-results-$STAMP
mkdir -p "$WORK"
RESULTS_TAR=$RESULTS_DIR/bringup-results-$STAMP.tar.gz
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say() { printf '%s\n' "$*" | tee -a "$WORK/session.log"; }
pack_results() {
  tar -C "$RESULTS_DIR" -czf "$RESULTS_TAR" "bringup-results-$STAMP" &&
    say "results: $RESULTS_TAR"
}

# ------------------------------------------------------------------------------ environment
# XLA dumps are several GB a program: kept out unless asked for.
scrub_dump_flags() {  # scrub_dump_flags VAR
  local var=$1 tok kept=() removed=()
  [ -n "${!var:-}" ] || return 0
  for tok in ${!var}; do
    case "$tok" in
    --xla_dump*) removed+=("$tok") ;;
    *) kept+=("$tok") ;;
    esac
  done
  if [ ${#removed[@]} -gt 0 ]; then
    echo "# removed from $var (DUMPS=1 keeps them): ${removed[*]}" >>"$WORK/environment.txt"
    export "$var=${kept[*]}"
  fi
}
: >"$WORK/environment.txt"
if [ "$DUMPS" != 1 ]; then
  scrub_dump_flags XLA_FLAGS
  scrub_dump_flags LIBTPU_INIT_ARGS
fi
case "$TARGET" in
cpu) export TLALOC_TEST_PJRT_TARGET=$BUNDLE/lib/libtlaloc_pjrt_cpu.so ;;
*) export TLALOC_TEST_PJRT_TARGET=$TARGET ;;
esac
[ "${RECORD_PROGRAMS:-0}" = 1 ] && export TLALOC_PROGRAMS_DIR=$WORK/programs

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -n) $(uname -srm)"
  grep -E '^PRETTY_NAME=' /etc/os-release 2>/dev/null
  echo "cpus: $(nproc 2>/dev/null)"
  grep -E '^(MemTotal|MemAvailable):' /proc/meminfo 2>/dev/null
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  ls -l /dev/accel* /dev/vfio /dev/nvidia* 2>/dev/null
} >"$WORK/machine.txt"
cp "$BUNDLE/MANIFEST" "$WORK/MANIFEST" 2>/dev/null

# -------------------------------------------------------------------------------- preflight
refusals=()
refuse() { refusals+=("$1"); }
checked() { echo "ok: $1" >>"$WORK/preflight.txt"; }
: >"$WORK/preflight.txt"

# The bundle as prepare.sh wrote it.
if [ ! -f "$BUNDLE/MANIFEST" ]; then
  refuse "bundle: no MANIFEST in $BUNDLE (unpack bringup-session.tar.gz and run its session.sh)"
elif ! (cd "$BUNDLE" && sed -n '/^--- sha256$/,$p' MANIFEST | tail -n +2 | sha256sum -c --quiet) \
  >"$WORK/checksums.txt" 2>&1; then
  refuse "bundle: files differ from the MANIFEST's sha256 ($(grep -c FAILED "$WORK/checksums.txt") files; see checksums.txt)"
else
  checked "bundle checksums"
fi

# glibc is the machine's; the MANIFEST says the newest symbol version the files need.
need=$(sed -n 's/^glibc_required: GLIBC_\([0-9.]*\).*/\1/p' "$BUNDLE/MANIFEST" 2>/dev/null)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$need" ] && [ -n "$have" ] &&
  [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  refuse "glibc: this machine has glibc $have, the bundle needs $need or newer"
else
  checked "glibc ${have:-?} (bundle needs ${need:-?})"
fi
# The machine's libstdc++ and libgcc_s unless they are older than the build's (lib/compat).
if ldd "$BIN/tlaloc" 2>&1 | grep -qE "(libstdc\+\+|libgcc_s).*not found|version .(GLIBCXX|CXXABI|GCC)_"; then
  export LD_LIBRARY_PATH="$BUNDLE/lib/compat:$LD_LIBRARY_PATH"
  need=$(sed -n 's/^glibc_required_compat: GLIBC_\([0-9.]*\).*/\1/p' "$BUNDLE/MANIFEST" 2>/dev/null)
  checked "libraries: this machine's libstdc++ is older than the build's; using lib/compat (needs glibc ${need:-?})"
  if [ -n "$need" ] && [ -n "$have" ] &&
    [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    refuse "glibc: this machine's libstdc++ is too old for the build and its glibc $have too old for the bundled one (needs $need)"
  fi
fi
if missing_libs=$(ldd "$BIN/tlaloc" 2>&1 | grep -E 'not found'); then
  refuse "libraries: bin/tlaloc cannot load: $(echo "$missing_libs" | tr -s ' \t\n' ' ')"
fi

# Device nodes of the target.
DEV_ROOT=${BRINGUP_DEV_ROOT:-/dev}
device_nodes=()
case "$TARGET" in
tpu)
  for n in "$DEV_ROOT"/accel* "$DEV_ROOT"/vfio/[0-9]*; do [ -e "$n" ] && device_nodes+=("$n"); done
  [ ${#device_nodes[@]} -gt 0 ] ||
    refuse "device nodes: no TPU device node ($DEV_ROOT/accel* or $DEV_ROOT/vfio/N); is this a TPU VM?"
  ;;
cuda)
  for n in "$DEV_ROOT"/nvidia[0-9]*; do [ -e "$n" ] && device_nodes+=("$n"); done
  [ ${#device_nodes[@]} -gt 0 ] ||
    refuse "device nodes: no GPU device node ($DEV_ROOT/nvidia<N>); is the NVIDIA driver loaded?"
  ;;
cpu | xla-cpu) ;;
esac
[ ${#device_nodes[@]} -gt 0 ] && checked "device nodes: ${device_nodes[*]}"
CHIPS=${#device_nodes[@]}
if [ "$TARGET" = tpu ]; then
  accel=0
  for n in "$DEV_ROOT"/accel*; do [ -e "$n" ] && accel=$((accel + 1)); done
  [ "$accel" -gt 0 ] && CHIPS=$accel
fi

# Chips held by another process: libtpu allows one process per TPU, and a busy GPU skews
# every measurement.
if [ ${#device_nodes[@]} -gt 0 ]; then
  holders=()
  for fd in /proc/[0-9]*/fd/*; do
    link=$(readlink "$fd" 2>/dev/null) || continue
    for n in "${device_nodes[@]}"; do
      if [ "$link" = "$n" ] || [ "$link" = "$(readlink -f "$n")" ]; then
        pid=${fd#/proc/}
        pid=${pid%%/*}
        [ "$pid" = $$ ] && continue
        # Driver daemons keep the nodes open without using the chips.
        comm=$(cat "/proc/$pid/comm" 2>/dev/null)
        case " ${BRINGUP_IGNORE_HOLDERS:-nvidia-persistenced nv-hostengine} " in
        *" $comm "*) continue ;;
        esac
        holders+=("$pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) holds $n")
      fi
    done
  done
  if [ ${#holders[@]} -gt 0 ]; then
    refuse "chips held by another process: $(printf '%s; ' "${holders[@]}" | sort -u | head -c 600)"
  else
    checked "no other process holds the chips"
  fi
fi

# Free space in $HOME: the plugin wheels, checkpoints and results go there.
free_kb=$(df -Pk "$HOME" 2>/dev/null | awk 'NR == 2 {print $4}')
if [ -z "$free_kb" ]; then
  refuse "disk: cannot read the free space of \$HOME ($HOME)"
elif [ $((free_kb / 1048576)) -lt "$MIN_FREE_GB" ]; then
  refuse "disk: \$HOME ($HOME) has $((free_kb / 1048576)) GB free, less than MIN_FREE_GB=$MIN_FREE_GB"
else
  checked "disk: $((free_kb / 1048576)) GB free in \$HOME (MIN_FREE_GB=$MIN_FREE_GB)"
fi

# The target's plugin: resolved as Tlaloc resolves it (tlaloc doctor), else the pinned wheel.
resolve_plugin() {
  "$BIN/tlaloc" doctor --target "$TARGET" 2>&1 | sed -n "s/^target $TARGET: //p" | head -n 1
}
add_nvidia_libs() {  # the nvidia-* wheels' libraries, which XLA:CUDA's plugin loads
  local d
  for d in "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/*/lib \
    "$HOME"/.local/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
  done
  export LD_LIBRARY_PATH
}
PLUGIN=""
if [ -x "$BIN/tlaloc" ] && [ -z "${missing_libs:-}" ]; then
  venv=${BRINGUP_VENV:-$HOME/tlaloc-bringup-venv}
  [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$venv" ] && export VIRTUAL_ENV=$venv
  PLUGIN=$(resolve_plugin)
  if { [ -z "$PLUGIN" ] || [ "$PLUGIN" = "NOT FOUND" ]; } && [ "$TARGET" != cpu ] &&
    [ "$INSTALL_PLUGIN" != 0 ]; then
    # shellcheck disable=SC1091
    . "$BUNDLE/versions"
    case "$TARGET" in
    tpu) wheels=("libtpu==$LIBTPU_VERSION") ;;
    xla-cpu) wheels=("lammps-jax-pjrt-cpu==$LAMMPS_JAX_PJRT_CPU_VERSION") ;;
    cuda) wheels=("jax-cuda13-pjrt==$JAX_CUDA13_PJRT_VERSION"
      "jax-cuda13-plugin[with-cuda]==$JAX_CUDA13_PLUGIN_VERSION") ;;
    esac
    say "preflight: no $TARGET plugin resolves; installing ${wheels[*]} into $venv"
    if { [ -d "$venv" ] || python3 -m venv "$venv"; } &&
      "$venv/bin/python" -m pip install --quiet "${wheels[@]}" >"$WORK/plugin-install.log" 2>&1; then
      export VIRTUAL_ENV=$venv
      PLUGIN=$(resolve_plugin)
    else
      refuse "plugin: installing ${wheels[*]} into $venv failed (see plugin-install.log)"
    fi
  fi
  [ "$TARGET" = cuda ] && add_nvidia_libs
  if [ -z "$PLUGIN" ] || [ "$PLUGIN" = "NOT FOUND" ]; then
    refuse "plugin: no $TARGET plugin resolves (tlaloc doctor --target $TARGET lists the places looked at; set TLALOC_PJRT_PLUGIN_PATH)"
  else
    checked "plugin: $PLUGIN"
    # The smoke test: the plugin opens and reports the target's platform.
    "$BIN/tlaloc" doctor --target "$TARGET" --load >"$WORK/doctor.txt" 2>&1
    platform=$(sed -n "s/^  PJRT C API [0-9.]*, platform '\([^']*\)'.*/\1/p" "$WORK/doctor.txt" | head -n 1)
    want=$TARGET
    [ "$TARGET" = xla-cpu ] && want=cpu
    if [ "$TARGET" = xla-cpu ] && ! grep -q '^  attribute xla_version = ' "$WORK/doctor.txt"; then
      # Tlaloc's own plugin also says 'cpu'; XLA's names its xla_version.
      refuse "smoke: the xla-cpu plugin reports no xla_version attribute: not XLA's CPU plugin (doctor.txt)"
    elif [ "$platform" = "$want" ] || { [ "$want" = cuda ] && [ "$platform" = gpu ]; }; then
      checked "smoke: the plugin reports platform '$platform'"
    elif [ -n "$platform" ]; then
      refuse "smoke: the plugin reports platform '$platform', expected '$want' (doctor.txt)"
    else
      refuse "smoke: the $TARGET plugin does not open: $(grep -m1 'session: FAILED' "$WORK/doctor.txt" | sed 's/^ *//' | cut -c1-300) (doctor.txt)"
    fi
  fi
fi

# Recorded after the plugin step (VIRTUAL_ENV, LD_LIBRARY_PATH additions).
env | LC_ALL=C sort | grep -E '^(XLA_|LIBTPU|TPU_|JAX_|TLALOC_)' >>"$WORK/environment.txt"

if [ ${#refusals[@]} -gt 0 ]; then
  for r in "${refusals[@]}"; do echo "REFUSED: $r" >>"$WORK/preflight.txt"; done
  say "session.sh: preflight refused TARGET=$TARGET; no lane was run:"
  for r in "${refusals[@]}"; do say "  REFUSED: $r"; done
  echo "preflight refused; lanes not run" >"$WORK/summary.txt"
  pack_results
  exit 2
fi
say "preflight passed for TARGET=$TARGET ($(grep -c '^ok:' "$WORK/preflight.txt") checks; preflight.txt)"

# ------------------------------------------------------------------------------------ lanes
# count_xml FILE: "passed failed skipped" over the <testcase> elements gtest wrote.
# empty_patterns BINARY FILTER: prints (space-separated) each positive pattern of the gtest
# FILTER that, with FILTER's negative part, selects no test of BINARY.
empty_patterns() {
  local positive=${2%%-*} negative="" p
  [ "$positive" = "$2" ] || negative=-${2#*-}
  [ -n "$positive" ] || positive='*'
  local -a patterns
  IFS=: read -r -a patterns <<<"$positive"
  for p in "${patterns[@]}"; do
    [ -n "$p" ] || continue
    # --gtest_list_tests prints each suite unindented and its tests indented.
    "$1" --gtest_list_tests --gtest_filter="$p$negative" 2>/dev/null | grep -q '^  ' ||
      printf '%s ' "$p"
  done
}
count_xml() {
  awk '
    function done_case() { if (res == "fail") f++; else if (res == "skip") s++; else if (res == "pass") p++; open = 0 }
    /<testcase / {
      open = 1; res = "pass"
      if ($0 ~ /status="notrun"/) res = "notrun"
      else if ($0 ~ /result="skipped"/) res = "skip"
      if ($0 ~ /\/>[[:space:]]*$/) done_case()
      next
    }
    open && /<failure/ { res = "fail" }
    open && /<skipped/ && res != "fail" { res = "skip" }
    open && /<\/testcase>/ { done_case() }
    END { printf "%d %d %d\n", p, f, s }' "$1"
}
# list_xml FILE: one "result<TAB>Suite.Test" line per test case (tests.tsv).
list_xml() {
  awk '
    function emit() { print res "\t" suite "." name; open = 0 }
    /<testcase / {
      open = 1; res = "passed"
      name = $0; sub(/.*<testcase name="/, "", name); sub(/".*/, "", name)
      suite = $0; sub(/.*classname="/, "", suite); sub(/".*/, "", suite)
      if ($0 ~ /status="notrun"/) res = "notrun"
      else if ($0 ~ /result="skipped"/) res = "skipped"
      if ($0 ~ /\/>[[:space:]]*$/) emit()
      next
    }
    open && /<failure/ { res = "failed" }
    open && /<skipped/ && res != "failed" { res = "skipped" }
    open && /<\/testcase>/ { emit() }' "$1"
}

mkdir -p "$WORK/lanes"
printf '%-10s %-16s %6s %6s %7s %6s  %s\n' lane status passed failed skipped time notes >"$WORK/summary.body"
overall=0
for lane in "${lanes[@]}"; do
  LANE_DIR=$WORK/lanes/$lane
  mkdir -p "$LANE_DIR"
  reason=$(lane_skip_reason "$lane")
  if [ -n "$reason" ]; then
    say "lane $lane: SKIPPED ($reason)"
    printf '%-10s %-16s %6s %6s %7s %6s  %s\n' "$lane" SKIPPED - - - - "$reason" >>"$WORK/summary.body"
    continue
  fi
  say "lane $lane: running (timeout ${LANE_TIMEOUT}s)"
  start=$SECONDS
  passed=0 failed=0 skipped=0 notes=()
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    left=$((LANE_TIMEOUT - (SECONDS - start)))
    if [ "$left" -le 0 ]; then
      notes+=("TIMEOUT before $entry")
      failed=$((failed + 1))
      break
    fi
    if [[ "$entry" == cmd:* ]]; then
      name=${entry#cmd:}
      name=${name%%=*}
      command=${entry#cmd:"$name"=}
      log=$LANE_DIR/$name.log
      BIN=$BIN LANE_DIR=$LANE_DIR timeout -k 30 "$left" bash -c "$command" >"$log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        printf 'passed\t%s\n' "$name" >>"$LANE_DIR/tests.tsv"
      else
        failed=$((failed + 1))
        printf 'failed\t%s\n' "$name" >>"$LANE_DIR/tests.tsv"
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then notes+=("$name TIMEOUT"); else notes+=("$name exit $rc"); fi
      fi
      continue
    fi
    binary=${entry%%=*}
    filter=${entry#*=}
    [ "$filter" = "$entry" ] && filter='*'
    xml=$LANE_DIR/$binary.xml
    log=$LANE_DIR/$binary.log
    # The same binary may appear twice in a lane: number its files.
    k=1
    while [ -e "$xml" ]; do
      k=$((k + 1))
      xml=$LANE_DIR/$binary.$k.xml
      log=$LANE_DIR/$binary.$k.log
    done
    if [ ! -x "$BIN/$binary" ]; then
      notes+=("$binary not in the bundle")
      failed=$((failed + 1))
      continue
    fi
    # A pattern that selects nothing must fail the lane, not leave it green with fewer tests.
    empty=$(empty_patterns "$BIN/$binary" "$filter")
    if [ -n "$empty" ]; then
      notes+=("$binary: ${empty% } selects no test")
      failed=$((failed + 1))
      printf 'failed\t%s: --gtest_filter pattern(s) %s select no test\n' "$binary" "${empty% }" \
        >>"$LANE_DIR/tests.tsv"
    fi
    timeout -k 30 "$left" "$BIN/$binary" --gtest_filter="$filter" --gtest_output="xml:$xml" \
      >"$log" 2>&1
    rc=$?
    if [ -s "$xml" ]; then
      read -r p f s < <(count_xml "$xml")
      list_xml "$xml" | sed "s/\t/\t$binary: /" >>"$LANE_DIR/tests.tsv"
    else
      p=0 f=0 s=0
    fi
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      notes+=("$binary TIMEOUT")
      [ "$f" -gt 0 ] || failed=$((failed + 1))
    elif [ ! -s "$xml" ]; then
      notes+=("$binary exit $rc, no XML")
      failed=$((failed + 1))
    elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
      notes+=("$binary exit $rc")
      failed=$((failed + 1))
    fi
  done < <(lane_entries "$lane")
  if [ "$failed" -gt 0 ]; then
    status=FAILED
  elif [ "$passed" -eq 0 ]; then
    status="NO TEST PASSED"
  else
    status=PASSED
  fi
  [ "$status" = PASSED ] || overall=1
  elapsed=$((SECONDS - start))
  say "lane $lane: $status ($passed passed, $failed failed, $skipped skipped, ${elapsed}s)"
  printf '%-10s %-16s %6d %6d %7d %5ds  %s\n' "$lane" "$status" "$passed" "$failed" "$skipped" \
    "$elapsed" "$(IFS=';'; echo "${notes[*]:-}")" >>"$WORK/summary.body"
done

{
  echo "Tlaloc bring-up, TARGET=$TARGET on $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  sed -n 's/^commit: /bundle commit: /p' "$BUNDLE/MANIFEST"
  [ -n "$PLUGIN" ] && echo "plugin: $PLUGIN"
  echo
  cat "$WORK/summary.body"
} >"$WORK/summary.txt"
rm -f "$WORK/summary.body"
tee -a "$WORK/session.log" <"$WORK/summary.txt"
pack_results
exit $overall
