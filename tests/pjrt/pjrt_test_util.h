// Where the tests find Tlaloc's plugin, and which PJRT target the device lanes use.
#pragma once

#include <cstdlib>
#include <string>

#include "tlaloc/runtime/target.h"

namespace tlaloc::pjrt::testing {

inline std::string CpuPluginPath() { return TLALOC_PJRT_CPU_PLUGIN; }

// TLALOC_TEST_PJRT_TARGET picks the device lane: cpu (Tlaloc's plugin, the default), cuda,
// tpu or a plugin path.
inline PjrtTarget TestTarget() {
  const char* v = std::getenv("TLALOC_TEST_PJRT_TARGET");
  if (v == nullptr || *v == '\0') return PjrtTarget::Path(CpuPluginPath());
  auto t = ParsePjrtTarget(v);
  return t.ok() ? *t : PjrtTarget::Path(CpuPluginPath());
}

}  // namespace tlaloc::pjrt::testing
