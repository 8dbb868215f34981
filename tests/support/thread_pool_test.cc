// The thread pool: every item runs exactly once, back-to-back loops (the spinning hand-over)
// lose nothing, nested loops run inline, and several callers share the pool safely.
#include "tlaloc/support/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

namespace tlaloc {
namespace {

// The process-wide pool takes the size set before its first use (the CLI's --threads), and a
// later, different size is refused rather than silently ignored. ctest runs each test in its own
// process; when another test in this process already made the pool, there is nothing to check.
TEST(DefaultThreadPoolTest, SizeSetBeforeFirstUseIsKeptAndLaterChangesAreRefused) {
  Status set = SetDefaultThreadPoolSize(3);
  if (!set.ok()) GTEST_SKIP() << "the pool already exists in this process: " << set.message();
  EXPECT_EQ(DefaultThreadPool().size(), 3);
  EXPECT_TRUE(SetDefaultThreadPoolSize(3).ok());
  Status late = SetDefaultThreadPoolSize(5);
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("already runs 3 threads"), std::string::npos) << late.message();
  EXPECT_EQ(DefaultThreadPool().size(), 3);
}

TEST(ThreadPoolTest, EveryItemRunsOnceOverManyBackToBackLoops) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  // Thousands of short loops, as a decode step issues: each hand-over between spinning and
  // sleeping threads must neither drop nor repeat a chunk.
  for (int round = 0; round < 2000; ++round) {
    const int64_t n = 1 + round % 997;
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
  }
  std::vector<int> expected(1000, 0);
  for (int round = 0; round < 2000; ++round)
    for (int64_t i = 0; i < 1 + round % 997; ++i) ++expected[i];
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[i].load(), expected[i]) << "item " << i;
}

TEST(ThreadPoolTest, LoopsAfterALongIdleGapStillRun) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  // Longer than the spin budget: the worker has gone to sleep and must be woken.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 2 * 4950);
}

TEST(ThreadPoolTest, NestedLoopsRunInlineAndConcurrentCallersShareThePool) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r)
        pool.ParallelFor(8, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            pool.ParallelFor(4, 1, [&](int64_t ib, int64_t ie) { total += ie - ib; });
        });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 8 * 4);
}

}  // namespace
}  // namespace tlaloc
