// Where programs run: the in-process interpreter or a PJRT plugin, and which plugin file a
// PJRT target resolves to. Resolution follows the TPU bring-up runbook:
//  - TLALOC_PJRT_PLUGIN_PATH first; for the TPU lane only when its file name is tpu-shaped
//    (contains "tpu"), so a CUDA host's generic variable never enters the TPU lane, and for the
//    CUDA lane only when it is not tpu-shaped;
//  - then the default places: libtpu/libtpu.so in $VIRTUAL_ENV's and the user site's
//    python3.N/site-packages, /lib/libtpu.so, /usr/lib/libtpu.so; for CUDA
//    jax_plugins/xla_cuda13|12/xla_cuda_plugin.so in the same site-packages roots;
//    for cpu, Tlaloc's own libtlaloc_pjrt_cpu.so next to the executable or in ../lib;
//    for xla-cpu, XLA's own CPU plugin (lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so, a wheel
//    built from jaxlib's XLA) in the same site-packages roots and then the checkout's venv.
//  - the cpu lane takes TLALOC_PJRT_PLUGIN_PATH only for a cpu-shaped Tlaloc plugin (the name
//    contains "cpu" and "tlaloc"), the xla-cpu lane only for a cpu-shaped file that is not
//    Tlaloc's: `cpu` stays Tlaloc's interpreter behind the C ABI, `xla-cpu` is XLA.
// Every step is recorded, so `tlaloc doctor` can say what each target resolves to and why.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc {

struct PjrtTarget {
  // kCpu: Tlaloc's own plugin (the interpreter); kXlaCpu: XLA's CPU plugin.
  enum class Kind { kCpu, kCuda, kTpu, kPath, kXlaCpu };
  Kind kind = Kind::kCpu;
  std::string path;  // kPath only: an explicit plugin file

  static PjrtTarget Cpu() { return {Kind::kCpu, ""}; }
  static PjrtTarget Cuda() { return {Kind::kCuda, ""}; }
  static PjrtTarget Tpu() { return {Kind::kTpu, ""}; }
  static PjrtTarget XlaCpu() { return {Kind::kXlaCpu, ""}; }
  static PjrtTarget Path(std::string p) { return {Kind::kPath, std::move(p)}; }
  // "cpu", "cuda", "tpu", "xla-cpu" or the path.
  std::string ToString() const;
  // The platform name the plugin's client must report ("cpu", "cuda", "tpu"), or "" when any
  // platform is acceptable (an explicit path).
  std::string ExpectedPlatform() const;
  bool operator==(const PjrtTarget&) const = default;
};

// "cpu" | "xla-cpu" | "cuda" | "gpu" | "tpu" | a path (contains '/' or ends in ".so").
StatusOr<PjrtTarget> ParsePjrtTarget(const std::string& text);

// Which backend runs programs: the interpreter, or PJRT with a target.
struct BackendChoice {
  bool interpreter = true;
  PjrtTarget target;
  std::string ToString() const;
};
// "interp" | "interpreter" | anything ParsePjrtTarget accepts.
StatusOr<BackendChoice> ParseBackendChoice(const std::string& text);
// TLALOC_TARGET when set (an error names the variable when it does not parse), else the
// interpreter.
StatusOr<BackendChoice> DefaultBackendChoice();

// The outside world resolution looks at; tests substitute a fake directory tree.
struct ResolveEnvironment {
  // Environment lookup; null: the process environment.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  // Prefix prepended to absolute system paths (/lib, /usr/lib); "" in production.
  std::string root;
  // Directory of the running executable ("" to skip those candidates).
  std::string executable_dir;
  // Compiled-in location of Tlaloc's CPU plugin (the build tree), tried last for cpu.
  std::string builtin_cpu_plugin;
  // Compiled-in venv of the checkout (third_party_py/, made by scripts/setup.sh), tried last
  // for xla-cpu ("" to skip it).
  std::string checkout_venv;

  // The real process environment and executable location.
  static ResolveEnvironment Process();
  std::optional<std::string> Get(const std::string& name) const;
};

struct PluginResolution {
  PjrtTarget target;
  std::string path;                // empty when nothing was found
  std::vector<std::string> trace;  // each candidate and why it was taken or skipped
  bool found() const { return !path.empty(); }
  // NotFound naming the target and every place looked at, or OK.
  Status ToStatus() const;
};

PluginResolution ResolvePjrtPlugin(const PjrtTarget& target, const ResolveEnvironment& env);

// True when a file name looks like a TPU plugin (contains "tpu", case-insensitive).
bool IsTpuShapedPath(const std::string& path);
// True when a file name looks like a CPU plugin (contains "cpu", case-insensitive).
bool IsCpuShapedPath(const std::string& path);
// True when a file name is Tlaloc's own plugin's (contains "tlaloc", case-insensitive).
bool IsTlalocShapedPath(const std::string& path);

// The site-packages roots searched for wheels: $VIRTUAL_ENV/lib/python3.N/site-packages and
// $HOME/.local/lib/python3.N/site-packages for every N present, newest first.
std::vector<std::string> SitePackagesRoots(const ResolveEnvironment& env,
                                           std::vector<std::string>* trace = nullptr);

// XLA's CPU plugin inside a site-packages root.
inline constexpr const char* kXlaCpuWheelPlugin = "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so";

}  // namespace tlaloc
