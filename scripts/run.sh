#!/usr/bin/env bash
# The main job: builds Tlaloc, then demonstrates the whole training cycle on the CPU
# interpreter with `tlaloc finetune-demo`: a small random Qwen3 (byte-level vocabulary) is
# created, its greedy answers to held-out questions of a generated chat task (upper-casing four
# letters) are scored, it is fine-tuned for a few minutes, and the held-out answers are scored
# again. Extra arguments go to `tlaloc finetune-demo` (for example --steps 800 or --task
# reverse); the fine-tuned checkpoint loads in `tlaloc generate`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target tlaloc_cli
./build/apps/tlaloc finetune-demo --out "$root/out/finetune-demo" "$@"
