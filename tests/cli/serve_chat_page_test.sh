#!/usr/bin/env bash
# The chat page at / of `tlaloc serve`, in Debian's headless Chromium driven by the venv's
# Selenium through chromedriver (serve_chat_page.py): a message sent from the page gets a
# streamed reply. The screenshot is kept as a test artefact in
# BUILD_DIR/test-artefacts/serve_chat_page.png.
# Usage: serve_chat_page_test.sh TLALOC SOURCE_DIR BUILD_DIR
set -euo pipefail
TLALOC=$1
SOURCE_DIR=$2
BUILD_DIR=$3
source "$SOURCE_DIR/tests/cli_test_lib.sh"
make_tiny_model "$TLALOC" "$SOURCE_DIR" 7
source "$SOURCE_DIR/tests/cli/serve_lib.sh"
need_python "$SOURCE_DIR" selenium
need_program chromium "$(command -v chromium || command -v chromium-browser || true)"
chromium=$(command -v chromium || command -v chromium-browser)
# Debian's chromium-driver installs /usr/bin/chromedriver; Selenium must not go looking for one.
chromedriver=$(command -v chromedriver || echo /usr/bin/chromedriver)
need_program chromedriver "$chromedriver"
start_server page --max-batch 2 --max-context 512
page=$(curl -s --max-time 10 "$URL/")
grep -q "<title>Tlaloc chat</title>" <<<"$page" || { echo "FAIL: / is not the chat page"; exit 1; }
mkdir -p "$BUILD_DIR/test-artefacts"
shot=$BUILD_DIR/test-artefacts/serve_chat_page.png
rm -f "$shot"
# Chromium wants a writable home besides its profile (a temporary --user-data-dir).
HOME=$WORK timeout 120 "$ORACLE_PYTHON" "$SOURCE_DIR/tests/cli/serve_chat_page.py" "$URL/" \
  "$chromium" "$chromedriver" "$shot"
[ -s "$shot" ] || { echo "FAIL: no screenshot"; exit 1; }
stop_server "$SERVER_PID"
