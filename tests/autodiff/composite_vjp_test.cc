// Gradients through stablehlo.composite: autodiff differentiates the decomposition in the
// composite's place (src/autodiff/vjp.cc), or uses the composite's own rule where it has one
// (tlaloc.masked_softmax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/builder/tensor.h"
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

// sum(masked_softmax(x, mask) * w) for x [2, 2, 3, 5] f64 and mask [2, 3, 5], as the composite
// or as the ops its decomposition holds, and its gradient with respect to x.
std::vector<double> MaskedSoftmaxGradient(bool composite, const Literal& x, const Literal& mask,
                                          const Literal& w) {
  auto module = std::make_shared<Module>("t");
  {
    FunctionBuilder fb(module.get(), "f");
    Tensor xs = fb.AddArg(x.type()), m = fb.AddArg(mask.type()), ws = fb.AddArg(w.type());
    Tensor probs =
        composite
            ? MaskedSoftmax(xs, m, {0, 2, 3}, -1e30)
            : Softmax(Where(BroadcastInDim(m, xs.dims(), {0, 2, 3}), xs, FullLike(xs, -1e30)), -1);
    EXPECT_TRUE(fb.Return({Sum(probs * ws, {0, 1, 2, 3})}).ok());
  }
  int composites = 0;
  for (const auto& op : module->Find("f")->entry().operations())
    composites += op->name() == "stablehlo.composite";
  EXPECT_EQ(composites, composite ? 1 : 0);
  auto g = Grad(*module, *module->Find("f"), GradOptions{{0}, 0, nullptr}, "grad");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  auto out = Interpret(*module, "grad", {x, mask, w});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  auto span = (*out)[0].span<double>();
  return {span.begin(), span.end()};
}

// The rule written from the result (y * (dy - sum(dy * y)), 0 where masked) against autodiff of
// the decomposition's ops: a partly masked row, a fully masked one (uniform over the fill, whose
// gradient must still be 0) and an unmasked one.
TEST(CompositeVjp, MaskedSoftmaxRuleMatchesTheDecompositionsGradient) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0, 2);
  std::vector<double> xv(2 * 2 * 3 * 5), wv(xv.size());
  for (double& v : xv) v = normal(rng);
  for (double& v : wv) v = normal(rng);
  std::vector<uint8_t> mv(2 * 3 * 5);
  for (size_t i = 0; i < mv.size(); ++i) {
    const size_t row = i / 5 % 3, col = i % 5;
    mv[i] = row == 1 ? 0 : row == 2 ? 1 : col < 3;  // row 1 of each batch: all masked
  }
  Literal mask(TensorType(ElementType::kPred, {2, 3, 5}));
  std::memcpy(mask.data(), mv.data(), mv.size());
  const Literal x = Literal::FromVector<double>({2, 2, 3, 5}, xv),
                w = Literal::FromVector<double>({2, 2, 3, 5}, wv);
  const std::vector<double> rule = MaskedSoftmaxGradient(true, x, mask, w),
                            ops = MaskedSoftmaxGradient(false, x, mask, w);
  ASSERT_EQ(rule.size(), xv.size());
  ASSERT_EQ(ops.size(), xv.size());
  double largest = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool kept = mv[(i / 30) * 15 + i % 15];
    if (!kept) {
      EXPECT_EQ(rule[i], 0.0) << "masked element " << i;
    }
    EXPECT_NEAR(rule[i], ops[i], 1e-12) << "element " << i;
    largest = std::max(largest, std::fabs(rule[i]));
  }
  EXPECT_GT(largest, 0.01);  // the gradient is not trivially zero
}

}  // namespace
}  // namespace tlaloc::autodiff
