# shellcheck shell=bash
# What the bench/*.sh comparisons share: where the venv's Python and the tlaloc binary are, and
# the name of the CPU their tables are measured on. Sourced by them after they set ROOT.

# bench_python SCRIPT MODULE...: the checkout's venv python (third_party_py/, made by
# scripts/setup.sh: llama-cpp-python built natively, torch 2.x), after checking that it imports
# each MODULE; without it, an error naming SCRIPT and what is missing (the caller's `$(...)`
# then fails under `set -e`).
bench_python() {
  local script=$1 python="$ROOT/third_party_py/bin/python" why
  shift
  if [[ ! -x "$python" ]]; then
    echo "$script: $python is missing (run scripts/setup.sh to make the venv)" >&2
    return 1
  fi
  if (($#)) && ! why=$("$python" -c "import sys
for m in sys.argv[1:]:
    __import__(m)" "$@" 2>&1); then
    echo "$script: $python cannot import $* (run scripts/setup.sh):" >&2
    echo "$why" | tail -n 3 >&2
    return 1
  fi
  echo "$python"
}

# bench_tlaloc SCRIPT GIVEN: GIVEN (the script's --tlaloc) or the first tlaloc binary built in
# this checkout; without one, an error naming SCRIPT (the caller's `$(...)` then fails under
# `set -e`).
bench_tlaloc() {
  local script=$1 binary=$2 candidate
  if [[ -z "$binary" ]]; then
    for candidate in "$ROOT/build/tlaloc" "$ROOT/build/apps/tlaloc" "$ROOT"/build-*/apps/tlaloc; do
      if [[ -x "$candidate" ]]; then binary="$candidate"; break; fi
    done
  fi
  if [[ ! -x "$binary" ]]; then
    echo "$script: no tlaloc binary (build it, or pass --tlaloc BIN)" >&2
    return 1
  fi
  echo "$binary"
}

# The CPU's model name, as lscpu gives it.
bench_cpu() { lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1; }

# bench_llama_cpp PYTHON: one line naming the llama.cpp the comparisons run (the package, the
# llama.cpp commit it carries, the CPU features it was built with).
bench_llama_cpp() {
  "$1" - "$ROOT/bench" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import llama_lowlevel as lowlevel
ll = lowlevel.load_llama_cpp()
version = lowlevel.package_version()
print(f"llama-cpp-python {version} (built natively), {lowlevel.llama_cpp_commit(version)}; "
      f"{ll.llama_print_system_info().decode().strip()}")
PY
}
