#!/usr/bin/env bash
# Builds the bring-up session tarball from an existing build tree (the one scripts/test.sh
# builds; nothing is compiled here):
#
#   scripts/bringup/prepare.sh [BUILD_DIR]        # default: build -> BUILD_DIR/bringup-session.tar.gz
#
# The tarball unpacks to bringup-session/ and runs where no compiler is (docs/BRINGUP.md):
#   bin/      tlaloc and the test binaries the lanes run (debug info stripped)
#   lib/      libtlaloc_pjrt_cpu.so and every shared library those need except glibc's own
#             (session.sh puts lib/ on LD_LIBRARY_PATH; the cpu target finds the plugin in ../lib)
#   session.sh, versions (pinned libtpu / jax-cuda13-pjrt), MANIFEST (commit, build flags,
#   required glibc, plugin versions, sha256 of every file)
#   kernels/pallas-tpu/  Mosaic kernels made from Pallas here (scripts/kernels/pallas_tpu_kernels.py
#             --check: the sealed tlaloc-tpu variant, references, jax's programs) and aot/, the
#             programs kernelized with them in TPU form (tpu_custom_call), for `tlaloc aot`; the
#             kernels lane runs on them (session.sh). Needs jax in BRINGUP_PYTHON.
# Env: BRINGUP_OUT (the tarball's path), BRINGUP_NO_STRIP=1 keeps debug info, BRINGUP_PYTHON (the
# checkout's third_party_py/bin/python), BRINGUP_PALLAS (auto: ship kernels/pallas-tpu when jax
# imports, else say so in the MANIFEST; 1: required; 0: never).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
[ -d "$build" ] || { echo "prepare.sh: build folder '$build' does not exist (run scripts/test.sh or cmake --build first)" >&2; exit 2; }
build=$(cd "$build" && pwd)
out=${BRINGUP_OUT:-$build/bringup-session.tar.gz}

# What the lanes run (session.sh's lane table). Each must exist: a tarball missing a lane's
# binary would only be noticed on the rented machine.
required_tests=(pjrt plugin runtime train generate kernels)
optional_tests=(support ir ops interp builder stablehlo io tokenizer nn models autodiff)
missing=()
[ -x "$build/apps/tlaloc" ] || missing+=("$build/apps/tlaloc")
[ -f "$build/libtlaloc_pjrt_cpu.so" ] || missing+=("$build/libtlaloc_pjrt_cpu.so")
for t in "${required_tests[@]}"; do
  [ -x "$build/tests/tlaloc_${t}_tests" ] || missing+=("$build/tests/tlaloc_${t}_tests")
done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'prepare.sh: not built: %s\n' "${missing[@]}" >&2
  echo "prepare.sh: build them first: cmake --build $build --target tlaloc_cli tlaloc_pjrt_cpu" \
    "$(printf 'tlaloc_%s_tests ' "${required_tests[@]}")" >&2
  exit 2
fi

stage_parent=$(mktemp -d "${TMPDIR:-/tmp}/bringup-stage.XXXXXX")
trap 'rm -rf "$stage_parent"' EXIT
stage=$stage_parent/bringup-session
mkdir -p "$stage/bin" "$stage/lib"

copy_elf() {  # copy_elf SRC DEST: a copy without debug info (a third of the size)
  cp "$1" "$2"
  chmod u+w "$2"
  if [ "${BRINGUP_NO_STRIP:-0}" != 1 ]; then strip --strip-debug "$2"; fi
}
copy_elf "$build/apps/tlaloc" "$stage/bin/tlaloc"
copy_elf "$build/libtlaloc_pjrt_cpu.so" "$stage/lib/libtlaloc_pjrt_cpu.so"
for t in "${required_tests[@]}" "${optional_tests[@]}"; do
  f=$build/tests/tlaloc_${t}_tests
  [ -x "$f" ] && copy_elf "$f" "$stage/bin/tlaloc_${t}_tests"
done
# The Pallas-made TPU kernels and the programs kernelized with them.
pallas_note="not included (BRINGUP_PALLAS=0)"
python=${BRINGUP_PYTHON:-$root/third_party_py/bin/python}
if [ "${BRINGUP_PALLAS:-auto}" != 0 ]; then
  if [ -x "$python" ] && "$python" -c 'import jax' >/dev/null 2>&1; then
    pallas=$stage/kernels/pallas-tpu
    log=$stage_parent/pallas.log
    if ! "$python" "$root/scripts/kernels/pallas_tpu_kernels.py" --check --out "$pallas" \
      --tlaloc "$build/apps/tlaloc" >"$log" 2>&1 ||
      ! TLALOC_PALLAS_REPO=$pallas TLALOC_PALLAS_AOT_DIR=$pallas/aot \
        "$build/tests/tlaloc_kernels_tests" --gtest_filter='PallasTpuKernels.*' >>"$log" 2>&1; then
      tail -30 "$log" >&2
      echo "prepare.sh: making kernels/pallas-tpu failed (above)" >&2
      exit 1
    fi
    pallas_note="kernels/pallas-tpu: $(find "$pallas/build/tlaloc-tpu" -name '*.mosaic' | wc -l) payloads, $(wc -l <"$pallas/aot/index.tsv") aot programs ($("$python" -c 'import jax; print("jax", jax.__version__)'))"
  elif [ "${BRINGUP_PALLAS:-auto}" = 1 ]; then
    echo "prepare.sh: BRINGUP_PALLAS=1 but $python cannot import jax (scripts/setup.sh installs it)" >&2
    exit 2
  else
    pallas_note="not included: $python cannot import jax"
    echo "prepare.sh: warning: kernels/pallas-tpu $pallas_note" >&2
  fi
