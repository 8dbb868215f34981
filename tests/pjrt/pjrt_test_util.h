// Where the tests find Tlaloc's plugin, and which PJRT target the device lanes use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "tlaloc/ir/literal.h"
#include "tlaloc/runtime/target.h"

namespace tlaloc::pjrt::testing {

// The build tree's plugin; where that tree is absent (the test binaries of an unpacked bring-up
// tarball, docs/BRINGUP.md), the one the cpu target resolves to (next to the binary, ../lib).
inline std::string CpuPluginPath() {
  if (std::filesystem::exists(TLALOC_PJRT_CPU_PLUGIN)) return TLALOC_PJRT_CPU_PLUGIN;
  PluginResolution r = ResolvePjrtPlugin(PjrtTarget::Cpu(), ResolveEnvironment::Process());
  return r.found() ? r.path : TLALOC_PJRT_CPU_PLUGIN;
}

// The device lane TLALOC_TEST_PJRT_TARGET names: cpu, xla-cpu, cuda, tpu or a plugin path;
// unset means Tlaloc's own plugin from this build tree.
struct Lane {
  PjrtTarget target;
  std::string error;        // the variable does not parse: the lane is misconfigured, a failure
  std::string skip;         // a named platform whose plugin does not resolve on this machine
  std::string plugin_path;  // the file the target names or resolves to
  // Tlaloc's own plugin, from this build tree or installed: results must be bit-identical.
  bool is_tlaloc_plugin() const {
    return std::filesystem::path(plugin_path).filename() ==
           std::filesystem::path(CpuPluginPath()).filename();
  }
};

inline Lane TestLane() {
  Lane lane;
  const char* v = std::getenv("TLALOC_TEST_PJRT_TARGET");
  if (v == nullptr || *v == '\0') {
    lane.target = PjrtTarget::Path(CpuPluginPath());
    lane.plugin_path = CpuPluginPath();
    return lane;
  }
  auto t = ParsePjrtTarget(v);
  if (!t.ok()) {
    lane.error = "TLALOC_TEST_PJRT_TARGET: " + t.status().message();
    return lane;
  }
  lane.target = *t;
  lane.plugin_path = lane.target.path;
  if (lane.target.kind != PjrtTarget::Kind::kPath) {
    PluginResolution r = ResolvePjrtPlugin(lane.target, ResolveEnvironment::Process());
    lane.plugin_path = r.path;
    if (!r.found()) {
      lane.skip = "TLALOC_TEST_PJRT_TARGET=" + lane.target.ToString() +
                  " but no plugin resolves here: " + r.ToStatus().message();
      // XLA:CPU comes from PyPI (scripts/setup.sh), not from hardware: CI must have it, so a
      // missing wheel fails there (as a missing oracle does, testing/oracle.h).
      const char* ci = std::getenv("CI");
      if (lane.target.kind == PjrtTarget::Kind::kXlaCpu && ci != nullptr &&
          std::string(ci) == "true") {
        lane.error = "CI=true: " + lane.skip + " (run scripts/setup.sh)";
      }
    }
  }
  return lane;
}

inline PjrtTarget TestTarget() { return TestLane().target; }

// Units in the last place between two f32 values (0 for equal ones, including +0 and -0).
inline int64_t UlpDistance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};  // monotonic in f
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// The largest UlpDistance over two f32 literals of one shape; -1 when they are not both f32
// of the same shape.
inline int64_t MaxUlpDistance(const Literal& a, const Literal& b) {
  if (!(a.type() == b.type()) || a.element_type() != ElementType::kF32) return -1;
  int64_t worst = 0;
  auto x = a.span<float>(), y = b.span<float>();
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, UlpDistance(x[i], y[i]));
  return worst;
}

}  // namespace tlaloc::pjrt::testing
