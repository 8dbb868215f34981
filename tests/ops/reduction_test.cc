// Tests of stablehlo.reduce, reduce_window and select_and_scatter.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "reduction_test_util.h"

namespace tlaloc {
namespace {

using rdtest::BinaryRegion;
using rdtest::MakeRegion;
using rdtest::RunOp;
using rdtest::Scalar;
using rdtest::Values;

std::vector<std::unique_ptr<Region>> Regions(std::unique_ptr<Region> a,
                                             std::unique_ptr<Region> b = nullptr) {
  std::vector<std::unique_ptr<Region>> v;
  v.push_back(std::move(a));
  if (b) v.push_back(std::move(b));
  return v;
}

AttrDict Dims(std::vector<int64_t> d) { return {{"dimensions", Attribute::IntArray(d)}}; }

class ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every op is registered: a registry regression must fail here, not skip.
    ASSERT_TRUE(rdtest::HasOps({"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum",
                                "stablehlo.multiply", "stablehlo.or", "stablehlo.and",
                                "stablehlo.compare", "stablehlo.select"}))
        << "an elementwise op used in reduce bodies is not registered";
  }
};

TEST_F(ReduceTest, AddOverEachDimensionMatchesLoop) {
  std::vector<float> x = rdtest::RandomFloats(2 * 3 * 4, 1);
  for (int64_t dim = 0; dim < 3; ++dim) {
    auto out = RunOp("stablehlo.reduce",
                     {Literal::FromVector<float>({2, 3, 4}, x), Literal::Scalar<float>(0.5f)},
                     Dims({dim}), {}, Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<int64_t> in_dims = {2, 3, 4};
    std::vector<int64_t> out_dims;
    for (int64_t d = 0; d < 3; ++d)
      if (d != dim) out_dims.push_back(in_dims[d]);
    EXPECT_EQ((*out)[0].dims(), out_dims);
    std::vector<float> expect(out_dims[0] * out_dims[1], 0.5f);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          int64_t idx[3] = {i, j, k};
          int64_t a = dim == 0 ? idx[1] : idx[0];
          int64_t b = dim == 2 ? idx[1] : idx[2];
          expect[a * out_dims[1] + b] += x[(i * 3 + j) * 4 + k];
        }
    auto got = Values<float>((*out)[0]);
    for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-5) << dim;
  }
}

