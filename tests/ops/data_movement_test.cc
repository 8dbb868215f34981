// Tests of broadcast_in_dim, reshape, transpose, reverse, slice, concatenate, pad,
// dynamic_slice and dynamic_update_slice. Expected values come from direct index arithmetic
// in the tests (a second, naive implementation), not from the kernels under test.
#include <cmath>
#include <limits>

#include "ops/data_movement_test_util.h"

namespace tlaloc::dmtest {
namespace {

using Dims = std::vector<int64_t>;

Literal IotaF32(Dims dims) {
  Literal l(T(ElementType::kF32, dims));
  auto s = l.span<float>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i) + 0.5f;
  return l;
}

// Multi-index of linear position i in dims.
Dims Unravel(int64_t i, const Dims& dims) {
  Dims idx(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}
int64_t Ravel(const Dims& idx, const Dims& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + idx[d];
  return i;
}

TEST(BroadcastInDim, ReplicatesAlongNewAndUnitDims) {
  Literal in = IotaF32({2, 1});
  auto out = RunOp("stablehlo.broadcast_in_dim", {in},
                   {{"broadcast_dimensions", Attribute::IntArray({0, 2})}},
                   std::vector<Type>{T(ElementType::kF32, {2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  ASSERT_EQ(r.dims(), (Dims{2, 3, 4}));
  for (int64_t i = 0; i < r.num_elements(); ++i) {
    Dims idx = Unravel(i, r.dims());
    EXPECT_EQ(r.span<float>()[i], in.span<float>()[idx[0]]) << i;
  }
}

TEST(BroadcastInDim, ScalarToMatrixForEveryElementType) {
  for (ElementType et : kAllElementTypes) {
    Literal s = Literal::FromDoubles(et, {}, {1});
    auto out = RunOp("stablehlo.broadcast_in_dim", {s},
                     {{"broadcast_dimensions", Attribute::IntArray({})}},
                     std::vector<Type>{T(et, {3, 5})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (int64_t i = 0; i < 15; ++i) EXPECT_EQ((*out)[0].GetAsDouble(i), 1.0) << MlirName(et);
  }
}

TEST(BroadcastInDim, RejectsIncompatibleSizes) {
  auto out = RunOp("stablehlo.broadcast_in_dim", {IotaF32({2})},
                   {{"broadcast_dimensions", Attribute::IntArray({0})}},
                   std::vector<Type>{T(ElementType::kF32, {3})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot broadcast"), std::string::npos)
      << out.status().message();
}

TEST(Reshape, KeepsRowMajorOrderAndChecksCount) {
  Literal in = IotaF32({6});
  auto out = RunOp("stablehlo.reshape", {in}, {}, std::vector<Type>{T(ElementType::kF32, {2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dims(), (Dims{2, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(in));
  auto bad = RunOp("stablehlo.reshape", {in}, {}, std::vector<Type>{T(ElementType::kF32, {4})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot reshape"), std::string::npos);
}

TEST(Transpose, PermutesDimensions) {
  Literal in = IotaF32({2, 3, 4});
  Dims perm = {2, 0, 1};
  auto out = RunOp("stablehlo.transpose", {in}, {{"permutation", Attribute::IntArray(perm)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  ASSERT_EQ(r.dims(), (Dims{4, 2, 3}));
  for (int64_t i = 0; i < r.num_elements(); ++i) {
    Dims ri = Unravel(i, r.dims()), ii(3);
    for (int d = 0; d < 3; ++d) ii[perm[d]] = ri[d];
    EXPECT_EQ(r.span<float>()[i], in.span<float>()[Ravel(ii, in.dims())]);
  }
  auto bad = RunOp("stablehlo.transpose", {in}, {{"permutation", Attribute::IntArray({0, 0, 1})}});
  EXPECT_FALSE(bad.ok());
}

TEST(Transpose, LargeTransposeUsesAllRows) {
  // Big enough to be split over threads.
  Literal in(T(ElementType::kS32, {300, 257}));
  auto s = in.span<int32_t>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int32_t>(i);
  auto out = RunOp("stablehlo.transpose", {in}, {{"permutation", Attribute::IntArray({1, 0})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto r = (*out)[0].span<int32_t>();
  for (int64_t i = 0; i < 257; ++i)
    for (int64_t j = 0; j < 300; ++j) ASSERT_EQ(r[i * 300 + j], s[j * 257 + i]);
}

TEST(Transpose, TiledPathWithOuterDims) {
  // The source is contiguous along result dim 1, not the last: the tiled copy, with a base per
  // outer index and partial tiles at the edges.
  Literal in = IotaF32({3, 45, 70});
  auto out = RunOp("stablehlo.transpose", {in}, {{"permutation", Attribute::IntArray({0, 2, 1})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  ASSERT_EQ(r.dims(), (Dims{3, 70, 45}));
  for (int64_t i = 0; i < r.num_elements(); ++i) {
    Dims ri = Unravel(i, r.dims());
    ASSERT_EQ(r.span<float>()[i], in.span<float>()[Ravel({ri[0], ri[2], ri[1]}, in.dims())]) << i;
  }
}

TEST(Reverse, ReversesChosenDimsInt8) {
  Literal in(T(ElementType::kS8, {2, 3, 4}));
  auto s = in.span<int8_t>();
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int8_t>(i * 5 - 60);
  auto out = RunOp("stablehlo.reverse", {in}, {{"dimensions", Attribute::IntArray({0, 2})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    Dims idx = Unravel(i, in.dims());
    idx[0] = 1 - idx[0];
    idx[2] = 3 - idx[2];
    EXPECT_EQ((*out)[0].span<int8_t>()[i], s[Ravel(idx, in.dims())]);
  }
}

TEST(Slice, StridedSlice) {
  Literal in = IotaF32({5, 7});
  auto out = RunOp("stablehlo.slice", {in},
                   {{"start_indices", Attribute::IntArray({1, 0})},
                    {"limit_indices", Attribute::IntArray({5, 7})},
                    {"strides", Attribute::IntArray({2, 3})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  ASSERT_EQ(r.dims(), (Dims{2, 3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(r.span<float>()[i * 3 + j], in.span<float>()[(1 + 2 * i) * 7 + 3 * j]);
  auto bad = RunOp("stablehlo.slice", {in},
                   {{"start_indices", Attribute::IntArray({0, 0})},
                    {"limit_indices", Attribute::IntArray({6, 7})},
                    {"strides", Attribute::IntArray({1, 1})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dimension 0"), std::string::npos);
}

TEST(Concatenate, JoinsAlongDimension) {
  Literal a = IotaF32({2, 1}), b = IotaF32({2, 3}), c = IotaF32({2, 2});
  auto out = RunOp("stablehlo.concatenate", {a, b, c},
                   {{"dimension", Attribute::Int(1, ElementType::kS64)}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Literal& r = (*out)[0];
  ASSERT_EQ(r.dims(), (Dims{2, 6}));
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.span<float>()[i * 6 + 0], a.span<float>()[i]);
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(r.span<float>()[i * 6 + 1 + j], b.span<float>()[i * 3 + j]);
    for (int64_t j = 0; j < 2; ++j)
      EXPECT_EQ(r.span<float>()[i * 6 + 4 + j], c.span<float>()[i * 2 + j]);
  }
  auto bad = RunOp("stablehlo.concatenate", {a, IotaF32({3, 1})},
                   {{"dimension", Attribute::Int(1, ElementType::kS64)}});
  EXPECT_FALSE(bad.ok());
}

// Naive pad: every result position asks which input element (if any) lands there.
Literal NaivePad(const Literal& in, float value, const Dims& low, const Dims& high,
                 const Dims& interior) {
  Dims od;
  for (size_t d = 0; d < in.dims().size(); ++d) {
    int64_t n = in.dims()[d];
    od.push_back(low[d] + high[d] + n + std::max<int64_t>(n - 1, 0) * interior[d]);
  }
  Literal out(T(ElementType::kF32, od));
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    Dims oi = Unravel(i, od), ii(od.size());
    bool hit = true;
    for (size_t d = 0; d < od.size(); ++d) {
      int64_t p = oi[d] - low[d];
      hit = hit && p >= 0 && p % (interior[d] + 1) == 0 && p / (interior[d] + 1) < in.dims()[d];
      ii[d] = hit ? p / (interior[d] + 1) : 0;
    }
    out.span<float>()[i] = hit ? in.span<float>()[Ravel(ii, in.dims())] : value;
  }
  return out;
}

TEST(Pad, EdgeAndInteriorPaddingIncludingNegative) {
  Literal in = IotaF32({3, 4});
  Literal pv = Literal::Scalar<float>(-7.0f);
  std::vector<std::array<Dims, 3>> cases = {{Dims{1, 2}, Dims{2, 0}, Dims{0, 1}},
                                            {Dims{0, -2}, Dims{0, -3}, Dims{0, 1}},
                                            {Dims{-1, 3}, Dims{-2, -1}, Dims{2, 2}},
                                            {Dims{-3, 0}, Dims{1, -4}, Dims{1, 0}},
                                            {Dims{0, 0}, Dims{0, 0}, Dims{0, 0}}};
  for (const auto& [low, high, interior] : cases) {
    auto out = RunOp("stablehlo.pad", {in, pv},
                     {{"edge_padding_low", Attribute::IntArray(low)},
                      {"edge_padding_high", Attribute::IntArray(high)},
                      {"interior_padding", Attribute::IntArray(interior)}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    Literal want = NaivePad(in, -7.0f, low, high, interior);
    ASSERT_EQ((*out)[0].dims(), want.dims());
    EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want))
        << "low " << low[0] << "," << low[1] << " high " << high[0] << "," << high[1];
  }
  auto bad = RunOp("stablehlo.pad", {in, pv},
                   {{"edge_padding_low", Attribute::IntArray({-5, 0})},
                    {"edge_padding_high", Attribute::IntArray({0, 0})},
                    {"interior_padding", Attribute::IntArray({0, 0})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("negative size"), std::string::npos);
}

TEST(DynamicSlice, ClampsStartIndices) {
  Literal in = IotaF32({4, 5});
  struct Case {
    int32_t r, c;
    int64_t want_r, want_c;
  };
  for (Case k : {Case{1, 2, 1, 2}, Case{-3, 9, 0, 3}, Case{3, 4, 2, 3},
                 Case{std::numeric_limits<int32_t>::min(), 0, 0, 0}}) {
    auto out = RunOp("stablehlo.dynamic_slice",
                     {in, Literal::Scalar<int32_t>(k.r), Literal::Scalar<int32_t>(k.c)},
                     {{"slice_sizes", Attribute::IntArray({2, 2})}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto r = (*out)[0].span<float>();
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_EQ(r[i * 2 + j], in.span<float>()[(k.want_r + i) * 5 + k.want_c + j]);
  }
  auto bad = RunOp("stablehlo.dynamic_slice", {in, Literal::Scalar<int32_t>(0)},
                   {{"slice_sizes", Attribute::IntArray({2, 2})}});
  EXPECT_FALSE(bad.ok());
}

TEST(DynamicUpdateSlice, ClampsAndCopiesWhenOperandIsShared) {
  Literal in = IotaF32({4, 5});
  Literal upd = Literal::FromVector<float>({2, 2}, {-1, -2, -3, -4});
  // `in` is still held here, so the op must not write into it.
  auto out = RunOp("stablehlo.dynamic_update_slice",
                   {in, upd, Literal::Scalar<int64_t>(7), Literal::Scalar<int64_t>(-1)}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Literal want = in.Clone();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      want.span<float>()[(2 + i) * 5 + j] = upd.span<float>()[i * 2 + j];
  EXPECT_EQ(Values<float>((*out)[0]), Values<float>(want));
  EXPECT_EQ(in.span<float>()[10], 10.5f);  // unchanged
  EXPECT_NE((*out)[0].data(), in.data());
}

TEST(DynamicUpdateSlice, UpdatesADonatedOperandInPlace) {
  Literal in = IotaF32({8, 16});
  const std::byte* storage = in.data();
  Literal upd = Literal::FromVector<float>({1, 16}, std::vector<float>(16, 42.0f));
  std::vector<Literal> args;
  args.push_back(std::move(in));  // donated: nobody else holds the buffer
  args.push_back(upd);
  args.push_back(Literal::Scalar<int32_t>(3));
  args.push_back(Literal::Scalar<int32_t>(0));
  auto out = RunOp("stablehlo.dynamic_update_slice", std::move(args), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].data(), storage) << "expected the KV-cache style update to reuse the buffer";
  auto r = (*out)[0].span<float>();
  for (int64_t i = 0; i < 8 * 16; ++i)
    EXPECT_EQ(r[i], i / 16 == 3 ? 42.0f : static_cast<float>(i) + 0.5f) << i;
}

TEST(DataMovement, EveryElementTypeSurvivesTransposeAndSlice) {
  for (ElementType et : kAllElementTypes) {
    std::vector<double> vals;
    for (int i = 0; i < 6; ++i) vals.push_back(et == ElementType::kPred ? i % 2 : i + 1);
    Literal in = Literal::FromDoubles(et, {2, 3}, vals);
    auto t = RunOp("stablehlo.transpose", {in}, {{"permutation", Attribute::IntArray({1, 0})}});
    ASSERT_TRUE(t.ok()) << MlirName(et) << ": " << t.status().ToString();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        EXPECT_EQ((*t)[0].GetAsDouble(i * 2 + j), vals[j * 3 + i]) << MlirName(et);
    auto s = RunOp("stablehlo.slice", {in},
                   {{"start_indices", Attribute::IntArray({1, 1})},
                    {"limit_indices", Attribute::IntArray({2, 3})},
                    {"strides", Attribute::IntArray({1, 1})}});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)[0].GetAsDouble(0), vals[4]);
    EXPECT_EQ((*s)[0].GetAsDouble(1), vals[5]);
  }
}

TEST(DataMovement, SpecialFloatBitsAreCopiedExactly) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  float denorm = std::numeric_limits<float>::denorm_min();
  Literal in = Literal::FromVector<float>({4}, {nan, -inf, -0.0f, denorm});
  auto out = RunOp("stablehlo.reverse", {in}, {{"dimensions", Attribute::IntArray({0})}});
  ASSERT_TRUE(out.ok());
  auto r = (*out)[0].span<float>();
  EXPECT_EQ(r[0], denorm);
  EXPECT_TRUE(std::signbit(r[1]) && r[1] == 0.0f);
  EXPECT_EQ(r[2], -inf);
  EXPECT_TRUE(std::isnan(r[3]));
}

}  // namespace
}  // namespace tlaloc::dmtest
