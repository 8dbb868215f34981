#!/usr/bin/env bash
# The main job: builds Tlaloc, creates the tiny random Qwen3 checkpoint (real tokenizer) if it
# is missing, and generates text from it on the CPU interpreter. Extra arguments go to
# `tlaloc generate` (for example --prompt "..." --max-new-tokens 64).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target tlaloc_cli
model="$root/out/tiny-qwen3"
if [ ! -f "$model/model.safetensors" ]; then
  ./build/apps/tlaloc init-model --preset tiny --seed 0 "$model"
fi
if [ "$#" -eq 0 ]; then
  set -- --chat "Write a haiku about rain." --max-new-tokens 32 --temperature 0.8 --top-k 40 --seed 7
fi
./build/apps/tlaloc generate --model "$model" "$@"