TEST_F(ReduceTest, GeneralBodyAgreesWithFastPath) {
  std::vector<float> x = rdtest::RandomFloats(5 * 7, 2);
  auto fast = RunOp("stablehlo.reduce",
                    {Literal::FromVector<float>({5, 7}, x), Literal::Scalar<float>(0.0f)},
                    Dims({1}), {}, Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  // add then add 0: not a single-op body, so the interpreter runs the region per element.
  auto body = MakeRegion({Scalar(ElementType::kF32), Scalar(ElementType::kF32)},
                         [](OpBuilder& b, const std::vector<Value>& a) {
                           Value zero = b.CreateOne(
                               "stablehlo.constant", {},
                               {{"value", Attribute::Elements(Literal::Scalar<float>(0.0f))}});
                           Value s = b.CreateOne("stablehlo.add", {a[0], a[1]});
                           return std::vector<Value>{b.CreateOne("stablehlo.add", {s, zero})};
                         });
  auto slow = RunOp("stablehlo.reduce",
                    {Literal::FromVector<float>({5, 7}, x), Literal::Scalar<float>(0.0f)},
                    Dims({1}), {}, Regions(std::move(body)));
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  // The general body reduces pairwise (a different but allowed order): equal up to rounding.
  auto a = Values<float>((*fast)[0]), b = Values<float>((*slow)[0]);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
}

// The trailing-rows fast path (reduction_rows.cc) against the general path, which a reduce of
// the transposed matrix over its first dimension takes: the same elements folded in the same
// order with the same scalar rule, so the bits must match, zero signs and max/min's NaN
// payloads too.
TEST_F(ReduceTest, TrailingRowsFastPathMatchesTheGeneralPathBitForBit) {
  const float nan_a = std::bit_cast<float>(0x7fc00001u), nan_b = std::bit_cast<float>(0xffc00002u);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {nan_a, nan_b, -0.0f, 0.0f, inf, -inf, 3e38f, -3e38f, 1e-40f};
  uint64_t state = 7;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int64_t rows : {1, 3, 8, 13}) {
    for (int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
      for (int variant = 0; variant < 4; ++variant) {
        std::vector<float> x(rows * n);
        for (float& v : x) {
          const uint64_t r = next() >> 33;
          if (variant == 1 && r % 50 == 0)
            v = specials[r / 50 % 9];  // NaNs, infinities, signed zeros sprinkled in
          else if (variant == 2)
            v = r % 2 ? -0.0f : (r % 3 ? 0.0f : -1.0f);  // maxima that are zeros of either sign
          else
            v = static_cast<float>(static_cast<int64_t>(r % 20001) - 10000) * 1.37e-3f;
          if (variant == 3) v = -std::abs(v) - 1.0f;  // all below the init of 0
        }
        std::vector<float> xt(n * rows);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) xt[j * rows + i] = x[i * n + j];
        for (const char* op :
             {"stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum"}) {
          for (float init : {0.0f, -0.0f, 1.0f, -inf, nan_b}) {
            auto fast = RunOp("stablehlo.reduce",
                              {Literal::FromVector<float>({rows, n}, x), Literal::Scalar(init)},
                              Dims({1}), {}, Regions(BinaryRegion(op, ElementType::kF32)));
            auto general = RunOp("stablehlo.reduce",
                                 {Literal::FromVector<float>({n, rows}, xt), Literal::Scalar(init)},
                                 Dims({0}), {}, Regions(BinaryRegion(op, ElementType::kF32)));
            ASSERT_TRUE(fast.ok()) << fast.status().ToString();
            ASSERT_TRUE(general.ok()) << general.status().ToString();
            auto a = Values<float>((*fast)[0]), b = Values<float>((*general)[0]);
            ASSERT_EQ(a.size(), static_cast<size_t>(rows));
            ASSERT_EQ(b.size(), static_cast<size_t>(rows));
            for (int64_t i = 0; i < rows; ++i) {
              // Which NaN an add or multiply of two NaNs returns is the compiler's choice of
              // operand order (it may commute them, in either path); max and min pick by rule.
              const bool any_nan =
                  std::string(op) == "stablehlo.add" || std::string(op) == "stablehlo.multiply";
              if (any_nan && std::isnan(a[i]) && std::isnan(b[i])) continue;
              ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
                  << op << " rows " << rows << " n " << n << " variant " << variant << " init "
                  << init << " row " << i << ": " << a[i] << " vs " << b[i];
            }
          }
        }
      }
    }
  }
}

TEST_F(ReduceTest, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto x = Literal::FromVector<float>({2, 3}, {1, nan, 3, -inf, 2, -0.0f});
  for (const char* op : {"stablehlo.maximum", "stablehlo.minimum"}) {
    auto out = RunOp(
        "stablehlo.reduce",
        {x, Literal::Scalar<float>(std::string(op).find("max") != std::string::npos ? -inf : inf)},
        Dims({1}), {}, Regions(BinaryRegion(op, ElementType::kF32)));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto v = Values<float>((*out)[0]);
    EXPECT_TRUE(std::isnan(v[0])) << op;
    EXPECT_EQ(v[1], std::string(op) == "stablehlo.maximum" ? 2.0f : -inf) << op;
  }
}

TEST_F(ReduceTest, IntegerAddWrapsAndMultiplyWraps) {
  auto x = Literal::FromVector<int8_t>({4}, {100, 100, 27, 1});
  auto out = RunOp("stablehlo.reduce", {x, Literal::Scalar<int8_t>(0)}, Dims({0}), {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kS8)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0])[0], static_cast<int8_t>(228 & 0xff));
  auto y = Literal::FromVector<uint16_t>({3}, {300, 300, 3});
  auto prod = RunOp("stablehlo.reduce", {y, Literal::Scalar<uint16_t>(1)}, Dims({0}), {},
                    Regions(BinaryRegion("stablehlo.multiply", ElementType::kU16)));
  ASSERT_TRUE(prod.ok()) << prod.status().ToString();
  EXPECT_EQ(Values<uint16_t>((*prod)[0])[0], static_cast<uint16_t>((300u * 300u * 3u) & 0xffff));
}

