// llama.cpp's side of bench/serve_vs_llama.sh: R greedy requests of N new tokens, C at a time,
// decoded together in ONE llama.cpp context of C sequences (node-llama-cpp batches the
// sequences' pending tokens into shared llama_decode calls), as a server built on
// node-llama-cpp would. Request i's prompt is the text "benchmark request i", the same as
// bench/serve_bench.mjs sends `tlaloc serve`. End tokens do not stop a request. llama.cpp's
// defaults otherwise (f16 KV cache, flash attention "auto", batch size). One warm-up request
// runs first, untimed. Prints one JSON line per concurrency:
//   {"concurrency", "requests", "prompt_tokens", "tokens", "seconds", "tokens_per_s"}
//
//   node bench/llama_multiseq.mjs --model FILE.gguf [--threads T] [--concurrency "1 4 16"]
//        [--requests R] [--new-tokens N] [--context L]
//
// node-llama-cpp is found in third_party_npm/ beside this folder (scripts/setup.sh installs it)
// or through NODE_PATH.
import process from "node:process";

import { importLlama, parseFlags } from "./llama_node.mjs";

function parseArgs(argv) {
  const opts = { threads: 2, concurrency: "1 4 16", requests: 16, newTokens: 64, context: 512 };
  const names = {
    "--model": ["model", String], "--threads": ["threads", Number],
    "--concurrency": ["concurrency", String], "--requests": ["requests", Number],
    "--new-tokens": ["newTokens", Number], "--context": ["context", Number],
  };
  parseFlags(argv, opts, names, ["threads", "requests", "newTokens", "context"]);
  opts.levels = opts.concurrency.trim().split(/\s+/).map(Number);
  if (opts.levels.some((c) => !Number.isInteger(c) || c < 1))
    throw new Error(`--concurrency "${opts.concurrency}": expected positive integers`);
  return opts;
}

// One request on a sequence of its own: prompt in, `newTokens` greedy tokens out.
async function runRequest(model, sequence, i, newTokens) {
  await sequence.clearHistory();
  const prompt = model.tokenize(`benchmark request ${i}`);
  let generated = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
    void token;
    if (++generated >= newTokens) break;
  }
  return { promptTokens: prompt.length, generated };
}

// `requests` requests, `concurrency` at a time, in one context of `concurrency` sequences.
async function measure(model, opts, concurrency, requests) {
  const context = await model.createContext({
    sequences: concurrency,
    contextSize: opts.context,
    threads: { ideal: opts.threads, min: opts.threads },
  });
  const sequences = Array.from({ length: concurrency }, () => context.getSequence());
  let next = 0, tokens = 0, promptTokens = 0;
  const t0 = performance.now();
  await Promise.all(sequences.map(async (sequence) => {
    while (next < requests) {
      const r = await runRequest(model, sequence, next++, opts.newTokens);
      tokens += r.generated;
      promptTokens += r.promptTokens;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  await context.dispose();
  return { concurrency, requests, prompt_tokens: promptTokens, tokens,
           seconds: +seconds.toFixed(2), tokens_per_s: +(tokens / seconds).toFixed(1) };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { getLlama } = await importLlama();
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: opts.threads, logLevel: "error" });
  const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0, useMmap: true });
  await measure(model, { ...opts, newTokens: 4 }, 1, 1);  // warm-up, untimed
  for (const c of opts.levels) console.log(JSON.stringify(await measure(model, opts, c, opts.requests)));
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llama_multiseq: ${e.message}`);
  process.exit(1);
});
