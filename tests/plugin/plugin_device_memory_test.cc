// PJRT_Device_MemoryStats end to end: Tlaloc's plugin counts its live buffers on their device
// and reports a limit (TLALOC_PLUGIN_MEMORY_BYTES, else the host's available memory); the PJRT
// backend turns that into AvailableDeviceMemory, so the memory budget refuses a program over
// the limit before it runs; a plugin without the call leaves the check skipped.
#include <gtest/gtest.h>

#include <cstdlib>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/pjrt/session.h"
#include "tlaloc/runtime/memory_budget.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::pjrt {
namespace {

// Sets TLALOC_PLUGIN_MEMORY_BYTES for one test.
class ScopedLimit {
 public:
  explicit ScopedLimit(const char* value) { setenv("TLALOC_PLUGIN_MEMORY_BYTES", value, 1); }
  ~ScopedLimit() { unsetenv("TLALOC_PLUGIN_MEMORY_BYTES"); }
};

std::unique_ptr<PjrtSession> OpenPlugin() {
  SessionOptions o;
  o.target = PjrtTarget::Path(testing::CpuPluginPath());
  auto s = PjrtSession::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// 4 KiB in, 4 KiB out written into the donated argument, 4 KiB temporaries a and b.
constexpr const char* kProgram = R"(
func.func public @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}) -> tensor<1024xf32> {
  %a = stablehlo.add %x, %x : tensor<1024xf32>
  %b = stablehlo.multiply %a, %x : tensor<1024xf32>
  %c = stablehlo.add %b, %a : tensor<1024xf32>
  return %c : tensor<1024xf32>
})";

TEST(PluginDeviceMemory, CountsLiveBuffersAgainstTheLimit) {
  ScopedLimit limit("1048576");
  auto session = OpenPlugin();
  ASSERT_TRUE(session);
  auto before = session->DeviceMemoryStats(0);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->bytes_in_use, 0);
  ASSERT_TRUE(before->bytes_limit.has_value());
  EXPECT_EQ(*before->bytes_limit, 1048576);
  {
    auto a = session->ToDevice(Literal(TensorType(ElementType::kF32, {1024})));
    auto b = session->ToDevice(Literal(TensorType(ElementType::kS32, {16})));
    ASSERT_TRUE(a.ok() && b.ok());
    auto during = session->DeviceMemoryStats(0);
    ASSERT_TRUE(during.ok());
    EXPECT_EQ(during->bytes_in_use, 4096 + 64);
    // A donated argument leaves the count; the output joins it.
    auto exe = session->Compile(kProgram);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    auto out = session->Execute(**exe, {&*a});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_TRUE(a->IsDeleted());
    auto after_run = session->DeviceMemoryStats(0);
    ASSERT_TRUE(after_run.ok());
    EXPECT_EQ(after_run->bytes_in_use, 4096 + 64);  // b and the output
  }
  auto after = session->DeviceMemoryStats(0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->bytes_in_use, 0);                 // every buffer destroyed
  EXPECT_FALSE(session->DeviceMemoryStats(1).ok());  // one device
}

TEST(PluginDeviceMemory, BackendRefusesAProgramOverTheLimitBeforeRunningIt) {
  ScopedLimit limit("20000");
  auto backend = MakePjrtBackend(OpenPlugin());
  auto module = ParseModule(kProgram);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto program = backend->Compile(std::shared_ptr<const Module>(std::move(*module)));
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto stats = backend->MemoryStats(**program);
  ASSERT_TRUE(stats.ok());
  // The plugin's plan: at least the 4 KiB argument and two 4 KiB temporaries, under 20000.
  const int64_t peak = PredictedPeakBytes(*stats);
  ASSERT_GT(peak, 20000 - 8192);
  ASSERT_LE(peak, 20000);
  // 8 KiB of other buffers: 20000 - 8192 = 11808 bytes left, the program needs 16 KiB.
  auto held = backend->ToDevice(Literal(TensorType(ElementType::kF32, {2048})));
  ASSERT_TRUE(held.ok());
  auto available = backend->AvailableDeviceMemory(0);
  ASSERT_TRUE(available.ok()) << available.status().ToString();
  EXPECT_EQ(*available, 20000 - 8192);
  Status refused = CheckMemoryBudget(*backend, **program, MemoryBudgetRequest{"main", 0, "less"});
  ASSERT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("(" + std::to_string(peak) + " bytes) at its peak"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("only 11.5 KiB (11808 bytes) is available"), std::string::npos)
      << refused.message();
  held->reset();  // freed: now it fits
  EXPECT_TRUE(CheckMemoryBudget(*backend, **program, MemoryBudgetRequest{"main", 0, ""}).ok());
}

TEST(PluginDeviceMemory, WithoutALimitTheHostsMemoryIsTheLimit) {
  auto session = OpenPlugin();
  ASSERT_TRUE(session);
  auto m = session->DeviceMemoryStats(0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  if (!m->bytes_limit) GTEST_SKIP() << "this system reports no available memory";
  EXPECT_GT(*m->bytes_limit - m->bytes_in_use, 0);
}

TEST(PluginDeviceMemory, ABadLimitIsNamed) {
  ScopedLimit limit("12 GB");
  auto session = OpenPlugin();
  ASSERT_TRUE(session);
  auto m = session->DeviceMemoryStats(0);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("TLALOC_PLUGIN_MEMORY_BYTES='12 GB'"), std::string::npos)
      << m.status().message();
}

// A plugin whose table has no PJRT_Device_MemoryStats (an empty slot, as a table too old for it
// reads): Unimplemented, and the budget check is skipped rather than refused.
TEST(PluginDeviceMemory, APluginWithoutTheCallLeavesTheCheckSkipped) {
  auto loaded = PjrtApi::Load(testing::CpuPluginPath());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  static PJRT_Api table;
  table = *(*loaded)->raw();
  table.PJRT_Device_MemoryStats = nullptr;
  auto api = PjrtApi::FromTable(&table, "no-memory-stats");
  ASSERT_TRUE(api.ok());
  SessionOptions o;
  o.target = PjrtTarget::Path(testing::CpuPluginPath());
  auto session = PjrtSession::OpenWithApi(*api, o);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto m = (*session)->DeviceMemoryStats(0);
  ASSERT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("PJRT_Device_MemoryStats"), std::string::npos);
  auto backend = MakePjrtBackend(std::move(*session));
  EXPECT_FALSE(backend->AvailableDeviceMemory(0).ok());
  auto module = ParseModule(kProgram);
  ASSERT_TRUE(module.ok());
  auto program = backend->Compile(std::shared_ptr<const Module>(std::move(*module)));
  ASSERT_TRUE(program.ok());
  EXPECT_TRUE(CheckMemoryBudget(*backend, **program, MemoryBudgetRequest{"main", 0, ""}).ok());
}

}  // namespace
}  // namespace tlaloc::pjrt
