// The real `openai` npm client against `tlaloc serve`: chat and completions, streamed and not.
// Greedy answers must parse, `usage` must add up, the streamed text must equal the whole
// answer's, and a refused request must surface as the client's APIError with its status.
// Usage: node serve_openai_client.mjs NODE_MODULES_DIR BASE_URL API_KEY
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const [, , modules, baseURL, apiKey] = process.argv;
const require = createRequire(modules + "/");
const { default: OpenAI } = require("openai");
const client = new OpenAI({ baseURL, apiKey, timeout: 60_000, maxRetries: 0 });

function checkUsage(u, what) {
  assert.ok(u, `${what}: no usage`);
  assert.ok(u.prompt_tokens > 0 && u.completion_tokens > 0, `${what}: usage ${JSON.stringify(u)}`);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens, `${what}: total`);
}

const messages = [{ role: "user", content: "Tell me about rain." }];
const chat = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 20,
                                                    temperature: 0 });
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices.length, 1);
assert.ok(["stop", "length"].includes(chat.choices[0].finish_reason));
assert.equal(chat.choices[0].message.role, "assistant");
checkUsage(chat.usage, "chat");
assert.ok(chat.usage.completion_tokens <= 20);

const stream = await client.chat.completions.create({
  model: "tiny", messages, max_tokens: 20, temperature: 0, stream: true,
  stream_options: { include_usage: true } });
let content = "", reasoning = "", finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  const c = chunk.choices[0];
  if (!c) continue;
  content += c.delta.content ?? "";
  reasoning += c.delta.reasoning_content ?? "";
  if (c.finish_reason) finish = c.finish_reason;
}
assert.equal(content, chat.choices[0].message.content, "streamed content = whole content");
assert.equal(reasoning, chat.choices[0].message.reasoning_content ?? "", "streamed reasoning");
assert.equal(finish, chat.choices[0].finish_reason);
checkUsage(usage, "streamed chat");
assert.deepEqual(usage, chat.usage);
assert.ok(chunks >= 3, `only ${chunks} chunks`);

const comp = await client.completions.create({ model: "tiny", prompt: "The rain", max_tokens: 12,
                                               temperature: 0, logprobs: 2 });
assert.equal(comp.object, "text_completion");
checkUsage(comp.usage, "completion");
assert.equal(comp.choices[0].logprobs.tokens.length, comp.usage.completion_tokens);
for (const lp of comp.choices[0].logprobs.token_logprobs) assert.ok(lp <= 0);
let text = "";
for await (const chunk of await client.completions.create({
  model: "tiny", prompt: "The rain", max_tokens: 12, temperature: 0, stream: true }))
  text += chunk.choices[0]?.text ?? "";
assert.equal(text, comp.choices[0].text, "streamed completion = whole completion");

const models = await client.models.list();
assert.ok(models.data.length === 1 && models.data[0].id);

for (const [body, status] of [[{ model: "tiny", messages, n: 2 }, 400],
                              [{ model: "tiny", messages, temperature: "hot" }, 400]]) {
  try {
    await client.chat.completions.create(body);
    assert.fail("a refused request was answered");
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.equal(err.status, status);
    assert.ok(err.error?.message || err.message);
  }
}
console.log(`ok: openai client: chat ${chat.usage.completion_tokens} tokens, ${chunks} stream ` +
            `chunks, completion ${comp.usage.completion_tokens} tokens, errors as APIError`);
