# Shared by the CLI end-to-end test scripts (sourced): the real Qwen3 tokenizer (data/qwen3/), a
# scratch folder removed on exit, and a tiny random Qwen3 made with `tlaloc init-model`.
# Usage: source cli_test_lib.sh; make_tiny_model TLALOC SOURCE_DIR SEED  (sets WORK and MODEL),
# or start_cli_test (sets work, failures and fail)
make_tiny_model() {
  local tlaloc=$1 source_dir=$2 seed=$3
  local tokenizer=$source_dir/data/qwen3/tokenizer.json
  [ -f "$tokenizer" ] || { echo "FAIL: the checkout lacks $tokenizer"; exit 1; }
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

# The oracles' Python: the checkout's venv (third_party_py/, made by scripts/setup.sh).
# need_python SOURCE_DIR MODULE...: sets ORACLE_PYTHON; exits 77 (skipped, naming what is
# missing) when the venv cannot import a module, 1 under CI=true (tests/testing/oracle.h).
need_python() {
  ORACLE_PYTHON=$1/third_party_py/bin/python
  shift
  local imports="" m
  for m in "$@"; do imports+="import $m;"; done
  if ! "$ORACLE_PYTHON" -c "$imports" >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
      echo "FAIL: CI=true and $ORACLE_PYTHON cannot import $* (run scripts/setup.sh)"
      exit 1
    fi
    echo "SKIP: $ORACLE_PYTHON cannot import $* (run scripts/setup.sh)"
    exit 77
  fi
}
