#!/usr/bin/env bash
# `tlaloc serve` where OpenAI-API users trip (issue 38), through curl and the official openai
# Python client (serve_api_client.py, the venv's): a non-streamed request that fails after
# admission gets an HTTP error with OpenAI's error object, not a 200 (the status goes out with
# the answer); a client that leaves a non-streamed request frees its slot; fields that would
# change the answer but are not honoured are refused with a 400 naming them, an unknown model
# with a 404 (model_not_found), an absent model is the served one; a completion prompt of token
# ids is answered; the sampling controls work through the client and are range-checked; with
# --cors, preflights get 204 before the key is checked and answers carry
# Access-Control-Allow-Origin for allowed origins only; without it, no CORS headers.
# Every request is bounded (curl --max-time, the client's timeout).
# Usage: serve_api_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" openai
fail() { echo "FAIL: $*"; exit 1; }
client() { "$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_api_client.py" "$URL/v1" "$@"; }
metric() { curl -s --max-time 10 "$URL/metrics" | sed -n "s/^$1 //p"; }

# --- A failure after admission ------------------------------------------------------------------
TLALOC_TEST_FAIL_DECODE_STEP=3 start_server late --max-batch 1 --max-context 256 --name tiny
client tiny late_error || fail "late_error"
# curl sees the status too, and the body is OpenAI's error object.
code=$(post /v1/completions '{"prompt":"after","max_tokens":4}' "$WORK/after.json")
[ "$code" = 200 ] || { cat "$WORK/after.json"; fail "the request after the failed one: HTTP $code"; }
stop_server "$SERVER_PID"

# --- A client that leaves a non-streamed request ----------------------------------------------
start_server cut --max-batch 1 --max-context 4096
set +e
curl -s --max-time 2 -H 'Content-Type: application/json' \
  -d '{"prompt":"Tell a long story","max_tokens":3000,"temperature":0}' \
  "$URL/v1/completions" >"$WORK/cut.json"
set -e
[ ! -s "$WORK/cut.json" ] || { cat "$WORK/cut.json"; fail "a cut non-streamed request got bytes before its answer"; }
freed=""
for _ in $(seq 1 50); do
  [ "$(metric tlaloc_requests_running)" = 0 ] && { freed=1; break; }
  sleep 0.1
done
[ -n "$freed" ] || fail "a disconnected non-streaming client still holds its slot after 5 s"
[ "$(metric 'tlaloc_requests_total{outcome="cancelled"}')" = 1 ] || fail "the cut request is not counted cancelled"
code=$(post /v1/completions '{"prompt":"after","max_tokens":4}' "$WORK/after.json")
[ "$code" = 200 ] || fail "request after a disconnect: HTTP $code"
echo "ok: a client that leaves a non-streamed request frees its slot"
stop_server "$SERVER_PID"

# --- Fields and models --------------------------------------------------------------------------
start_server fields --max-batch 2 --max-context 256 --name tiny
client tiny refused model token_ids sampling || fail "refused/model/token_ids/sampling"
# No --cors: no CORS headers, and a preflight is no special route.
curl -s --max-time 10 -D "$WORK/nocors.h" -o /dev/null -H 'Origin: http://a.test' "$URL/v1/models"
! grep -qi '^access-control' "$WORK/nocors.h" || fail "CORS headers without --cors"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X OPTIONS -H 'Origin: http://a.test' \
  -H 'Access-Control-Request-Method: POST' "$URL/v1/chat/completions")
[ "$code" != 204 ] || fail "a preflight answered 204 without --cors"
# An absent model is the served one (llama-server's leniency; OpenAI requires the field).
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}' "$WORK/nomodel.json")
[ "$code" = 200 ] || { cat "$WORK/nomodel.json"; fail "a request without a model: HTTP $code"; }
[ "$(json_get "$WORK/nomodel.json" "j['model']")" = tiny ] || fail "a request without a model is not answered as tiny"
echo "ok: a request without a model is answered by the served one"
stop_server "$SERVER_PID"

# --- CORS ---------------------------------------------------------------------------------------
start_server cors --max-batch 1 --max-context 256 --api-key sekrit --cors http://a.test,http://b.test --cors http://c.test
pre=$(curl -s --max-time 10 -D "$WORK/pre.h" -o /dev/null -w '%{http_code}' -X OPTIONS \
  -H 'Origin: http://c.test' -H 'Access-Control-Request-Method: POST' \
  -H 'Access-Control-Request-Headers: authorization,content-type' "$URL/v1/chat/completions")
[ "$pre" = 204 ] || { cat "$WORK/pre.h"; fail "preflight: HTTP $pre, expected 204 (before the key)"; }
grep -qi '^access-control-allow-origin: http://c.test' "$WORK/pre.h" || fail "preflight: no Allow-Origin"
grep -qi '^access-control-allow-methods: .*POST' "$WORK/pre.h" || fail "preflight: no Allow-Methods"
grep -qi '^access-control-allow-headers: .*authorization' "$WORK/pre.h" || fail "preflight: no Allow-Headers"
code=$(curl -s --max-time 30 -D "$WORK/post.h" -o "$WORK/post.json" -w '%{http_code}' \
  -H 'Origin: http://a.test' -H 'Authorization: Bearer sekrit' -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":2}' "$URL/v1/completions")
[ "$code" = 200 ] || fail "CORS POST: HTTP $code"
grep -qi '^access-control-allow-origin: http://a.test' "$WORK/post.h" || fail "answer without Allow-Origin"
# A page can read the error too; another origin gets no header.
code=$(curl -s --max-time 10 -D "$WORK/401.h" -o /dev/null -w '%{http_code}' -H 'Origin: http://b.test' "$URL/v1/models")
[ "$code" = 401 ] && grep -qi '^access-control-allow-origin: http://b.test' "$WORK/401.h" || fail "401 without Allow-Origin"
curl -s --max-time 10 -D "$WORK/other.h" -o /dev/null -H 'Origin: http://evil.test' "$URL/health"
! grep -qi '^access-control-allow-origin' "$WORK/other.h" || fail "Allow-Origin for an origin not allowed"
stop_server "$SERVER_PID"
start_server any --max-batch 1 --max-context 256 --cors '*'
curl -s --max-time 10 -D "$WORK/any.h" -o /dev/null -H 'Origin: http://x.test' "$URL/v1/models"
grep -qi '^access-control-allow-origin: \*' "$WORK/any.h" || fail "--cors '*': no Allow-Origin: *"
stop_server "$SERVER_PID"
echo "ok: CORS with --cors, none without"
echo "PASS"
