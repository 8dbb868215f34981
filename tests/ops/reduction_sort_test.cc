// Tests of stablehlo.sort and chlo.top_k.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "reduction_test_util.h"

namespace tlaloc {
namespace {

using rdtest::CompareRegion;
using rdtest::RunOp;
using rdtest::Values;

std::vector<std::unique_ptr<Region>> One(std::unique_ptr<Region> r) {
  std::vector<std::unique_ptr<Region>> v;
  v.push_back(std::move(r));
  return v;
}

class SortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every op is registered: a registry regression must fail here, not skip.
    ASSERT_TRUE(rdtest::HasOps({"stablehlo.compare"}))
        << "stablehlo.compare (used by comparators) is not registered";
  }
};

TEST_F(SortTest, AscendingAlongEachDimension) {
  std::vector<float> x = rdtest::RandomFloats(4 * 6, 21);
  for (int64_t dim : {0, 1, -1}) {
    auto out = RunOp("stablehlo.sort", {Literal::FromVector<float>({4, 6}, x)},
                     {{"dimension", Attribute::Int(dim)}}, {},
                     One(CompareRegion("LT", "FLOAT", {ElementType::kF32})));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto got = Values<float>((*out)[0]);
    int64_t d = dim < 0 ? dim + 2 : dim;
    // Each line along d must be the sorted version of the input line.
    for (int64_t line = 0; line < (d == 0 ? 6 : 4); ++line) {
      std::vector<float> in_line, out_line;
      for (int64_t i = 0; i < (d == 0 ? 4 : 6); ++i) {
        int64_t off = d == 0 ? i * 6 + line : line * 6 + i;
        in_line.push_back(x[off]);
        out_line.push_back(got[off]);
      }
      std::sort(in_line.begin(), in_line.end());
      EXPECT_EQ(out_line, in_line) << "dim " << dim << " line " << line;
    }
  }
}

TEST_F(SortTest, MultipleOperandsSortStablyByKey) {
  std::vector<int32_t> keys = {3, 1, 3, 2, 1, 3};
  std::vector<int32_t> vals = {0, 1, 2, 3, 4, 5};
  auto out =
      RunOp("stablehlo.sort",
            {Literal::FromVector<int32_t>({6}, keys), Literal::FromVector<int32_t>({6}, vals)},
            {{"dimension", Attribute::Int(0)}, {"is_stable", Attribute::Bool(true)}}, {},
            One(CompareRegion("GT", "SIGNED", {ElementType::kS32, ElementType::kS32})));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{3, 3, 3, 2, 1, 1}));
  EXPECT_EQ(Values<int32_t>((*out)[1]), (std::vector<int32_t>{0, 2, 5, 3, 1, 4}));
}

TEST_F(SortTest, ComparatorOnSecondOperandRunsTheRegion) {
  // The comparator looks at operand 1 (not a fast-path shape): sort keys by their values.
  std::vector<float> a = {10, 20, 30, 40};
  std::vector<uint8_t> b = {3, 0, 2, 1};
  auto out = RunOp("stablehlo.sort",
                   {Literal::FromVector<float>({4}, a), Literal::FromVector<uint8_t>({4}, b)},
                   {{"dimension", Attribute::Int(0)}}, {},
                   One(CompareRegion("LT", "UNSIGNED", {ElementType::kF32, ElementType::kU8},
                                     /*lhs=*/1)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{20, 40, 30, 10}));
  EXPECT_EQ(Values<uint8_t>((*out)[1]), (std::vector<uint8_t>{0, 1, 2, 3}));
}

TEST_F(SortTest, TotalOrderPlacesNaNAndSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto out = RunOp("stablehlo.sort",
                   {Literal::FromVector<float>({6}, {nan, 0.0f, -0.0f, -inf, 1.0f, -nan})},
                   {{"dimension", Attribute::Int(0)}}, {},
                   One(CompareRegion("LT", "TOTALORDER", {ElementType::kF32})));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto v = Values<float>((*out)[0]);
  EXPECT_TRUE(std::isnan(v[0]) && std::signbit(v[0]));
  EXPECT_EQ(v[1], -inf);
  EXPECT_TRUE(v[2] == 0.0f && std::signbit(v[2]));
  EXPECT_TRUE(v[3] == 0.0f && !std::signbit(v[3]));
  EXPECT_EQ(v[4], 1.0f);
  EXPECT_TRUE(std::isnan(v[5]) && !std::signbit(v[5]));
}

