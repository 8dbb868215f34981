// Variant names and the choice of a variant for a target (see variant.h for the grammar).
#include "tlaloc/kernels/variant.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>

#include "tlaloc/kernels/kernel_abi.h"

namespace tlaloc::kernels {
namespace {

struct BackendToken {
  Backend backend;
  std::string_view prefix;  // token prefix; the rest is the backend version
};
constexpr BackendToken kTokens[] = {
    {Backend::kCpu, "cpu"}, {Backend::kCuda, "cu"},     {Backend::kRocm, "rocm"},
    {Backend::kXpu, "xpu"}, {Backend::kMetal, "metal"}, {Backend::kNeuron, "neuron"},
    {Backend::kTpu, "tpu"},
};

bool AllDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? s.size() - start : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
    case Backend::kRocm:
      return "rocm";
    case Backend::kXpu:
      return "xpu";
    case Backend::kMetal:
      return "metal";
    case Backend::kNeuron:
      return "neuron";
    case Backend::kTpu:
      return "tpu";
    case Backend::kUniversal:
      return "universal";
  }
  return "?";
}

StatusOr<Backend> ParseBackend(std::string_view name) {
  for (Backend b : {Backend::kCpu, Backend::kCuda, Backend::kRocm, Backend::kXpu, Backend::kMetal,
                    Backend::kNeuron, Backend::kTpu, Backend::kUniversal})
    if (BackendName(b) == name) return b;
  return InvalidArgument("unknown kernel backend '" + std::string(name) +
                         "' (expected cpu, cuda, rocm, xpu, metal, neuron, tpu or universal)");
}

bool TlalocCanRun(Backend b) {
  return b == Backend::kCpu || b == Backend::kCuda || b == Backend::kTpu ||
         b == Backend::kUniversal;
}

StatusOr<VariantName> ParseVariantName(std::string_view name) {
  VariantName v;
  v.name = std::string(name);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("variant name '" + std::string(name) + "': " + why +
                           " (expected tlaloc{ABI}-{backend}-{arch}-{os}, tlaloc-{backend} or "
                           "tlaloc-universal)");
  };
  std::vector<std::string> parts = Split(name, '-');
  if (parts.empty() || parts[0].rfind("tlaloc", 0) != 0) return bad("does not start with 'tlaloc'");
  std::string abi = parts[0].substr(6);
  if (abi.empty()) {
    if (parts.size() != 2) return bad("a noarch variant has exactly one backend part");
    v.noarch = true;
    if (parts[1] == "universal") return v;
    auto backend = ParseBackend(parts[1]);
    if (!backend.ok()) return bad(backend.status().message());
    v.backend = *backend;
    return v;
  }
  if (!AllDigits(abi)) return bad("ABI version '" + abi + "' is not a number");
  v.abi = std::stoi(abi);
  if (parts.size() != 4) return bad("an arch variant has four parts");
  const std::string& token = parts[1];
  bool found = false;
  for (const auto& t : kTokens) {
    if (token.rfind(t.prefix, 0) != 0) continue;
    std::string rest = token.substr(t.prefix.size());
    if (!AllDigits(rest)) continue;
    if (t.backend == Backend::kCuda && rest.size() < 2) return bad("CUDA token needs cu{M}{m}");
    v.backend = t.backend;
    v.backend_version = rest;
    found = true;
    break;
  }
  if (!found) return bad("unknown backend token '" + token + "'");
  v.arch = parts[2];
  v.os = parts[3];
  return v;
}

Target Target::HostCpu() {
  Target t;
  struct utsname u;
  t.arch = uname(&u) == 0 ? u.machine : "x86_64";
  t.os = "linux";
#ifdef __APPLE__
  t.os = "darwin";
#endif
  t.abi = TLALOC_KERNEL_ABI_VERSION;
  return t;
}

