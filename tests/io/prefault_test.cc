// Checkpoint::PrefaultViews: weights viewed in a mapped shard are in the resident set after it
// (their first product takes no page faults); copies are skipped, and TLALOC_PREFAULT=0 turns
// it off.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

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

TEST(CheckpointPrefaultImage, InMemoryImageIsNotMapped) {
  std::vector<NamedTensor> tensors = {
      {"x", Literal::FromVector<float>({4096}, std::vector<float>(4096, 7.0f))}};
  auto bytes = SerializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok());
  auto file = SafetensorsFile::FromBytes(*bytes);
  ASSERT_TRUE(file.ok());
  const Literal view = (*file)->Load(*(*file)->Find("x"));
  EXPECT_FALSE((*file)->Prefault(view.data(), static_cast<size_t>(view.byte_size())));
  EXPECT_TRUE(view.BitwiseEquals(tensors[0].value));
}

}  // namespace
}  // namespace tlaloc::io
