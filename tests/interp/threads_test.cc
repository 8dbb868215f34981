// InterpreterOptions::num_threads: an executable prepared with it runs its large ops on its own
// pool, with the same results, and leaves the process-wide pool alone (never even created).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc {
namespace {

// Whether the shared pool exists can only be asked by sizing it, twice with different counts (an
// existing pool accepts its own size).
bool SharedPoolAbsent() {
  return SetDefaultThreadPoolSize(3).ok() && SetDefaultThreadPoolSize(4).ok();
}

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  std::_Exit(1);
}

// In a process of its own: adds a 2^20-element f32 vector to itself on an executable with a
// 3-thread pool of its own, checks every element, and exits 0 when the results are right and
// the shared pool was never made, else prints why and exits 1.
[[noreturn]] void RunOnAnOwnPool() {
  if (!SharedPoolAbsent()) Fail("the shared pool existed before the run");
  constexpr int64_t kN = int64_t{1} << 20;  // large enough to be split over the threads
  auto parsed =
      ParseModule(R"(func.func public @main(%a: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %b = stablehlo.add %a, %a : tensor<1048576xf32>
  return %b : tensor<1048576xf32>
})");
  if (!parsed.ok()) Fail(parsed.status().ToString());
  std::shared_ptr<const Module> module(std::move(*parsed));
  InterpreterOptions options;
  options.num_threads = 3;
  auto exe = Executable::Prepare(module, "main", options);
  if (!exe.ok()) Fail(exe.status().ToString());
  Literal a(TensorType(ElementType::kF32, {kN}));
  for (int64_t i = 0; i < kN; ++i) a.span<float>()[i] = static_cast<float>(i % 1000);
  auto out = (*exe)->Execute({std::move(a)});
  if (!out.ok()) Fail(out.status().ToString());
  for (int64_t i = 0; i < kN; ++i)
    if ((*out)[0].span<const float>()[i] != 2.0f * static_cast<float>(i % 1000))
      Fail("wrong sum at element " + std::to_string(i));
  if (!SharedPoolAbsent()) Fail("the run made the shared pool");
  std::_Exit(0);
}

TEST(InterpreterThreads, OwnPoolGivesTheSameResultsWithoutTheSharedPool) {
  // The threadsafe style re-runs the binary for this test alone, so the check runs in a fresh
  // process however the binary is run (ctest's one test a process, or the whole binary, where
  // an earlier test may have made the shared pool and a forked child would inherit it).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunOnAnOwnPool(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tlaloc
