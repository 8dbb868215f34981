#!/usr/bin/env bash
# `tlaloc serve` on loopback with the tiny preset: curl and the official openai Python client
# (serve_openai_client.py, the venv's) get parsed answers whose usage adds up and typed errors
# for refusals; a greedy request returns exactly `tlaloc generate`'s reply; 8 concurrent greedy
# requests of different lengths each return what they return alone; bad bodies, unknown routes,
# a missing API key and an over-long prompt get OpenAI-shaped 4xx errors; a bounded load test
# (serve_load.py: 64 requests at concurrency 16) all succeed; a client that disconnects frees its
# slot; a full queue answers 429 with Retry-After; --host ::1 prints a bracketed URL and the
# startup line matches docs/SERVING.md's; the bearer scheme is case-insensitive; SIGTERM
# finishes the running request and exits 0; with --mesh model=2 (tensor parallel) the concurrent
# greedy requests get the same answers. Every request
# is bounded (curl --max-time, the clients' timeouts, the load test's deadline).
# Usage: serve_http_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" openai
fail() { echo "FAIL: $*"; exit 1; }
# wait_until WHAT CMD...: polls CMD every 0.1 s until it succeeds; fails naming WHAT after 60 s.
# The test waits for events, not for fixed times: a slow or loaded machine only takes longer.
wait_until() {
  local what=$1; shift
  for _ in $(seq 1 600); do "$@" && return 0; sleep 0.1; done
  fail "waited 60 s for $what"
}

# A bad pool size is a usage error naming the flag, before anything loads.
set +e
"$TLALOC" serve -m "$MODEL" --port 0 --kv-blocks -1 2>"$WORK/kvbad.txt"
code=$?
set -e
[ "$code" = 2 ] && grep -q -- '--kv-blocks -1' "$WORK/kvbad.txt" || fail "--kv-blocks -1: exit $code"

# --- Server A: 8 slots -------------------------------------------------------------------------
start_server a --max-batch 8 --max-context 512 --api-key sekrit --name tiny
AUTH=(-H "Authorization: Bearer sekrit")
[ "$(curl -s --max-time 10 "$URL/health")" = '{"status":"ok"}' ] || fail "/health"
curl -s --max-time 10 "${AUTH[@]}" "$URL/v1/models" >"$WORK/models.json"
[ "$(json_get "$WORK/models.json" "j['data'][0]['id']")" = tiny ] || fail "/v1/models"
curl -s --max-time 10 "$URL/metrics" >"$WORK/metrics.txt"
grep -q '^tlaloc_kv_slots_total 8$' "$WORK/metrics.txt" || fail "/metrics has no slot count"
# The default pool: 8 requests of 512 positions in blocks of 16, none in use yet.
grep -q '^tlaloc_kv_blocks_total 256$' "$WORK/metrics.txt" || fail "/metrics: KV blocks total"
grep -q '^tlaloc_kv_blocks_in_use 0$' "$WORK/metrics.txt" || fail "/metrics: KV blocks in use"
grep -q '^tlaloc_requests_running_peak 0$' "$WORK/metrics.txt" ||
  fail "/metrics: a running peak before any request"
grep -q '^# TYPE tlaloc_request_duration_seconds histogram$' "$WORK/metrics.txt" || fail "no histogram"
echo "ok: /health, /v1/models, /metrics"

