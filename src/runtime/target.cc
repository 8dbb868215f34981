#include "tlaloc/runtime/target.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tlaloc {
namespace fs = std::filesystem;

std::string PjrtTarget::ToString() const {
  switch (kind) {
    case Kind::kCpu:
      return "cpu";
    case Kind::kCuda:
      return "cuda";
    case Kind::kTpu:
      return "tpu";
    case Kind::kXlaCpu:
      return "xla-cpu";
    case Kind::kPath:
      return path;
  }
  return "?";
}

std::string PjrtTarget::ExpectedPlatform() const {
  switch (kind) {
    case Kind::kCpu:
      return "cpu";
    case Kind::kCuda:
      return "cuda";
    case Kind::kTpu:
      return "tpu";
    case Kind::kXlaCpu:
      return "cpu";  // XLA's CPU client names its platform "cpu", as Tlaloc's does
    case Kind::kPath:
      return "";
  }
  return "";
}

StatusOr<PjrtTarget> ParsePjrtTarget(const std::string& text) {
  if (text == "cpu") return PjrtTarget::Cpu();
  if (text == "xla-cpu") return PjrtTarget::XlaCpu();
  if (text == "cuda" || text == "gpu") return PjrtTarget::Cuda();
  if (text == "tpu") return PjrtTarget::Tpu();
  if (text.find('/') != std::string::npos ||
      (text.size() > 3 && text.compare(text.size() - 3, 3, ".so") == 0)) {
    return PjrtTarget::Path(text);
  }
  return InvalidArgument("PJRT target '" + text +
                         "': expected cpu, xla-cpu, cuda, tpu or a plugin path (containing '/' or "
                         "ending in .so)");
}

std::string BackendChoice::ToString() const {
  return interpreter ? "interp" : "pjrt:" + target.ToString();
}

StatusOr<BackendChoice> ParseBackendChoice(const std::string& text) {
  if (text == "interp" || text == "interpreter") return BackendChoice{};
  auto target = ParsePjrtTarget(text);
  if (!target.ok()) {
    return InvalidArgument("target '" + text +
                           "': expected interp, cpu, xla-cpu, cuda, tpu or a plugin path");
  }
  return BackendChoice{false, *target};
}

StatusOr<BackendChoice> DefaultBackendChoice() {
  const char* value = std::getenv("TLALOC_TARGET");
  if (value == nullptr || *value == '\0') return BackendChoice{};
  auto choice = ParseBackendChoice(value);
  if (!choice.ok()) return choice.status().WithContext("TLALOC_TARGET");
  return choice;
}

ResolveEnvironment ResolveEnvironment::Process() {
  ResolveEnvironment env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) env.executable_dir = exe.parent_path().string();
#ifdef TLALOC_BUILTIN_CPU_PLUGIN
  env.builtin_cpu_plugin = TLALOC_BUILTIN_CPU_PLUGIN;
#endif
#ifdef TLALOC_CHECKOUT_VENV
  env.checkout_venv = TLALOC_CHECKOUT_VENV;
#endif
  return env;
}

std::optional<std::string> ResolveEnvironment::Get(const std::string& name) const {
  if (getenv) return getenv(name);
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

namespace {
bool FileNameContains(const std::string& path, const char* word) {
  std::string name = fs::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name.find(word) != std::string::npos;
}
}  // namespace

bool IsTpuShapedPath(const std::string& path) { return FileNameContains(path, "tpu"); }
bool IsCpuShapedPath(const std::string& path) { return FileNameContains(path, "cpu"); }
bool IsTlalocShapedPath(const std::string& path) { return FileNameContains(path, "tlaloc"); }

Status PluginResolution::ToStatus() const {
  if (found()) return OkStatus();
  std::string message = "no PJRT plugin found for target " + target.ToString() + "; looked at:";
  for (const std::string& line : trace) message += "\n  " + line;
  return NotFound(message);
}

namespace {

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// python3.N directories under `lib_dir`, newest N first.
std::vector<std::string> PythonDirs(const std::string& lib_dir) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(lib_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("python3.", 0) != 0) continue;
    std::string minor = name.substr(8);
    if (minor.empty() || !std::all_of(minor.begin(), minor.end(), ::isdigit)) continue;
    found.emplace_back(std::stoi(minor), it->path().string());
  }
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::string> dirs;
  for (auto& [n, dir] : found) dirs.push_back(dir);
  return dirs;
}

// Tries one candidate file, recording the outcome.
bool Try(const std::string& path, const std::string& why, std::vector<std::string>& trace) {
  if (IsFile(path)) {
    trace.push_back("found " + path + " (" + why + ")");
    return true;
  }
  trace.push_back("absent " + path + " (" + why + ")");
  return false;
}

}  // namespace

std::vector<std::string> SitePackagesRoots(const ResolveEnvironment& env,
                                           std::vector<std::string>* trace) {
  std::vector<std::string> roots;
  auto add_from = [&](const std::string& prefix, const std::string& label) {
    std::vector<std::string> dirs = PythonDirs(prefix + "/lib");
    if (dirs.empty() && trace)
      trace->push_back("no python3.N under " + prefix + "/lib (" + label + ")");
    for (const std::string& d : dirs) roots.push_back(d + "/site-packages");
  };
  if (auto venv = env.Get("VIRTUAL_ENV"); venv && !venv->empty()) {
    add_from(*venv, "$VIRTUAL_ENV");
  } else if (trace) {
    trace->push_back("$VIRTUAL_ENV not set");
  }
  if (auto home = env.Get("HOME"); home && !home->empty()) {
    add_from(*home + "/.local", "user site");
  } else if (trace) {
    trace->push_back("$HOME not set: no user site");
  }
  return roots;
}