StatusOr<Target> Target::Parse(std::string_view text) {
  Target t = HostCpu();
  if (text == "cpu") return t;
  if (text == "tpu") {
    t.backend = Backend::kTpu;
    return t;
  }
  if (text.rfind("cuda", 0) == 0) {
    t.backend = Backend::kCuda;
    t.cuda_major = 12, t.cuda_minor = 8, t.capability = 90;
    std::string rest(text.substr(4));
    std::string sm;
    if (size_t colon = rest.find(':'); colon != std::string::npos) {
      sm = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    if (!rest.empty()) {
      size_t dot = rest.find('.');
      if (dot == std::string::npos || !AllDigits(rest.substr(0, dot)) ||
          !AllDigits(rest.substr(dot + 1)) || dot == 0 || dot + 1 == rest.size())
        return InvalidArgument("target '" + std::string(text) +
                               "': expected cuda{major}.{minor}[:sm{NN}], e.g. cuda12.4:sm90");
      t.cuda_major = std::stoi(rest.substr(0, dot));
      t.cuda_minor = std::stoi(rest.substr(dot + 1));
    }
    if (!sm.empty()) {
      if (sm.rfind("sm", 0) != 0 || sm.size() < 3 || !AllDigits(sm.substr(2)))
        return InvalidArgument("target '" + std::string(text) + "': capability must read sm{NN}");
      t.capability = std::stoi(sm.substr(2));
    }
    return t;
  }
  return InvalidArgument("unknown kernel target '" + std::string(text) +
                         "' (expected cpu, tpu or cuda[{major}.{minor}][:sm{NN}])");
}

std::string Target::ToString() const {
  std::string s(BackendName(backend));
  if (backend == Backend::kCuda)
    s += std::to_string(cuda_major) + "." + std::to_string(cuda_minor) + ":sm" +
         std::to_string(capability);
  return s + " " + arch + "-" + os + " abi " + std::to_string(abi);
}

std::vector<VariantDecision> RankVariants(const std::vector<std::string>& variants,
                                          const Target& target) {
  std::vector<VariantDecision> out;
  for (const auto& name : variants) {
    VariantDecision d;
    d.variant = name;
    auto parsed = ParseVariantName(name);
    if (!parsed.ok()) {
      d.reason = parsed.status().message();
      out.push_back(d);
      continue;
    }
    const VariantName& v = *parsed;
    if (v.noarch && v.backend == Backend::kUniversal) {
      d.accepted = true, d.priority = 1, d.reason = "universal StableHLO runs on every backend";
    } else if (!TlalocCanRun(v.backend)) {
      d.reason = "Tlaloc cannot run " + std::string(BackendName(v.backend)) +
                 " kernels (it runs cpu, cuda and tpu)";
    } else if (v.backend != target.backend) {
      d.reason = "backend " + std::string(BackendName(v.backend)) + " is not the target's " +
                 std::string(BackendName(target.backend));
    } else if (v.noarch) {
      d.accepted = true, d.priority = 2, d.reason = "noarch variant for the target's backend";
    } else if (v.abi != target.abi) {
      d.reason = "built for Tlaloc kernel ABI " + std::to_string(v.abi) + ", this is ABI " +
                 std::to_string(target.abi);
    } else if (v.arch != target.arch) {
      d.reason = "CPU architecture " + v.arch + " is not the host's " + target.arch;
    } else if (v.os != target.os) {
      d.reason = "OS " + v.os + " is not the host's " + target.os;
    } else if (v.backend == Backend::kCuda) {
      int major = std::stoi(v.backend_version.substr(0, v.backend_version.size() - 1));
      int minor = v.backend_version.back() - '0';
      if (major != target.cuda_major)
        d.reason = "CUDA " + std::to_string(major) + "." + std::to_string(minor) +
                   " has a different major version than the target's CUDA " +
                   std::to_string(target.cuda_major) + "." + std::to_string(target.cuda_minor);
      else if (minor > target.cuda_minor)
        d.reason = "CUDA " + std::to_string(major) + "." + std::to_string(minor) +
                   " is newer than the target's CUDA " + std::to_string(target.cuda_major) + "." +
                   std::to_string(target.cuda_minor);
      else
        d.accepted = true, d.priority = 100 + minor, d.reason = "CUDA build for this major";
    } else {
      d.accepted = true, d.priority = 100, d.reason = "arch build for the target";
    }
    out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const VariantDecision& a, const VariantDecision& b) {
    if (a.accepted != b.accepted) return a.accepted;
    return a.priority > b.priority;
  });
  return out;
}

StatusOr<std::string> SelectVariant(const std::vector<std::string>& variants, const Target& target,
                                    std::string_view repo_name) {
  auto ranked = RankVariants(variants, target);
  if (!ranked.empty() && ranked.front().accepted) return ranked.front().variant;
  std::string msg = "kernel repository " + std::string(repo_name) + " has no variant for target " +
                    target.ToString() + ";";
  if (ranked.empty()) msg += " it has no build/<variant> folders";
  for (const auto& d : ranked) msg += "\n  " + d.variant + ": " + d.reason;
  return NotFound(msg);
}

}  // namespace tlaloc::kernels
