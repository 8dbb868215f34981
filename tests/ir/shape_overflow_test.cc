// NumElements, byte sizes and strides never overflow silently (signed overflow is undefined),
// and ShapeFits/CheckShape judge a shape by the product of its non-zero dims, so a zero dim
// cannot hide an overflowing product of the others.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "tlaloc/ir/type.h"
#include "tlaloc/support/checked_math.h"

namespace tlaloc {
namespace {

constexpr int64_t k2to40 = int64_t{1} << 40;

TEST(CheckedMath, MulAndAddReportOverflow) {
  int64_t out = 0;
  EXPECT_TRUE(CheckedMul<int64_t>(int64_t{1} << 31, int64_t{1} << 31, &out));
  EXPECT_EQ(out, int64_t{1} << 62);
  EXPECT_FALSE(CheckedMul<int64_t>(4244700928, 1099494850563, &out));  // the gguf_fuzz finding
  EXPECT_FALSE(CheckedAdd<int64_t>(std::numeric_limits<int64_t>::max(), 1, &out));
  uint64_t u = 0;
  EXPECT_FALSE(CheckedAdd<uint64_t>(~uint64_t{0}, 1, &u));
}

TEST(ShapeFits, JudgesNonZeroDims) {
  EXPECT_TRUE(ShapeFits({}));
  EXPECT_TRUE(ShapeFits({2, 3}, 4));
  EXPECT_TRUE(ShapeFits({0, 3, 5}));
  EXPECT_FALSE(ShapeFits({0, k2to40, k2to40}));  // 0 elements, but strides are 2^40 and 2^80
  EXPECT_FALSE(ShapeFits({k2to40, k2to40, 0}));
  EXPECT_FALSE(ShapeFits({int64_t{1} << 31, int64_t{1} << 31}, 2));  // count fits, bytes do not
  EXPECT_FALSE(ShapeFits({-1, 4}));
}

TEST(CheckShape, NamesTheShape) {
  EXPECT_TRUE(CheckShape({2, 3}, ElementType::kF32).ok());
  Status s = CheckShape({0, k2to40, k2to40}, ElementType::kF32);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("0x1099511627776x1099511627776"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("overflows"), std::string::npos) << s.message();
}

TEST(NumElements, ZeroDimShapesStillCount) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({0, k2to40, k2to40}), 0);
  EXPECT_EQ(TensorType(ElementType::kF32, {2, 3}).byte_size(), 24);
}

// An unchecked overflowing shape dies loudly instead of computing with a wrapped product.
TEST(NumElementsDeathTest, OverflowAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)NumElements({k2to40, k2to40, 0}), "element count of shape .* overflows");
  EXPECT_DEATH(
      (void)TensorType(ElementType::kF32, {int64_t{1} << 31, int64_t{1} << 31}).byte_size(),
      "byte size of shape .* overflows");
  EXPECT_DEATH((void)RowMajorStrides({0, k2to40, k2to40}), "stride of shape .* overflows");
}

}  // namespace
}  // namespace tlaloc