PluginResolution ResolvePjrtPlugin(const PjrtTarget& target, const ResolveEnvironment& env) {
  PluginResolution r;
  r.target = target;
  auto& trace = r.trace;
  auto take = [&](const std::string& path, const std::string& why) {
    if (Try(path, why, trace)) {
      r.path = path;
      return true;
    }
    return false;
  };

  if (target.kind == PjrtTarget::Kind::kPath) {
    take(target.path, "explicit plugin path");
    return r;
  }

  // The generic override, gated per lane.
  auto env_path = env.Get("TLALOC_PJRT_PLUGIN_PATH");
  if (env_path && !env_path->empty()) {
    bool tpu_shaped = IsTpuShapedPath(*env_path);
    bool cpu_shaped = IsCpuShapedPath(*env_path);
    bool tlaloc_shaped = IsTlalocShapedPath(*env_path);
    if (target.kind == PjrtTarget::Kind::kTpu && !tpu_shaped) {
      trace.push_back("skipped TLALOC_PJRT_PLUGIN_PATH=" + *env_path +
                      " (not tpu-shaped: the TPU lane takes it only when the file name "
                      "contains \"tpu\")");
    } else if (target.kind == PjrtTarget::Kind::kCuda && tpu_shaped) {
      trace.push_back("skipped TLALOC_PJRT_PLUGIN_PATH=" + *env_path +
                      " (tpu-shaped: kept out of the CUDA lane)");
    } else if (target.kind == PjrtTarget::Kind::kCpu && !(cpu_shaped && tlaloc_shaped)) {
      trace.push_back("skipped TLALOC_PJRT_PLUGIN_PATH=" + *env_path +
                      " (the cpu lane is Tlaloc's plugin: it takes the variable only when the "
                      "file name contains \"cpu\" and \"tlaloc\")");
    } else if (target.kind == PjrtTarget::Kind::kXlaCpu && !(cpu_shaped && !tlaloc_shaped)) {
      trace.push_back("skipped TLALOC_PJRT_PLUGIN_PATH=" + *env_path +
                      " (the xla-cpu lane takes it only when the file name contains \"cpu\" "
                      "and is not Tlaloc's own plugin)");
    } else if (take(*env_path, "TLALOC_PJRT_PLUGIN_PATH")) {
      return r;
    }
  } else {
    trace.push_back("TLALOC_PJRT_PLUGIN_PATH not set");
  }

  switch (target.kind) {
    case PjrtTarget::Kind::kTpu: {
      for (const std::string& root : SitePackagesRoots(env, &trace)) {
        if (take(root + "/libtpu/libtpu.so", "libtpu wheel")) return r;
      }
      if (take(env.root + "/lib/libtpu.so", "TPU VM system image")) return r;
      if (take(env.root + "/usr/lib/libtpu.so", "TPU VM system image")) return r;
      break;
    }
    case PjrtTarget::Kind::kCuda: {
      for (const std::string& root : SitePackagesRoots(env, &trace)) {
        for (const char* pkg : {"xla_cuda13", "xla_cuda12"}) {
          if (take(root + "/jax_plugins/" + pkg + "/xla_cuda_plugin.so",
                   std::string("jax-") + (pkg + 4) + "-pjrt wheel")) {
            return r;
          }
        }
      }
      break;
    }
    case PjrtTarget::Kind::kCpu: {
      if (!env.executable_dir.empty()) {
        if (take(env.executable_dir + "/libtlaloc_pjrt_cpu.so", "next to the executable")) return r;
        if (take(env.executable_dir + "/../lib/libtlaloc_pjrt_cpu.so", "installed ../lib")) {
          return r;
        }
      }
      if (!env.builtin_cpu_plugin.empty() && take(env.builtin_cpu_plugin, "Tlaloc's build tree")) {
        return r;
      }
      break;
    }
    case PjrtTarget::Kind::kXlaCpu: {
      // XLA's CPU plugin as PyPI ships it (lammps-jax-pjrt-cpu, built from jaxlib's XLA); the
      // checkout's venv last, as the build tree's plugin is last for cpu.
      std::vector<std::string> roots = SitePackagesRoots(env, &trace);
      if (!env.checkout_venv.empty()) {
        std::vector<std::string> dirs = PythonDirs(env.checkout_venv + "/lib");
        if (dirs.empty())
          trace.push_back("no python3.N under " + env.checkout_venv + "/lib (the checkout's venv)");
        for (const std::string& d : dirs) roots.push_back(d + "/site-packages");
      }
      for (const std::string& root : roots) {
        if (take(root + "/" + kXlaCpuWheelPlugin, "lammps-jax-pjrt-cpu wheel")) return r;
      }
      break;
    }
    case PjrtTarget::Kind::kPath:
      break;
  }
  return r;
}

}  // namespace tlaloc
