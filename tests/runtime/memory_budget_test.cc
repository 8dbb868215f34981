// The memory budget: a program fits or is refused with its figures, an output written into a
// donated argument counts once, the interpreter backend's statistics come from its plan, and
// TLALOC_MEMORY_CHECK=0 turns the check off.
#include "tlaloc/runtime/memory_budget.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/buffer_cache.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc {
namespace {

// 4 KiB temporaries: a, b, then c made while a and b are still live (results are allocated
// before the op's operands die), then d, the output that takes x's buffer, while c lives.
constexpr const char* kProgram = R"(
func.func public @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}) -> tensor<1024xf32> {
  %a = stablehlo.add %x, %x : tensor<1024xf32>
  %b = stablehlo.multiply %x, %x : tensor<1024xf32>
  %c = stablehlo.add %a, %b : tensor<1024xf32>
  %d = stablehlo.multiply %c, %x : tensor<1024xf32>
  return %d : tensor<1024xf32>
})";

TEST(MemoryBudget, PredictedPeakCountsAnAliasedOutputOnce) {
  ProgramMemoryStats s{1000, 600, 300, 400};
  EXPECT_EQ(PredictedPeakBytes(s), 1000 + 600 + 300 - 400);
}

TEST(MemoryBudget, FitsWhenTheRestFitsInWhatIsAvailable) {
  ProgramMemoryStats s{1 << 20, 1 << 20, 3 << 20, 0};  // 5 MiB at the peak
  MemoryBudgetRequest r{"decode-step", 1 << 20, "fewer slots"};
  EXPECT_TRUE(CheckMemoryFits(s, 4 << 20, r).ok());         // 1 MiB resident: 4 MiB more
  EXPECT_FALSE(CheckMemoryFits(s, (4 << 20) - 1, r).ok());  // one byte short
  r.resident_bytes = 0;
  EXPECT_FALSE(CheckMemoryFits(s, 4 << 20, r).ok());
  EXPECT_TRUE(CheckMemoryFits(s, 5 << 20, r).ok());
}

TEST(MemoryBudget, RefusalNamesProgramFiguresAndWhatWouldFit) {
  ProgramMemoryStats s{int64_t{2} << 30, int64_t{2} << 30, int64_t{6} << 30, int64_t{2} << 30};
  MemoryBudgetRequest r{"train_step (batch 64 x seq_len 4096)", int64_t{2} << 30,
                        "a smaller batch (--batch)"};
  Status st = CheckMemoryFits(s, int64_t{3} << 30, r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  const std::string& m = st.message();
  EXPECT_NE(m.find("train_step (batch 64 x seq_len 4096)"), std::string::npos) << m;
  EXPECT_NE(m.find("8.0 GiB (8589934592 bytes) at its peak"), std::string::npos) << m;
  EXPECT_NE(m.find("6.0 GiB (6442450944 bytes) more"), std::string::npos) << m;
  EXPECT_NE(m.find("only 3.0 GiB (3221225472 bytes) is available"), std::string::npos) << m;
  EXPECT_NE(m.find("a smaller batch (--batch)"), std::string::npos) << m;
  EXPECT_NE(m.find("TLALOC_MEMORY_CHECK=0"), std::string::npos) << m;
}

std::unique_ptr<CompiledProgram> Compile(Backend& backend) {
  auto module = ParseModule(kProgram);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return nullptr;
  auto program = backend.Compile(std::shared_ptr<const Module>(std::move(*module)));
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  return program.ok() ? std::move(*program) : nullptr;
}

TEST(MemoryBudget, InterpreterStatisticsComeFromThePlan) {
  auto backend = MakeInterpreterBackend();
  auto program = Compile(*backend);
  ASSERT_NE(program, nullptr);
  auto stats = backend->MemoryStats(*program);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->argument_bytes, 4096);
  EXPECT_EQ(stats->output_bytes, 4096);
  // a, b and c (the output is not a temporary), and d's buffer made before x's takes its place.
  EXPECT_EQ(stats->temp_bytes, 4 * 4096);
  EXPECT_EQ(stats->alias_bytes, 4096);
  // Beyond the 20 KiB of tensors: the buffer cache's headroom and the allocator margin.
  EXPECT_EQ(stats->overhead_bytes, HostOverheadBytes(20 * 1024));
  EXPECT_EQ(PredictedPeakBytes(*stats), 20 * 1024 + stats->overhead_bytes);
}

