# Shared by the `tlaloc serve` test scripts (sourced after cli_test_lib.sh's make_tiny_model):
# start a server on an ephemeral loopback port, stop it, and check for the programs a test needs.
# start_server NAME ARGS...: starts `tlaloc serve` (log $WORK/NAME.log), waits (<= 60 s) for its
# "listening on" line; sets SERVER_PID and URL.
start_server() {
  local name=$1; shift
  # The log exists before the first read: the background job may not have opened it yet.
  : >"$WORK/$name.log"
  "$TLALOC" serve -m "$MODEL" --host 127.0.0.1 --port 0 "$@" 2>"$WORK/$name.log" &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  local port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/$name.log")
    [ -n "$port" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/$name.log"; echo "FAIL: server $name died"; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$WORK/$name.log"; echo "FAIL: server $name did not listen in 60 s"; exit 1; }
  URL="http://127.0.0.1:$port"
}
# stop_server PID: SIGTERM, then waits (<= 60 s) and checks exit status 0.
stop_server() {
  local pid=$1 rc=0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; echo "FAIL: server $pid ignored SIGTERM for 60 s"; exit 1; fi
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { echo "FAIL: server $pid exited $rc after SIGTERM"; exit 1; }
}
SERVER_PIDS=()
cleanup_servers() {
  for p in "${SERVER_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup_servers EXIT
# need_program WHAT PATH: exits 77 (1 under CI=true) when PATH is empty or not executable.
need_program() {
  if [ -z "$2" ] || [ ! -x "$2" ]; then
    if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and $1 is not installed"; exit 1; fi
    echo "SKIP: $1 is not installed (scripts/setup.sh installs it)"
    exit 77
  fi
}
# post PATH BODY OUT [CURL_ARGS...]: POSTs JSON, writes the body to OUT, prints the HTTP status.
post() {
  local path=$1 body=$2 out=$3
  shift 3
  curl -s --max-time 60 -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
    -d "$body" "$URL$path"
}
json_get() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