# Refusals: status, and the error object naming the field.
check_error() {  # check_error STATUS PARAM_OR_CODE PATH BODY [CURL_ARGS...]
  local status=$1 needle=$2 path=$3 body=$4; shift 4
  local got
  got=$(curl -s --max-time 30 -o "$WORK/err.json" -w '%{http_code}' "$@" \
        -H 'Content-Type: application/json' -d "$body" "$URL$path")
  [ "$got" = "$status" ] || { cat "$WORK/err.json"; fail "$path $body: HTTP $got, expected $status"; }
  python3 - "$WORK/err.json" "$needle" <<'PY' || fail "$path $body: bad error object"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["message"] and e["type"], e
assert sys.argv[2] in (e.get("param") or "", e.get("code") or "", e["type"]), e
PY
}
msg='"messages":[{"role":"user","content":"hi"}]'
check_error 401 invalid_api_key /v1/chat/completions "{$msg}"
check_error 401 invalid_api_key /v1/chat/completions "{$msg}" -H "Authorization: Bearer wrong"
check_error 400 invalid_request_error /v1/chat/completions '{"messages": [' "${AUTH[@]}"
check_error 400 max_tokens /v1/chat/completions "{$msg, \"max_tokens\": \"many\"}" "${AUTH[@]}"
check_error 400 messages /v1/chat/completions '{"messages": 3}' "${AUTH[@]}"
check_error 400 n /v1/chat/completions "{$msg, \"n\": 9}" "${AUTH[@]}"  # past --max-batch 8
check_error 400 prompt /v1/completions '{"prompt": 12}' "${AUTH[@]}"
long=$(python3 -c "print(' '.join(['rain']*700))")
check_error 400 context_length_exceeded /v1/completions "{\"prompt\": \"$long\"}" "${AUTH[@]}"
check_error 404 invalid_request_error /v1/nothing '{}' "${AUTH[@]}"
# A too-long completion prompt is blamed on "prompt", a chat's on "messages".
check_error 400 prompt /v1/completions "{\"prompt\": \"$long\"}" "${AUTH[@]}"
check_error 400 messages /v1/chat/completions \
  "{\"messages\": [{\"role\": \"user\", \"content\": \"$long\"}]}" "${AUTH[@]}"
echo "ok: bad requests get OpenAI-shaped 4xx errors"
# The auth scheme is case-insensitive (RFC 9110): "bearer" and "BEARER" pass as "Bearer" does.
for scheme in bearer BEARER; do
  code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' \
         -H "Authorization: $scheme sekrit" "$URL/v1/models")
  [ "$code" = 200 ] || fail "Authorization: $scheme KEY: HTTP $code, expected 200"
done
echo "ok: the bearer scheme is case-insensitive"

# Greedy: exactly `tlaloc generate`'s reply and token count (chat and plain prompt).
"$TLALOC" generate -m "$MODEL" --chat "Hello there" -n 24 --temp 0 --json >"$WORK/gen.json" 2>/dev/null
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":24,"temperature":0}' \
  "$WORK/chat.json" "${AUTH[@]}" >/dev/null
"$TLALOC" generate -m "$MODEL" --prompt "Once upon" -n 20 --temp 0 --json >"$WORK/gen2.json" 2>/dev/null
post /v1/completions '{"prompt":"Once upon","max_tokens":20,"temperature":0}' "$WORK/comp.json" \
  "${AUTH[@]}" >/dev/null
python3 - "$WORK/gen.json" "$WORK/chat.json" "$WORK/gen2.json" "$WORK/comp.json" <<'PY' || fail "greedy parity"
import json, sys
gen, chat, gen2, comp = (json.load(open(p)) for p in sys.argv[1:])
m = chat["choices"][0]["message"]
assert m["content"] == gen["text"], (m, gen["text"])
assert m.get("reasoning_content", "") == gen["reasoning_content"], (m, gen["reasoning_content"])
u = chat["usage"]
assert u["completion_tokens"] == len(gen["generated_ids"]), (u, len(gen["generated_ids"]))
assert u["prompt_tokens"] == len(gen["prompt_ids"]), u
assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], u
assert chat["choices"][0]["finish_reason"] == gen["finish_reason"]
assert comp["choices"][0]["text"] == gen2["text"] + gen2["reasoning_content"] or \
       comp["choices"][0]["text"] == gen2["text"], (comp, gen2)
assert comp["usage"]["completion_tokens"] == len(gen2["generated_ids"])
print("ok: greedy chat and completion equal tlaloc generate (%d and %d tokens)"
      % (u["completion_tokens"], comp["usage"]["completion_tokens"]))
PY

