// Proof that the ThreadSanitizer pass of scripts/test.sh can fail: a deliberate data race in a
// death-test child must be reported. Without it, a TSan tree that silently lost its
// instrumentation (a flag dropped from CMake) would pass every race-prone test.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <thread>

// GCC says __SANITIZE_THREAD__, clang __has_feature(thread_sanitizer).
#if defined(__SANITIZE_THREAD__)
#define TLALOC_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TLALOC_UNDER_TSAN 1
#endif
#endif

namespace {

// Two threads write one int with no synchronisation: the textbook race TSan must flag.
[[maybe_unused]] void RaceOnAnInt() {
  static int shared = 0;
  std::thread writer([] {
    for (int i = 0; i < 1000; ++i) shared = shared + 1;
  });
  for (int i = 0; i < 1000; ++i) shared = shared + 1;
  writer.join();
  std::exit(0);  // reaching here means TSan said nothing
}

TEST(ThreadSanitizerDeathTest, AnUnsynchronisedWriteIsReported) {
#ifndef TLALOC_UNDER_TSAN
  GTEST_SKIP() << "not a ThreadSanitizer build (scripts/test.sh runs it in build-tsan/)";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto failed = [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); };
  EXPECT_EXIT(RaceOnAnInt(), failed, "ThreadSanitizer: data race");
#endif
}

}  // namespace
