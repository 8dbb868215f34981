#!/usr/bin/env bash
# The CLI on XLA's own CPU PJRT plugin (lammps-jax-pjrt-cpu in the checkout's venv):
# `tlaloc doctor --target xla-cpu --load` names the wheel's plugin, its API version and devices;
# `tlaloc run --target xla-cpu` runs a self-checking program (checks on the host); and
# `tlaloc generate --target xla-cpu` prints the interpreter's ids, greedy and sampled with a
# seed (generate_cli_parity.sh), also split over two devices (--mesh model=2); and
# `tlaloc serve --target xla-cpu` answers a greedy and a seeded completion as the interpreter's
# server does. Usage: xla_cpu_cli.sh TLALOC_BINARY SOURCE_DIR
# Exits 77 (skipped) when no XLA:CPU plugin resolves; fails instead under CI=true.
set -euo pipefail
TLALOC=$1 SOURCE_DIR=$2
source "$(dirname "$0")/../cli_test_lib.sh"
start_cli_test

if ! "$TLALOC" doctor --target xla-cpu --load >"$work/doctor.txt" 2>&1; then
  if grep -q "NOT FOUND" "$work/doctor.txt"; then
    if [ "${CI:-}" = "true" ]; then
      echo "FAIL: CI=true and no XLA:CPU plugin resolves (run scripts/setup.sh)"
      cat "$work/doctor.txt"
      exit 1
    fi
    echo "SKIP: no XLA:CPU plugin resolves (run scripts/setup.sh)"
    exit 77
  fi
  fail "doctor --target xla-cpu --load: $(cat "$work/doctor.txt")"
fi
grep -q "^target xla-cpu: .*pjrt_c_api_cpu_plugin.so$" "$work/doctor.txt" ||
  fail "doctor does not name XLA's plugin file"
grep -Eq "^  PJRT C API 0\.[0-9]+, platform 'cpu'" "$work/doctor.txt" ||
  fail "doctor does not print the plugin's API version and platform"
grep -q "^  device 0: cpu$" "$work/doctor.txt" || fail "doctor lists no device"

cat >"$work/check.mlir" <<'MLIR'
func.func public @main() -> tensor<2xf32> {
  %a = stablehlo.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %b = stablehlo.multiply %a, %a : tensor<2xf32>
  %want = stablehlo.constant dense<[2.25, 4.0]> : tensor<2xf32>
  stablehlo.custom_call @check.expect_eq(%b, %want) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  return %b : tensor<2xf32>
}
MLIR
"$TLALOC" run "$work/check.mlir" --target xla-cpu >"$work/run.txt" 2>&1 || fail "run: $(cat "$work/run.txt")"
grep -q "PASS @check.expect_eq" "$work/run.txt" || fail "run --target xla-cpu reports no passed check"

bash "$(dirname "$0")/../plugin/generate_cli_parity.sh" "$TLALOC" xla-cpu "$SOURCE_DIR" ||
  fail "generate --target xla-cpu differs from the interpreter"

# Tensor parallel over two XLA:CPU devices gives the single-device text (greedy ids).
"$TLALOC" init-model --preset tiny --seed 5 --tokenizer "$SOURCE_DIR/data/qwen3/tokenizer.json" \
  "$work/model" >"$work/init.log" 2>&1 || fail "init-model: $(cat "$work/init.log")"
mesh_ids() {
  "$TLALOC" generate --model "$work/model" --prompt "Tlaloc brings the rain" --max-new-tokens 6 \
    --json "$@" 2>"$work/mesh.err" | grep -o '"generated_ids":\[[^]]*\]' || cat "$work/mesh.err"
}
single=$(mesh_ids --target interp)
meshed=$(mesh_ids --target xla-cpu --mesh model=2)
grep -q "tensor parallel over mesh model=2" "$work/mesh.err" || fail "generate --mesh model=2 did not split the model"
[ -n "$single" ] && [ "$single" = "$meshed" ] ||
  fail "generate --mesh model=2 --target xla-cpu: $meshed, single device on the interpreter: $single"

# `tlaloc serve --target xla-cpu`: a greedy and a seeded completion are the interpreter's.
server_pid=""
trap '[ -z "$server_pid" ] || kill -KILL "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
serve_replies() {  # TARGET: prints the greedy and the sampled completion of a server on TARGET
  "$TLALOC" serve -m "$work/model" --host 127.0.0.1 --port 0 --target "$1" 2>"$work/serve.log" &
  server_pid=$!
  local port="" body
  for _ in $(seq 1 1200); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.log")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "no server: $(cat "$work/serve.log")"
  else
    for body in '{"prompt":"Tlaloc brings the rain","max_tokens":8,"temperature":0}' \
      '{"prompt":"Hello","max_tokens":8,"temperature":0.9,"seed":5}'; do
      curl -s --max-time 300 -H 'Content-Type: application/json' -d "$body" \
        "http://127.0.0.1:$port/v1/completions" |
        python3 -c 'import json,sys; print(repr(json.load(sys.stdin)["choices"][0]["text"]))' ||
        echo "no reply"
    done
  fi
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
served_interp=$(serve_replies interp)
served_xla=$(serve_replies xla-cpu)
case "$served_interp$served_xla" in *"no server"* | *"no reply"*) fail "serve: $served_interp / $served_xla" ;; esac
[ -n "$served_interp" ] && [ "$served_interp" = "$served_xla" ] ||
  fail "serve --target xla-cpu replied $served_xla, the interpreter $served_interp"

[ "$failures" -eq 0 ] && echo "PASS: doctor, run, generate, generate --mesh model=2 and serve on xla-cpu"
exit $((failures > 0))
