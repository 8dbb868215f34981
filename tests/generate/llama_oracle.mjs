// llama.cpp as an oracle, through npm's node-llama-cpp (its prebuilt CPU binaries; nothing is
// compiled or downloaded at run time). Loads a GGUF file, evaluates the given prompt token ids and
// prints one JSON object on stdout:
//   {"n_vocab", "prompt_ids", "greedy_ids", "logits_file"?, "text_ids"?, "load_seconds",
//    "prompt_seconds", "generate_seconds"}
// With --logits-out FILE, the raw logits after every prompt position go to FILE as little-endian
// float32 [prompt_len, n_vocab] (binary, since JSON would be slow and lossy for 150k floats).
// With --text-file FILE, "text_ids" are llama.cpp's tokens for the file's UTF-8 text (special
// tokens such as <|im_start|> recognised), which checks the tokenizer the GGUF carries.
//
//   node llama_oracle.mjs --model M.gguf --tokens 1,2,3 [--generate N] [--logits-out FILE]
//                         [--text-file FILE] [--threads N] [--context N] [--node-modules DIR]
//
// Loading and thread options live in openModel() so other modes (benchmarks) reuse them.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

function parseArgs(argv) {
  const args = { generate: 32, threads: 2, context: 0, tokens: [] };
  for (let i = 0; i < argv.length; ++i) {
    const key = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${key} needs a value`);
    ++i;
    if (key === "--model") args.model = value;
    else if (key === "--tokens") args.tokens = value.split(",").filter((s) => s !== "").map(Number);
    else if (key === "--generate") args.generate = Number(value);
    else if (key === "--logits-out") args.logitsOut = value;
    else if (key === "--threads") args.threads = Number(value);
    else if (key === "--context") args.context = Number(value);
    else if (key === "--node-modules") args.nodeModules = value;
    else if (key === "--text-file") args.textFile = value;
    else throw new Error(`unknown option ${key}`);
  }
  if (!args.model) throw new Error("--model is required");
  if (args.tokens.length === 0 || args.tokens.some((t) => !Number.isInteger(t) || t < 0))
    throw new Error("--tokens must be a comma-separated list of token ids");
  return args;
}

// node-llama-cpp from --node-modules, else third_party_npm/ of the checkout holding this script.
async function importNodeLlamaCpp(nodeModules) {
  const root = nodeModules ??
      path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../third_party_npm/node_modules");
  const require = createRequire(path.join(root, "noop.js"));
  const entry = require.resolve("node-llama-cpp");
  return import(pathToFileURL(entry).href);
}

// One place for how the oracle loads llama.cpp: CPU only, prebuilt binaries only, f32 KV cache
// and no flash attention so f32 models are computed in f32 end to end.
export async function openModel({ model, threads, context, nodeModules, tokensNeeded }) {
  const lib = await importNodeLlamaCpp(nodeModules);
  const llama = await lib.getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: lib.LlamaLogLevel.error,
    maxThreads: threads,
  });
  const loaded = await llama.loadModel({ modelPath: model, gpuLayers: 0, useMmap: true });
  const contextSize = context > 0 ? context : Math.max(64, tokensNeeded);
  const ctx = await loaded.createContext({
    contextSize,
    batchSize: Math.min(contextSize, 512),
    sequences: 1,
    threads,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  return { lib, llama, model: loaded, context: ctx, sequence: ctx.getSequence() };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = performance.now();
  const oracle = await openModel({
    model: args.model,
    threads: args.threads,
    context: args.context,
    nodeModules: args.nodeModules,
    tokensNeeded: args.tokens.length + args.generate + 1,
  });
  const t1 = performance.now();
  const wantLogits = args.logitsOut !== undefined;
  const items = args.tokens.map((t, i) => [
    t,
    { generateNext: { token: i === args.tokens.length - 1, logits: wantLogits } },
  ]);
  const results = await oracle.sequence.controlledEvaluate(items);
  // llama.cpp hands back one logit per vocabulary entry; the first position tells how many.
  const vocabSize = results[0]?.next?.logits?.size ?? 0;
  if (wantLogits) {
    const logits = new Float32Array(args.tokens.length * vocabSize);
    for (let i = 0; i < args.tokens.length; ++i) {
      const map = results[i]?.next?.logits;
      if (!map || map.size !== vocabSize || vocabSize === 0)
        throw new Error(`position ${i}: got ${map ? map.size : 0} logits, expected ${vocabSize}`);
      for (const [token, value] of map) logits[i * vocabSize + token] = value;
    }
    fs.writeFileSync(args.logitsOut, Buffer.from(logits.buffer));
  }
  const t2 = performance.now();

  const greedy = [];
  let next = results[args.tokens.length - 1]?.next?.token;
  while (greedy.length < args.generate && next !== undefined && next !== null) {
    greedy.push(next);
    if (greedy.length === args.generate) break;
    const step = await oracle.sequence.controlledEvaluate([[next, { generateNext: { token: true } }]]);
    next = step[0]?.next?.token;
  }
  const t3 = performance.now();
  const textIds = args.textFile === undefined
      ? undefined
      : oracle.model.tokenize(fs.readFileSync(args.textFile, "utf8"), true);

  process.stdout.write(JSON.stringify({
    n_vocab: vocabSize,
    prompt_ids: args.tokens,
    greedy_ids: greedy,
    logits_file: args.logitsOut ?? null,
    text_ids: textIds,
    load_seconds: (t1 - t0) / 1000,
    prompt_seconds: (t2 - t1) / 1000,
    generate_seconds: (t3 - t2) / 1000,
  }) + "\n");
  await oracle.context.dispose();
  await oracle.model.dispose();
  await oracle.llama.dispose();
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e) => {
    process.stderr.write(`llama_oracle: ${e?.stack ?? e}\n`);
    process.exit(1);
  });
}
