#!/usr/bin/env bash
# `tlaloc generate` with the prompt on stdin: on a terminal it says on stderr that it reads the
# prompt from there; with a pipe it does not (generate_stdin_tty.py, Python's pty module).
# Usage: generate_stdin_test.sh TLALOC SOURCE_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 5
python3 "$SOURCE_DIR/tests/cli/generate_stdin_tty.py" "$TLALOC" "$MODEL"
echo "PASS"
