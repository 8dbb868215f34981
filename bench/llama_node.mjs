// What the node-llama-cpp benchmark scripts (llama_bench.mjs, llama_multiseq.mjs) share: their
// "--flag value" parsing and finding node-llama-cpp (in third_party_npm/ beside this folder,
// where scripts/setup.sh installs it, else through NODE_PATH).
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

// Fills `opts` (holding the defaults) from argv's "--flag value" pairs; `names` maps each flag
// to [field, converter]; every field in `positive` must end up a positive integer.
export function parseFlags(argv, opts, names, positive) {
  for (let i = 0; i < argv.length; i += 2) {
    const spec = names[argv[i]];
    if (!spec || i + 1 >= argv.length) throw new Error(`unknown or incomplete option ${argv[i]}`);
    opts[spec[0]] = spec[1](argv[i + 1]);
  }
  if (!opts.model) throw new Error("--model FILE.gguf is required");
  for (const k of positive)
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new Error(`--${k} must be a positive integer`);
  return opts;
}

export async function importLlama() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const local = path.join(here, "..", "third_party_npm", "node_modules", "node-llama-cpp");
  try {
    const require = createRequire(path.join(local, "package.json"));
    return await import(pathToFileURL(require.resolve("node-llama-cpp")).href);
  } catch {
    return await import("node-llama-cpp");
  }
}
