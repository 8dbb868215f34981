#!/usr/bin/env bash
# `tlaloc quantize` end to end: the tiny preset quantized to int8 is inspected, generated from on
# the interpreter and on Tlaloc's PJRT plugin (the printed StableHLO with i8 weights runs there
# unchanged: same greedy tokens), and exported as GGUF Q8_0; bad input is refused by name. The
# tiny-moe preset likewise (int8 experts, exported as qwen3moe's Q8_0 expert tensors). The
# tiny-llama preset (Llama, with its built-in tokenizer) is quantized and generated from too.
# Usage: quantize_cli_test.sh TLALOC_BINARY PLUGIN_PATH SOURCE_DIR
# Uses the checkout's Qwen3 tokenizer (data/qwen3/); fails naming it when it is missing.
set -uo pipefail
TLALOC=$1 PLUGIN=$2 SOURCE_DIR=$3
source "$(dirname "$0")/../cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
status=0
fail() { echo "FAIL: $*"; status=1; }

INT8=$WORK/int8
"$TLALOC" quantize "$MODEL" "$INT8" --dtype int8 2>"$WORK/q.log" || { cat "$WORK/q.log"; fail "quantize"; }
grep -q '"quant_method": "tlaloc_int8"' "$INT8/config.json" || fail "config.json lacks quantization_config"
[ -f "$INT8/tokenizer.json" ] || fail "tokenizer.json not copied"
ls -a "$WORK" | grep -q '\.tmp-' && fail "a staging folder was left behind"

"$TLALOC" quantize "$MODEL" "$WORK/int4" --dtype int4 2>"$WORK/e.log"
rc=$?
[ $rc -eq 2 ] && grep -q 'int4' "$WORK/e.log" || fail "--dtype int4: exit $rc, $(cat "$WORK/e.log")"
[ -e "$WORK/int4" ] && fail "--dtype int4 wrote a folder"
"$TLALOC" quantize "$MODEL" "$INT8" 2>"$WORK/e.log"
rc=$?
[ $rc -eq 1 ] && grep -q 'not an empty folder' "$WORK/e.log" || fail "existing output: exit $rc"
"$TLALOC" quantize "$INT8" "$WORK/again" 2>"$WORK/e.log"
[ $? -eq 1 ] && grep -q 'already quantized' "$WORK/e.log" || fail "quantizing twice was not refused"

"$TLALOC" inspect "$INT8" >"$WORK/inspect.txt" 2>&1 || fail "inspect"
# The format from ir/quant_format.h's table, with its bits per weight.
grep -qF 'quantized:    int8 (q8_0 blocks of 32, f16 scales, 8.5 bits per weight) (quantization_config tlaloc_int8)' \
  "$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "inspect does not name the int8 format"; }
grep -q 'check: *OK' "$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "inspect check"; }

ids() {  # target: the generated_ids of a greedy --json run
  "$TLALOC" generate --model "$INT8" --prompt "Tlaloc brings the rain" --max-new-tokens 6 \
    --json --target "$1" 2>"$WORK/stderr" | grep -o '"generated_ids":\[[^]]*\]' ||
    { cat "$WORK/stderr" >&2; return 1; }
}
local_ids=$(ids interp)
plugin_ids=$(ids "$PLUGIN")
grep -q "on pjrt:cpu" "$WORK/stderr" || fail "the int8 model did not run on the plugin"
if [ -n "$local_ids" ] && [ "$local_ids" = "$plugin_ids" ]; then
  echo "PASS int8 generate, interpreter = plugin: $plugin_ids"
else
  fail "int8 generate: interp $local_ids, plugin $plugin_ids"
fi

