#!/usr/bin/env bash
# `tlaloc serve` with response_format (structured output, issue 39), through the official openai
# Python client (serve_json_client.py) on a tiny random model: json_object and json_schema replies
# sampled at temperature 1 all parse and validate (jsonschema, pydantic through
# chat.completions.parse), an unconstrained request batched with a constrained one is unchanged,
# and a schema keyword outside the subset is a 400 naming it.
# Usage: serve_json_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" openai jsonschema pydantic
fail() { echo "FAIL: $*"; exit 1; }

start_server json --max-batch 2 --max-context 1024
"$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_json_client.py" "$URL/v1" "$MODEL" \
  refused object schema parse isolation || fail "structured output"
stop_server "$SERVER_PID"

# The CLI: --json-object and --json-schema constrain `tlaloc generate` the same way.
echo '{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}' \
  >"$WORK/schema.json"
"$TLALOC" generate -m "$MODEL" -p "Some JSON:" --temp 1 -s 3 -n 64 --json-schema "$WORK/schema.json" \
  >"$WORK/schema.out" 2>"$WORK/schema.err" || { cat "$WORK/schema.err"; fail "generate --json-schema"; }
"$ORACLE_PYTHON" - "$WORK/schema.out" <<'PY' || fail "generate --json-schema output"
import json, sys
value = json.loads(open(sys.argv[1]).read())
assert set(value) == {"n"} and isinstance(value["n"], int), value
PY
"$TLALOC" generate -m "$MODEL" -p "Some JSON:" --temp 1 -s 4 -n 64 --json-object \
  >"$WORK/object.out" 2>"$WORK/object.err" || { cat "$WORK/object.err"; fail "generate --json-object"; }
"$ORACLE_PYTHON" -c 'import json,sys; assert isinstance(json.loads(open(sys.argv[1]).read()), dict)' \
  "$WORK/object.out" || fail "generate --json-object output: $(cat "$WORK/object.out")"
echo '{"type":"string","format":"date"}' >"$WORK/bad.json"
if "$TLALOC" generate -m "$MODEL" -p x --json-schema "$WORK/bad.json" >/dev/null 2>"$WORK/bad.err"; then
  fail "an unsupported schema keyword was accepted"
fi
grep -q "'format'" "$WORK/bad.err" || { cat "$WORK/bad.err"; fail "the refusal does not name 'format'"; }
echo "PASS"
