#!/usr/bin/env bash
# Installs what Tlaloc builds and tests with: Debian's packages with apt-get, then the test
# oracles from PyPI into a venv of the checkout (third_party_py/). Idempotent: apt runs only
# when a package is missing, pip only when scripts/python/requirements.lock (or the llama.cpp
# build settings) changed since the venv was last made.
# Outside CI a failed PyPI install only warns (the tests that need the oracle skip by name);
# under CI (CI=true) it is fatal, since those tests would fail anyway.
set -euo pipefail

# Each package says why it is here: the build, the tests or scripts/ use every one (a package
# that nothing uses any more is removed, as libfmt-dev was).
packages=(
  # The build: GCC 12, CMake and Ninja; ccache (CMakeLists.txt uses it as the compiler launcher
  # when found); pkg-config (pkg_check_modules: OpenBLAS, PCRE2, utf8proc, cpp-httplib).
  build-essential cmake ninja-build ccache pkg-config
  # The fuzz smoke of scripts/test.sh: clang 14 (Debian 12's clang) and its libFuzzer, ASan and
  # UBSan runtimes. GCC's ASan/UBSan/TSan runtimes (libasan8, libubsan1, libtsan2) come with
  # build-essential's gcc-12.
  clang libclang-rt-14-dev
  # clang's own omp.h: the clang build includes it for oneDNN's thread-count calls (GCC's copy
  # sits in GCC's private include folder, which clang does not search).
  libomp-14-dev
  libgtest-dev libgmock-dev  # the tests (GTest::gtest, GTest::gmock)
  libbenchmark-dev  # bench/ (find_package(benchmark); without it the benchmarks are not built)
  nlohmann-json3-dev libcli11-dev  # JSON everywhere; the CLI's option parsing
  libopenblas-dev  # f32 matrix products
  libpcre2-dev libutf8proc-dev  # the tokenizer's pre-tokenizer regex and Unicode normalisation
  libprotobuf-dev protobuf-compiler  # PJRT's compile options and XLA's protos
  libssl-dev git  # kernel repositories: sha256 digests (OpenSSL), reading them with the git CLI
  libdnnl-dev  # oneDNN: bf16 matrix products on AVX512-BF16 / AMX
  libcpp-httplib-dev curl  # `tlaloc serve`'s HTTP server; curl drives it in tests
  libcurl4-openssl-dev  # `-m ORG/NAME` downloads from the Hugging Face Hub (HTTPS via libcurl)
  # Needed only by oneDNN's CMake config: Debian's libdnnl is built with the OpenCL GPU runtime,
  # so dnnl-config.cmake calls find_package(OpenCL REQUIRED) and the dnnl target links
  # OpenCL::OpenCL; the package only recommends the headers and loader, which
  # --no-install-recommends leaves out. Tlaloc itself uses no OpenCL.
  ocl-icd-opencl-dev
  ca-certificates  # pip's HTTPS to PyPI; a minimal Debian root has no CA bundle
  tmux  # terminal tests of `tlaloc chat` (tests/cli/chat_tmux_test.sh: send keys, read the pane)
  # Headless Chromium: screenshots of what Tlaloc draws (loss.svg, checked for pixels with
  # Pillow) and, through chromium-driver and the venv's Selenium, the server's chat page.
  chromium chromium-driver python3-pil
  # Multi-process runs under mpirun (interpreter collectives over MPI, tests/mpi/):
  # find_package(MPI COMPONENTS C) and the mpirun launcher.
  openmpi-bin libopenmpi-dev
  # The oracles' venv: Debian's Python 3.11 and its venv module (pip comes with the venv).
  python3 python3-venv
)

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
  # CI's disk holds the venv and three build trees (docs/RELIABILITY.md, "CI disk"): the downloaded
  # packages are not needed once installed there. A developer's apt cache is left alone.
  if [ "${CI:-}" = "true" ]; then $sudo_cmd apt-get clean; fi
fi

# The Qwen3 tokenizer (11 MB, Apache-2.0) is too large to track: it comes from shared/data/qwen3/
# beside the checkout (CI and fresh-machine-check have it), checked against its sha256, into
# data/qwen3/, where init-model, the install and the tests look.
tok_src="$(cd "$(dirname "$0")/../.." && pwd)/shared/data/qwen3/tokenizer.json"
tok_dst="$(cd "$(dirname "$0")/.." && pwd)/data/qwen3/tokenizer.json"
tok_sha=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
if ! echo "$tok_sha  $tok_dst" | sha256sum -c --status 2>/dev/null; then
  if [ -f "$tok_src" ] && echo "$tok_sha  $tok_src" | sha256sum -c --status; then
    cp "$tok_src" "$tok_dst.tmp" && mv "$tok_dst.tmp" "$tok_dst"
  else
    echo "setup: no Qwen3 tokenizer.json with sha256 $tok_sha at $tok_src" >&2
    [ "${CI:-}" = "true" ] && exit 1
  fi
fi

# The oracles from PyPI (scripts/python/README.md says what each is for): one pinned set in
# requirements.lock, then llama.cpp built from llama-cpp-python's source for this CPU
# (GGML_NATIVE=ON; pip's cache keeps the built wheel, so a second venv does not rebuild it).
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/third_party_py"
lock="$root/scripts/python/requirements.lock"
llama_pin="llama-cpp-python==0.3.36"
llama_cmake_args="-DGGML_NATIVE=ON"
stamp="$venv/.tlaloc-installed"
want_stamp="$(sha256sum "$lock" | cut -d' ' -f1) $llama_pin $llama_cmake_args"
pip_failed() {  # pip_failed WHAT LOG: shows pip's log, fatal under CI
  echo "setup: pip install of $1 failed:" >&2
  tail -n 30 "$2" >&2
  if [ "${CI:-}" = "true" ]; then
    echo "setup: CI=true, so a missing oracle is an error" >&2
    exit 1
  fi
  echo "setup: the tests that need $1 will skip by name" >&2
  exit 0
}
if [ "$(cat "$stamp" 2>/dev/null)" != "$want_stamp" ]; then
  log="$(mktemp)"
  start=$SECONDS
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup: making the oracles' venv $venv" >&2
    /usr/bin/python3 -m venv "$venv" >"$log" 2>&1 || pip_failed "the venv" "$log"
  fi
  echo "setup: installing the PyPI oracles into $venv (a few minutes the first time)" >&2
  # Under CI the wheels are not kept in pip's cache after they are installed: torch, its CUDA
  # libraries and triton (5.2 GB installed) would sit there a second time as downloads (a CI run
  # once ran out of disk). A developer's cache spares a re-download when the lock changes.
  pip_cache=()
  if [ "${CI:-}" = "true" ]; then pip_cache=(--no-cache-dir); fi
  "$venv/bin/pip" install --disable-pip-version-check --no-input "${pip_cache[@]}" -r "$lock" \
    >"$log" 2>&1 ||
    pip_failed "scripts/python/requirements.lock" "$log"
  echo "setup: building llama.cpp ($llama_pin, CMAKE_ARGS=$llama_cmake_args) for this CPU" >&2
  CMAKE_ARGS="$llama_cmake_args" "$venv/bin/pip" install --disable-pip-version-check \
    --no-input --no-binary llama-cpp-python "$llama_pin" >"$log" 2>&1 ||
    pip_failed "$llama_pin" "$log"
  rm -f "$log"
  echo "$want_stamp" >"$stamp"
  echo "setup: the venv is ready in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))" >&2
fi