TEST_F(ReduceTest, PredOrAnd) {
  auto x = Literal::FromVector<bool>({2, 3}, {false, true, false, false, false, false});
  auto any = RunOp("stablehlo.reduce", {x, Literal::Scalar<bool>(false)}, Dims({1}), {},
                   Regions(BinaryRegion("stablehlo.or", ElementType::kPred)));
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_EQ(Values<bool>((*any)[0]), (std::vector<bool>{true, false}));
  auto all = RunOp("stablehlo.reduce", {x, Literal::Scalar<bool>(true)}, Dims({0, 1}), {},
                   Regions(BinaryRegion("stablehlo.and", ElementType::kPred)));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)[0].dims(), std::vector<int64_t>{});
  EXPECT_FALSE(Values<bool>((*all)[0])[0]);
}

TEST_F(ReduceTest, Bf16AddRoundsEachStep) {
  // 256 + 1 + 1: each bf16 add of 1 to 256 rounds back to 256 (8 bits of mantissa).
  auto x = Literal::FromVector<bf16>({3}, {bf16(256.0f), bf16(1.0f), bf16(1.0f)});
  auto out = RunOp("stablehlo.reduce", {x, Literal::Scalar<bf16>(bf16(0.0f))}, Dims({0}), {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kBF16)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<bf16>((*out)[0])[0].f(), 256.0f);
}

TEST_F(ReduceTest, EmptyReductionGivesInit) {
  auto x = Literal(TensorType(ElementType::kF32, {3, 0}));
  auto out = RunOp("stablehlo.reduce", {x, Literal::Scalar<float>(7.0f)}, Dims({1}), {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{7, 7, 7}));
}

TEST_F(ReduceTest, DimensionsAsDenseElementsAreAccepted) {
  // Older StableHLO text spells dimensions as dense<[1]> : tensor<1xi64>.
  auto x = Literal::FromVector<float>({2, 2}, {1, 2, 3, 4});
  auto out = RunOp("stablehlo.reduce", {x, Literal::Scalar<float>(0)},
                   {{"dimensions", Attribute::Elements(Literal::FromVector<int64_t>({1}, {1}))}},
                   {}, Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{3, 7}));
}

