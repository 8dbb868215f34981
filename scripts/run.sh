#!/usr/bin/env bash
# The main job: builds Tlaloc and runs the bundled example program.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target tlaloc_cli
./build/apps/tlaloc example "$@"
