// The thread pool: every item runs exactly once, back-to-back loops (the spinning hand-over)
// lose nothing, nested loops run inline, and several callers share the pool safely.
#include "tlaloc/support/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

// Sanitizer runtimes reserve and map memory of their own, which an address-space limit breaks
// (GCC says __SANITIZE_*__, clang __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TLALOC_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TLALOC_TEST_SANITIZED 1
#endif
#endif

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

#ifndef TLALOC_TEST_SANITIZED
// In a child process: limits the address space to what is mapped now plus 1 MiB (no 8 MiB thread
// stack fits), makes a 4-thread pool and runs a loop on it. Exits 0 when every item ran and the
// pool is smaller than asked, 1 when items were lost, 2 when the limit did not stop a thread.
[[noreturn]] void RunAPoolUnderAnAddressSpaceLimit() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  if (pages <= 0) std::_Exit(3);
  const rlim_t limit = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (1 << 20);
  struct rlimit lim = {limit, limit};
  if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(4);
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  std::_Exit(sum.load() != 999 * 1000 / 2 ? 1 : pool.size() < 4 ? 0 : 2);
}
#endif

// Under an address-space limit with no room for another thread's stack (ulimit -v nearly used
// up by a KV cache), making a pool used to throw std::system_error out of its constructor and
// abort the process; now the pool runs with the threads it could start, the caller's included.
TEST(ThreadPoolTest, AThreadThatCannotStartLeavesASmallerPoolThatStillRunsEverything) {
#ifdef TLALOC_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer runtime maps memory of its own under the address-space limit";
#else
  // A fresh process (threadsafe style re-runs the binary for this test alone): a forked child
  // would inherit glibc's cache of earlier tests' thread stacks and need no new mapping.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RunAPoolUnderAnAddressSpaceLimit(), ::testing::ExitedWithCode(0), "");
#endif
}

}  // namespace
}  // namespace tlaloc
