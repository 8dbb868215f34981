// The buffer cache: freed large blocks come back for requests of the same rounded size, the
// bytes it keeps stay within its capacity (oldest evicted first), and it is off under
// AddressSanitizer.
#include "tlaloc/support/buffer_cache.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

// GCC says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer) (as buffer_cache.cc).
#if defined(__SANITIZE_ADDRESS__)
#define TLALOC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TLALOC_TEST_ASAN 1
#endif
#endif

namespace tlaloc {
namespace {

constexpr size_t kKiB = 1024;

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % BufferCache::kAlignment == 0;
}

TEST(BufferCache, ReleasedBlockComesBackForTheSameSize) {
  BufferCache cache(4096 * kKiB, 64 * kKiB);
  void* a = cache.Allocate(200 * kKiB);
  ASSERT_TRUE(Aligned(a));
  cache.Release(a, 200 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 1u);
  // 200 KiB - 100 bytes rounds up to the same 50 pages.
  void* b = cache.Allocate(200 * kKiB - 100);
  EXPECT_EQ(b, a);
  BufferCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.cached_blocks, 0u);
  EXPECT_EQ(s.cached_bytes, 0u);
  // One more page is another size: a miss.
  void* c = cache.Allocate(200 * kKiB + 100);
  EXPECT_NE(c, b);
  EXPECT_EQ(cache.stats().misses, 2);
  cache.Release(b, 200 * kKiB - 100);
  cache.Release(c, 200 * kKiB + 100);
}

TEST(BufferCache, MostRecentlyReleasedBlockIsReusedFirst) {
  BufferCache cache(4096 * kKiB, 64 * kKiB);
  void* a = cache.Allocate(100 * kKiB);
  void* b = cache.Allocate(100 * kKiB);
  cache.Release(a, 100 * kKiB);
  cache.Release(b, 100 * kKiB);
  EXPECT_EQ(cache.Allocate(100 * kKiB), b);
  EXPECT_EQ(cache.Allocate(100 * kKiB), a);
  cache.Release(a, 100 * kKiB);
  cache.Release(b, 100 * kKiB);
}

TEST(BufferCache, CachedBytesStayWithinCapacityOldestEvictedFirst) {
  // Room for three 64 KiB blocks; five are released.
  BufferCache cache(3 * 64 * kKiB, 64 * kKiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(cache.Allocate(64 * kKiB));
  for (void* p : blocks) cache.Release(p, 64 * kKiB);
  BufferCache::Stats s = cache.stats();
  EXPECT_EQ(s.cached_blocks, 3u);
  EXPECT_EQ(s.cached_bytes, 3 * 64 * kKiB);
  EXPECT_EQ(s.evictions, 2);
  // The three kept are the last three released, newest first.
  EXPECT_EQ(cache.Allocate(64 * kKiB), blocks[4]);
  EXPECT_EQ(cache.Allocate(64 * kKiB), blocks[3]);
  EXPECT_EQ(cache.Allocate(64 * kKiB), blocks[2]);
  EXPECT_EQ(cache.stats().hits, 3);
  for (int i = 2; i < 5; ++i) cache.Release(blocks[i], 64 * kKiB);
}

TEST(BufferCache, MissLeavesBlocksOfOtherSizesCached) {
  BufferCache cache(4096 * kKiB, 64 * kKiB);
  void* a = cache.Allocate(64 * kKiB);
  cache.Release(a, 64 * kKiB);
  // 128 KiB matches no cached size: fresh memory, and the 64 KiB block stays for its next use.
  void* big = cache.Allocate(128 * kKiB);
  EXPECT_NE(big, a);
  BufferCache::Stats s = cache.stats();
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.evictions, 0);
  EXPECT_EQ(s.cached_blocks, 1u);
  EXPECT_EQ(cache.Allocate(64 * kKiB), a);
  cache.Release(a, 64 * kKiB);
  cache.Release(big, 128 * kKiB);
}

