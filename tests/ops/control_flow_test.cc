// Tests of stablehlo.while, case, if, optimization_barrier, custom_call and rng_bit_generator.
#include "ops/control_flow_threefry.h"
#include "reduction_test_util.h"

namespace tlaloc {
namespace {

using rdtest::MakeRegion;
using rdtest::RunOp;
using rdtest::Scalar;
using rdtest::Values;

Value Const(OpBuilder& b, Literal l) {
  return b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(std::move(l))}});
}

std::unique_ptr<Region> ConstBranch(int32_t v) {
  return MakeRegion({}, [v](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::Scalar<int32_t>(v))};
  });
}

TEST(WhileTest, SumsBelowALimit) {
  // (i, acc) = (0, 0); while i < 10: acc += i; i += 1.
  std::vector<Type> state = {Scalar(ElementType::kS32), Scalar(ElementType::kS64)};
  auto cond = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>& a) {
    Value lim = Const(b, Literal::Scalar<int32_t>(10));
    return std::vector<Value>{
        b.CreateOne("stablehlo.compare", {a[0], lim},
                    {{"comparison_direction", Attribute::Enum("LT", "comparison_direction")}})};
  });
  auto body = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>& a) {
    Value one = Const(b, Literal::Scalar<int32_t>(1));
    Value i64 =
        b.CreateOne("stablehlo.convert", {a[0]}, {}, std::vector<Type>{Scalar(ElementType::kS64)});
    return std::vector<Value>{b.CreateOne("stablehlo.add", {a[0], one}),
                              b.CreateOne("stablehlo.add", {a[1], i64})};
  });
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(cond));
  regions.push_back(std::move(body));
  auto out = RunOp("stablehlo.while", {Literal::Scalar<int32_t>(0), Literal::Scalar<int64_t>(0)},
                   {}, {}, std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int32_t>((*out)[0])[0], 10);
  EXPECT_EQ(Values<int64_t>((*out)[1])[0], 45);
}

TEST(WhileTest, FalseConditionRunsNoIteration) {
  std::vector<Type> state = {Type(TensorType(ElementType::kF32, {2}))};
  auto cond = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::Scalar<bool>(false))};
  });
  auto body = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::FromVector<float>({2}, {9, 9}))};
  });
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(cond));
  regions.push_back(std::move(body));
  auto out = RunOp("stablehlo.while", {Literal::FromVector<float>({2}, {1, 2})}, {}, {},
                   std::move(regions));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2}));
}

TEST(WhileTest, BodyReturningWrongTypesIsAnError) {
  std::vector<Type> state = {Scalar(ElementType::kF32)};
  auto cond = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::Scalar<bool>(false))};
  });
  auto body = MakeRegion(state, [](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::Scalar<int32_t>(1))};
  });
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(cond));
  regions.push_back(std::move(body));
  auto out = RunOp("stablehlo.while", {Literal::Scalar<float>(0)}, {}, {}, std::move(regions));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("body region returns"), std::string::npos)
      << out.status().message();
}

TEST(CaseTest, SelectsBranchAndClampsOutOfRange) {
  for (auto [index, expect] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 100}, {1, 101}, {2, 102}, {-1, 102}, {7, 102}}) {
    std::vector<std::unique_ptr<Region>> branches;
    for (int32_t v : {100, 101, 102}) branches.push_back(ConstBranch(v));
    auto out =
        RunOp("stablehlo.case", {Literal::Scalar<int32_t>(index)}, {}, {}, std::move(branches));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(Values<int32_t>((*out)[0])[0], expect) << "index " << index;
  }
}

TEST(CaseTest, BranchesMustAgree) {
  std::vector<std::unique_ptr<Region>> branches;
  branches.push_back(ConstBranch(1));
  branches.push_back(MakeRegion({}, [](OpBuilder& b, const std::vector<Value>&) {
    return std::vector<Value>{Const(b, Literal::Scalar<float>(1))};
  }));
  auto out = RunOp("stablehlo.case", {Literal::Scalar<int32_t>(0)}, {}, {}, std::move(branches));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("branch 1 returns"), std::string::npos);
}

TEST(IfTest, PicksBranchByPredicate) {
  for (bool p : {true, false}) {
    std::vector<std::unique_ptr<Region>> branches;
    branches.push_back(ConstBranch(1));
    branches.push_back(ConstBranch(2));
    auto out = RunOp("stablehlo.if", {Literal::Scalar<bool>(p)}, {}, {}, std::move(branches));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(Values<int32_t>((*out)[0])[0], p ? 1 : 2);
  }
}

TEST(OptimizationBarrierTest, PassesValuesThrough) {
  auto out = RunOp("stablehlo.optimization_barrier",
                   {Literal::FromVector<float>({2}, {1, 2}), Literal::Scalar<int8_t>(-3)}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<int8_t>((*out)[1])[0], -3);
}

TEST(CustomCallTest, DispatchesToRegisteredHandler) {
  InterpreterOptions opts;
  opts.custom_calls["test.double"] = [](std::span<const Literal> in, std::vector<Literal>& out) {
    for (int64_t i = 0; i < in[0].num_elements(); ++i)
      out[0].span<float>()[i] = 2 * in[0].span<float>()[i];
    return OkStatus();
  };
  AttrDict attrs{{"call_target_name", Attribute::String("test.double")},
                 {"has_side_effect", Attribute::Bool(false)}};
  auto out = RunOp("stablehlo.custom_call", {Literal::FromVector<float>({3}, {1, 2, -4})}, attrs,
                   std::vector<Type>{Type(TensorType(ElementType::kF32, {3}))}, {}, opts);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{2, 4, -8}));
}

