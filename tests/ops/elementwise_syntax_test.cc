// Pretty syntax of the elementwise ops: the forms JAX emits parse into the generic attributes,
// run, print back in the same form, and bad text fails with a message naming the problem.
#include "elementwise_test_util.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::ewtest {
namespace {

// Every pretty form of the area, as the conformance programs write them.
constexpr const char* kProgram = R"(module @m {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %i: tensor<4xi32>, %lo: tensor<f32>, %hi: tensor<f32>) -> (tensor<4xf32>, tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    %1 = stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %2 = stablehlo.select %1, %a, %b : tensor<4xi1>, tensor<4xf32>
    %3 = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xf32>
    %4 = stablehlo.iota dim = 0 : tensor<4xi32>
    %5 = stablehlo.reduce_precision %a, format = e5m10 : tensor<4xf32>
    %6 = stablehlo.bitcast_convert %a : (tensor<4xf32>) -> tensor<4xi32>
    %7 = stablehlo.clamp %lo, %a, %hi : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %8 = chlo.next_after %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %9 = chlo.lgamma %b : tensor<4xf32> -> tensor<4xf32>
    %10 = stablehlo.compare  EQ, %i, %4 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %11 = stablehlo.is_finite %3 : (tensor<4xf32>) -> tensor<4xi1>
    %12 = stablehlo.convert %a : tensor<4xf32>
    %13 = stablehlo.shift_right_logical %i, %4 : tensor<4xi32>
    return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13 : tensor<4xf32>, tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>
  }
})";

const Operation* FindOp(const Module& m, const std::string& name, int nth = 0) {
  for (const auto& op : m.Find("main")->entry().operations())
    if (op->name() == name && nth-- == 0) return op.get();
  return nullptr;
}

TEST(ElementwiseSyntax, PrettyFormsParseIntoGenericAttributes) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Operation* cmp = FindOp(**m, "stablehlo.compare");
  ASSERT_NE(cmp, nullptr);
  EXPECT_EQ(cmp->attrs().at("comparison_direction"), Attribute::Enum("LT", "comparison_direction"));
  EXPECT_EQ(cmp->attrs().at("compare_type"), Attribute::Enum("FLOAT", "comparison_type"));
  EXPECT_EQ(FindOp(**m, "stablehlo.compare", 1)->attrs().count("compare_type"), 0u);
  const Operation* rp = FindOp(**m, "stablehlo.reduce_precision");
  EXPECT_EQ(rp->attrs().at("exponent_bits"), Attribute::Int(5, ElementType::kS32));
  EXPECT_EQ(rp->attrs().at("mantissa_bits"), Attribute::Int(10, ElementType::kS32));
  EXPECT_EQ(GetIntAttr(FindOp(**m, "stablehlo.iota")->attrs(), "iota_dimension", -1), 0);
}

TEST(ElementwiseSyntax, ParsedProgramRuns) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<Literal> args = {Doubles(ElementType::kF32, {1, 5, -2, 0.5}),
                               Doubles(ElementType::kF32, {2, 3, -2, 4}),
                               Literal::FromVector<int32_t>({4}, {0, 7, 2, -8}),
                               Literal::Scalar(0.0f), Literal::Scalar(2.0f)};
  auto r = Interpret(**m, "main", args);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 14u);
  ExpectDoubles((*r)[0], {3, 8, -4, 4.5}, "add");
  EXPECT_EQ(Elems<bool>((*r)[1]), (std::vector<bool>{true, false, false, true}));
  ExpectDoubles((*r)[2], {1, 3, -2, 0.5}, "select");
  ExpectDoubles((*r)[3], {0, 7, 2, -8}, "convert");
  EXPECT_EQ(Elems<int32_t>((*r)[4]), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Elems<int32_t>((*r)[6])[0], 0x3F800000);
  ExpectDoubles((*r)[7], {1, 2, 0, 0.5}, "clamp");
  EXPECT_EQ(Elems<float>((*r)[8])[2], -2.0f);                  // next_after(x, x) = x
  EXPECT_NEAR(Elems<float>((*r)[9])[1], std::log(2.0), 1e-6);  // lgamma(3) = log 2
  EXPECT_EQ(Elems<bool>((*r)[10]), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(Elems<int32_t>((*r)[13]), (std::vector<int32_t>{0, 3, 0, 0x1FFFFFFF}));
}

TEST(ElementwiseSyntax, PrintsThePrettyFormsBack) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string text = PrintModule(**m);
  for (const char* form :
       {"stablehlo.compare  LT, %arg0, %arg1,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> "
        "tensor<4xi1>",
        "stablehlo.select %1, %arg0, %arg1 : tensor<4xi1>, tensor<4xf32>",
        "stablehlo.iota dim = 0 : tensor<4xi32>",
        "stablehlo.reduce_precision %arg0, format = e5m10 : tensor<4xf32>",
        "stablehlo.convert %arg2 : (tensor<4xi32>) -> tensor<4xf32>",
        "stablehlo.clamp %arg3, %arg0, %arg4 : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> "
        "tensor<4xf32>",
        "chlo.next_after %arg0, %arg1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>",
        "chlo.lgamma %arg1 : tensor<4xf32> -> tensor<4xf32>",
        "stablehlo.add %arg0, %arg1 : tensor<4xf32>"})
    EXPECT_NE(text.find(form), std::string::npos) << "missing `" << form << "` in\n" << text;
  // Printing the re-parsed text gives the same text.
  auto again = ParseModule(text);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(PrintModule(**again), text);
}

TEST(ElementwiseSyntax, BadTextNamesTheProblem) {
  struct Case {
    const char* op_text;
    const char* expect;
  };
  const Case cases[] = {
      {"%0 = stablehlo.compare  XX, %a, %a,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> "
       "tensor<4xi1>",
       "comparison direction"},
      {"%0 = stablehlo.compare  LT, %a, %a,  FLAOT : (tensor<4xf32>, tensor<4xf32>) -> "
       "tensor<4xi1>",
       "comparison type"},
      {"%0 = stablehlo.reduce_precision %a, format = m5e10 : tensor<4xf32>", "e5m10"},
      {"%0 = stablehlo.select %a, %a, %a : tensor<4xi1>, tensor<4xf32>", "predicate"},
      {"%0 = chlo.lgamma %a : tensor<4xf64> -> tensor<4xf64>", "signature"},
      {"%0 = stablehlo.iota dim = 3 : tensor<4xi32>", "out of range"},
  };
  for (const Case& c : cases) {
    std::string text = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  " +
                       std::string(c.op_text) + "\n  return %a : tensor<4xf32>\n}";
    auto m = ParseModule(text);
    ASSERT_FALSE(m.ok()) << c.op_text;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos)
        << c.op_text << " -> " << m.status().message();
  }
}

}  // namespace
}  // namespace tlaloc::ewtest
