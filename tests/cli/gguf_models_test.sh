#!/usr/bin/env bash
# GGUF files as models, end to end: a tiny Qwen3 (rows of 256, so llama.cpp's K-quants apply)
# exported as F32 GGUF and quantized by llama.cpp to Q4_K_M (tests/generate/gguf_quantize.py);
# `generate`, `chat`, `bench` and `serve` take -m FILE.gguf (imported once into
# $TLALOC_GGUF_CACHE, reused after); the F32 file generates what its source folder does; bad
# files are refused naming the architecture, the ggml type or the missing key.
# Usage: gguf_models_test.sh TLALOC_BINARY SOURCE_DIR
set -euo pipefail
TLALOC=$1 SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
need_python "$SOURCE_DIR" gguf llama_cpp numpy
make_tiny_model "$TLALOC" "$SOURCE_DIR" 9
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
status=0
fail() { echo "FAIL: $*"; status=1; }
export TLALOC_GGUF_CACHE=$WORK/cache

# The tiny preset widened to rows of 256 and 512.
"$ORACLE_PYTHON" - "$MODEL/config.json" "$WORK/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=256, head_dim=64, intermediate_size=512, initializer_range=0.1)
json.dump(c, open(sys.argv[2], "w"))
PY
"$TLALOC" init-model --config "$WORK/config.json" --seed 9 "$WORK/wide" >/dev/null 2>&1 ||
  { echo "FAIL: init-model"; exit 1; }
"$TLALOC" export gguf "$WORK/wide" "$WORK/f32.gguf" >/dev/null 2>&1 || { echo "FAIL: export"; exit 1; }
"$ORACLE_PYTHON" "$SOURCE_DIR/tests/generate/gguf_quantize.py" "$WORK/f32.gguf" \
  "$WORK/q4_k_m.gguf" Q4_K_M >"$WORK/quantize.json" 2>"$WORK/quantize.log" ||
  { cat "$WORK/quantize.log"; echo "FAIL: llama.cpp quantize"; exit 1; }
grep -q '"Q4_K"' "$WORK/quantize.json" || fail "llama.cpp wrote no Q4_K tensor: $(cat "$WORK/quantize.json")"

ids() {  # MODEL: the generated_ids of a greedy --json run
  "$TLALOC" generate -m "$1" --prompt "Tlaloc brings the rain" --max-new-tokens 6 --json \
    2>"$WORK/gen.err" | grep -o '"generated_ids":\[[^]]*\]' || { cat "$WORK/gen.err" >&2; return 1; }
}
folder_ids=$(ids "$WORK/wide") || fail "generate on the folder"
gguf_ids=$(ids "$WORK/f32.gguf") || fail "generate -m f32.gguf"
[ -n "$gguf_ids" ] && [ "$gguf_ids" = "$folder_ids" ] ||
  fail "f32.gguf generates $gguf_ids, its folder $folder_ids"
imported=$(ls -d "$TLALOC_GGUF_CACHE"/f32-* 2>/dev/null | head -1)
[ -f "$imported/config.json" ] && [ -f "$imported/tokenizer.json" ] || fail "no cached import"
stamp=$(stat -c %Y "$imported/model.safetensors")
sleep 1
ids "$WORK/f32.gguf" >/dev/null || fail "second generate -m f32.gguf"
[ "$(stat -c %Y "$imported/model.safetensors")" = "$stamp" ] || fail "the import was not reused"

ids "$WORK/q4_k_m.gguf" >/dev/null || fail "generate -m q4_k_m.gguf"
printf 'Hello there\n' | "$TLALOC" chat -m "$WORK/q4_k_m.gguf" -n 4 --temp 0 >"$WORK/chat.out" \
  2>"$WORK/chat.err" || { cat "$WORK/chat.err"; fail "chat -m q4_k_m.gguf"; }
"$TLALOC" bench -m "$WORK/q4_k_m.gguf" --prompt-tokens 8 --new-tokens 4 --json --no-bandwidth \
  >"$WORK/bench.json" 2>"$WORK/bench.err" || { cat "$WORK/bench.err"; fail "bench -m q4_k_m.gguf"; }