TEST_F(SortTest, FloatCompareWithNaNStaysInBounds) {
  // FLOAT LT is not a strict weak order with NaN; the sort must still return a permutation.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {3, nan, 1, nan, 2, 0, nan, -1};
  auto out = RunOp("stablehlo.sort", {Literal::FromVector<float>({8}, x)},
                   {{"dimension", Attribute::Int(0)}}, {},
                   One(CompareRegion("LT", "FLOAT", {ElementType::kF32})));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto v = Values<float>((*out)[0]);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](float f) { return std::isnan(f); }), 3);
}

TEST_F(SortTest, BadDimensionIsAnError) {
  auto out = RunOp("stablehlo.sort", {Literal::FromVector<float>({3}, {1, 2, 3})},
                   {{"dimension", Attribute::Int(1)}}, {},
                   One(CompareRegion("LT", "FLOAT", {ElementType::kF32})));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'dimension'"), std::string::npos);
}

TEST(TopKTest, LargestFirstTiesByIndex) {
  auto out =
      RunOp("chlo.top_k", {Literal::FromVector<int64_t>({2, 4}, {5, 9, 5, 1, -3, -3, 7, -3})},
            {{"k", Attribute::Int(3)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int64_t>((*out)[0]), (std::vector<int64_t>{9, 5, 5, 7, -3, -3}));
  EXPECT_EQ(Values<int32_t>((*out)[1]), (std::vector<int32_t>{1, 0, 2, 2, 0, 1}));
}

TEST(TopKTest, UnsignedAndFloatNaN) {
  auto u = RunOp("chlo.top_k", {Literal::FromVector<uint8_t>({3}, {200, 7, 255})},
                 {{"k", Attribute::Int(2)}});
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(Values<uint8_t>((*u)[0]), (std::vector<uint8_t>{255, 200}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto f = RunOp("chlo.top_k", {Literal::FromVector<float>({3}, {1, nan, 2})},
                 {{"k", Attribute::Int(1)}});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(std::isnan(Values<float>((*f)[0])[0]));
  EXPECT_EQ(Values<int32_t>((*f)[1])[0], 1);
}

// Float rows (f32 and bf16) with repeated values, signed zeros, infinities and NaNs of both
// signs: every k gives the stable descending order in the total order (-NaN < -inf < ... < -0 <
// +0 < ... < +inf < +NaN), ties by the lower index, computed here from the bit patterns.
TEST(TopKTest, FloatRowsFollowTheTotalOrderAtEveryK) {
  const int64_t rows = 3, len = 1000;
  std::vector<float> x = rdtest::RandomFloats(rows * len, 77);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < rows * len; i += 7) x[i] = x[i / 7 % 50];  // repeats
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * len;
    row[3] = 0.0f, row[900] = -0.0f, row[5] = inf, row[6] = -inf, row[700] = -inf;
    row[8] = nan, row[9] = -nan, row[999] = nan;
  }
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    const Literal in = ConvertElementType(Literal::FromVector<float>({rows, len}, x), et);
    const Literal wide = ConvertElementType(in, ElementType::kF32);  // the values compared
    const auto v = wide.span<float>();
    auto key = [&](int64_t i) {  // sign-magnitude bits, as a signed order
      uint32_t u;
      std::memcpy(&u, &v[i], 4);
      const int64_t mag = u & 0x7fffffffu;
      return (u >> 31) ? -mag - 1 : mag;
    };
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{37}, len}) {
      auto out = RunOp("chlo.top_k", {in}, {{"k", Attribute::Int(k)}});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const auto got_idx = Values<int32_t>((*out)[1]);
      const Literal got_values = ConvertElementType((*out)[0], ElementType::kF32);
      ASSERT_EQ(static_cast<int64_t>(got_idx.size()), rows * k);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int64_t> order(len);
        for (int64_t i = 0; i < len; ++i) order[i] = r * len + i;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return key(a) > key(b); });
        for (int64_t i = 0; i < k; ++i) {
          ASSERT_EQ(got_idx[r * k + i], order[i] - r * len)
              << MlirName(et) << " k " << k << " row " << r << " place " << i;
          const float want = v[order[i]], have = got_values.span<float>()[r * k + i];
          EXPECT_EQ(std::memcmp(&want, &have, 4), 0) << "value at place " << i;
        }
      }
    }
  }
}

TEST(TopKTest, KLargerThanDimensionIsAnError) {
  auto out =
      RunOp("chlo.top_k", {Literal::FromVector<float>({3}, {1, 2, 3})}, {{"k", Attribute::Int(4)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("k = 4"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc
