// Checkpoint::PrefaultViews: weights viewed in a mapped shard are in the resident set after it
// (their first product takes no page faults); copies are skipped, and TLALOC_PREFAULT=0 turns
// it off. Checkpoint::ReadAheadViews: a view's pages, dropped from the page cache, are read
// back into it (all of a range longer than one read-ahead window) without entering the
// resident set.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "io_test_util.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {
namespace {

using testing::ResidentBytes;
using testing::TempDir;

// Whether this kernel maps pages on request (MADV_POPULATE_READ, Linux 5.14); before that
// Prefault only reads ahead, which leaves the resident set as it was.
bool KernelPopulates() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool ok = madvise(p, page, 22 /* MADV_POPULATE_READ */) == 0 || errno != EINVAL;
  munmap(p, page);
  return ok;
}

class CheckpointPrefault : public ::testing::Test {
 protected:
  static constexpr int64_t kFloats = 8 << 20;  // 32 MiB
  void SetUp() override {
    unsetenv("TLALOC_PREFAULT");
    std::vector<NamedTensor> tensors = {
        {"a.big", Literal::FromVector<float>({kFloats}, std::vector<float>(kFloats, 0.25f))},
        {"b.small", Literal::FromVector<float>({3}, {1.5f, -2.5f, 3.25f})}};
    ASSERT_TRUE(WriteCheckpoint(dir_.path(), tensors).ok());
    auto ckpt = Checkpoint::Open(dir_.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    ckpt_ = std::move(*ckpt);
  }
  void TearDown() override { unsetenv("TLALOC_PREFAULT"); }
  TempDir dir_;
  Checkpoint ckpt_;
};

TEST_F(CheckpointPrefault, MapsViewedWeightsAndSkipsCopies) {
  if (ResidentBytes() < 0) GTEST_SKIP() << "no /proc/self/statm to read the resident set from";
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_READ (Linux 5.14)";
  auto view = ckpt_.Get("a.big");
  ASSERT_TRUE(view.ok());
  // A copy lives outside the mapping (made without reading the view, which would map it).
  const Literal copy = Literal::FromVector<float>({kFloats}, std::vector<float>(kFloats, 0.25f));
  const int64_t before = ResidentBytes();
  const Literal values[] = {*view, copy};
  EXPECT_EQ(ckpt_.PrefaultViews(values), static_cast<uint64_t>(kFloats * 4));
  const int64_t after = ResidentBytes();
  std::printf("resident %lld -> %lld bytes after prefaulting a %lld-byte view\n",
              static_cast<long long>(before), static_cast<long long>(after),
              static_cast<long long>(kFloats * 4));
  EXPECT_GE(after - before, kFloats * 4 * 3 / 4);
  EXPECT_TRUE(view->BitwiseEquals(copy));  // the view reads the file's values
}

TEST_F(CheckpointPrefault, OffWhenAsked) {
  setenv("TLALOC_PREFAULT", "0", 1);
  auto view = ckpt_.Get("a.big");
  ASSERT_TRUE(view.ok());
  const Literal values[] = {*view};
  EXPECT_EQ(ckpt_.PrefaultViews(values), 0u);
}

// The pages [data, data + bytes) touches, and how many of them (inside a file mapping) are in
// the page cache, by mincore.
int64_t TouchedPages(const std::byte* data, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page * page;
  return static_cast<int64_t>((reinterpret_cast<uintptr_t>(data) + bytes - first + page - 1) /
                              page);
}
int64_t CachedPages(const std::byte* data, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page * page;
  std::vector<unsigned char> in(static_cast<size_t>(TouchedPages(data, bytes)));
  if (mincore(reinterpret_cast<void*>(first), in.size() * page, in.data()) != 0) return -1;
  int64_t count = 0;
  for (unsigned char c : in) count += c & 1;
  return count;
}

TEST_F(CheckpointPrefault, ReadsViewsBackIntoThePageCache) {
  auto view = ckpt_.Get("a.big");
  ASSERT_TRUE(view.ok());
  const int64_t pages = TouchedPages(view->data(), view->byte_size());
  // Drop the file's pages (written back first; clean pages go).
  const std::string file = (dir_.path() / "model.safetensors").string();
  const int fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << file;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  const int64_t dropped = CachedPages(view->data(), view->byte_size());
  ASSERT_GE(dropped, 0) << "mincore failed";
  if (dropped > pages / 2)
    GTEST_SKIP() << "this file system keeps the pages (" << dropped << " of " << pages
                 << " still cached, e.g. tmpfs): nothing to read back";
  const int64_t resident = ResidentBytes();
  const Literal values[] = {*view};
  EXPECT_EQ(ckpt_.ReadAheadViews(values), static_cast<uint64_t>(kFloats * 4));
  // The reads run in the background: wait for them (a few ms for 32 MiB).
  int64_t cached = 0;
  for (int i = 0; i < 500 && cached < pages; ++i) {
    cached = CachedPages(view->data(), view->byte_size());
    if (cached < pages) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("cached pages %lld -> %lld of %lld\n", static_cast<long long>(dropped),
              static_cast<long long>(cached), static_cast<long long>(pages));
  // All of 32 MiB, past any one read-ahead window (128 KiB to 8 MiB).
  EXPECT_EQ(cached, pages);
  // Not mapped into this process.
  if (resident >= 0) {
    EXPECT_LT(ResidentBytes() - resident, kFloats * 4 / 4);
  }
  setenv("TLALOC_PREFAULT", "0", 1);
  EXPECT_EQ(ckpt_.ReadAheadViews(values), 0u);
}

TEST(CheckpointPrefaultImage, InMemoryImageIsNotMapped) {
  std::vector<NamedTensor> tensors = {
      {"x", Literal::FromVector<float>({4096}, std::vector<float>(4096, 7.0f))}};
  auto bytes = SerializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok());
  auto file = SafetensorsFile::FromBytes(*bytes);
  ASSERT_TRUE(file.ok());
  const Literal view = (*file)->Load(*(*file)->Find("x"));
  EXPECT_FALSE((*file)->Prefault(view.data(), static_cast<size_t>(view.byte_size())));
  EXPECT_FALSE((*file)->ReadAhead(view.data(), static_cast<size_t>(view.byte_size())));
  EXPECT_TRUE(view.BitwiseEquals(tensors[0].value));
}

}  // namespace
}  // namespace tlaloc::io
