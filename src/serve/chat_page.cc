// The chat page served at /: one self-contained HTML file (no external scripts, styles or
// fonts, so it works offline and with a strict network policy) that keeps the conversation in
// the page and streams each reply from /v1/chat/completions as server-sent events.
#include <string_view>

#include "tlaloc/serve/server.h"

namespace tlaloc::serve {

std::string_view ChatPageHtml() {
  static constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tlaloc chat</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d2330; }
  header { padding: 10px 16px; background: #1d3557; color: #fff; display: flex; gap: 12px;
           align-items: center; }
  header h1 { font-size: 17px; margin: 0; flex: 1; }
  header input { width: 160px; }
  #log { max-width: 820px; margin: 0 auto; padding: 16px; }
  .msg { margin: 10px 0; padding: 10px 14px; border-radius: 10px; white-space: pre-wrap;
         word-wrap: break-word; }
  .user { background: #dbe8ff; margin-left: 15%; }
  .assistant { background: #fff; margin-right: 15%; border: 1px solid #dde1e7; }
  .reasoning { color: #6b7280; font-style: italic; }
  .error { background: #ffe1e1; }
  .meta { font-size: 12px; color: #6b7280; margin-top: 4px; }
  form { position: sticky; bottom: 0; background: #f4f5f7; max-width: 820px; margin: 0 auto;
         display: flex; gap: 8px; padding: 12px 16px; }
  textarea { flex: 1; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid #bbb;
             resize: vertical; min-height: 44px; }
  button { font: inherit; padding: 0 18px; border-radius: 8px; border: 0; background: #1d3557;
           color: #fff; cursor: pointer; }
  button:disabled { opacity: .5; cursor: default; }
  #stop { background: #9b2226; }
  [hidden] { display: none !important; }
</style>
</head>
<body>
<header>
  <h1>Tlaloc chat <span id="model"></span></h1>
  <label>max tokens <input id="max" type="number" min="1" placeholder="auto" style="width:70px"></label>
  <label>temperature <input id="temp" type="number" value="0.7" min="0" max="2" step="0.1"
         style="width:60px"></label>
  <input id="key" type="password" placeholder="API key (if set)">
  <button id="reset" type="button">New chat</button>
</header>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Type a message; Enter sends, Shift+Enter is a new line"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" hidden>Stop</button>
</form>
<script>
"use strict";
const log = document.getElementById("log");
const input = document.getElementById("input");
const send = document.getElementById("send");
const keyBox = document.getElementById("key");
const stop = document.getElementById("stop");
// The running reply's fetch: Stop aborts it (the server frees the request's slot).
let controller = null;
stop.onclick = () => { if (controller) controller.abort(); };
keyBox.value = localStorage.getItem("tlaloc-key") || "";
let history = [];

function headers() {
  const h = {"Content-Type": "application/json"};
  if (keyBox.value) h["Authorization"] = "Bearer " + keyBox.value;
  return h;
}
function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  log.appendChild(div);
  div.scrollIntoView({block: "end"});
  return div;
}
fetch("/v1/models", {headers: headers()}).then(r => r.json()).then(j => {
  if (j.data && j.data[0]) document.getElementById("model").textContent = "· " + j.data[0].id;
}).catch(() => {});
document.getElementById("reset").onclick = () => { history = []; log.textContent = ""; };
input.addEventListener("keydown", e => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); document.getElementById("form").requestSubmit(); }
});

document.getElementById("form").addEventListener("submit", async e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || send.disabled) return;
  localStorage.setItem("tlaloc-key", keyBox.value);
  input.value = "";
  history.push({role: "user", content: text});
  bubble("user", text);
  const div = bubble("assistant", "");
  const think = document.createElement("div");
  think.className = "reasoning";
  const body = document.createElement("span");
  const meta = document.createElement("div");
  meta.className = "meta";
  div.append(think, body, meta);
  send.disabled = true;
  controller = new AbortController();
  stop.hidden = false;
  const started = performance.now();
  let reply = "", pieces = 0;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      // An empty budget is left out: the server's default runs to the end token or the context.
      body: JSON.stringify({messages: history, stream: true,
                            max_tokens: Number(document.getElementById("max").value) || undefined,
                            temperature: Number(document.getElementById("temp").value),
                            stream_options: {include_usage: true}})});
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + res.status));
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "", finish = "", usage = null;
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const j = JSON.parse(data);
          if (j.error) throw new Error(j.error.message);
          if (j.usage) usage = j.usage;
          const c = j.choices && j.choices[0];
          if (!c) continue;
          if (c.delta && c.delta.reasoning_content) think.textContent += c.delta.reasoning_content;
          if (c.delta && c.delta.content) { reply += c.delta.content; body.textContent = reply; pieces++; }
          if (c.finish_reason) finish = c.finish_reason;
          div.scrollIntoView({block: "end"});
        }
      }
    }
    const secs = (performance.now() - started) / 1000;
    meta.textContent = (usage ? usage.completion_tokens + " tokens, " : "") + secs.toFixed(1) +
        " s" + (finish ? ", " + finish : "");
    history.push({role: "assistant", content: reply});
    div.dataset.done = "1";
    div.dataset.pieces = String(pieces);
  } catch (err) {
    if (err.name === "AbortError") {
      // Stopped: what came so far is the assistant's turn, as shown.
      meta.textContent = "stopped";
      history.push({role: "assistant", content: reply});
      div.dataset.done = "stopped";
    } else {
      // A failed turn leaves the conversation: the next request must not send it again.
      history.pop();
      div.classList.add("error");
      body.textContent = reply + (reply ? "\n" : "") + "Error: " + err.message;
      div.dataset.done = "error";
    }
  } finally {
    controller = null;
    stop.hidden = true;
    send.disabled = false;
    input.focus();
  }
});
</script>
</body>
</html>
)html";
  return kPage;
}

}  // namespace tlaloc::serve
