// A bounded load test of `tlaloc serve`: N requests at concurrency C (defaults 64 and 16), each
// a short streamed chat with its own length (every 16th one sampled); every one must succeed.
// Prints p50/p99 latency, time to the first byte and aggregate tokens/s.
// Usage: node serve_load.mjs BASE_URL [N] [C] [MAX_TOKENS]
const [, , base, n = "64", c = "16", maxTokens = "16"] = process.argv;
const total = Number(n), concurrency = Number(c);

async function one(i) {
  const t0 = performance.now();
  const res = await fetch(base + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    signal: AbortSignal.timeout(120_000),
    body: JSON.stringify({ messages: [{ role: "user", content: `request ${i} ` + "x".repeat(i % 7) }],
                           // Every 16th request samples (its own seed); a sampled row makes
                           // the whole step sort candidates, so most stay greedy to keep CI fast.
                           max_tokens: 4 + (i % Number(maxTokens)),
                           temperature: i % 16 === 0 ? 0.8 : 0, seed: i,
                           stream: true, stream_options: { include_usage: true } }) });
  if (res.status !== 200) throw new Error(`request ${i}: HTTP ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "", first = 0, usage = null, finish = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!first) first = performance.now();
    buf += decoder.decode(value, { stream: true });
  }
  for (const line of buf.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const j = JSON.parse(line.slice(6));
    if (j.error) throw new Error(`request ${i}: ${j.error.message}`);
    if (j.usage) usage = j.usage;
    if (j.choices[0]?.finish_reason) finish = j.choices[0].finish_reason;
  }
  if (!buf.endsWith("data: [DONE]\n\n")) throw new Error(`request ${i}: no [DONE]`);
  if (!usage || !["stop", "length"].includes(finish)) throw new Error(`request ${i}: ${buf}`);
  return { ms: performance.now() - t0, ttft: first - t0, tokens: usage.completion_tokens };
}

const results = [];
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < total) results.push(await one(next++));
}));
const wall = (performance.now() - t0) / 1000;
const pct = (xs, p) => xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const tokens = results.reduce((s, r) => s + r.tokens, 0);
if (results.length !== total) throw new Error(`${results.length} of ${total} finished`);
console.log(`ok: load ${total} requests at concurrency ${concurrency}: all succeeded in ` +
            `${wall.toFixed(1)} s; latency p50 ${pct(results.map(r => r.ms), 0.5).toFixed(0)} ms, ` +
            `p99 ${pct(results.map(r => r.ms), 0.99).toFixed(0)} ms; first byte p50 ` +
            `${pct(results.map(r => r.ttft), 0.5).toFixed(0)} ms; ${tokens} tokens, ` +
            `${(tokens / wall).toFixed(1)} tokens/s`);
