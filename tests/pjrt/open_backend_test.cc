// runtime::OpenBackend through the pjrt layer's opener: Tlaloc's CPU plugin gets a mesh's
// devices (its cpu_device_count), and a plugin that cannot open is named by its target.
#include "tlaloc/runtime/open_backend.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc::runtime {
namespace {

TEST(OpenBackendPjrt, TheCpuPluginGetsTheMeshDevices) {
  pjrt::RegisterBackendOpener();
  if (const char* env = std::getenv("TLALOC_CPU_DEVICES"); env && *env)
    GTEST_SKIP() << "TLALOC_CPU_DEVICES is set: it decides the device count";
  auto mesh = Mesh::Parse("data=2");
  ASSERT_TRUE(mesh.ok());
  BackendChoice choice{false, PjrtTarget::Path(TLALOC_PJRT_CPU_PLUGIN)};
  auto b = OpenBackend(choice, *mesh, SingleProcessWorld());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "pjrt:cpu");
  EXPECT_EQ((*b)->num_devices(), 2);
}

TEST(OpenBackendPjrt, AMissingPluginIsNamedByItsTarget) {
  pjrt::RegisterBackendOpener();
  BackendChoice choice{false, PjrtTarget::Path("/nonexistent/libmissing_plugin.so")};
  auto b = OpenBackend(choice, std::nullopt, SingleProcessWorld());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message().rfind("target pjrt:/nonexistent/libmissing_plugin.so: ", 0), 0u)
      << b.status().message();
}

}  // namespace
}  // namespace tlaloc::runtime
