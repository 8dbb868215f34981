#!/usr/bin/env bash
# Tlaloc's kernel hub against Hugging Face's `kernels` package (tests/kernels/hub_interop.py):
# variant choice for CPU, CUDA and TPU systems, metadata digests and lockfiles in both directions.
# Skips (exit 77) without `kernels` in the venv; fails under CI=true.
# Usage: hub_interop.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1 source_dir=$2
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" kernels packaging
start_cli_test
"$ORACLE_PYTHON" "$source_dir/tests/kernels/hub_interop.py" "$tlaloc" "$work/interop" 2>&1 |
  grep -v '^WARNING'