grep -q 'decode' "$WORK/bench.json" || fail "bench printed no decode figure: $(cat "$WORK/bench.json")"
"$TLALOC" inspect "$WORK/q4_k_m.gguf" >"$WORK/inspect.txt" 2>&1 || fail "inspect q4_k_m.gguf"
grep -q 'Q4_K' "$WORK/inspect.txt" || fail "inspect does not list Q4_K: $(cat "$WORK/inspect.txt")"
# The import keeps the 4- and 6-bit matrices packed: inspect of its folder counts them by format
# (ir/quant_format.h's names), as many as llama.cpp wrote of each type.
q4_import=$(ls -d "$TLALOC_GGUF_CACHE"/q4_k_m-* 2>/dev/null | head -1)
"$TLALOC" inspect "$q4_import" >"$WORK/inspect_import.txt" 2>&1 || fail "inspect of the import"
want=$("$ORACLE_PYTHON" - "$WORK/quantize.json" <<'PY'
import json, sys
types = list(json.load(open(sys.argv[1]))["types"].values())
counts = [f"{t.lower()} x {types.count(t)}" for t in ("Q8_0", "Q4_0", "Q4_K", "Q6_K") if t in types]
print(", ".join(counts))
PY
)
grep -qF "quantized:    gguf: $want (quantization_config tlaloc_gguf)" "$WORK/inspect_import.txt" ||
  fail "inspect names the formats otherwise (want gguf: $want): $(cat "$WORK/inspect_import.txt")"
grep -qF "q4_k blocks of 256, f32 scales, 6 bits per weight (4.5 in GGUF)" \
  "$WORK/inspect_import.txt" || fail "inspect lacks q4_k's bits per weight"
grep '^quantized' "$WORK/inspect_import.txt"

MODEL=$WORK/q4_k_m.gguf
start_server gguf
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}' \
  "$WORK/serve.json")
[ "$code" = 200 ] && grep -q '"choices"' "$WORK/serve.json" ||
  fail "serve -m q4_k_m.gguf: HTTP $code $(cat "$WORK/serve.json")"
grep -q 'q4_k_m' "$WORK/serve.json" || fail "serve names the model after its cache folder, not the file"
stop_server "$SERVER_PID"

# Bad files, made with gguf-py: each refused naming what is wrong.
"$ORACLE_PYTHON" - "$WORK" <<'PY'
import sys
import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
work = sys.argv[1]

def write(name, arch, keys, tensor_type=None):
    w = GGUFWriter(f"{work}/{name}.gguf", arch)
    for k, v in keys.items():
        w.add_uint32(k, v)
    if tensor_type is None:
        w.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float32))
    else:  # 2 rows of one Q2_K block (84 bytes) each
        w.add_tensor("token_embd.weight", np.zeros((2, 84), dtype=np.uint8), raw_dtype=tensor_type)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

write("gemma3", "gemma3", {})
write("llama", "llama", {})
write("no_blocks", "qwen3", {"qwen3.embedding_length": 32})
write("q2_k", "qwen3", {}, GGMLQuantizationType.Q2_K)
PY
refused() {  # FILE TEXT
  set +e
  "$TLALOC" generate -m "$WORK/$1.gguf" --prompt x --max-new-tokens 1 >/dev/null 2>"$WORK/err"
  local rc=$?
  set -e
  [ $rc -ne 0 ] && grep -qF -- "$2" "$WORK/err" || fail "$1.gguf: exit $rc, expected '$2' in: $(cat "$WORK/err")"
}
refused gemma3 'architecture "gemma3"'
refused llama 'missing metadata key "llama.block_count"'
refused no_blocks 'missing metadata key "qwen3.block_count"'
refused q2_k 'ggml type Q2_K'
ls "$TLALOC_GGUF_CACHE" | grep -q 'tmp-' && fail "a failed import left its staging folder"
exit $status
