#include "tlaloc/support/memory_info.h"

#include <gtest/gtest.h>

namespace tlaloc {
namespace {

TEST(MemoryInfo, AvailableBytesArePlausible) {
  auto before = AvailableMemoryBytes();
  ASSERT_TRUE(before.has_value()) << "/proc/meminfo should be readable on Linux";
  EXPECT_GT(*before, uint64_t{16} << 20);
}

TEST(MemoryInfo, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 30), "3.0 GiB");
}

}  // namespace
}  // namespace tlaloc