TEST(CustomCallTest, UnregisteredTargetIsANamedError) {
  AttrDict attrs{{"call_target_name", Attribute::String("no.such.kernel")}};
  auto out = RunOp("stablehlo.custom_call", {Literal::Scalar<float>(1)}, attrs,
                   std::vector<Type>{Scalar(ElementType::kF32)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("@no.such.kernel"), std::string::npos)
      << out.status().message();
}

TEST(CustomCallTest, HandlerErrorsPropagate) {
  InterpreterOptions opts;
  opts.custom_calls["test.fail"] = [](std::span<const Literal>, std::vector<Literal>&) {
    return InvalidArgument("boom");
  };
  AttrDict attrs{{"call_target_name", Attribute::String("test.fail")}};
  auto out = RunOp("stablehlo.custom_call", {Literal::Scalar<float>(1)}, attrs, std::vector<Type>{},
                   {}, opts);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("boom"), std::string::npos);
}

// ---- rng_bit_generator -----------------------------------------------------------------------

TEST(ThreefryTest, KnownAnswerVectors) {
  // Random123's known-answer tests for threefry2x32 with 20 rounds.
  EXPECT_EQ(ops::Threefry2x32(0, 0, 0, 0), std::make_pair(0x6b200159u, 0x99ba4efeu));
  EXPECT_EQ(ops::Threefry2x32(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu),
            std::make_pair(0x1cb996fcu, 0xbb002be7u));
  EXPECT_EQ(ops::Threefry2x32(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u),
            std::make_pair(0xc4923a9cu, 0x483df7a0u));
}

AttrDict ThreeFry() { return {{"rng_algorithm", Attribute::Enum("THREE_FRY", "rng_algorithm")}}; }

TEST(RngBitGeneratorTest, U64OutputsFollowTheCounter) {
  const uint64_t key = 0x0000000400000001ull, counter = 0x0000000100000000ull;
  Type state(TensorType(ElementType::kU64, {2}));
  Type bits(TensorType(ElementType::kU64, {3, 5}));
  auto out =
      RunOp("stablehlo.rng_bit_generator", {Literal::FromVector<uint64_t>({2}, {key, counter})},
            ThreeFry(), std::vector<Type>{state, bits});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint64_t>((*out)[0]), (std::vector<uint64_t>{key, counter + 15}));
  auto v = Values<uint64_t>((*out)[1]);
  for (uint64_t i = 0; i < 15; ++i) {
    uint64_t c = counter + i;
    auto [lo, hi] = ops::Threefry2x32(static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32),
                                      static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32));
    EXPECT_EQ(v[i], static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32)) << i;
  }
}

TEST(RngBitGeneratorTest, U32OutputsPairWordsAlongTheSplitDimension) {
  // Shape [3, 2]: dimension 1 (the first even one) is halved, so row r holds both words of
  // counter r, and the state advances by 3.
  Type state(TensorType(ElementType::kU64, {2}));
  Type bits(TensorType(ElementType::kU32, {3, 2}));
  auto out = RunOp("stablehlo.rng_bit_generator", {Literal::FromVector<uint64_t>({2}, {0, 0})},
                   ThreeFry(), std::vector<Type>{state, bits});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint64_t>((*out)[0]), (std::vector<uint64_t>{0, 3}));
  auto v = Values<uint32_t>((*out)[1]);
  EXPECT_EQ(v[0], 0x6b200159u);  // the (0, 0) known answer
  EXPECT_EQ(v[1], 0x99ba4efeu);
  for (uint32_t r = 0; r < 3; ++r) {
    auto [w0, w1] = ops::Threefry2x32(0, 0, r, 0);
    EXPECT_EQ(v[2 * r], w0);
    EXPECT_EQ(v[2 * r + 1], w1);
  }
}

TEST(RngBitGeneratorTest, OddShapeDropsTheLastSecondWord) {
  Type state(TensorType(ElementType::kU64, {2}));
  Type bits(TensorType(ElementType::kU32, {3}));
  auto out = RunOp("stablehlo.rng_bit_generator", {Literal::FromVector<uint64_t>({2}, {5, 7})},
                   ThreeFry(), std::vector<Type>{state, bits});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint64_t>((*out)[0])[1], 9u);  // two threefry calls for three outputs
  auto v = Values<uint32_t>((*out)[1]);
  EXPECT_EQ(v[2], ops::Threefry2x32(5, 0, 8, 0).first);
}

TEST(RngBitGeneratorTest, OtherAlgorithmsAreClearErrors) {
  Type state(TensorType(ElementType::kU64, {2}));
  Type bits(TensorType(ElementType::kU32, {4}));
  auto out = RunOp("stablehlo.rng_bit_generator", {Literal::FromVector<uint64_t>({2}, {0, 0})},
                   {{"rng_algorithm", Attribute::Enum("PHILOX", "rng_algorithm")}},
                   std::vector<Type>{state, bits});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("PHILOX"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc
