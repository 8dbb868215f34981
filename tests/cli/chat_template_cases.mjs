// Renders the chat template of a tokenizer_config.json with npm's @huggingface/jinja and checks
// it against the conversations and expected texts of tests/tokenizer/chat_test.cc (Tlaloc's own
// RenderQwen3Chat), so the Jinja template and the C++ renderer agree.
//   node chat_template_cases.mjs NODE_MODULES TOKENIZER_CONFIG.json
import fs from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [nodeModules, configPath] = process.argv.slice(2);
const require = createRequire(nodeModules + "/noop.js");
const { Template } = await import(pathToFileURL(require.resolve("@huggingface/jinja")).href);
const template = new Template(JSON.parse(fs.readFileSync(configPath, "utf8")).chat_template);

const sys = { role: "system", content: "Be brief." }, hi = { role: "user", content: "Hi!" };
const cases = [
  ["system and user", { messages: [sys, hi], add_generation_prompt: true },
   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"],
  ["enable_thinking=false",
   { messages: [sys, hi], add_generation_prompt: true, enable_thinking: false },
   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n" +
       "<|im_start|>assistant\n<think>\n\n</think>\n\n"],
  ["enable_thinking=true", { messages: [sys, hi], add_generation_prompt: true, enable_thinking: true },
   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"],
  ["no generation prompt", { messages: [{ role: "user", content: "x" }], add_generation_prompt: false },
   "<|im_start|>user\nx<|im_end|>\n"],
  ["earlier turns drop their thinking",
   { messages: [{ role: "user", content: "q1" },
                { role: "assistant", content: "<think>\nplan\n</think>\n\nanswer one" },
                { role: "user", content: "q2" }], add_generation_prompt: true },
   "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\nanswer one<|im_end|>\n" +
       "<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n"],
  ["final turn keeps a think block",
   { messages: [{ role: "user", content: "q" }, { role: "assistant", content: "plain answer" }] },
   "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nplain answer<|im_end|>\n"],
  ["reasoning_content",
   { messages: [{ role: "user", content: "q" },
                { role: "assistant", content: "plain answer", reasoning_content: "\nsteps\n" }] },
   "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nsteps\n</think>\n\nplain answer<|im_end|>\n"],
  ["later system message and tool results",
   { messages: [{ role: "user", content: "u" }, { role: "system", content: "s2" },
                { role: "tool", content: "r1" }, { role: "tool", content: "r2" }] },
   "<|im_start|>user\nu<|im_end|>\n<|im_start|>system\ns2<|im_end|>\n" +
       "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n"],
];
let failed = 0;
for (const [name, vars, want] of cases) {
  const got = template.render(vars);
  if (got === want) {
    console.log(`ok: ${name}`);
  } else {
    console.log(`FAIL: ${name}\n  got  ${JSON.stringify(got)}\n  want ${JSON.stringify(want)}`);
    ++failed;
  }
}
process.exit(failed ? 1 : 0);
