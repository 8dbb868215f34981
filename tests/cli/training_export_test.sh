#!/usr/bin/env bash
# The checkpoints the training commands write export to GGUF with their chat template:
#  - finetune-demo's base and fine-tuned ones (a byte-level tokenizer without merges), whose GGUF
#    llama.cpp tokenizes exactly as Tlaloc does and answers with Tlaloc's greedy tokens (checked
#    through llama-cpp-python, tests/generate/llama_oracle.py);
#  - a finetune of a checkpoint keeping its template in chat_template.jinja (copied to the output);
#  - init-model's tiny Qwen3 (tokenizer_config.json with the Qwen3 chat template), whose template
#    renders, through transformers' apply_chat_template and plain jinja2, what chat_test.cc
#    expects of Tlaloc's chat rendering and what `tlaloc tokenize --chat` renders and encodes
#    (tests/cli/chat_template_cases.py).
# The oracle parts need the checkout's venv (third_party_py/: llama_cpp, jinja2, transformers);
# without it the script skips (exit 77) after the other checks; under CI=true it fails.
# Usage: training_export_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
src=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../cli_test_lib.sh
source "$here/../cli_test_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

kv() { python3 "$here/gguf_kv.py" "$1"; }
# key FILE.json KEY: the value (JSON) of KEY in gguf_kv's output.
key() { python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2])))' "$1" "$2"; }

echo "== finetune-demo checkpoints export"
"$tlaloc" finetune-demo --out "$work/demo" --steps 40 --train-size 64 --held-out 1 --batch 4 \
  --seq-len 48 >"$work/demo.out" 2>"$work/demo.err" || { cat "$work/demo.err"; exit 1; }
for which in base tuned; do
  "$tlaloc" export gguf "$work/demo/$which" "$work/$which.gguf" 2>"$work/export.err" ||
    { echo "FAIL: export of the demo's $which checkpoint"; cat "$work/export.err"; exit 1; }
  cat "$work/export.err"
  kv "$work/$which.gguf" >"$work/$which.json"
  [ "$(key "$work/$which.json" tokenizer.ggml.pre)" = '"qwen2"' ] || { echo "FAIL: pre"; exit 1; }
  [ "$(key "$work/$which.json" tokenizer.chat_template)" != null ] ||
    { echo "FAIL: the demo's $which GGUF has no tokenizer.chat_template"; exit 1; }
done

echo "== finetune copies chat_template.jinja"
cp -r "$work/demo/base" "$work/jbase"
# The template only in chat_template.jinja (newer transformers' layout).
python3 - "$work/jbase/tokenizer_config.json" <<'EOF'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c.pop("chat_template")
json.dump(c, open(p, "w"))
EOF
# The finetune renders its chat rows with this template, so its newlines are real ones.
printf '%s' '{% for m in messages %}<|im_start|>{{ m.role }}{{ "\n" }}{{ m.content }}<|im_end|>{{ "\n" }}{% endfor %}' \
  >"$work/jbase/chat_template.jinja"
echo "some special tokens" >"$work/jbase/special_tokens_map.json"
"$tlaloc" finetune --model "$work/jbase" --data "$work/demo/train.jsonl" --out "$work/jtuned" \
  --steps 2 --batch 2 --seq-len 32 >"$work/ft.out" 2>"$work/ft.err" || { cat "$work/ft.err"; exit 1; }
for f in chat_template.jinja tokenizer_config.json special_tokens_map.json; do
  cmp -s "$work/jbase/$f" "$work/jtuned/$f" || { echo "FAIL: finetune did not copy $f"; exit 1; }
done
"$tlaloc" export gguf "$work/jtuned" "$work/jtuned.gguf" 2>/dev/null
kv "$work/jtuned.gguf" >"$work/jtuned.json"
python3 - "$work/jtuned.json" "$work/jbase/chat_template.jinja" <<'EOF'
import json, sys
got = json.load(open(sys.argv[1])).get("tokenizer.chat_template")
want = open(sys.argv[2]).read()
assert got == want, f"GGUF chat template {got!r}, expected chat_template.jinja's {want!r}"
EOF

echo "== init-model's tiny Qwen3 exports with its chat template"
"$tlaloc" init-model --preset tiny --tokenizer "$src/data/qwen3/tokenizer.json" "$work/tiny" 2>/dev/null
"$tlaloc" export gguf "$work/tiny" "$work/tiny.gguf" 2>/dev/null
kv "$work/tiny.gguf" >"$work/tiny.json"
python3 - "$work/tiny.json" "$work/tiny/tokenizer_config.json" <<'EOF'
import json, sys
g = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
assert g.get("tokenizer.chat_template") == c["chat_template"], "GGUF lacks the chat template"
assert g.get("tokenizer.ggml.eos_token_id") == 151645, g.get("tokenizer.ggml.eos_token_id")
assert g.get("tokenizer.ggml.padding_token_id") == 151643, g.get("tokenizer.ggml.padding_token_id")
EOF

# The checks above need no oracle; the ones below do.
need_python "$src" llama_cpp jinja2 transformers

echo "== llama.cpp tokenizes the demo's GGUF like Tlaloc"
printf '<|im_start|>user\nabcd, what is "x"?  2+2 <|im_end|>\n<|im_start|>assistant\n' >"$work/text.txt"
want=$("$tlaloc" tokenize --tokenizer "$work/demo/tuned" --ids - <"$work/text.txt" | tr -s ' \n' ' ' | sed 's/ *$//')
"$ORACLE_PYTHON" "$src/tests/generate/llama_oracle.py" --model "$work/tuned.gguf" --tokens 257 \
  --generate 1 --text-file "$work/text.txt" >"$work/llama.json"
got=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["text_ids"])))' "$work/llama.json")
echo "tlaloc:    $want"
echo "llama.cpp: $got"
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: the token ids differ"; exit 1; }
# And llama.cpp runs the fine-tuned model: its greedy answer is Tlaloc's.
"$tlaloc" generate --model "$work/demo/tuned" --chat abcd --max-new-tokens 8 --temperature 0 \
  --json >"$work/gen.json" 2>"$work/gen.err" || { cat "$work/gen.err"; exit 1; }
prompt=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$work/gen.json")
want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "$work/gen.json")
"$ORACLE_PYTHON" "$src/tests/generate/llama_oracle.py" --model "$work/tuned.gguf" \
  --tokens "$prompt" --generate 8 >"$work/llama_gen.json"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_ids"])' "$work/llama_gen.json")
echo "greedy: tlaloc $want, llama.cpp $got"
[ "$want" = "$got" ] || { echo "FAIL: llama.cpp's greedy tokens differ from Tlaloc's"; exit 1; }

echo "== init-model's chat template (Jinja) renders what tlaloc tokenize --chat does"
"$ORACLE_PYTHON" "$here/chat_template_cases.py" "$work/tiny" --tlaloc "$tlaloc"

echo "all export checks passed"
