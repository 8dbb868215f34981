// Where kernel repositories come from, and whether their native code may run.
//
// A source is a local folder, or a git URL (https://, http://, file://, ssh) read with the git
// CLI at a `v{N}` branch (version=N) or a revision (branch, tag, commit). Git sources are
// mirrored into a cache folder ($TLALOC_KERNELS_CACHE, else ~/.cache/tlaloc/kernels) and each
// commit is exported once; offline use ($TLALOC_KERNELS_OFFLINE=1) reads only the cache.
// $TLALOC_LOCAL_KERNELS="repo=path:repo2=path2" swaps a repository for a local folder during
// development.
//
// Trust: universal (StableHLO) variants are data and always load once their digests match.
// Native variants (cpu/cuda .so, tpu payloads) load only from a trusted source: a local
// folder, a lockfile entry whose commit and variant hash match, or an explicit trust flag.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "tlaloc/kernels/lockfile.h"
#include "tlaloc/kernels/repository.h"
#include "tlaloc/kernels/variant.h"

namespace tlaloc::kernels {

struct KernelSource {
  std::string repo;            // folder path or git URL
  std::optional<int> version;  // branch v{N}
  std::string revision;        // branch, tag or commit (exclusive with version)

  // "URL", "URL@REVISION" or "URL@vN" (a version).
  static StatusOr<KernelSource> Parse(std::string_view text);
  std::string ToString() const;
};

struct LoaderOptions {
  std::filesystem::path cache_dir;  // empty: the environment's or ~/.cache/tlaloc/kernels
  bool offline = false;             // also set by TLALOC_KERNELS_OFFLINE=1
  bool trust_remote_code = false;
  const Lockfile* lockfile = nullptr;
  // "repo=path:repo2=path2"; empty: $TLALOC_LOCAL_KERNELS.
  std::string local_overrides;
  // Base URL that kernel-depends repo ids ("org/name") are relative to; empty:
  // $TLALOC_KERNELS_HUB. Ids that are URLs or folders are used as they are.
  std::string hub_url;
};

struct Checkout {
  std::string repo;
  std::filesystem::path root;  // the repository's files
  std::string commit;          // 40 hex, or "local" for a plain folder
  bool local = false;          // a local folder (trusted)
  std::string origin;          // how it was found: "local folder", "TLALOC_LOCAL_KERNELS", "git"
};

// Resolves the source to files on disk (cloning or updating the cache unless offline).
StatusOr<Checkout> FetchRepository(const KernelSource& source, const LoaderOptions& options);

struct LoadedVariant {
  Checkout checkout;
  VariantMetadata meta;
  std::filesystem::path dir;
  bool native = false;     // runs code in this process or on the device
  std::string trusted_by;  // why native code may load
};

// Fetches, picks the best variant for the target, verifies every digest, and checks trust.
StatusOr<LoadedVariant> LoadVariant(const KernelSource& source, const Target& target,
                                    const LoaderOptions& options);
// Loads a specific variant (no target choice); same verification and trust rules.
StatusOr<LoadedVariant> LoadNamedVariant(const Checkout& checkout, const std::string& variant,
                                         const LoaderOptions& options);

// Loads the kernel-depends of a loaded variant (recursively, each once) for the same target,
// with the same verification and trust rules. Errors name the dependency and its dependent.
StatusOr<std::vector<LoadedVariant>> LoadDependencies(const LoadedVariant& variant,
                                                      const Target& target,
                                                      const LoaderOptions& options);

// Runs a command (arguments are quoted), returning its stdout, or an error with its stderr.
StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

}  // namespace tlaloc::kernels