TEST_F(ReduceTest, BadDimensionsAreErrors) {
  auto x = Literal::FromVector<float>({2, 2}, {1, 2, 3, 4});
  auto out = RunOp("stablehlo.reduce", {x, Literal::Scalar<float>(0)}, Dims({2}), {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("dimension 2"), std::string::npos)
      << out.status().message();
  auto dup = RunOp("stablehlo.reduce", {x, Literal::Scalar<float>(0)}, Dims({0, 0}), {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("repeats"), std::string::npos);
}

TEST_F(ReduceTest, VariadicArgmax) {
  // Returns (max value, its smallest index).
  auto body = MakeRegion(
      {Scalar(ElementType::kF32), Scalar(ElementType::kS32), Scalar(ElementType::kF32),
       Scalar(ElementType::kS32)},
      [](OpBuilder& b, const std::vector<Value>& a) {
        auto cmp = [&](const char* dir, Value x, Value y, const char* type) {
          return b.CreateOne(
              "stablehlo.compare", {x, y},
              {{"comparison_direction", Attribute::Enum(dir, "comparison_direction")},
               {"compare_type", Attribute::Enum(type, "comparison_type")}});
        };
        Value gt = cmp("GT", a[0], a[2], "FLOAT");
        Value eq = cmp("EQ", a[0], a[2], "FLOAT");
        Value lt = cmp("LT", a[1], a[3], "SIGNED");
        Value take_first =
            b.CreateOne("stablehlo.or", {gt, b.CreateOne("stablehlo.and", {eq, lt})});
        return std::vector<Value>{b.CreateOne("stablehlo.select", {gt, a[0], a[2]}),
                                  b.CreateOne("stablehlo.select", {take_first, a[1], a[3]})};
      });
  std::vector<float> x = {3, 9, 1, 9, 2, 0, -1, 5};
  std::vector<int32_t> idx = {0, 1, 2, 3, 0, 1, 2, 3};
  auto out =
      RunOp("stablehlo.reduce",
            {Literal::FromVector<float>({2, 4}, x), Literal::FromVector<int32_t>({2, 4}, idx),
             Literal::Scalar<float>(-std::numeric_limits<float>::infinity()),
             Literal::Scalar<int32_t>(0)},
            Dims({1}), {}, Regions(std::move(body)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{9, 5}));
  EXPECT_EQ(Values<int32_t>((*out)[1]), (std::vector<int32_t>{1, 3}));
}

TEST_F(ReduceTest, VariadicArgmaxOverOddLengthsPicksTheFirstMaximum) {
  // Same body as above, over rows of odd and even lengths with repeated maxima.
  for (int64_t len : {1, 2, 3, 1001, 1024}) {
    auto body = MakeRegion(
        {Scalar(ElementType::kS32), Scalar(ElementType::kS32), Scalar(ElementType::kS32),
         Scalar(ElementType::kS32)},
        [](OpBuilder& b, const std::vector<Value>& a) {
          auto cmp = [&](const char* dir, Value x, Value y) {
            return b.CreateOne(
                "stablehlo.compare", {x, y},
                {{"comparison_direction", Attribute::Enum(dir, "comparison_direction")}});
          };
          Value gt = cmp("GT", a[0], a[2]);
          Value tie = b.CreateOne("stablehlo.and", {cmp("EQ", a[0], a[2]), cmp("LT", a[1], a[3])});
          Value first = b.CreateOne("stablehlo.or", {gt, tie});
          return std::vector<Value>{b.CreateOne("stablehlo.select", {gt, a[0], a[2]}),
                                    b.CreateOne("stablehlo.select", {first, a[1], a[3]})};
        });
    std::vector<int32_t> x(2 * len), idx(2 * len);
    std::vector<int32_t> want_v(2, -1000), want_i(2, 0);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t i = 0; i < len; ++i) {
        int32_t v = static_cast<int32_t>((i * 37 + r * 11) % 53);  // maxima repeat
        x[r * len + i] = v;
        idx[r * len + i] = static_cast<int32_t>(i);
        if (v > want_v[r]) {
          want_v[r] = v;
          want_i[r] = static_cast<int32_t>(i);
        }
      }
    auto out = RunOp(
        "stablehlo.reduce",
        {Literal::FromVector<int32_t>({2, len}, x), Literal::FromVector<int32_t>({2, len}, idx),
         Literal::Scalar<int32_t>(-1000), Literal::Scalar<int32_t>(0)},
        Dims({1}), {}, Regions(std::move(body)));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(Values<int32_t>((*out)[0]), want_v) << len;
    EXPECT_EQ(Values<int32_t>((*out)[1]), want_i) << len;
  }
}

// ---- reduce_window ---------------------------------------------------------------------------

// Direct evaluation of a 2-D windowed sum with padding (zeros) and strides.
std::vector<float> WindowSum2D(const std::vector<float>& x, int64_t h, int64_t w, int64_t wh,
                               int64_t ww, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                               int64_t* oh, int64_t* ow) {
  *oh = (h + 2 * ph - wh) / sh + 1;
  *ow = (w + 2 * pw - ww) / sw + 1;
  std::vector<float> out;
  for (int64_t i = 0; i < *oh; ++i)
    for (int64_t j = 0; j < *ow; ++j) {
      float s = 0;
      for (int64_t a = 0; a < wh; ++a)
        for (int64_t b = 0; b < ww; ++b) {
          int64_t r = i * sh + a - ph, c = j * sw + b - pw;
          if (r >= 0 && r < h && c >= 0 && c < w) s += x[r * w + c];
        }
      out.push_back(s);
    }
  return out;
}

TEST_F(ReduceTest, ReduceWindowSumWithPaddingAndStrides) {
  std::vector<float> x = rdtest::RandomFloats(5 * 6, 3);
  Literal pad = Literal::FromVector<int64_t>({2, 2}, {1, 1, 1, 1});
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({3, 2})},
                 {"window_strides", Attribute::IntArray({2, 1})},
                 {"padding", Attribute::Elements(pad)}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<float>({5, 6}, x), Literal::Scalar<float>(0)}, attrs, {},
                   Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  int64_t oh, ow;
  std::vector<float> expect = WindowSum2D(x, 5, 6, 3, 2, 2, 1, 1, 1, &oh, &ow);
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{oh, ow}));
  auto got = Values<float>((*out)[0]);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-5);
}

