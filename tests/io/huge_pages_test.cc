// Checkpoint::CopyOntoHugePages: views of the file move into one block on 2 MiB pages with their
// bits, converted weights stay; the mapped pages they came from leave the resident set (one copy
// resident, not two); TLALOC_HUGE_PAGES=0 and TLALOC_PREFAULT=0 leave them where they are.
#include "tlaloc/support/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "io_test_util.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {
namespace {

using testing::ResidentBytes;
using testing::TempDir;

class CheckpointHugePages : public ::testing::Test {
 protected:
  static constexpr int64_t kFloats = 8 << 20;  // 32 MiB
  void SetUp() override {
    unsetenv("TLALOC_PREFAULT");
    unsetenv("TLALOC_HUGE_PAGES");
    std::vector<float> big(kFloats);
    for (int64_t i = 0; i < kFloats; ++i) big[i] = static_cast<float>(i % 1000) - 0.5f;
    std::vector<NamedTensor> tensors = {{"a.big", Literal::FromVector<float>({kFloats}, big)},
                                        {"b.small", Literal::FromVector<float>({3}, {1, -2, 3})}};
    ASSERT_TRUE(WriteCheckpoint(dir_.path(), tensors).ok());
    auto ckpt = Checkpoint::Open(dir_.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
    ckpt_ = std::move(*ckpt);
  }
  void TearDown() override {
    unsetenv("TLALOC_PREFAULT");
    unsetenv("TLALOC_HUGE_PAGES");
  }
  bool InImage(const Literal& v) const {
    const auto image = ckpt_.shards()[0]->bytes();
    return v.data() >= image.data() && v.data() < image.data() + image.size();
  }
  TempDir dir_;
  Checkpoint ckpt_;
};

TEST_F(CheckpointHugePages, CopiesIntoOneBlockWithTheirBits) {
  if (!HugePagesOffered()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  if (ResidentBytes() < 0) GTEST_SKIP() << "no /proc/self/statm to read the resident set from";
  auto big = ckpt_.Get("a.big");
  auto small = ckpt_.Get("b.small");
  ASSERT_TRUE(big.ok() && small.ok());
  const Literal big_copy = big->Clone(), small_copy = small->Clone();
  std::vector<float> numbers(1 << 20);  // 4 MiB: a converted weight, not a view
  for (size_t i = 0; i < numbers.size(); ++i) numbers[i] = static_cast<float>(i);
  const Literal converted = Literal::FromVector<float>({1 << 20}, numbers);
  std::vector<Literal> values = {*big, converted, *small};
  big = small = Literal();  // the only views left are in `values`
  const int64_t before = ResidentBytes();
  const uint64_t copied = ckpt_.CopyOntoHugePages(values);
  const int64_t after = ResidentBytes();
  std::printf("resident %lld -> %lld bytes copying a %lld-byte view\n",
              static_cast<long long>(before), static_cast<long long>(after),
              static_cast<long long>(kFloats * 4));
  EXPECT_EQ(copied, static_cast<uint64_t>(kFloats * 4 + 64));
  EXPECT_TRUE(values[0].BitwiseEquals(big_copy));
  EXPECT_TRUE(values[1].BitwiseEquals(converted));
  EXPECT_TRUE(values[2].BitwiseEquals(small_copy));
  EXPECT_EQ(values[1].data(), converted.data());  // in memory of its own: left there
  EXPECT_FALSE(InImage(values[0]));
  EXPECT_FALSE(InImage(values[2]));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(values[0].data()) % (uintptr_t{2} << 20), 0u);
  EXPECT_EQ(values[2].data(), values[0].data() + kFloats * 4);  // one block, in order
  // The view's pages (mapped by the Clone above) went as it was copied: one copy resident, not
  // two (the block adds about what the view gives back).
  EXPECT_LT(after - before, kFloats * 4 / 2);
}

TEST_F(CheckpointHugePages, OffWhenAsked) {
  for (const char* name : {"TLALOC_HUGE_PAGES", "TLALOC_PREFAULT"}) {
    setenv(name, "0", 1);
    auto big = ckpt_.Get("a.big");
    ASSERT_TRUE(big.ok());
    std::vector<Literal> values = {*big};
    EXPECT_EQ(ckpt_.CopyOntoHugePages(values), 0u) << name;
    EXPECT_EQ(values[0].data(), big->data()) << name;
    EXPECT_TRUE(InImage(values[0])) << name;
    unsetenv(name);
  }
}

}  // namespace
}  // namespace tlaloc::io
