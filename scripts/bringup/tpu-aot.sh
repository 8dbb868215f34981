#!/usr/bin/env bash
# Compiles the lanes' programs with libtpu for TPU topologies on a machine without a TPU
# (docs/BRINGUP.md, "Ahead of time"): records them through Tlaloc's plugin with
# TLALOC_PROGRAMS_DIR, then runs `tlaloc aot --plugin tpu` for each topology.
#
#   scripts/bringup/tpu-aot.sh [BUILD_DIR]      # default: build
#
# Recorded: the tiny and tiny-moe presets' prefill and decode; finetune-demo's train step, eval
# loss, prefill and decode; the dp, fsdp, tp and dp_tp plans' per-device train steps and
# tensor-parallel generation (finetune-demo's model); with QWEN3_06B=1 also the qwen3-0.6b
# preset's train step (chunked loss, --remat, batch 8 x 256) and its bf16 prefill and decode
# (context 2048), each stopped once recorded. With LANES=1 also every lane test binary the build
# has (g2b, training, serving, multichip filters of session.sh).
# Programs for one device compile for ONE_TOPOLOGIES (v6e:1x1 v5e:1x1), those for more for
# MANY_TOPOLOGIES (v6e:2x2 v5e:2x2). Results: BUILD/tpu-aot/<time>/<topology>/summary.tsv and
# errors/, and refusals.txt: every refusal, "explained" when it matches a line of
# scripts/bringup/tpu-aot-known-refusals.tsv (module, error text, why), else "UNEXPLAINED".
# AOT_FLAGS are added to every `tlaloc aot` (e.g. --tpu-form: f32 dots at HIGHEST, as a TPU
# session sends them). Exit 0 when nothing is unexplained. libtpu comes from $VIRTUAL_ENV, else the checkout's venv
# (third_party_py/, scripts/setup.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tlaloc=$build/apps/tlaloc
plugin=$build/libtlaloc_pjrt_cpu.so
for f in "$tlaloc" "$plugin"; do
  [ -e "$f" ] || { echo "tpu-aot.sh: $f not built (cmake --build $build --target tlaloc_cli tlaloc_pjrt_cpu)" >&2; exit 2; }
done
export VIRTUAL_ENV=${VIRTUAL_ENV:-$root/third_party_py}
[ -f "$VIRTUAL_ENV"/lib/python3*/site-packages/libtpu/libtpu.so ] ||
  { echo "tpu-aot.sh: no libtpu/libtpu.so under $VIRTUAL_ENV (scripts/setup.sh)" >&2; exit 2; }
out=$build/tpu-aot/$(date -u +%Y%m%d-%H%M%S)
rec=$out/recorded
work=$out/work
mkdir -p "$rec" "$work"
log() { echo "tpu-aot: $*"; }

record() {  # record NAME COMMAND...: runs it with TLALOC_PROGRAMS_DIR=$rec
  local name=$1
  shift
  log "recording $name"
  TLALOC_PROGRAMS_DIR=$rec "$@" >"$work/$name.log" 2>&1 ||
    { echo "tpu-aot.sh: $name failed: $(tail -3 "$work/$name.log")" >&2; exit 1; }
}

# record_until NAME PATTERN COMMAND...: stops the command once index.tsv has a line matching
# PATTERN (a program is recorded when it is compiled, before it runs).
record_until() {
  local name=$1 pattern=$2
  shift 2
  log "recording $name (stopped once $pattern is recorded)"
  TLALOC_PROGRAMS_DIR=$rec "$@" >"$work/$name.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q "$pattern" "$rec/index.tsv" 2>/dev/null; then
      sleep 2
      kill "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
  done
  wait "$pid" || true
  grep -q "$pattern" "$rec/index.tsv" ||
    { echo "tpu-aot.sh: $name recorded no $pattern: $(tail -3 "$work/$name.log")" >&2; exit 1; }
}

tokenizer=$root/data/qwen3/tokenizer.json
for preset in tiny tiny-moe; do
  "$tlaloc" init-model --preset "$preset" --tokenizer "$tokenizer" "$work/$preset" >/dev/null 2>&1
  record "generate-$preset" "$tlaloc" generate -m "$work/$preset" -p "The capital of France is" \
    -n 3 -c 256 --target "$plugin"
done
record finetune-demo "$tlaloc" finetune-demo --out "$work/demo" --target "$plugin" --steps 1 \
  --train-size 16 --held-out 1 --batch 4 --seq-len 32