TEST_F(ReduceTest, ReduceWindowCumsumAsJaxEmitsIt) {
  // jnp.cumsum lowers to a window of n over n-1 low padding.
  Literal pad = Literal::FromVector<int64_t>({1, 2}, {3, 0});
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({4})},
                 {"padding", Attribute::Elements(pad)}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<int32_t>({4}, {1, 2, 3, 4}), Literal::Scalar<int32_t>(0)},
                   attrs, {}, Regions(BinaryRegion("stablehlo.add", ElementType::kS32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{1, 3, 6, 10}));
}

TEST_F(ReduceTest, ReduceWindowPrefixScanAlongAnInnerAxis) {
  // Cumulative max along axis 0 of a 5x3 tensor (a strided scan).
  std::vector<float> x = rdtest::RandomFloats(5 * 3, 5);
  Literal pad = Literal::FromVector<int64_t>({2, 2}, {4, 0, 0, 0});
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({5, 1})},
                 {"padding", Attribute::Elements(pad)}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<float>({5, 3}, x),
                    Literal::Scalar<float>(-std::numeric_limits<float>::infinity())},
                   attrs, {}, Regions(BinaryRegion("stablehlo.maximum", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = Values<float>((*out)[0]);
  for (int64_t c = 0; c < 3; ++c) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < 5; ++r) {
      m = std::max(m, x[r * 3 + c]);
      EXPECT_EQ(got[r * 3 + c], m) << r << "," << c;
    }
  }
}

TEST_F(ReduceTest, ReduceWindowScanShapeWithNonIdentityInitCountsPadding) {
  // init 1 under add is not an identity: every padding position adds another 1.
  Literal pad = Literal::FromVector<int64_t>({1, 2}, {3, 0});
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({4})},
                 {"padding", Attribute::Elements(pad)}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<int32_t>({4}, {1, 2, 3, 4}), Literal::Scalar<int32_t>(1)},
                   attrs, {}, Regions(BinaryRegion("stablehlo.add", ElementType::kS32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{5, 6, 8, 11}));
}

TEST_F(ReduceTest, ReduceWindowGeneralBodyFoldsLikeTheFastPath) {
  // add then add 0: not a single op, so the body runs vectorised per window position; the fold
  // order per output is the same as the fast path's, so results are identical.
  std::vector<float> x = rdtest::RandomFloats(6 * 5, 9);
  Literal pad = Literal::FromVector<int64_t>({2, 2}, {1, 0, 0, 2});
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({2, 3})},
                 {"window_strides", Attribute::IntArray({1, 2})},
                 {"padding", Attribute::Elements(pad)}};
  auto run = [&](std::unique_ptr<Region> body) {
    return RunOp("stablehlo.reduce_window",
                 {Literal::FromVector<float>({6, 5}, x), Literal::Scalar<float>(-10.0f)}, attrs, {},
                 Regions(std::move(body)));
  };
  auto fast = run(BinaryRegion("stablehlo.add", ElementType::kF32));
  auto general =
      run(MakeRegion({Scalar(ElementType::kF32), Scalar(ElementType::kF32)},
                     [](OpBuilder& b, const std::vector<Value>& a) {
                       Value zero =
                           b.CreateOne("stablehlo.constant", {},
                                       {{"value", Attribute::Elements(Literal::Scalar<float>(0))}});
                       Value s = b.CreateOne("stablehlo.add", {a[0], a[1]});
                       return std::vector<Value>{b.CreateOne("stablehlo.add", {s, zero})};
                     }));
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  ASSERT_TRUE(general.ok()) << general.status().ToString();
  EXPECT_TRUE((*fast)[0].BitwiseEquals((*general)[0]));
}

TEST_F(ReduceTest, ReduceWindowDilations) {
  // base dilation 2 turns [1, 2, 3] into [1, _, 2, _, 3]; a window of 2 with window dilation 2
  // pairs positions (p, p + 2): (1, 2), (_, _), (2, 3) -> max with init -100.
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({2})},
                 {"base_dilations", Attribute::IntArray({2})},
                 {"window_dilations", Attribute::IntArray({2})}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<float>({3}, {1, 2, 3}), Literal::Scalar<float>(-100)},
                   attrs, {}, Regions(BinaryRegion("stablehlo.maximum", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{2, -100, 3}));
}

