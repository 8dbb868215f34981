// AllocateOnHugePages: 2 MiB-aligned, writable blocks of any size; none for 0 bytes.
#include "tlaloc/support/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

namespace tlaloc {
namespace {

TEST(HugePages, BlocksAreAlignedToTwoMebibytesAndWritable) {
  for (size_t bytes : {size_t{1}, size_t{2} << 20, (size_t{5} << 20) + 3}) {
    std::byte* p = AllocateOnHugePages(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (uintptr_t{2} << 20), 0u) << bytes;
    p[bytes - 1] = std::byte{2};
    p[0] = std::byte{1};
    EXPECT_EQ(p[0], std::byte{1});
    if (bytes > 1) {
      EXPECT_EQ(p[bytes - 1], std::byte{2});
    }
    std::free(p);
  }
  EXPECT_EQ(AllocateOnHugePages(0), nullptr);
}

}  // namespace
}  // namespace tlaloc