TEST(BufferCache, SmallAndOversizedBlocksAreNotKept) {
  BufferCache cache(256 * kKiB, 64 * kKiB);
  void* small = cache.Allocate(1000);
  ASSERT_TRUE(Aligned(small));
  cache.Release(small, 1000);
  void* huge = cache.Allocate(512 * kKiB);
  cache.Release(huge, 512 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 0u);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

TEST(BufferCache, ZeroCapacityKeepsNothing) {
  BufferCache cache(0, 64 * kKiB);
  void* a = cache.Allocate(100 * kKiB);
  cache.Release(a, 100 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 0u);
  EXPECT_EQ(cache.stats().hits, 0);
}

TEST(BufferCache, RaisedCapacityKeepsLargerBlocksAndNeverLowers) {
  BufferCache cache(256 * kKiB, 64 * kKiB);
  void* a = cache.Allocate(512 * kKiB);
  cache.Release(a, 512 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 0u);  // larger than the capacity: freed
  EXPECT_EQ(cache.RaiseCapacity(1024 * kKiB), 1024 * kKiB);
  EXPECT_EQ(cache.RaiseCapacity(128 * kKiB), 1024 * kKiB);  // never lowered
  EXPECT_EQ(cache.capacity_bytes(), 1024 * kKiB);
  void* b = cache.Allocate(512 * kKiB);
  cache.Release(b, 512 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 1u);
  EXPECT_EQ(cache.Allocate(512 * kKiB), b);
  cache.Release(b, 512 * kKiB);
}

TEST(BufferCache, RaiseCapacityLeavesACacheThatIsOff) {
  BufferCache cache(0, 64 * kKiB);
  EXPECT_EQ(cache.RaiseCapacity(1024 * kKiB), 0u);
  void* a = cache.Allocate(100 * kKiB);
  cache.Release(a, 100 * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 0u);
}

TEST(BufferCache, TrimFreesEverything) {
  BufferCache cache(4096 * kKiB, 64 * kKiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(cache.Allocate((64 + 64 * i) * kKiB));
  for (int i = 0; i < 4; ++i) cache.Release(blocks[i], (64 + 64 * i) * kKiB);
  EXPECT_EQ(cache.stats().cached_blocks, 4u);
  cache.Trim();
  EXPECT_EQ(cache.stats().cached_blocks, 0u);
  EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

TEST(BufferCache, ConcurrentUseKeepsBlocksDistinctAndCountsExact) {
  const size_t capacity = 8 * 128 * kKiB;
  BufferCache cache(capacity, 64 * kKiB);
  constexpr int kThreads = 4, kRounds = 500;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        size_t bytes = (64 + 64 * ((r + t) % 2)) * kKiB;
        auto* p = static_cast<unsigned char*>(cache.Allocate(bytes));
        // A block handed to two threads at once would show the other's mark.
        p[0] = static_cast<unsigned char>(t);
        p[bytes - 1] = static_cast<unsigned char>(t);
        std::this_thread::yield();
        if (p[0] != t || p[bytes - 1] != t) ++bad[t];
        cache.Release(p, bytes);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
  BufferCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, kThreads * kRounds);
  EXPECT_GT(s.hits, 0);
  EXPECT_LE(s.cached_bytes, capacity);
}

TEST(BufferCache, GlobalCacheIsOffUnderAddressSanitizer) {
#if defined(TLALOC_TEST_ASAN)
  EXPECT_EQ(BufferCache::Global().capacity_bytes(), 0u);
#else
  GTEST_SKIP() << "not an AddressSanitizer build (TLALOC_SANITIZE=ON or TLALOC_FUZZ=ON)";
#endif
}

TEST(BufferCacheDeathTest, UseAfterFreeOfTensorStorageIsReported) {
#if defined(TLALOC_TEST_ASAN)
  auto read_after_free = [] {
    const volatile std::byte* p = nullptr;
    {
      std::shared_ptr<std::byte> storage = AllocateTensorStorage(256 * 1024, /*zeroed=*/false);
      p = storage.get();
    }
    return static_cast<int>(p[0]);
  };
  EXPECT_DEATH(read_after_free(), "heap-use-after-free");
#else
  GTEST_SKIP() << "not an AddressSanitizer build (TLALOC_SANITIZE=ON or TLALOC_FUZZ=ON)";
#endif
}

}  // namespace
}  // namespace tlaloc