TEST_F(ReduceTest, ReduceWindowRejectsWrongLengths) {
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({2})}};
  auto out = RunOp("stablehlo.reduce_window",
                   {Literal::FromVector<float>({2, 2}, {1, 2, 3, 4}), Literal::Scalar<float>(0)},
                   attrs, {}, Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("window_dimensions"), std::string::npos)
      << out.status().message();
}

// reduce and reduce_window share their operand and body checks: N inputs of one shape, N scalar
// inits, a body of 2N arguments.
TEST_F(ReduceTest, ReduceAndReduceWindowRefuseBadInputsInitsAndBodies) {
  const Literal x = Literal::FromVector<float>({2, 2}, {1, 2, 3, 4});
  const Literal wide = Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Literal zero = Literal::Scalar<float>(0);
  const Literal zeros = Literal::FromVector<float>({2}, {0, 0});
  const AttrDict window{{"window_dimensions", Attribute::IntArray({1, 1})}};
  for (const std::string name : {"stablehlo.reduce", "stablehlo.reduce_window"}) {
    SCOPED_TRACE(name);
    const AttrDict attrs = name == "stablehlo.reduce" ? Dims({0}) : window;
    struct Case {
      std::vector<Literal> operands;
      std::string expected;
    };
    const std::vector<Case> cases = {
        {{x, zero, zero}, "expected N inputs followed by N init values, got 3"},
        {{x, wide, zero, zero}, "input 1 has shape tensor<2x3xf32>"},
        {{x, zeros}, "init value 0 must be a scalar"},
        {{x, x, zero, zero}, "the body takes 2 arguments, expected 4"},
    };
    for (const Case& c : cases) {
      auto out = RunOp(name, c.operands, attrs, {},
                       Regions(BinaryRegion("stablehlo.add", ElementType::kF32)));
      ASSERT_FALSE(out.ok()) << c.expected;
      EXPECT_NE(out.status().message().find(c.expected), std::string::npos)
          << out.status().message();
    }
  }
}

// ---- select_and_scatter ----------------------------------------------------------------------

TEST_F(ReduceTest, SelectAndScatterRoutesToWindowMax) {
  // 4x4 operand, 2x2 windows with stride 2: each source value lands on its window's maximum
  // (the first one on ties, since GE keeps the current selection).
  std::vector<float> x = {1, 5, 2, 2,  //
                          3, 4, 2, 0,  //
                          9, 0, 7, 8,  //
                          0, 9, 8, 1};
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({2, 2})},
                 {"window_strides", Attribute::IntArray({2, 2})}};
  auto out =
      RunOp("stablehlo.select_and_scatter",
            {Literal::FromVector<float>({4, 4}, x),
             Literal::FromVector<float>({2, 2}, {10, 20, 30, 40}), Literal::Scalar<float>(0)},
            attrs, {},
            Regions(rdtest::CompareRegion("GE", "FLOAT", {ElementType::kF32}),
                    BinaryRegion("stablehlo.add", ElementType::kF32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<float> expect(16, 0);
  expect[1] = 10;   // 5 in the top-left window
  expect[2] = 20;   // first 2 of the tie in the top-right window
  expect[8] = 30;   // 9 (first of two 9s) in the bottom-left window
  expect[11] = 40;  // 8 (first of two 8s, row-major) in the bottom-right window
  EXPECT_EQ(Values<float>((*out)[0]), expect);
}

TEST_F(ReduceTest, SelectAndScatterOverlappingWindowsAccumulate) {
  // Windows of 2 with stride 1 over [1, 3, 2]: both windows pick 3, so it receives 1 + 2.
  AttrDict attrs{{"window_dimensions", Attribute::IntArray({2})}};
  auto out = RunOp("stablehlo.select_and_scatter",
                   {Literal::FromVector<int32_t>({3}, {1, 3, 2}),
                    Literal::FromVector<int32_t>({2}, {1, 2}), Literal::Scalar<int32_t>(100)},
                   attrs, {},
                   Regions(rdtest::CompareRegion("GE", "SIGNED", {ElementType::kS32}),
                           BinaryRegion("stablehlo.add", ElementType::kS32)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{100, 103, 100}));
}

}  // namespace
}  // namespace tlaloc
