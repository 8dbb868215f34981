// Builds the example kernel repositories (examples/kernels/) into real git repositories for the
// kernel tests: build/<variant>/ folders sealed with their digests, branches v1 and v2 (the
// metadata version differs), main at v2.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "testing/oracle.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/kernels/repository.h"
#include "tlaloc/kernels/source.h"

namespace tlaloc::testing {

namespace fs = std::filesystem;

inline fs::path KernelTempDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("tlaloc_kernels_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline fs::path ExamplesDir() { return fs::path(TLALOC_SOURCE_DIR) / "examples" / "kernels"; }

inline std::string HostCpuVariant() {
  auto t = kernels::Target::HostCpu();
  return "tlaloc1-cpu-" + t.arch + "-" + t.os;
}

// One variant: folder name -> files to copy into it (metadata.json included).
using VariantFiles = std::map<std::string, std::vector<fs::path>>;

inline VariantFiles RmsNormVariants() {
  fs::path ex = ExamplesDir() / "rmsnorm";
  return {{"tlaloc-universal", {ex / "universal/metadata.json", ex / "universal/rms_norm.mlir"}},
          {HostCpuVariant(), {ex / "cpu/metadata.json", fs::path(TLALOC_RMSNORM_CPU_SO)}}};
}

inline VariantFiles SiluVariants() {
  fs::path ex = ExamplesDir() / "silu_and_mul";
  return {{HostCpuVariant(), {ex / "cpu/metadata.json", fs::path(TLALOC_SILU_CPU_SO)}}};
}

inline Status Git(const fs::path& repo, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git",
                                   "-C",
                                   repo.string(),
                                   "-c",
                                   "user.name=Tlaloc Test",
                                   "-c",
                                   "user.email=test@tlaloc.invalid"};
  argv.insert(argv.end(), args.begin(), args.end());
  return kernels::RunCommand(argv).status();
}

// Writes the variants into `root/build/`, seals them, and sets "version" in every metadata.
inline Status WriteVariants(const fs::path& root, const VariantFiles& variants, int version) {
  for (const auto& [name, files] : variants) {
    fs::path dir = root / "build" / name;
    fs::create_directories(dir);
    for (const auto& f : files) {
      std::error_code ec;
      fs::copy_file(f, dir / f.filename(), fs::copy_options::overwrite_existing, ec);
      if (ec) return NotFound("cannot copy " + f.string() + ": " + ec.message());
    }
    auto text = kernels::ReadFileBytes(dir / "metadata.json");
    if (!text.ok()) return text.status();
    std::string t = *text;
    size_t p = t.find("\"version\": 1");
    if (p != std::string::npos) t.replace(p, 12, "\"version\": " + std::to_string(version));
    std::ofstream(dir / "metadata.json", std::ios::trunc) << t;
    TL_RETURN_IF_ERROR(kernels::SealVariant(dir));
  }
  return OkStatus();
}

// A git repository with branches v1 and v2 (main = v2).
inline Status MakeGitKernelRepo(const fs::path& root, const VariantFiles& variants) {
  fs::create_directories(root);
  TL_RETURN_IF_ERROR(Git(root, {"init", "-q", "-b", "main"}));
  TL_RETURN_IF_ERROR(WriteVariants(root, variants, 1));
  TL_RETURN_IF_ERROR(Git(root, {"add", "-A"}));
  TL_RETURN_IF_ERROR(Git(root, {"commit", "-q", "-m", "v1"}));
  TL_RETURN_IF_ERROR(Git(root, {"branch", "v1"}));
  TL_RETURN_IF_ERROR(WriteVariants(root, variants, 2));
  TL_RETURN_IF_ERROR(Git(root, {"commit", "-q", "-a", "-m", "v2"}));
  TL_RETURN_IF_ERROR(Git(root, {"branch", "v2"}));
  // Dumb HTTP clones read info/refs and objects/info/packs.
  return Git(root, {"update-server-info"});
}

inline bool HaveGit() { return std::system("git --version >/dev/null 2>&1") == 0; }

inline std::string FileUrl(const fs::path& p) { return "file://" + fs::absolute(p).string(); }

// A Kernelizer that replaces RMSNorm (with epsilon `rms_eps`) and SiluAndMul on the CPU by the
// example repositories, made as git repositories under `root` and loaded (trusted) into
// root/cache: what the kernelized-generation tests run.
inline StatusOr<kernels::Kernelizer> CpuRmsNormAndSiluKernelizer(const fs::path& root,
                                                                 double rms_eps) {
  TL_RETURN_IF_ERROR(MakeGitKernelRepo(root / "rms", RmsNormVariants()));
  TL_RETURN_IF_ERROR(MakeGitKernelRepo(root / "silu", SiluVariants()));
  kernels::KernelMapping mapping;
  mapping.Add("RMSNorm", kernels::Backend::kCpu, kernels::Mode::kInference,
              {{FileUrl(root / "rms"), 1, ""}, "", std::nullopt});
  mapping.Add("SiluAndMul", kernels::Backend::kCpu, kernels::Mode::kInference,
              {{FileUrl(root / "silu"), 1, ""}, "", std::nullopt});
  kernels::KernelizeOptions options;
  options.loader.cache_dir = root / "cache";
  options.loader.local_overrides = "none=none";
  options.loader.trust_remote_code = true;
  options.layer_attributes["RMSNorm"]["eps"] = rms_eps;
  return kernels::Kernelizer::Create(mapping, options);
}

}  // namespace tlaloc::testing
