// ReleasePagesKeepingContents (support/page_release.h): a checkpoint's clean file pages are
// unmapped (the page cache keeps them), anything this process wrote is paged out instead, and
// every byte reads back unchanged either way.
#include "tlaloc/support/page_release.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tlaloc {
namespace {

constexpr size_t kBytes = size_t{64} << 12;  // 64 pages of 4 KiB

std::vector<char> Pattern(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131 + 7);
  return v;
}

TEST(PageRelease, BoundsRoundInwardForInsideAndOutwardForTouching) {
  const uintptr_t page = PageSize();
  ASSERT_GT(page, 0u);
  ASSERT_EQ(page & (page - 1), 0u) << "page size " << page << " is not a power of two";
  const auto at = [](uintptr_t a) { return reinterpret_cast<const void*>(a); };
  const uintptr_t base = 1000 * page;
  // Starting one byte into a page and ending one byte into the third after it.
  PageBounds inside = PagesInside(at(base + 1), 3 * page);
  EXPECT_EQ(inside.begin, base + page);
  EXPECT_EQ(inside.end, base + 3 * page);
  EXPECT_EQ(inside.bytes(), 2 * page);
  PageBounds touching = PagesTouching(at(base + 1), 3 * page);
  EXPECT_EQ(touching.begin, base);
  EXPECT_EQ(touching.end, base + 4 * page);
  // Aligned ranges are their own pages either way; a range within one page holds no whole page.
  EXPECT_EQ(PagesInside(at(base), 2 * page).bytes(), 2 * page);
  EXPECT_EQ(PagesTouching(at(base), 2 * page).bytes(), 2 * page);
  EXPECT_EQ(PagesInside(at(base + 10), 20).bytes(), 0u);
  EXPECT_EQ(PagesTouching(at(base + 10), 20).bytes(), page);
}

TEST(PageRelease, CleanFilePagesAreUnmappedWrittenOnesPagedOutContentsKept) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("tlaloc_page_release_" + std::to_string(::getpid()));
  const std::vector<char> want = Pattern(kBytes);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(want.data(), static_cast<std::streamsize>(want.size()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // As the safetensors reader maps a checkpoint: private, writable, never written.
  void* map = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  char* bytes = static_cast<char*>(map);
  ASSERT_EQ(std::memcmp(bytes, want.data(), kBytes), 0);
  EXPECT_EQ(ReleasePagesKeepingContents(bytes, kBytes), PageRelease::kUnmapped);
  EXPECT_EQ(std::memcmp(bytes, want.data(), kBytes), 0) << "file pages read back";

  // One page written copy-on-write: dropping it would lose the write, so the range is paged out.
  bytes[5 * 4096 + 1] ^= 0x5A;
  std::vector<char> written = want;
  written[5 * 4096 + 1] ^= 0x5A;
  const PageRelease how = ReleasePagesKeepingContents(bytes, kBytes);
  EXPECT_NE(how, PageRelease::kUnmapped);
  EXPECT_EQ(std::memcmp(bytes, written.data(), kBytes), 0) << "the written page kept its write";
  munmap(map, kBytes);
  std::filesystem::remove(path);
}

TEST(PageRelease, AnonymousMemoryKeepsItsContents) {
  std::vector<char> memory = Pattern(kBytes + 4096);
  const std::vector<char> want = memory;
  EXPECT_NE(ReleasePagesKeepingContents(memory.data(), memory.size()), PageRelease::kUnmapped);
  EXPECT_EQ(memory, want);
  // Less than a whole page: nothing to give back.
  EXPECT_EQ(ReleasePagesKeepingContents(memory.data() + 1, 100), PageRelease::kNone);
}

}  // namespace
}  // namespace tlaloc
