# Shared by the mpirun tests: MPIRUN_FLAGS and require_mpirun.
# Loopback only; as root (CI containers) Open MPI refuses to start without these two variables.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shared memory between the ranks without ptrace (containers forbid CMA); TCP on loopback.
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_tcp_if_include=lo
MPIRUN_FLAGS=(--oversubscribe --bind-to none)

# require_mpirun MPIRUN: returns 0 when MPIRUN runs a trivial job; else fails in CI and skips
# (77) elsewhere, naming what is missing.
require_mpirun() {
  local mpirun=$1 why=""
  if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
    why="mpirun not found (install openmpi-bin libopenmpi-dev: scripts/setup.sh)"
  elif ! timeout 30 "$mpirun" "${MPIRUN_FLAGS[@]}" -np 2 true >/dev/null 2>&1; then
    why="$mpirun -np 2 true fails on this machine"
  fi
  [ -z "$why" ] && return 0
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $why (CI must run the multi-process tests)"
    return 1
  fi
  echo "SKIP: $why"
  return 77
}
