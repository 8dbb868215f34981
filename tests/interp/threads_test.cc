// InterpreterOptions::num_threads: an executable prepared with it runs its large ops on its own
// pool, with the same results, and leaves the process-wide pool alone (never even created).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc {
namespace {

TEST(InterpreterThreads, OwnPoolGivesTheSameResultsWithoutTheSharedPool) {
  // Whether the shared pool exists can only be asked by sizing it, twice with different counts
  // (an existing pool accepts its own size). ctest runs each test in a fresh process, where it
  // does not exist yet; a whole-binary run may have made it in an earlier test.
  auto shared_pool_absent = [] {
    return SetDefaultThreadPoolSize(3).ok() && SetDefaultThreadPoolSize(4).ok();
  };
  if (!shared_pool_absent()) GTEST_SKIP() << "an earlier test made the shared pool";
  constexpr int64_t kN = int64_t{1} << 20;  // large enough to be split over the threads
  auto parsed =
      ParseModule(R"(func.func public @main(%a: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %b = stablehlo.add %a, %a : tensor<1048576xf32>
  return %b : tensor<1048576xf32>
})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  std::shared_ptr<const Module> module(std::move(*parsed));
  InterpreterOptions options;
  options.num_threads = 3;
  auto exe = Executable::Prepare(module, "main", options);
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  Literal a(TensorType(ElementType::kF32, {kN}));
  for (int64_t i = 0; i < kN; ++i) a.span<float>()[i] = static_cast<float>(i % 1000);
  auto out = (*exe)->Execute({std::move(a)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int64_t i = 0; i < kN; ++i)
    ASSERT_EQ((*out)[0].span<const float>()[i], 2.0f * static_cast<float>(i % 1000)) << i;
  EXPECT_TRUE(shared_pool_absent()) << "the run made the shared pool";
}

}  // namespace
}  // namespace tlaloc
