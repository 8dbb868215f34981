"""Hugging Face oracle for tests/tokenizer/parity_test.cc.

Two modes:

  hf_encode.py corpus TOKENIZER_JSON CORPUS
      Encodes each line of CORPUS with the `tokenizers` library (Tokenizer.from_file) and prints
      one JSON object a line: {"ids": [...], "decoded": HEX}, where "decoded" is the hex of the
      UTF-8 bytes that tokenizers' decode(ids) gives back. CORPUS has one string a line, written
      as "=" and the hex of its bytes, so any bytes (invalid UTF-8 included) pass through; the
      bytes are decoded as UTF-8 with each maximal invalid subpart replaced by U+FFFD, which is the
      rule Tlaloc's encoder follows too.

  hf_encode.py chat TOKENIZER_DIR REQUEST.json
      Renders conversations with transformers' AutoTokenizer.apply_chat_template(tokenize=False),
      using the tokenizer.json and tokenizer_config.json (with its Jinja chat template) of
      TOKENIZER_DIR, copied alone into a temporary folder. REQUEST.json is a list of
      {"messages": [...], "add_generation_prompt": bool, "enable_thinking": bool (optional)};
      prints a JSON list of {"text": rendered text, "ids": its ids (no special tokens added)}.
"""

import json
import os
import shutil
import sys
import tempfile


def encode_corpus(tokenizer_json, corpus_path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_json)
    with open(corpus_path, "rb") as f:
        lines = [line for line in f.read().split(b"\n") if line]
    texts = []
    for number, line in enumerate(lines, 1):
        if not line.startswith(b"="):
            sys.exit(f"{corpus_path}:{number}: expected '=' and hex, got {line[:20]!r}")
        texts.append(bytes.fromhex(line[1:].decode("ascii")).decode("utf-8", errors="replace"))
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    out = []
    for encoding in encodings:
        decoded = tokenizer.decode(encoding.ids, skip_special_tokens=False)
        out.append(json.dumps({"ids": encoding.ids, "decoded": decoded.encode("utf-8").hex()}))
    sys.stdout.write("\n".join(out) + "\n")


def render_chats(tokenizer_dir, request_path):
    from transformers import AutoTokenizer

    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    with tempfile.TemporaryDirectory() as folder:
        # Only these two files, so nothing else in TOKENIZER_DIR changes how transformers loads it.
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokenizer_dir, name), folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    out = []
    for index, case in enumerate(request):
        kwargs = {"add_generation_prompt": case["add_generation_prompt"]}
        if "enable_thinking" in case:  # absent stays undefined in the template
            kwargs["enable_thinking"] = case["enable_thinking"]
        try:
            text = tokenizer.apply_chat_template(case["messages"], tokenize=False, **kwargs)
        except Exception as e:  # name the case; the template's own error follows
            sys.exit(f"{request_path}: case {index}: apply_chat_template failed: {e}")
        ids = tokenizer.encode(text, add_special_tokens=False)
        out.append({"text": text, "ids": ids})
    json.dump(out, sys.stdout)  # ASCII with \u escapes, whatever the locale
    sys.stdout.write("\n")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "corpus":
        encode_corpus(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "chat":
        render_chats(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: hf_encode.py corpus TOKENIZER_JSON CORPUS\n"
                 "       hf_encode.py chat TOKENIZER_DIR REQUEST.json")


if __name__ == "__main__":
    main()
