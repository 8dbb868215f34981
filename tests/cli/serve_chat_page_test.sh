#!/usr/bin/env bash
# The chat page at / of `tlaloc serve`, in headless Chromium through puppeteer-core: a message
# sent from the page gets a streamed reply. The screenshot is kept as a test artefact in
# BUILD_DIR/test-artefacts/serve_chat_page.png.
# Usage: serve_chat_page_test.sh TLALOC SOURCE_DIR BUILD_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
BUILD_DIR=$3
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 7
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_npm puppeteer-core
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI=true and chromium is not installed"; exit 1; }
  echo "SKIP: chromium is not installed (scripts/setup.sh installs it)"
  exit 77
fi
start_server page --max-batch 2 --max-context 512
page=$(curl -s --max-time 10 "$URL/")
grep -q "<title>Tlaloc chat</title>" <<<"$page" || { echo "FAIL: / is not the chat page"; exit 1; }
mkdir -p "$BUILD_DIR/test-artefacts"
shot=$BUILD_DIR/test-artefacts/serve_chat_page.png
rm -f "$shot"
# Chromium wants a writable home for its profile.
HOME=$WORK timeout 120 "$NODE" "$SOURCE_DIR/tests/cli/serve_chat_page.mjs" "$NODE_MODULES" "$URL/" \
  "$chromium" "$shot"
[ -s "$shot" ] || { echo "FAIL: no screenshot"; exit 1; }
stop_server "$SERVER_PID"
