#!/usr/bin/env bash
# A conversation longer than the context (issue 39): `tlaloc chat` (driven on stdin, which it reads
# with read(2) like a terminal) drops the oldest turns with a notice on stderr and goes on
# answering; a line that alone does not fit is refused and the chat continues. `tlaloc serve`
# drops them for /v1/chat/completions with the X-Tlaloc-Dropped-Turns header, checked through the
# openai client (serve_context_client.py). Usage: chat_context_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 7
fail() { echo "FAIL: $*"; [ -f "$WORK/chat.out" ] && { echo "--- stdout:"; cat "$WORK/chat.out"; echo "--- stderr:"; cat "$WORK/chat.err"; }; exit 1; }

# --- tlaloc chat ---------------------------------------------------------------------------------
context=96
lines=""
for i in 1 2 3 4 5 6; do lines+="message number $i with a few more words to fill the context"$'\n'; done
lines+="$(printf 'word %.0s' $(seq 1 200))"$'\n'
lines+="after the long one"$'\n'
printf '%s' "$lines" | timeout 300 "$TLALOC" chat -m "$MODEL" --temp 0 -n 4 -c "$context" \
  >"$WORK/chat.out" 2>"$WORK/chat.err" || { cat "$WORK/chat.err"; fail "chat exited $?"; }
grep -Eq "^\(dropped [0-9]+ oldest turns? to fit the context of $context tokens\)$" "$WORK/chat.err" ||
  { cat "$WORK/chat.err"; fail "no notice of dropped turns on stderr"; }
! grep -q "^(dropped" "$WORK/chat.out" || fail "the notice went to stdout"
# Every short line was answered: seven prompts read, one refusal (the 200-word line), no other error.
refusals=$(grep -c "no room for a reply" "$WORK/chat.out" || true)
[ "$refusals" = 1 ] || { cat "$WORK/chat.out"; fail "expected one refusal, saw $refusals"; }
! grep -q "generation failed" "$WORK/chat.out" || { cat "$WORK/chat.out"; fail "a reply failed"; }
notices=$(grep -c "^(dropped" "$WORK/chat.err")
echo "ok: chat dropped old turns $notices times in a context of $context and refused one line"

# --- tlaloc serve --------------------------------------------------------------------------------
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" openai
start_server ctx --max-batch 1 --max-context "$context" --name tiny
"$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_context_client.py" "$URL/v1" "$context" ||
  { cat "$WORK/ctx.log"; fail "serve_context_client.py"; }
stop_server "$SERVER_PID"
echo "PASS"