for run in "dp data=2" "fsdp data=4" "tp model=2" "dp_tp data=2,model=2"; do
  set -- $run
  record "finetune-$1" "$tlaloc" finetune --model "$work/demo/base" --data "$work/demo/train.jsonl" \
    --steps 1 --batch 4 --seq-len 32 --mesh "$2" --plan "$1" --target "$plugin" --out "$work/$1"
done
record generate-tp "$tlaloc" generate -m "$work/demo/base" -p ab -n 2 --mesh model=2 --target "$plugin"
if [ "${QWEN3_06B:-0}" = 1 ]; then
  "$tlaloc" init-model --preset qwen3-0.6b --tokenizer "$tokenizer" "$work/q06" >/dev/null 2>&1
  record_until finetune-qwen3-0.6b train_step "$tlaloc" finetune --model "$work/q06" \
    --data "$work/demo/train.jsonl" --steps 1 --remat --target "$plugin" --out "$work/q06-out"
  record generate-qwen3-0.6b "$tlaloc" generate -m "$work/q06" -p "The capital of France is" \
    -n 3 -c 2048 --target "$plugin"
fi
if [ "${LANES:-0}" = 1 ]; then
  for entry in \
    "tlaloc_plugin_tests PluginGenerate.*:PluginMemoryStats.*:PluginDevices.*" \
    "tlaloc_pjrt_tests SessionTest.*:BackendParity.*:PjrtSessionPlatform.*" \
    "tlaloc_train_tests TrainerPjrt.*:AdamW.*:LmHeadCrossEntropy.*" \
    "tlaloc_runtime_tests MultiDeviceBackend.*"; do
    set -- $entry
    if [ -x "$build/tests/$1" ]; then
      TLALOC_PROGRAMS_DIR=$rec TLALOC_TEST_PJRT_TARGET=$plugin "$build/tests/$1" \
        --gtest_filter="$2" >"$work/$1.log" 2>&1 || log "$1 had failures (programs kept)"
    else
      log "LANES: $build/tests/$1 not built, skipped"
    fi
  done
fi

# The index split by devices: a folder of links per kind.
split() {  # split NAME AWK_CONDITION
  mkdir -p "$out/$1"
  awk -F'\t' "$2" "$rec/index.tsv" >"$out/$1/index.tsv"
  while IFS=$'\t' read -r file _; do
    ln -sf "$rec/$file" "$out/$1/$file"
    [ -e "$rec/${file%.mlir}.options.pb" ] && ln -sf "$rec/${file%.mlir}.options.pb" "$out/$1/"
  done <"$out/$1/index.tsv"
}
split one '$4 * $5 == 1'
split many '$4 * $5 > 1'

known=$here/tpu-aot-known-refusals.tsv
unexplained=0
: >"$out/refusals.txt"
compile() {  # compile FOLDER TOPOLOGY
  local dir=$out/$1 topology=$2 name=${2//:/_}
  [ -s "$dir/index.tsv" ] || return 0
  log "compiling $(wc -l <"$dir/index.tsv") program(s) for $topology"
  "$tlaloc" aot --plugin tpu --topology "$topology" ${AOT_FLAGS:-} --out "$out/$name" "$dir" \
    >"$out/$name.log" 2>&1 || true
  grep "^tlaloc aot:" "$out/$name.log" || { tail -5 "$out/$name.log"; unexplained=$((unexplained + 1)); }
  local program module error why
  while IFS=$'\t' read -r program module _; do
    error=$(tail -n +3 "$out/$name/errors/${program%.mlir}.txt")
    why=""
    while IFS=$'\t' read -r kmodule kerror kwhy; do
      case "$kmodule" in '#'* | '') continue ;; esac
      if [ "$kmodule" = "$module" ] && [[ "$error" == *"$kerror"* ]]; then why=$kwhy; fi
    done <"$known"
    if [ -n "$why" ]; then
      printf '%s\t%s\t%s\texplained: %s\n' "$topology" "$program" "$module" "$why" >>"$out/refusals.txt"
    else
      printf '%s\t%s\t%s\tUNEXPLAINED: %s\n' "$topology" "$program" "$module" "${error:0:300}" \
        >>"$out/refusals.txt"
      unexplained=$((unexplained + 1))
    fi
  done < <(awk -F'\t' 'NR > 1 && $11 ~ /^refused/' "$out/$name/summary.tsv" 2>/dev/null)
}
for t in ${ONE_TOPOLOGIES:-v6e:1x1 v5e:1x1}; do compile one "$t"; done
for t in ${MANY_TOPOLOGIES:-v6e:2x2 v5e:2x2}; do compile many "$t"; done
cat "$out/refusals.txt"
log "results in $out; $unexplained unexplained refusal(s)"
[ "$unexplained" -eq 0 ]
