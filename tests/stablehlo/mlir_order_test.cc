// Printed text must be what StableHLO's own parser accepts (checked against stablehlo-opt with
// scripts/check_printed_with_stablehlo_opt.sh): generic ops put their regions before the
// attribute dictionary, and calls inside stablehlo regions keep their func. prefix.
#include <gtest/gtest.h>

#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

constexpr const char* kProgram = R"(module @m {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> (tensor<4xf32>, tensor<i32>) {
    %0 = "stablehlo.sort"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = true} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.while(%iterArg = %arg1) : tensor<i32>
     cond {
      %z = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare  LT, %iterArg, %z,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %n = func.call @inc(%iterArg) : (tensor<i32>) -> tensor<i32>
      stablehlo.return %n : tensor<i32>
    }
    return %0, %1 : tensor<4xf32>, tensor<i32>
  }
  func.func private @inc(%arg0: tensor<i32>) -> tensor<i32> {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %r = stablehlo.add %arg0, %one : tensor<i32>
    return %r : tensor<i32>
  }
}
)";

TEST(MlirOrder, RegionsBeforeAttributesAndQualifiedCallsInRegions) {
  auto module = ParseModule(kProgram, "order.mlir");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::string text = PrintModule(**module);
  EXPECT_NE(text.find("}) {dimension = 0"), std::string::npos) << text;
  EXPECT_NE(text.find("func.call @inc"), std::string::npos) << text;
  // Directly in a function body the short forms stay, as JAX writes them.
  EXPECT_NE(text.find("    return "), std::string::npos) << text;
  auto again = ParseModule(text, "printed.mlir");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(PrintModule(**again), text);
}

TEST(MlirOrder, AttributesBeforeRegionsStillParse) {
  std::string legacy = kProgram;
  legacy.replace(legacy.find("}) {dimension = 0 : i64, is_stable = true}"),
                 std::string("}) {dimension = 0 : i64, is_stable = true}").size(), "})");
  legacy.replace(legacy.find("\"stablehlo.sort\"(%arg0)"),
                 std::string("\"stablehlo.sort\"(%arg0)").size(),
                 "\"stablehlo.sort\"(%arg0) {dimension = 0 : i64, is_stable = true}");
  auto module = ParseModule(legacy, "legacy.mlir");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
}

}  // namespace
}  // namespace tlaloc