# Batching invariance: 8 concurrent greedy requests of different lengths, then each alone.
body() { echo "{\"prompt\":\"$(printf 'w%.0s ' $(seq 1 $(( $1 * 3 + 1 ))))\",\"max_tokens\":$(( 6 + $1 * 3 )),\"temperature\":0}"; }
for i in $(seq 0 7); do
  post /v1/completions "$(body "$i")" "$WORK/together.$i.json" "${AUTH[@]}" >"$WORK/together.$i.code" &
done
wait_for_jobs() { for j in $(jobs -p); do [ "$j" = "$SERVER_PID" ] || wait "$j"; done; }
wait_for_jobs
for i in $(seq 0 7); do
  post /v1/completions "$(body "$i")" "$WORK/alone.$i.json" "${AUTH[@]}" >/dev/null
done
# same_as_alone PREFIX MESSAGE: the 8 replies $WORK/PREFIX.i.json are 200s with the text and
# usage of $WORK/alone.i.json.
same_as_alone() {
  python3 - "$WORK" "$1" "$2" <<'PY' || fail "$1: not the replies of requests sent alone"
import json, sys
w, prefix, message = sys.argv[1:]
for i in range(8):
    assert open(f"{w}/{prefix}.{i}.code").read() == "200", i
    t, a = json.load(open(f"{w}/{prefix}.{i}.json")), json.load(open(f"{w}/alone.{i}.json"))
    assert t["choices"][0]["text"] == a["choices"][0]["text"], (i, t, a)
    assert t["usage"] == a["usage"], (i, t["usage"], a["usage"])
print("ok: " + message)
PY
}
same_as_alone together "8 concurrent greedy requests each return what they return alone"
curl -s --max-time 10 "$URL/metrics" >"$WORK/metrics.txt"
steps=$(sed -n 's/^tlaloc_decode_steps_total //p' "$WORK/metrics.txt")
rows=$(sed -n 's/^tlaloc_decode_rows_total //p' "$WORK/metrics.txt")
[ "$rows" -gt "$steps" ] || fail "decode steps were never shared ($rows rows in $steps steps)"

# Streaming with curl: SSE chunks, then [DONE].
curl -sN --max-time 60 "${AUTH[@]}" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Stream"}],"max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' \
  "$URL/v1/chat/completions" >"$WORK/sse.txt"
python3 - "$WORK/sse.txt" <<'PY' || fail "SSE stream"
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert lines[-1] == "data: [DONE]", lines[-1]
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert any(c["choices"] and c["choices"][0]["finish_reason"] for c in chunks)
assert chunks[-1]["usage"]["total_tokens"] == chunks[-1]["usage"]["prompt_tokens"] + chunks[-1]["usage"]["completion_tokens"]
print("ok: curl streaming: %d chunks then [DONE]" % len(chunks))
PY

# The openai Python client: plain, streamed and refused requests.
"$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_openai_client.py" "$URL/v1" sekrit 512
stop_server "$SERVER_PID"

