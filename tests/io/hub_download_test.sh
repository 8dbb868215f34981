#!/usr/bin/env bash
# `-m ORG/NAME` downloads from the Hub (issue 39), against a look-alike of the Hub on loopback
# (tests/io/hub_server.py) serving the tiny preset model: the download generates text, lays the
# cache out as huggingface_hub does (huggingface_hub reads Tlaloc's cache, Tlaloc reads
# huggingface_hub's), resumes after a dropped connection and from a previous run's .incomplete
# file, refuses a file whose sha256 is not its ETag, refuses to download when offline, sends
# HF_TOKEN (never to the CDN host), names the cause of a 401, a 403, a 404 and a network failure,
# and takes turns with huggingface_hub through its blob lock.
# Usage: hub_download_test.sh TLALOC SOURCE_DIR
set -euo pipefail
tlaloc=$1
source_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$source_dir/tests/cli_test_lib.sh"
need_python "$source_dir" huggingface_hub filelock
make_tiny_model "$tlaloc" "$source_dir" 7
# Hermetic: no token, offline switch or endpoint from the caller's environment or home.
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_TOKEN_PATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HF_ENDPOINT
export HF_HOME=$WORK/hf_home
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT

# start_server NAME [hub_server.py options]: sets ENDPOINT and LOG.
start_server() {
  local name=$1
  shift
  stop_server
  LOG=$WORK/$name.log
  rm -f "$WORK/port" "$LOG"
  "$ORACLE_PYTHON" "$here/hub_server.py" --model-dir "$MODEL" --repo org/tiny \
    --port-file "$WORK/port" --log "$LOG" "$@" 2>"$WORK/$name.server.err" &
  server_pid=$!
  for _ in $(seq 300); do  # it hashes the model's 90 MB first
    [ -s "$WORK/port" ] && break
    sleep 0.1
  done
  [ -s "$WORK/port" ] || { cat "$WORK/$name.server.err"; echo "FAIL: the look-alike did not start"; exit 1; }
  ENDPOINT=http://127.0.0.1:$(cat "$WORK/port")
  touch "$LOG"
}

