#!/usr/bin/env bash
# The Llama family through the CLI: a tiny random Llama written by transformers
# (tests/generate/llama_checkpoint.py: LlamaForCausalLM, a byte-level tokenizer and a Llama 3
# chat template in tokenizer_config.json) is exported as llama.cpp's `llama` architecture (the
# GGUF's general.architecture) and served: one chat request rendered by the checkpoint's Llama 3
# template answers; and fine-tuned: the loss of a repeated text falls, documents ending with the
# family's <|end_of_text|> (models::ModelFamily::document_end_token).
# Usage: llama_family_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
source_dir=$2
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" torch transformers tokenizers gguf
WORK=$(mktemp -d)
MODEL=$WORK/model
TLALOC=$tlaloc
source "$source_dir/tests/cli/serve_lib.sh"  # its EXIT trap removes $WORK and stops servers
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

"$ORACLE_PYTHON" "$source_dir/tests/generate/llama_checkpoint.py" --out "$MODEL" --vocab 512 \
  >"$WORK/make.log" 2>&1 || { cat "$WORK/make.log"; exit 1; }

# GGUF: llama.cpp's llama architecture.
"$tlaloc" export gguf "$MODEL" "$WORK/model.gguf" >"$WORK/export.log" 2>&1 ||
  { cat "$WORK/export.log"; exit 1; }
arch=$("$ORACLE_PYTHON" -c "
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
f = r.fields['general.architecture']
print(bytes(f.parts[f.data[0]]).decode())" "$WORK/model.gguf")
[ "$arch" = llama ] || fail "general.architecture is '$arch', expected llama"

# Fine-tune: a few steps on one repeated sentence; the loss falls.
for _ in $(seq 1 16); do echo '{"text": "the quick brown fox jumps over the lazy dog"}'; done \
  >"$WORK/train.jsonl"
"$tlaloc" finetune --model "$MODEL" --data "$WORK/train.jsonl" --out "$WORK/tuned" --steps 6 \
  --batch 4 --seq-len 32 --lr 3e-3 --warmup 1 --print-every 1 >"$WORK/ft.log" 2>&1 ||
  { cat "$WORK/ft.log"; exit 1; }
python3 - "$WORK/tuned/loss_log.jsonl" <<'PY' || fail "fine-tune loss did not fall"
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
print("fine-tune losses:", " ".join(f"{l:.3f}" for l in losses))
assert len(losses) == 6 and losses[-1] < 0.8 * losses[0], losses
PY

# Serve one chat request through the checkpoint's Llama 3 template.
start_server llama --max-batch 1 --max-context 256
code=$(post /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}' \
  "$WORK/chat.json")
[ "$code" = 200 ] || fail "chat request: HTTP $code $(cat "$WORK/chat.json")"
python3 - "$WORK/chat.json" <<'PY' || fail "chat response: $(cat "$WORK/chat.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["object"] == "chat.completion", r
assert r["choices"][0]["message"]["role"] == "assistant", r
assert r["usage"]["prompt_tokens"] > 0 and r["usage"]["completion_tokens"] > 0, r
print("served:", r["usage"], repr(r["choices"][0]["message"]["content"]))
PY
stop_server "$SERVER_PID"
[ "$failures" -eq 0 ]
