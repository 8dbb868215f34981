#!/usr/bin/env bash
# `tlaloc serve` with tools (issue 39), through the official openai Python client
# (serve_tools_client.py): the rendered prompt with tools matches transformers'
# apply_chat_template, and (with TLALOC_TEST_REPLY standing in for a model that calls tools)
# replies come back as message.tool_calls, streamed and not; a malformed block stays text.
# Usage: serve_tools_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" openai transformers
# init-model writes a shortened Qwen3 template that has no tools section; the checkpoint's own
# (data/qwen3/tokenizer_config.json, Qwen3's) renders tools and tool calls.
cp "$SOURCE_DIR/data/qwen3/tokenizer_config.json" "$MODEL/tokenizer_config.json"
fail() { echo "FAIL: $*"; exit 1; }
client() { "$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_tools_client.py" "$@"; }

start_server plain --max-batch 2 --max-context 2048
client "$URL/v1" "$MODEL" prompt || fail "prompt"
stop_server "$SERVER_PID"

TLALOC_TEST_REPLY=$(client reply) start_server calls --max-batch 2 --max-context 2048
client "$URL/v1" "$MODEL" calls || fail "calls"
stop_server "$SERVER_PID"

TLALOC_TEST_REPLY=$(client malformed-reply) start_server bad --max-batch 2 --max-context 2048
client "$URL/v1" "$MODEL" malformed || fail "malformed"
stop_server "$SERVER_PID"
echo "PASS"