// The buffer cache may take in up to its capacity less what it holds now during a run; the
// allocator margin is a fixed part plus a share of the peak.
TEST(MemoryBudget, HostOverheadCountsTheBufferCacheAndAStatedMargin) {
  const BufferCache& cache = BufferCache::Global();
  const int64_t headroom = static_cast<int64_t>(cache.capacity_bytes()) -
                           static_cast<int64_t>(cache.stats().cached_bytes);
  // Under `ulimit -v` a failing allocation empties the cache first: its headroom is not counted.
  EXPECT_EQ(HostOverheadBytes(0),
            (AddressSpaceLimitBinds() ? 0 : headroom) + kAllocatorMarginBytes);
  EXPECT_EQ(HostOverheadBytes(int64_t{32} << 30) - HostOverheadBytes(0),
            (int64_t{32} << 30) / kAllocatorMarginDivisor);
  // A refusal names the overhead among the figures.
  ProgramMemoryStats s;
  s.argument_bytes = 1 << 20;
  s.overhead_bytes = HostOverheadBytes(1 << 20);
  Status st = CheckMemoryFits(s, 1 << 20, MemoryBudgetRequest{"prefill", 0, ""});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("buffer cache and allocator"), std::string::npos) << st.message();
}

// A backend whose target has `available` bytes, to refuse without exhausting the machine.
class SmallTarget : public Backend {
 public:
  explicit SmallTarget(int64_t available)
      : inner_(MakeInterpreterBackend()), available_(available) {}
  std::string name() const override { return "small"; }
  std::vector<DeviceInfo> devices() const override { return inner_->devices(); }
  StatusOr<std::unique_ptr<CompiledProgram>> Compile(std::shared_ptr<const Module> module,
                                                     const std::string& entry) override {
    return inner_->Compile(std::move(module), entry);
  }
  StatusOr<std::unique_ptr<DeviceBuffer>> ToDevice(const Literal& l, int device) override {
    return inner_->ToDevice(l, device);
  }
  StatusOr<Literal> ToHost(const DeviceBuffer& b) override { return inner_->ToHost(b); }
  StatusOr<std::vector<std::unique_ptr<DeviceBuffer>>> Execute(
      CompiledProgram& p, const std::vector<ExecuteArg>& args) override {
    return inner_->Execute(p, args);
  }
  StatusOr<ProgramMemoryStats> MemoryStats(CompiledProgram& p) override {
    return inner_->MemoryStats(p);
  }
  StatusOr<int64_t> AvailableDeviceMemory(int) override { return available_; }

 private:
  std::unique_ptr<Backend> inner_;
  int64_t available_;
};

TEST(MemoryBudget, CheckReadsTheBackendAndCanBeTurnedOff) {
  // The peak: 4 KiB argument + 4 KiB output + 16 KiB temporaries - 4 KiB aliased = 20 KiB,
  // plus the host's overhead (buffer cache, allocator margin).
  SmallTarget probe(0);
  auto program = Compile(probe);
  ASSERT_NE(program, nullptr);
  auto stats = probe.MemoryStats(*program);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const int64_t peak = 20 * 1024 + stats->overhead_bytes;
  SmallTarget small(peak - 1);
  MemoryBudgetRequest r{"main", 0, ""};
  Status st = CheckMemoryBudget(small, *program, r);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  r.resident_bytes = 4096;  // the argument is already there
  EXPECT_TRUE(CheckMemoryBudget(small, *program, r).ok());
  r.resident_bytes = 0;
  setenv("TLALOC_MEMORY_CHECK", "0", 1);
  EXPECT_TRUE(CheckMemoryBudget(small, *program, r).ok());
  unsetenv("TLALOC_MEMORY_CHECK");
  SmallTarget big(peak);
  EXPECT_TRUE(CheckMemoryBudget(big, *program, r).ok());
}

TEST(MemoryBudget, HostBackendReportsWhatTheProcessCanTake) {
  auto backend = MakeInterpreterBackend({}, 1);
  auto available = backend->AvailableDeviceMemory(0);
  const std::optional<uint64_t> host = AvailableMemoryBytes();
  if (!host) GTEST_SKIP() << "this system reports no available memory";
  ASSERT_TRUE(available.ok()) << available.status().ToString();
  EXPECT_GT(*available, 0);
  EXPECT_FALSE(backend->AvailableDeviceMemory(1).ok());  // one device
  auto two = MakeInterpreterBackend({}, 2);              // two device threads share the host
  auto half = two->AvailableDeviceMemory(1);
  ASSERT_TRUE(half.ok());
  EXPECT_LT(*half, *available);
}

}  // namespace
}  // namespace tlaloc