"$TLALOC" export gguf "$INT8" "$WORK/q8.gguf" 2>"$WORK/x.log" || { cat "$WORK/x.log"; fail "export"; }
"$TLALOC" inspect "$WORK/q8.gguf" >"$WORK/gguf.txt" 2>&1 || fail "inspect of the GGUF"
grep -q 'Q8_0' "$WORK/gguf.txt" || { cat "$WORK/gguf.txt"; fail "the GGUF has no Q8_0 tensors"; }
"$TLALOC" export gguf "$INT8" "$WORK/b.gguf" --dtype bf16 2>"$WORK/e.log"
# Conflicting options: a usage error, exit 2 (README).
[ $? -eq 2 ] && grep -q 'int8 checkpoint' "$WORK/e.log" || fail "export --dtype of an int8 folder: exit 2 expected"
# Qwen3-MoE: the experts are quantized too (the router stays float), generate agrees between
# the interpreter and the plugin, and the export writes qwen3moe's experts as Q8_0.
MOE=$WORK/moe
"$TLALOC" init-model --preset tiny-moe --seed 5 "$MOE" >/dev/null 2>"$WORK/m.log" ||
  { cat "$WORK/m.log"; fail "init-model tiny-moe"; }
"$TLALOC" quantize "$MOE" "$MOE-int8" --dtype int8 2>"$WORK/q.log" || { cat "$WORK/q.log"; fail "quantize MoE"; }
"$TLALOC" inspect "$MOE-int8" >"$WORK/inspect_moe.txt" 2>&1 || fail "inspect MoE"
grep -q 'check: *OK' "$WORK/inspect_moe.txt" || { cat "$WORK/inspect_moe.txt"; fail "inspect MoE check"; }
INT8=$MOE-int8
local_ids=$(ids interp)
plugin_ids=$(ids "$PLUGIN")
if [ -n "$local_ids" ] && [ "$local_ids" = "$plugin_ids" ]; then
  echo "PASS int8 MoE generate, interpreter = plugin: $plugin_ids"
else
  fail "int8 MoE generate: interp $local_ids, plugin $plugin_ids"
fi
"$TLALOC" export gguf "$INT8" "$WORK/moe.gguf" 2>"$WORK/x.log" || { cat "$WORK/x.log"; fail "export MoE"; }
"$TLALOC" inspect "$WORK/moe.gguf" >"$WORK/moe_gguf.txt" 2>&1 || fail "inspect of the MoE GGUF"
# Embedding, head, 4 attention projections and 3 stacked experts per layer (2 layers).
grep -q 'Q8_0 *16 tensors' "$WORK/moe_gguf.txt" ||
  { cat "$WORK/moe_gguf.txt"; fail "the MoE GGUF's experts are not all Q8_0"; }
# Llama: quantized like Qwen3 (every matrix, the tied embedding too) and run on both targets.
LLAMA=$WORK/llama
"$TLALOC" init-model --preset tiny-llama --seed 5 "$LLAMA" >/dev/null 2>"$WORK/l.log" ||
  { cat "$WORK/l.log"; fail "init-model tiny-llama"; }
"$TLALOC" quantize "$LLAMA" "$LLAMA-int8" --dtype int8 2>"$WORK/q.log" ||
  { cat "$WORK/q.log"; fail "quantize Llama"; }
"$TLALOC" inspect "$LLAMA-int8" >"$WORK/inspect_llama.txt" 2>&1 || fail "inspect Llama"
grep -q '^quantized: *int8' "$WORK/inspect_llama.txt" &&
  grep -q 'check: *OK' "$WORK/inspect_llama.txt" ||
  { cat "$WORK/inspect_llama.txt"; fail "inspect Llama int8"; }
INT8=$LLAMA-int8
local_ids=$(ids interp)
plugin_ids=$(ids "$PLUGIN")
if [ -n "$local_ids" ] && [ "$local_ids" = "$plugin_ids" ]; then
  echo "PASS int8 Llama generate, interpreter = plugin: $local_ids"
else
  fail "int8 Llama generate: interp $local_ids, plugin $plugin_ids"
fi
[ $status -eq 0 ] && echo "PASS quantize CLI"
exit $status
