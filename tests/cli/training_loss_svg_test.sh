#!/usr/bin/env bash
# finetune and finetune-demo write loss.svg beside loss_log.jsonl: one curve point per step, the
# demo's held-out scores as a label, still valid XML when a run is interrupted with SIGINT, and
# drawn by a real browser (headless Chromium screenshot, checked with Pillow: not blank, the
# curve colours present). The screenshot is kept under ARTEFACT_DIR.
# Without chromium (or $CHROMIUM) it exits 77 (skipped) after the SVG checks; under CI=true it
# fails instead.
# Usage: training_loss_svg_test.sh TLALOC ARTEFACT_DIR
set -euo pipefail
tlaloc=$1
artefacts=$(realpath -m "$2")  # absolute: it becomes a file:// URL
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# check_svg FILE STEPS: well-formed XML whose loss and lr curves have STEPS points each ("any":
# at least one); prints the count.
check_svg() {
  python3 - "$1" "$2" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
path, want = sys.argv[1], sys.argv[2]
root = ET.parse(path).getroot()  # raises on a truncated or malformed file
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
paths = {p.get("id"): p.get("d") for p in root.iter(ns + "path")}
assert "loss-curve" in paths and "lr-curve" in paths, paths.keys()
counts = {k: len(re.findall(r"[ML]", paths[k])) for k in ("loss-curve", "lr-curve")}
assert counts["loss-curve"] == counts["lr-curve"], counts
if want != "any":
    assert counts["loss-curve"] == int(want), f"{counts} points, expected {want} (one per step)"
assert counts["loss-curve"] >= 1
print(counts["loss-curve"])
EOF
}

echo "== finetune-demo (6 steps)"
"$tlaloc" finetune-demo --out "$work/demo" --steps 6 --train-size 32 --held-out 2 --batch 2 \
  --seq-len 32 >"$work/demo.out" 2>"$work/demo.err" || { cat "$work/demo.err"; exit 1; }
grep -q "loss plot: $work/demo/tuned/loss.svg" "$work/demo.out" ||
  { echo "FAIL: finetune-demo does not print the plot's path"; cat "$work/demo.out"; exit 1; }
check_svg "$work/demo/tuned/loss.svg" 6
grep -q "held-out answers exactly right: before [0-9]*/2, after [0-9]*/2" "$work/demo/tuned/loss.svg" ||
  { echo "FAIL: the demo's loss.svg lacks the held-out scores"; exit 1; }

echo "== finetune (7 steps)"
"$tlaloc" finetune --model "$work/demo/base" --data "$work/demo/train.jsonl" --out "$work/ft" \
  --steps 7 --batch 2 --seq-len 32 --lr 1e-3 --warmup 2 >"$work/ft.out" 2>"$work/ft.err" ||
  { cat "$work/ft.err"; exit 1; }
[ "$(wc -l <"$work/ft/loss_log.jsonl")" -eq 7 ] || { echo "FAIL: loss_log.jsonl has not 7 lines"; exit 1; }
check_svg "$work/ft/loss.svg" 7
grep -q "plot $work/ft/loss.svg" "$work/ft.err" || { echo "FAIL: finetune does not name loss.svg"; exit 1; }
ls "$work/ft" | grep -q '\.tmp' && { echo "FAIL: a temporary plot file was left in $work/ft"; exit 1; }

echo "== finetune --resume into the same folder plots the whole run (7 + 3 steps)"
"$tlaloc" finetune --resume "$work/ft" --data "$work/demo/train.jsonl" --out "$work/ft" \
  --steps 10 >"$work/resume.out" 2>"$work/resume.err" || { cat "$work/resume.err"; exit 1; }
check_svg "$work/ft/loss.svg" 10

echo "== finetune interrupted with SIGINT mid-run"
timeout -s INT 120 "$tlaloc" finetune --model "$work/demo/base" --data "$work/demo/train.jsonl" \
  --out "$work/int" --steps 100000 --batch 2 --seq-len 32 --print-every 1 \
  >"$work/int.out" 2>"$work/int.err" &