# gen CACHE OUT [tlaloc generate options]: greedy generation of 4 tokens through org/tiny.
gen() {
  local cache=$1 out=$2
  shift 2
  HF_ENDPOINT=$ENDPOINT HF_HUB_CACHE=$cache "$tlaloc" generate -m org/tiny --prompt "Hello" \
    -n 4 --json "$@" >"$out.json" 2>"$out.err"
}
ids() { "$ORACLE_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "$1"; }
log_count() { "$ORACLE_PYTHON" -c "import json,sys; print(sum(1 for l in open(sys.argv[1]) if (lambda r: $1)(json.loads(l))))" "$LOG"; }

safetensors_sha=$(sha256sum "$MODEL/model.safetensors" | cut -d' ' -f1)
tokenizer_sha=$(sha256sum "$MODEL/tokenizer.json" | cut -d' ' -f1)
total_bytes=$(cat "$MODEL"/*.json "$MODEL"/*.safetensors | wc -c)

# 1. A download through `tlaloc generate`, then generation from it.
start_server plain
commit=$("$ORACLE_PYTHON" -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))["sha"])' "$ENDPOINT/api/models/org/tiny/revision/main")
t0=$(date +%s.%N)
gen "$WORK/c1" "$WORK/a" || { cat "$WORK/a.err"; fail "generate -m org/tiny (download) failed"; }
t1=$(date +%s.%N)
entry=$WORK/c1/models--org--tiny
[ "$(cat "$entry/refs/main" 2>/dev/null)" = "$commit" ] || fail "refs/main does not hold the commit $commit"
link=$(readlink "$entry/snapshots/$commit/model.safetensors" || true)
[ "$link" = "../../blobs/$safetensors_sha" ] || fail "model.safetensors links to '$link', expected ../../blobs/$safetensors_sha"
[ "$(sha256sum "$entry/blobs/$safetensors_sha" | cut -d' ' -f1)" = "$safetensors_sha" ] || fail "the safetensors blob's sha256 is not its name"
[ -L "$entry/snapshots/$commit/tokenizer.json" ] || fail "no tokenizer.json link in the snapshot"
ls "$entry/blobs" | grep -q incomplete && fail "an .incomplete file is left in blobs/"
grep -q "hub: org/tiny@main" "$WORK/a.err" || fail "no progress lines on stderr: $(cat "$WORK/a.err")"
[ "$(log_count 'r["host"].startswith("localhost") and r["method"] == "GET"')" -ge 2 ] || fail "the LFS files did not come from the CDN redirect"
echo "download: $total_bytes bytes ($(ls "$entry/blobs" | wc -l) blobs) and generation in $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s"
grep "MB downloaded" "$WORK/a.err" || true

# The same reference again: from the cache, no request at all.
before=$(wc -l <"$LOG")
gen "$WORK/c1" "$WORK/a2" || fail "a second run from the cache failed: $(cat "$WORK/a2.err")"
[ "$(wc -l <"$LOG")" = "$before" ] || fail "a cached reference made requests"
[ "$(ids "$WORK/a.json")" = "$(ids "$WORK/a2.json")" ] || fail "the cached run generated other tokens"

# 2. huggingface_hub reads what Tlaloc wrote, offline.
"$ORACLE_PYTHON" - "$WORK/c1" "$commit" <<'EOF' || fail "huggingface_hub does not read Tlaloc's cache"
import os, sys
from huggingface_hub import snapshot_download, try_to_load_from_cache
cache, commit = sys.argv[1], sys.argv[2]
snap = snapshot_download("org/tiny", cache_dir=cache, local_files_only=True)
assert os.path.basename(snap) == commit, snap
cfg = try_to_load_from_cache("org/tiny", "config.json", cache_dir=cache)
assert isinstance(cfg, str) and os.path.realpath(cfg).startswith(os.path.join(cache, "models--org--tiny", "blobs")), cfg
st = try_to_load_from_cache("org/tiny", "model.safetensors", cache_dir=cache, revision=commit)
assert isinstance(st, str) and os.path.getsize(st) > 0, st
EOF

# 3. Tlaloc reads what huggingface_hub downloaded from the look-alike (offline, the same tokens).
"$ORACLE_PYTHON" - "$WORK/c2" "$ENDPOINT" <<'EOF' >"$WORK/hf.out" 2>&1 || { cat "$WORK/hf.out"; fail "huggingface_hub could not download from the look-alike"; }
import sys
from huggingface_hub import snapshot_download
print(snapshot_download("org/tiny", cache_dir=sys.argv[1], endpoint=sys.argv[2]))
EOF
HF_HUB_CACHE=$WORK/c2 "$tlaloc" generate --offline -m org/tiny --prompt "Hello" -n 4 --json \
  >"$WORK/b.json" 2>"$WORK/b.err" || fail "tlaloc does not read huggingface_hub's cache: $(cat "$WORK/b.err")"
[ "$(ids "$WORK/a.json")" = "$(ids "$WORK/b.json" 2>/dev/null)" ] || fail "huggingface_hub's download generates other tokens"
for f in config.json model.safetensors tokenizer.json; do
  [ "$(readlink "$WORK/c2/models--org--tiny/snapshots/$commit/$f")" = "$(readlink "$entry/snapshots/$commit/$f")" ] ||
    fail "$f: huggingface_hub and Tlaloc link it to different blobs"
done

# 4. A dropped connection mid-file: Tlaloc resumes it with a Range request in the same run.
start_server drop --drop-after 1000000
gen "$WORK/c3" "$WORK/d" || fail "the download with a dropped connection failed: $(cat "$WORK/d.err")"
grep -q "resuming at byte" "$WORK/d.err" || fail "no resume announced: $(cat "$WORK/d.err")"
[ "$(log_count 'r["range"] == "bytes=1000000-" and r["status"] == 206')" -ge 1 ] || fail "no Range request from the byte the connection dropped at"
[ "$(ids "$WORK/a.json")" = "$(ids "$WORK/d.json" 2>/dev/null)" ] || fail "the resumed download generates other tokens"
echo "resume after a dropped connection: $(log_count 'r["range"] is not None') range request(s); $(grep -c 'resuming at byte' "$WORK/d.err") resume(s)"

# 5. A previous run's .incomplete file is resumed, not downloaded again.
start_server plain2
mkdir -p "$WORK/c4/models--org--tiny/blobs"
head -c 40000000 "$MODEL/model.safetensors" >"$WORK/c4/models--org--tiny/blobs/$safetensors_sha.incomplete"
gen "$WORK/c4" "$WORK/e" || fail "resuming a previous .incomplete failed: $(cat "$WORK/e.err")"
size=$(stat -c %s "$MODEL/model.safetensors")
sent=$(log_count "r['range'] == 'bytes=40000000-' and r['sent'] == $size - 40000000")
[ "$sent" = 1 ] || fail "the .incomplete file was not resumed at byte 40000000 (log: $(cat "$LOG"))"
[ "$(sha256sum "$WORK/c4/models--org--tiny/blobs/$safetensors_sha" | cut -d' ' -f1)" = "$safetensors_sha" ] || fail "the resumed blob is corrupt"
echo "resume across runs: $((size - 40000000)) of $size bytes fetched"

# 6. A file whose bytes do not match its sha256 ETag is refused; no snapshot appears.
start_server corrupt --corrupt model.safetensors
if gen "$WORK/c5" "$WORK/f"; then fail "a corrupt download was accepted"; fi
grep -q "sha256" "$WORK/f.err" && grep -q "$safetensors_sha" "$WORK/f.err" || fail "the refusal does not name the sha256: $(cat "$WORK/f.err")"
[ -e "$WORK/c5/models--org--tiny/snapshots" ] && fail "a corrupt download left a snapshot"
[ -e "$WORK/c5/models--org--tiny/refs/main" ] && fail "a corrupt download left refs/main"
ls "$WORK/c5/models--org--tiny/blobs" | grep -q "$safetensors_sha" && fail "the corrupt blob was kept"

# 7. Offline: refused, naming the reference; no request.
before=$(wc -l <"$LOG")
if HF_HUB_OFFLINE=1 gen "$WORK/c6" "$WORK/g"; then fail "HF_HUB_OFFLINE=1 downloaded"; fi
grep -q "org/tiny" "$WORK/g.err" && grep -q "HF_HUB_OFFLINE" "$WORK/g.err" || fail "the offline refusal does not name org/tiny and HF_HUB_OFFLINE: $(cat "$WORK/g.err")"
if gen "$WORK/c6" "$WORK/g2" --offline; then fail "--offline downloaded"; fi
grep -q "org/tiny" "$WORK/g2.err" && grep -q -- "--offline" "$WORK/g2.err" || fail "the --offline refusal does not name org/tiny and --offline: $(cat "$WORK/g2.err")"
[ "$(wc -l <"$LOG")" = "$before" ] || fail "offline runs made requests"

# 8. 404s: a repository and a revision the Hub does not have.
HF_ENDPOINT=$ENDPOINT HF_HUB_CACHE=$WORK/c7 "$tlaloc" generate -m org/absent --prompt x -n 1 2>"$WORK/h.err" && fail "org/absent succeeded"
grep -q "HTTP 404" "$WORK/h.err" && grep -q "repository org/absent" "$WORK/h.err" || fail "404 repo: $(cat "$WORK/h.err")"
HF_ENDPOINT=$ENDPOINT HF_HUB_CACHE=$WORK/c7 "$tlaloc" generate -m org/tiny@nobranch --prompt x -n 1 2>"$WORK/h2.err" && fail "org/tiny@nobranch succeeded"
grep -q "revision is not found" "$WORK/h2.err" || fail "404 revision: $(cat "$WORK/h2.err")"

# 9. A network failure names the URL.
HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE=$WORK/c7 "$tlaloc" generate -m org/tiny --prompt x -n 1 2>"$WORK/i.err" && fail "an unreachable endpoint succeeded"
grep -q "http://127.0.0.1:9/api/models/org/tiny/revision/main" "$WORK/i.err" || fail "the network failure does not name the URL: $(cat "$WORK/i.err")"

# 10. A token: 401 without it (saying to set HF_TOKEN), 403 with one without access (a gated
# model), sent to the Hub with it, never to the CDN.
start_server token --token s3cret
if gen "$WORK/c8" "$WORK/j"; then fail "no token, yet the download succeeded"; fi
grep -q "HTTP 401" "$WORK/j.err" && grep -q "set HF_TOKEN" "$WORK/j.err" || fail "the 401 does not say to set HF_TOKEN: $(cat "$WORK/j.err")"
if HF_TOKEN=wrong gen "$WORK/c8" "$WORK/j2"; then fail "a token without access succeeded"; fi
grep -q "HTTP 403" "$WORK/j2.err" && grep -q "gated model" "$WORK/j2.err" || fail "the 403 does not explain gated access: $(cat "$WORK/j2.err")"
HF_TOKEN=s3cret gen "$WORK/c8" "$WORK/k" || fail "HF_TOKEN was not sent: $(cat "$WORK/k.err")"
[ "$(log_count 'r["host"].startswith("127.0.0.1") and r["status"] < 400 and r["authorization"] != "Bearer s3cret"')" = 0 ] || fail "a Hub request went without the token"
[ "$(log_count 'r["host"].startswith("localhost") and r["authorization"] is not None')" = 0 ] || fail "the token was sent to the CDN host"
printf 's3cret\n' >"$WORK/token"
HF_TOKEN_PATH=$WORK/token gen "$WORK/c9" "$WORK/l" || fail "HF_TOKEN_PATH was not read: $(cat "$WORK/l.err")"

# 11. huggingface_hub's lock on a blob (.locks/models--org--tiny/<etag>.lock, filelock's flock)
# is honoured: while Python holds it and writes the blob, Tlaloc waits, then uses that blob.
mkdir -p "$WORK/c10/models--org--tiny/blobs"
"$ORACLE_PYTHON" - "$WORK/c10" "$safetensors_sha" "$MODEL/model.safetensors" <<'EOF' &
import os, shutil, sys, time
from filelock import FileLock
cache, sha, source = sys.argv[1:]
lock = os.path.join(cache, ".locks", "models--org--tiny", sha + ".lock")
os.makedirs(os.path.dirname(lock), exist_ok=True)
with FileLock(lock):
    open(os.path.join(cache, "locked"), "w").close()
    time.sleep(3)
    shutil.copy(source, os.path.join(cache, "models--org--tiny", "blobs", sha))
EOF
holder=$!
for _ in $(seq 100); do [ -e "$WORK/c10/locked" ] && break; sleep 0.1; done
before=$(wc -l <"$LOG")
HF_TOKEN=s3cret gen "$WORK/c10" "$WORK/m" || fail "the download beside a held lock failed: $(cat "$WORK/m.err")"
wait "$holder" || fail "the Python lock holder failed"
grep -q "waiting for another download" "$WORK/m.err" || fail "Tlaloc did not wait for the held lock: $(cat "$WORK/m.err")"
tail -n +"$((before + 1))" "$LOG" | grep -q "/cdn/$safetensors_sha" && fail "Tlaloc downloaded the blob the lock holder wrote"
stop_server

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "hub download: all checks passed"