fi
cp "$here/session.sh" "$stage/session.sh"
chmod +x "$stage/session.sh"
cp "$here/versions" "$stage/versions"

# Shared libraries: everything ldd resolves except glibc's own objects, which must come from
# the machine (a bundled libc does not match its loader). ldd already lists the transitive
# closure. libstdc++ and libgcc_s go to lib/compat/, which session.sh adds only when the
# machine's own copies are too old: Debian 12's need glibc 2.36 (arc4random, _dl_find_object),
# while the binaries need 2.34, so bundling them always would shut out Ubuntu 22.04 (2.35).
is_glibc() {
  case "$1" in
  linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
    librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libmvec.so.*) return 0 ;;
  esac
  return 1
}
unresolved=()
for elf in "$stage"/bin/* "$stage"/lib/libtlaloc_pjrt_cpu.so; do
  [ -f "$elf" ] || continue
  case "$elf" in *.sh | */versions) continue ;; esac
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    if [ "$path" = "not" ]; then
      unresolved+=("$name (needed by $(basename "$elf"))")
      continue
    fi
    dest=$stage/lib
    case "$name" in libstdc++.so.* | libgcc_s.so.*) dest=$stage/lib/compat ;; esac
    mkdir -p "$dest"
    [ -f "$dest/$name" ] || cp -L "$path" "$dest/$name"
  done < <(ldd "$elf")
done
if [ ${#unresolved[@]} -gt 0 ]; then
  printf 'prepare.sh: ldd cannot resolve %s\n' "${unresolved[@]}" >&2
  exit 1
fi
chmod -R u+w,a+r "$stage/lib"

# The newest glibc symbol version any file needs: the oldest distribution it runs on.
newest_glibc() {
  for f in "$@"; do
    [ -f "$f" ] || continue
    objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' || true
  done | sort -u -V | tail -n 1
}
glibc_needed=$(newest_glibc "$stage"/bin/* "$stage"/lib/*.so*)
glibc_compat=$(newest_glibc "$stage"/lib/compat/*)

cache=$build/CMakeCache.txt
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$cache" 2>/dev/null | head -n 1; }
build_type=$(cache_value CMAKE_BUILD_TYPE)
build_type_upper=$(echo "$build_type" | tr '[:lower:]' '[:upper:]')
compiler=$(cache_value CMAKE_CXX_COMPILER)
# The commit of the sources the build tree was configured from.
source_dir=$(cache_value CMAKE_HOME_DIRECTORY)
[ -d "$source_dir" ] || source_dir=$root
commit=$(git -C "$source_dir" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=""
if [ "$commit" != unknown ] && [ -n "$(git -C "$source_dir" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  dirty=" (worktree has uncommitted changes)"
fi
{
  echo "# Tlaloc bring-up session (scripts/bringup/prepare.sh)"
  echo "created: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) ($(uname -m))"
  echo "commit: $commit$dirty"
  echo "build: $build_type, $compiler ($("$compiler" --version 2>/dev/null | head -n 1))"
  echo "cxx_flags: $(cache_value CMAKE_CXX_FLAGS) $(cache_value "CMAKE_CXX_FLAGS_$build_type_upper") -Wall -Wextra -Werror"
  echo "stripped: $([ "${BRINGUP_NO_STRIP:-0}" = 1 ] && echo no || echo yes)"
  echo "pallas_tpu: $pallas_note"
  echo "glibc_required: ${glibc_needed:-unknown} (glibc's objects are not bundled)"
  echo "glibc_required_compat: ${glibc_compat:-none} (lib/compat: libstdc++ and libgcc_s, used only where the machine's are older than GCC $(gcc -dumpversion 2>/dev/null)'s)"
  sed -n 's/^\([A-Z0-9_]*_VERSION\)=\(.*\)$/plugin_pin: \1=\2/p' "$here/versions"
  libs=()
  for f in "$stage"/lib/*.so* "$stage"/lib/compat/*; do
    [ "${f##*/}" = libtlaloc_pjrt_cpu.so ] || libs+=("${f#"$stage"/lib/}")
  done
  echo "bundled_libs: ${libs[*]}"
  echo "# sha256 of every file (sha256sum -c format below the next line)"
  echo "--- sha256"
  (cd "$stage" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum)
} >"$stage/MANIFEST"

mkdir -p "$(dirname "$out")"
tar -C "$stage_parent" -czf "$out.tmp" bringup-session
mv "$out.tmp" "$out"
echo "prepare.sh: wrote $out ($(du -h "$out" | cut -f1), $(find "$stage" -type f | wc -l) files, glibc >= ${glibc_needed#GLIBC_})"