pid=$!
# Wait (events, not fixed times) until 5 steps are logged and loss.svg was redrawn mid-run
# after its first-step drawing (2 or more points: the once-a-second redraw), then interrupt.
mid_run_plot() {
  local n
  [ -f "$work/int/loss_log.jsonl" ] && [ "$(wc -l <"$work/int/loss_log.jsonl")" -ge 5 ] &&
    [ -f "$work/int/loss.svg" ] || return 1
  n=$(check_svg "$work/int/loss.svg" any 2>/dev/null || true)
  [ "${n:-0}" -ge 2 ]
}
plotted=""
for _ in $(seq 1 300); do
  mid_run_plot && { plotted=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$plotted" ] || { echo "FAIL: waited 60 s for 5 logged steps and a loss.svg redrawn mid-run" \
                            "(2 or more points)"; cat "$work/int.err"; kill -INT "$pid"; exit 1; }
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: the interrupted run exited 0"; exit 1; }
[ -f "$work/int/loss.svg" ] || { echo "FAIL: no loss.svg after SIGINT"; cat "$work/int.err"; exit 1; }
points=$(check_svg "$work/int/loss.svg" any)
logged=$(wc -l <"$work/int/loss_log.jsonl")
echo "interrupted (exit $rc) after $logged logged steps; loss.svg valid with $points points"
[ "$points" -le "$logged" ] || { echo "FAIL: more plotted points than logged steps"; exit 1; }

echo "== headless Chromium"
# $CHROMIUM picks another browser binary (a missing one checks the skip path).
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ ! -x "$chromium" ]; then
  if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and chromium is not installed"; exit 1; fi
  echo "SKIP: chromium is not installed (the SVG checks above passed)"
  exit 77
fi
# Debian's python3-pil serves /usr/bin/python3, which may not be the python3 first on PATH.
pil_python=""
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import PIL' 2>/dev/null; then pil_python=$py; break; fi
done
if [ -z "$pil_python" ]; then
  if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and no python3 with Pillow (PIL)"; exit 1; fi
  echo "SKIP: no python3 with Pillow (the SVG checks above passed)"
  exit 77
fi
mkdir -p "$artefacts"
cp "$work/demo/tuned/loss.svg" "$artefacts/finetune_demo_loss.svg"
png=$artefacts/finetune_demo_loss.png
rm -f "$png"
# A private profile folder: no clash with another Chromium, nothing left in $HOME.
timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$work/chromium-profile" --screenshot="$png" --window-size=800,500 \
  "file://$artefacts/finetune_demo_loss.svg" >"$work/chromium.log" 2>&1 ||
  { echo "FAIL: chromium failed"; cat "$work/chromium.log"; exit 1; }
[ -s "$png" ] || { echo "FAIL: chromium wrote no screenshot"; cat "$work/chromium.log"; exit 1; }
"$pil_python" - "$png" <<'EOF'
import sys
from PIL import Image
img = Image.open(sys.argv[1]).convert("RGB")
w, h = img.size
assert (w, h) == (800, 500), f"screenshot is {w}x{h}"
pixels = list(img.getdata())
non_white = sum(1 for p in pixels if min(p) < 240) / len(pixels)
colours = len(set(pixels))
def near(c, tol=60):
    return sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, c)) < tol)
blue, orange = near((0x1f, 0x77, 0xb4)), near((0xff, 0x7f, 0x0e))
print(f"non-white {non_white:.1%}, {colours} colours, {blue} loss-blue and {orange} lr-orange pixels")
assert 0.01 < non_white < 0.6, "blank or filled picture"
assert colours >= 8, "too few colours for axes, text and two curves"
assert blue >= 100 and orange >= 50, "a curve is missing from the picture"
EOF
echo "screenshot: $png"
