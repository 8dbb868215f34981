// llama.cpp's side of bench/compare_llama.sh: loads a GGUF with node-llama-cpp's prebuilt CPU
// build, processes a random prompt of N tokens in one batch, then generates M tokens greedily
// (end tokens do not stop it), and prints one JSON object with the same fields as
// `tlaloc bench --json`: load_s, prefill_tokens_per_s, decode_tokens_per_s, peak_rss_bytes.
//
//   node bench/llama_bench.mjs --model FILE.gguf [--threads T] [--prompt-tokens N]
//        [--new-tokens M] [--kv default|f16|f32|bf16] [--vocab V] [--seed S]
//
// --kv default (the default) leaves the KV cache type and the attention path to
// node-llama-cpp, as its users get them (an f16 cache, flash attention "auto"); f16, f32 or bf16
// set both the key and the value type (experimentalKvCacheKeyType/ValueType). The JSON reports
// the types and attention mode the context ended up with.
//
// node-llama-cpp is found in third_party_npm/ beside this folder (scripts/setup.sh installs it)
// or through NODE_PATH.
import process from "node:process";

import { importLlama, parseFlags } from "./llama_node.mjs";

function parseArgs(argv) {
  const opts = { threads: 2, promptTokens: 512, newTokens: 128, kv: "default", vocab: 151936, seed: 0 };
  const names = {
    "--model": ["model", String], "--threads": ["threads", Number],
    "--prompt-tokens": ["promptTokens", Number], "--new-tokens": ["newTokens", Number],
    "--kv": ["kv", String], "--vocab": ["vocab", Number], "--seed": ["seed", Number],
  };
  parseFlags(argv, opts, names, ["threads", "promptTokens", "newTokens", "vocab"]);
  if (!["default", "f16", "f32", "bf16"].includes(opts.kv))
    throw new Error(`--kv ${opts.kv}: expected default, f16, f32 or bf16`);
  return opts;
}

// A small deterministic generator: the ids only need to be valid, not meaningful.
function randomIds(n, vocab, seed) {
  let state = BigInt(seed) * 6364136223846793005n + 1442695040888963407n;
  const ids = [];
  for (let i = 0; i < n; ++i) {
    state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    ids.push(Number((state >> 33n) % BigInt(vocab)));
  }
  return ids;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { getLlama, GgmlType } = await importLlama();
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: opts.threads, logLevel: "error" });

  let t0 = performance.now();
  const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0, useMmap: true });
  const loadS = (performance.now() - t0) / 1000;

  const contextSize = Math.ceil((opts.promptTokens + opts.newTokens + 1) / 256) * 256;
  const context = await model.createContext({
    contextSize,
    batchSize: Math.max(512, opts.promptTokens),
    threads: { ideal: opts.threads, min: opts.threads },
    ...(opts.kv === "default"
      ? {}
      : { experimentalKvCacheKeyType: opts.kv.toUpperCase(), experimentalKvCacheValueType: opts.kv.toUpperCase() }),
  });
  const seq = context.getSequence();
  const prompt = randomIds(opts.promptTokens, opts.vocab, opts.seed);

  t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, -1));
  // The last prompt token is evaluated alone together with sampling the first new token, like
  // a decode step, so it is timed with decoding.
  const prefillS = (performance.now() - t0) / 1000;

  let generated = 0;
  t0 = performance.now();
  for await (const token of seq.evaluate([prompt[prompt.length - 1]], { temperature: 0, yieldEogToken: true })) {
    void token;
    if (++generated >= opts.newTokens) break;
  }
  const decodeS = (performance.now() - t0) / 1000;

  const out = {
    engine: "llama.cpp (node-llama-cpp)",
    model: opts.model,
    threads: opts.threads,
    kv_type: opts.kv,
    kv_key_type: GgmlType?.[context.kvCacheKeyType] ?? context.kvCacheKeyType,
    kv_value_type: GgmlType?.[context.kvCacheValueType] ?? context.kvCacheValueType,
    flash_attention: context.flashAttention,
    load_s: loadS,
    prefill_tokens: prompt.length - 1,
    prefill_s: prefillS,
    prefill_tokens_per_s: (prompt.length - 1) / prefillS,
    decode_tokens: generated,
    decode_s: decodeS,
    decode_tokens_per_s: generated / decodeS,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
  };
  console.log(JSON.stringify(out));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llama_bench: ${e.message}`);
  process.exit(1);
});
