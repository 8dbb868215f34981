#include "tlaloc/ir/typed_builder.h"

#include <gtest/gtest.h>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc {
namespace {

const TensorType kF32x23(ElementType::kF32, {2, 3});

// x [2, 3] . y [3, 2] contracted over x's 1 and y's 0, then summed over the result's rows:
// the helpers' attributes must be the ones the registry and the interpreter read.
TEST(TypedBuilderTest, ContractionAndSumRunWithTheirDimensionNumbers) {
  Module m("t");
  const TensorType yt(ElementType::kF32, {3, 2}), out(ElementType::kF32, {2});
  Function* fn = m.AddFunction("main", {Type(kF32x23), Type(yt)}, {Type(out)});
  OpBuilder b(&fn->entry(), &m);
  Value x = fn->entry().argument(0), y = fn->entry().argument(1);
  Value prod = hlo::DotGeneral(b, x, y, {{}, {}, {1}, {0}});
  Value sum = hlo::SumOver(b, prod, {0});
  b.Create("func.return", {hlo::Add(b, sum, hlo::ZerosLike(b, sum))});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto result = Interpret(m, "main",
                          {Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                           Literal::FromVector<float>({3, 2}, {1, 0, 0, 1, 1, 1})});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // x . y = [[4, 5], [10, 11]]; column sums 14 and 16.
  EXPECT_EQ((*result)[0].span<float>()[0], 14.0f);
  EXPECT_EQ((*result)[0].span<float>()[1], 16.0f);
}

TEST(TypedBuilderTest, CompareTypeFollowsTheElementType) {
  Module m("t");
  const TensorType s32(ElementType::kS32, {2}), u8(ElementType::kU8, {2});
  Function* fn = m.AddFunction("main", {Type(kF32x23), Type(s32), Type(u8)}, {});
  OpBuilder b(&fn->entry(), &m);
  const Block& entry = fn->entry();
  for (int i = 0; i < 3; ++i) {
    Value v = entry.argument(i);
    hlo::Compare(b, v, v, hlo::CompareDirection::kLt);
  }
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const char* want[] = {"FLOAT", "SIGNED", "UNSIGNED"};
  for (int i = 0; i < 3; ++i) {
    const Operation& op = *entry.operations()[i];
    EXPECT_EQ(GetStringAttr(op.attrs(), "compare_type"), want[i]);
    EXPECT_EQ(GetStringAttr(op.attrs(), "comparison_direction"), "LT");
  }
}

TEST(TypedBuilderTest, NoOpCasesEmitNothing) {
  Module m("t");
  Function* fn = m.AddFunction("main", {Type(kF32x23)}, {});
  OpBuilder b(&fn->entry(), &m);
  Value x = fn->entry().argument(0);
  EXPECT_EQ(hlo::SumOver(b, x, {}), x);
  EXPECT_EQ(hlo::Reshape(b, x, kF32x23), x);
  EXPECT_TRUE(fn->entry().operations().empty());
  // Zeros of a scalar is the constant alone; of a tensor, that constant broadcast.
  hlo::Zeros(b, TensorType(ElementType::kF32, {}));
  EXPECT_EQ(fn->entry().operations().size(), 1u);
  hlo::Zeros(b, kF32x23);
  EXPECT_EQ(fn->entry().operations().size(), 3u);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
}

}  // namespace
}  // namespace tlaloc
