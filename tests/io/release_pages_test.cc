// Checkpoint::ReleasePages: a mapped tensor's pages leave the resident set (what keeps stacked
// experts from being resident twice at load) and read back unchanged from the file afterwards;
// its neighbours and in-memory images are untouched.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "io_test_util.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {
namespace {

using testing::ResidentBytes;
using testing::TempDir;

double Sum(const Literal& l) {
  double s = 0;
  for (float x : l.span<float>()) s += x;
  return s;
}

TEST(CheckpointReleasePages, DropsTheTensorsPagesAndRereadsThemFromTheFile) {
  if (ResidentBytes() < 0) GTEST_SKIP() << "no /proc/self/statm to read the resident set from";
  constexpr int64_t kFloats = 8 << 20;  // 32 MiB
  std::vector<float> big(kFloats), small = {1.5f, -2.5f, 3.25f};
  for (int64_t i = 0; i < kFloats; ++i) big[i] = static_cast<float>(i % 1000) * 0.5f;
  TempDir dir;
  std::vector<NamedTensor> tensors = {{"a.big", Literal::FromVector<float>({kFloats}, big)},
                                      {"b.small", Literal::FromVector<float>({3}, small)}};
  const double want = Sum(tensors[0].value);
  ASSERT_TRUE(WriteCheckpoint(dir.path(), tensors).ok());
  tensors.clear();
  big.clear();
  big.shrink_to_fit();
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  auto view = ckpt->Get("a.big");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(Sum(*view), want);  // touches every page
  const int64_t touched = ResidentBytes();
  ckpt->ReleasePages("a.big");
  const int64_t released = ResidentBytes();
  std::printf("resident %lld -> %lld bytes after releasing a %lld-byte tensor\n",
              static_cast<long long>(touched), static_cast<long long>(released),
              static_cast<long long>(kFloats * 4));
  EXPECT_GE(touched - released, kFloats * 4 * 3 / 4);
  // Read again: the same bits, from the file.
  EXPECT_EQ(Sum(*view), want);
  auto neighbour = ckpt->Get("b.small");
  ASSERT_TRUE(neighbour.ok());
  EXPECT_EQ(std::vector<float>(neighbour->span<float>().begin(), neighbour->span<float>().end()),
            small);
  ckpt->ReleasePages("no.such.tensor");  // nothing
}

TEST(CheckpointReleasePages, LeavesAnInMemoryImageAlone) {
  std::vector<NamedTensor> tensors = {
      {"x", Literal::FromVector<float>({4096}, std::vector<float>(4096, 7.0f))}};
  auto bytes = SerializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok());
  auto file = SafetensorsFile::FromBytes(*bytes);
  ASSERT_TRUE(file.ok());
  const SafetensorsTensorInfo* info = (*file)->Find("x");
  ASSERT_NE(info, nullptr);
  (*file)->ReleasePages(*info);
  EXPECT_TRUE((*file)->Load(*info).BitwiseEquals(tensors[0].value));
}

}  // namespace
}  // namespace tlaloc::io
