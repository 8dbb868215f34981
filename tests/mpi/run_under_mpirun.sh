#!/usr/bin/env bash
# Runs COMMAND... under `mpirun -np NP` on this machine (loopback, --oversubscribe, as root where
# needed), bounded by LIMIT seconds. Where mpirun cannot run: a failure in CI (CI=true), else
# exit 77 (CTest's skip) saying so by name.
# Usage: run_under_mpirun.sh MPIRUN NP LIMIT COMMAND...
set -uo pipefail
mpirun=$1 np=$2 limit=$3
shift 3
source "$(dirname "$0")/mpi_test_lib.sh"
require_mpirun "$mpirun" || exit $?
timeout -k 5 "$limit" "$mpirun" "${MPIRUN_FLAGS[@]}" -np "$np" "$@"
rc=$?
[ "$rc" -eq 124 ] && echo "FAIL: mpirun -np $np $* did not finish within ${limit}s"
exit "$rc"
