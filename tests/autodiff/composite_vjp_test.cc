// Gradients through stablehlo.composite: autodiff differentiates the decomposition in the
// composite's place (src/autodiff/vjp.cc).
#include <gtest/gtest.h>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::autodiff {
namespace {

// f(x, y) = sum(composite(x, y) * 3) with the decomposition x * x * y: df/dx = 6xy, df/dy = 3x^2.
constexpr const char* kProgram = R"(module {
  func.func @f(%x: tensor<3xf64>, %y: tensor<3xf64>) -> tensor<f64> {
    %0 = stablehlo.composite "test.square_times" %x, %y {composite_attributes = {power = 2 : i64}, decomposition = @square_times, version = 1 : i32} : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
    %c = stablehlo.constant dense<3.0> : tensor<3xf64>
    %1 = stablehlo.multiply %0, %c : tensor<3xf64>
    %z = stablehlo.constant dense<0.0> : tensor<f64>
    %2 = stablehlo.reduce(%1 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<3xf64>, tensor<f64>) -> tensor<f64>
    return %2 : tensor<f64>
  }
  func.func private @square_times(%a: tensor<3xf64>, %b: tensor<3xf64>) -> tensor<3xf64> {
    %0 = stablehlo.multiply %a, %a : tensor<3xf64>
    %1 = stablehlo.multiply %0, %b : tensor<3xf64>
    return %1 : tensor<3xf64>
  }
}
)";

TEST(CompositeVjp, DifferentiatesTheDecomposition) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Function* f = (*m)->Find("f");
  ASSERT_NE(f, nullptr);
  auto g = Grad(**m, *f, GradOptions{{0, 1}, 0, nullptr}, "grad");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(Verify(**m).ok());
  const std::vector<double> x = {1.5, -2, 0.25}, y = {2, 0.5, -4};
  auto out = Interpret(**m, "grad",
                       {Literal::FromVector<double>({3}, x), Literal::FromVector<double>({3}, y)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ((*out)[0].span<double>()[i], 6 * x[i] * y[i]);
    EXPECT_DOUBLE_EQ((*out)[1].span<double>()[i], 3 * x[i] * x[i]);
  }
}

TEST(CompositeVjp, AMissingDecompositionIsNamed) {
  std::string text = kProgram;
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok());
  // Rename the decomposition away after parsing, as a pass that dropped it would leave it.
  (*m)->Find("square_times")->set_name("elsewhere");
  auto g = Grad(**m, *(*m)->Find("f"), GradOptions{{0}, 0, nullptr}, "grad");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().ToString().find("@square_times"), std::string::npos)
      << g.status().ToString();
}

}  // namespace
}  // namespace tlaloc::autodiff
