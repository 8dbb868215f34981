// Aggregate generation throughput of a running `tlaloc serve`: R greedy requests of N new tokens
// each, C at a time (non-streamed), and the tokens/s they add up to. Prints one JSON line
// (concurrency, requests, prompt_tokens, tokens, seconds, tokens_per_s).
// Usage: node serve_bench.mjs BASE_URL CONCURRENCY REQUESTS NEW_TOKENS
const [, , base, c, r, n] = process.argv;
const concurrency = Number(c), requests = Number(r), tokens = Number(n);
let next = 0, total = 0, promptTokens = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < requests) {
    const i = next++;
    const res = await fetch(base + "/v1/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      signal: AbortSignal.timeout(600_000),
      body: JSON.stringify({ prompt: `benchmark request ${i}`, max_tokens: tokens, temperature: 0 }) });
    const j = await res.json();
    if (res.status !== 200) throw new Error(JSON.stringify(j));
    total += j.usage.completion_tokens;
    promptTokens += j.usage.prompt_tokens;
  }
}));
const seconds = (performance.now() - t0) / 1000;
console.log(JSON.stringify({ concurrency, requests, prompt_tokens: promptTokens, tokens: total,
                             seconds: +seconds.toFixed(2),
                             tokens_per_s: +(total / seconds).toFixed(1) }));
