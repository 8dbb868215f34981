// Build variants of a kernel repository and the target they run on. A variant is a folder
// `build/<name>/`; its name encodes what must match the running target:
//
//   tlaloc{ABI}-{backend}{version}-{cpu arch}-{os}   e.g. tlaloc1-cpu-x86_64-linux,
//                                                        tlaloc1-cu128-x86_64-linux
//   tlaloc-{backend}                                 noarch for one backend, e.g. tlaloc-tpu
//   tlaloc-universal                                 a StableHLO function, runs everywhere
//
// Backend tokens: cpu, cu{major}{minor}, rocm{version}, xpu{version}, metal, neuron, tpu. All
// parse; those Tlaloc cannot run (rocm, xpu, metal, neuron) are rejected with that reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::kernels {

enum class Backend { kCpu, kCuda, kRocm, kXpu, kMetal, kNeuron, kTpu, kUniversal };

std::string_view BackendName(Backend b);
StatusOr<Backend> ParseBackend(std::string_view name);
// Backends whose kernels Tlaloc can run: cpu (interpreter), cuda and tpu (PJRT plugins).
bool TlalocCanRun(Backend b);

struct VariantName {
  std::string name;
  Backend backend = Backend::kUniversal;
  bool noarch = false;
  int abi = 0;                  // arch variants only
  std::string backend_version;  // "128" for cu128, "71" for rocm71; empty otherwise
  std::string arch;             // x86_64, aarch64
  std::string os;               // linux, darwin
};

StatusOr<VariantName> ParseVariantName(std::string_view name);

// What the kernels will run on.
struct Target {
  Backend backend = Backend::kCpu;
  int cuda_major = 0, cuda_minor = 0;  // CUDA toolkit/driver version (cuda only)
  int capability = 0;                  // compute capability as 10*major+minor, e.g. 90
  std::string arch;                    // defaults to the host's
  std::string os;
  int abi = 0;  // defaults to TLALOC_KERNEL_ABI_VERSION

  // The host CPU with the interpreter.
  static Target HostCpu();
  // "cpu", "tpu", "cuda" (12.8, sm 9.0 unless given), "cuda12.4", "cuda12.4:sm80".
  static StatusOr<Target> Parse(std::string_view text);
  std::string ToString() const;
};

struct VariantDecision {
  std::string variant;
  bool accepted = false;
  std::string reason;  // why rejected, or what makes it fit
  int priority = 0;    // higher is preferred among accepted ones
};

// Decides every variant for `target`, best accepted first, then the rejected ones.
std::vector<VariantDecision> RankVariants(const std::vector<std::string>& variants,
                                          const Target& target);
// The best variant, or NotFound listing each variant and why it was rejected.
StatusOr<std::string> SelectVariant(const std::vector<std::string>& variants, const Target& target,
                                    std::string_view repo_name);

}  // namespace tlaloc::kernels