# --- Server 6: IPv6 loopback, with docs/SERVING.md's flags --------------------------------------
# The startup line writes the address as a URL does (http://[::1]:PORT) and says what
# docs/SERVING.md's example line says for the same flags (KV blocks and their MiB).
if [ -r /proc/net/if_inet6 ] && grep -q '^0\{31\}1 ' /proc/net/if_inet6; then
  : >"$WORK/v6.log"
  "$TLALOC" serve -m "$MODEL" --host ::1 --port 0 --max-batch 8 --max-context 2048 \
    2>"$WORK/v6.log" &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/\[::1\]:\([0-9]*\).*/\1/p' "$WORK/v6.log")
    [ -n "$port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$WORK/v6.log"; fail "--host ::1: no 'listening on http://[::1]:PORT'"; }
  [ "$(curl -sg --max-time 10 "http://[::1]:$port/health")" = '{"status":"ok"}' ] ||
    fail "--host ::1: the printed URL does not answer"
  kv() { grep -o '[0-9]* [a-z0-9]* KV blocks of [0-9]* ([0-9.]* MiB)' "$1" | head -1; }
  documented=$(kv "$SOURCE_DIR/docs/SERVING.md")
  [ -n "$documented" ] && [ "$(kv "$WORK/v6.log")" = "$documented" ] ||
    fail "docs/SERVING.md says '$documented', the same flags print '$(kv "$WORK/v6.log")'"
  stop_server "$SERVER_PID"
  echo "ok: --host ::1 prints http://[::1]:$port, which answers; '$documented' as documented"
else
  [ "${CI:-}" != true ] || fail "CI=true and this machine has no IPv6 loopback for --host ::1"
  echo "note: no IPv6 loopback here (/proc/net/if_inet6), the --host ::1 check did not run"
fi

# --- Server M: tensor parallel (--mesh model=2: weights and KV cache over 2 devices) ----------
# The 8 concurrent greedy requests return what server A returned for each alone.
TLALOC_CPU_DEVICES=2 start_server m --max-batch 8 --max-context 512 --mesh model=2
for i in $(seq 0 7); do
  post /v1/completions "$(body "$i")" "$WORK/mesh.$i.json" >"$WORK/mesh.$i.code" &
done
wait_for_jobs
same_as_alone mesh "serve --mesh model=2 answers 8 concurrent greedy requests as one device does"
stop_server "$SERVER_PID"
start_server load --max-batch 8 --max-context 256 --max-queue 64
"$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_load.py" "$URL" 64 16 16
stop_server "$SERVER_PID"

# --- Server B: one slot, a queue of one: disconnect and overload ------------------------------
start_server b --max-batch 1 --max-queue 1 --max-context 4096 --kv-blocks 200
metric() { curl -s --max-time 10 "$URL/metrics" | sed -n "s/^$1 //p"; }
[ "$(metric tlaloc_kv_blocks_total)" = 200 ] || fail "--kv-blocks 200: /metrics says otherwise"
long_body='{"prompt":"Tell a long story","max_tokens":3000,"temperature":0,"stream":true}'
metric_is() { [ "$(metric "$1")" = "$2" ]; }
# The client disconnects once the first token has arrived.
curl -sN --max-time 120 -H 'Content-Type: application/json' -d "$long_body" "$URL/v1/completions" \
  >"$WORK/cut.txt" &
cut_pid=$!
wait_until "the first token of the stream that is then cut" grep -q '^data: ' "$WORK/cut.txt"
kill "$cut_pid" 2>/dev/null || true
wait "$cut_pid" 2>/dev/null || true
wait_until "a disconnected streaming client to free its slot" metric_is tlaloc_requests_running 0
[ "$(metric tlaloc_kv_blocks_in_use)" = 0 ] || fail "a disconnected client still holds KV blocks"
[ "$(metric tlaloc_kv_blocks_reserved)" = 0 ] || fail "a disconnected client's blocks stay promised"
[ "$(metric 'tlaloc_requests_total{outcome="cancelled"}')" = 1 ] || fail "no cancelled request counted"
code=$(post /v1/completions '{"prompt":"after","max_tokens":4}' "$WORK/after.json")
[ "$code" = 200 ] || fail "request after a disconnect: HTTP $code"
echo "ok: a disconnected streaming client frees its slot"

# Non-streamed too: the handler peeks at its socket and notices the closed connection. The
# client disconnects once its request holds the slot.
curl -s --max-time 120 -H 'Content-Type: application/json' \
  -d '{"prompt":"Tell a long story","max_tokens":3000,"temperature":0}' "$URL/v1/completions" \
  >/dev/null &
cut_pid=$!
wait_until "the non-streaming request to hold the slot" metric_is tlaloc_requests_running 1
kill "$cut_pid" 2>/dev/null || true
wait "$cut_pid" 2>/dev/null || true
wait_until "a disconnected non-streaming client to free its slot" \
  metric_is tlaloc_requests_running 0
# The high-water marks keep what the gauges no longer show: one request ran, and held blocks.
[ "$(metric tlaloc_requests_running_peak)" -ge 1 ] || fail "/metrics: no running peak"
[ "$(metric tlaloc_kv_blocks_in_use_peak)" -ge 1 ] || fail "/metrics: no KV block peak"
[ "$(metric tlaloc_kv_blocks_reserved_peak)" -ge 1 ] || fail "/metrics: no reserved-block peak"
echo "ok: a disconnected non-streaming client frees its slot"

# Overload: one running, one queued, the rest refused with 429.
curl -sN --max-time 120 -H 'Content-Type: application/json' -d "$long_body" \
  "$URL/v1/completions" >"$WORK/bg.1.txt" 2>/dev/null &
wait_until "the first long request to hold the slot" metric_is tlaloc_requests_running 1
curl -sN --max-time 120 -H 'Content-Type: application/json' -d "$long_body" \
  "$URL/v1/completions" >"$WORK/bg.2.txt" 2>/dev/null &
wait_until "the second long request to wait in the queue" metric_is tlaloc_requests_waiting 1
code=$(post /v1/completions '{"prompt":"one too many","max_tokens":4}' "$WORK/429.json" \
       -D "$WORK/429.headers")
[ "$code" = 429 ] || { cat "$WORK/429.json"; fail "overload: HTTP $code, expected 429"; }
[ "$(json_get "$WORK/429.json" "j['error']['code']")" = rate_limit_exceeded ] || fail "429 body"
grep -qiE '^Retry-After: [0-9]+' "$WORK/429.headers" ||
  { cat "$WORK/429.headers"; fail "429 without a Retry-After header"; }
echo "ok: a full queue answers 429 with Retry-After"

# SIGTERM with a request running: it finishes ([DONE]), new ones are refused, exit 0.
kill_bg() { for j in $(jobs -p); do [ "$j" = "$SERVER_PID" ] || kill "$j" 2>/dev/null || true; done; }
kill_bg
wait_for_jobs 2>/dev/null || true
wait_until "the killed clients' requests to leave the queue" metric_is tlaloc_requests_waiting 0
wait_until "the killed clients' requests to free the slot" metric_is tlaloc_requests_running 0
: >"$WORK/drain.txt"
curl -sN --max-time 120 -H 'Content-Type: application/json' \
  -d '{"prompt":"Drain","max_tokens":200,"temperature":0,"stream":true}' "$URL/v1/completions" \
  >"$WORK/drain.txt" &
drain_pid=$!
wait_until "the first token of the request to drain" grep -q '^data: ' "$WORK/drain.txt"
kill -TERM "$SERVER_PID"
# Draining has begun once /health stops answering 200 (503 "draining", or 000: not listening).
health_not_ok() {
  local c
  c=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/health" || true)
  [ "$c" != 200 ]
}
wait_until "the server to start draining after SIGTERM (/health not 200)" health_not_ok
late=$(curl -s --max-time 10 -o "$WORK/late.json" -w '%{http_code}' -H 'Content-Type: application/json' \
       -d '{"prompt":"late","max_tokens":2}' "$URL/v1/completions" || true)
[ "$late" = 503 ] || [ "$late" = 000 ] || fail "a request during shutdown got HTTP $late"
wait "$drain_pid" || fail "the draining request's curl failed"
# The stream ends with its last event complete: "data: [DONE]" and the blank line after it.
tail -c 14 "$WORK/drain.txt" | cmp -s - <(printf 'data: [DONE]\n\n') ||
  { tail -5 "$WORK/drain.txt"; fail "the running request was cut by SIGTERM (no final 'data: [DONE]' event)"; }
grep -q '"finish_reason":"\(stop\|length\)"' "$WORK/drain.txt" || fail "the drained request has no finish_reason"
stop_server "$SERVER_PID"
grep -q "finishing running requests" "$WORK/b.log" || fail "no shutdown message"
echo "ok: SIGTERM finishes the running request, refuses new ones (HTTP $late) and exits 0"
