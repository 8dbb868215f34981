#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc {
namespace {

TEST(IrTest, ConstantFunctionVerifiesAndRuns) {
  Module m("t");
  TensorType t(ElementType::kF32, {3});
  Function* fn = m.AddFunction("main", {}, {Type(t)});
  OpBuilder b(&fn->entry(), &m);
  Value c =
      b.CreateOne("stablehlo.constant", {},
                  {{"value", Attribute::Elements(Literal::FromVector<float>({3}, {1, 2, 3}))}});
  b.Create("func.return", {c});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(Verify(m).ok());
  ExecutionStats stats;
  auto out = Interpret(m, "main", {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].span<float>()[2], 3.0f);
  // The result is the attribute's own literal (no buffer is allocated for it first): 12 bytes.
  EXPECT_EQ(stats.peak_live_bytes, 12);
}

TEST(IrTest, ReturnTypeMismatchIsAnError) {
  Module m("t");
  Function* fn = m.AddFunction("main", {Type(TensorType(ElementType::kF32, {2}))},
                               {Type(TensorType(ElementType::kF32, {3}))});
  OpBuilder b(&fn->entry(), &m);
  b.Create("func.return", {fn->entry().argument(0)});
  Status s = Verify(m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("declared to return"), std::string::npos) << s.message();
}

TEST(IrTest, UnknownOpIsAClearError) {
  Module m("t");
  Function* fn = m.AddFunction("main", {}, {});
  OpBuilder b(&fn->entry(), &m);
  b.Create("stablehlo.no_such_op", {});
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("no_such_op"), std::string::npos);
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(FloatToBf16Bits(1.00390625f), 0x3f80);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);       // rounds to infinity
  EXPECT_EQ(FloatToHalfBits(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(HalfBitsToFloat(0x0001), 5.9604645e-8f);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    if (f != f) continue;
    ASSERT_EQ(FloatToHalfBits(f), h) << h;
  }
}

}  // namespace
}  // namespace tlaloc

namespace tlaloc {
namespace {

// A private function `name` (f32[2] -> f32[2]) whose body calls `callee` when given, else
// returns its argument.
void AddPrivate(Module& m, const std::string& name, const std::string& callee = "") {
  TensorType t(ElementType::kF32, {2});
  Function* fn = m.AddFunction(name, {Type(t)}, {Type(t)});
  fn->set_public(false);
  OpBuilder b(&fn->entry(), &m);
  Value v = fn->entry().argument(0);
  if (!callee.empty())
    v = b.CreateOne("func.call", {v}, {{"callee", Attribute::Symbol(callee)}},
                    std::vector<Type>{Type(t)});
  b.Create("func.return", {v});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
}

std::set<std::string> Names(const Module& m) {
  std::set<std::string> out;
  for (const auto& f : m.functions()) out.insert(f->name());
  return out;
}

TEST(IrTest, RemovesOnlyUnreachedCandidates) {
  Module m("t");
  AddPrivate(m, "used");               // candidate called from main: kept
  AddPrivate(m, "dead", "dead_leaf");  // candidate nothing calls: removed
  AddPrivate(m, "dead_leaf");          // candidate only the removed one calls: removed
  AddPrivate(m, "other");              // not a candidate: kept though nothing calls it
  AddPrivate(m, "nested");             // candidate called from inside main's while body: kept
  TensorType t(ElementType::kF32, {2});
  Function* main = m.AddFunction("main", {Type(t)}, {Type(t)});
  OpBuilder b(&main->entry(), &m);
  Value v = b.CreateOne("func.call", {main->entry().argument(0)},
                        {{"callee", Attribute::Symbol("used")}}, std::vector<Type>{Type(t)});
  b.Create("func.return", {v});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // A symbol reached only through a nested attribute (an array inside a dict) counts too.
  main->entry().operations().front()->attrs()["refs"] =
      Attribute::Dict({{"inner", Attribute::Array({Attribute::String("nested")})}});

  EXPECT_EQ(m.RemoveUnreachableFunctions({"used", "dead", "dead_leaf", "nested"}), 2);
  EXPECT_EQ(Names(m), (std::set<std::string>{"main", "used", "other", "nested"}));
  EXPECT_TRUE(Verify(m).ok());
  EXPECT_EQ(m.RemoveUnreachableFunctions({"used", "nested"}), 0);
}

}  // namespace
}  // namespace tlaloc
