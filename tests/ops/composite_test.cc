// stablehlo.composite: the pretty form parses and prints back as StableHLO writes it, the
// verifier checks the decomposition's signature, and the interpreter runs the decomposition.
#include <gtest/gtest.h>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

// The form of StableHLO's own tests (stablehlo/tests/ops_stablehlo.mlir, XLA's composite.mlir).
constexpr const char* kProgram = R"(module @composite {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.composite "my.scaled_add" %arg0, %arg1 {composite_attributes = {alpha = 2.000000e+00 : f32, kind = "axpy"}, decomposition = @my.scaled_add.impl, version = 1 : i32} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @my.scaled_add.impl(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
    %1 = stablehlo.add %0, %arg1 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
)";

TEST(Composite, RunsItsDecomposition) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(Verify(**m).ok());
  auto out = Interpret(**m, "main",
                       {Literal::FromVector<float>({4}, {1, 2, 3, 4}),
                        Literal::FromVector<float>({4}, {0.5f, 0, -1, 10})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto v = (*out)[0].span<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{2.5f, 4, 5, 18}));
}

TEST(Composite, PrintsAsParsed) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string printed = PrintModule(**m);
  EXPECT_NE(printed.find("stablehlo.composite \"my.scaled_add\" %arg0, %arg1 {composite_attributes "
                         "= {alpha = 2.0 : f32, kind = \"axpy\"}, decomposition = "
                         "@my.scaled_add.impl, version = 1 : i32} : (tensor<4xf32>, "
                         "tensor<4xf32>) -> tensor<4xf32>"),
            std::string::npos)
      << printed;
  auto again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(PrintModule(**again), printed);
}

TEST(Composite, GenericFormAndDefaultsParse) {
  // The generic form, and the defaults (no composite_attributes, version 0) left out in print.
  constexpr const char* kGeneric = R"(module {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = "stablehlo.composite"(%arg0) {name = "foo.bar", decomposition = @add, version = 0 : i32, composite_attributes = {}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @add(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<f32>
    return %0 : tensor<f32>
  }
}
)";
  auto m = ParseModule(kGeneric);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string printed = PrintModule(**m);
  EXPECT_NE(printed.find("stablehlo.composite \"foo.bar\" %arg0 {decomposition = @add} : "
                         "(tensor<f32>) -> tensor<f32>"),
            std::string::npos)
      << printed;
  auto out = Interpret(**m, "main", {Literal::Scalar<float>(1.5f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].span<float>()[0], 3.0f);
}

TEST(Composite, VerifierChecksTheDecomposition) {
  std::string missing = kProgram;
  missing.replace(missing.find("decomposition = @my.scaled_add.impl"),
                  std::string("decomposition = @my.scaled_add.impl").size(),
                  "decomposition = @nowhere");
  auto m = ParseModule(missing);
  Status s = m.ok() ? Verify(**m) : m.status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("@nowhere"), std::string::npos) << s.ToString();

  std::string no_name = kProgram;
  no_name.replace(no_name.find("\"my.scaled_add\" "), std::string("\"my.scaled_add\" ").size(), "");
  EXPECT_FALSE(ParseModule(no_name).ok());
}

}  // namespace
}  // namespace tlaloc
