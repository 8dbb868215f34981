// StepPorts: each training program's ports sit where the programs have always put them (the
// layout checkpoints of compiled programs and external callers rely on), and only parameters
// and moments alias their updated results.
#include "tlaloc/train/step_ports.h"

#include <gtest/gtest.h>

namespace tlaloc::train {
namespace {

TEST(StepPorts, TrainStepLayout) {
  const size_t n = 5;
  const StepPorts p = StepPorts::TrainStep(n);
  EXPECT_EQ(p.args.size(), 3 * 5 + 3);
  EXPECT_EQ(p.args(Port::kParams, 4), 4);
  EXPECT_EQ(p.args(Port::kM, 0), 5);
  EXPECT_EQ(p.args(Port::kV, 2), 12);
  EXPECT_EQ(p.args(Port::kStep), 15);
  EXPECT_EQ(p.args(Port::kInputIds), 16);
  EXPECT_EQ(p.args(Port::kLabels), 17);
  EXPECT_EQ(p.results.size(), 3 * 5 + 4);
  EXPECT_EQ(p.results(Port::kLoss), 15);
  EXPECT_EQ(p.results(Port::kTokens), 16);
  EXPECT_EQ(p.results(Port::kGradNorm), 17);
  EXPECT_EQ(p.results(Port::kLr), 18);
  EXPECT_FALSE(p.args.has(Port::kGrads));
}

TEST(StepPorts, GradsEvalAndAdamWLayouts) {
  const StepPorts g = StepPorts::Grads(3);
  EXPECT_EQ(g.args(Port::kLabels), 4);
  EXPECT_EQ(g.results(Port::kGrads, 0), 2);
  EXPECT_EQ(g.results.size(), 5);
  const StepPorts e = StepPorts::Eval(3);
  EXPECT_EQ(e.results.size(), 2);
  EXPECT_EQ(e.results(Port::kLoss), 0);
  const StepPorts a = StepPorts::AdamW(3);
  EXPECT_EQ(a.args(Port::kGrads, 1), 4);
  EXPECT_EQ(a.args(Port::kV, 0), 9);
  EXPECT_EQ(a.args(Port::kStep), 12);
  EXPECT_EQ(a.results(Port::kGradNorm), 9);
}

TEST(StepPorts, ParametersAndMomentsAliasTheirUpdates) {
  const size_t n = 2;
  const StepPorts a = StepPorts::AdamW(n);
  Module module("m");
  Function* fn = module.AddFunction(
      "f", std::vector<Type>(a.args.size(), TensorType(ElementType::kF32, {})), {});
  a.SetAliases(*fn);
  auto alias = [&](int arg) { return GetIntAttr(fn->arg_attrs(arg), "tf.aliasing_output", -1); };
  EXPECT_EQ(alias(a.args(Port::kParams, 1)), a.results(Port::kParams, 1));
  EXPECT_EQ(alias(a.args(Port::kM, 0)), a.results(Port::kM, 0));
  EXPECT_EQ(alias(a.args(Port::kV, 1)), a.results(Port::kV, 1));
  EXPECT_EQ(alias(a.args(Port::kGrads, 0)), -1);
  EXPECT_EQ(alias(a.args(Port::kStep)), -1);
}

}  // namespace
}  // namespace tlaloc::train
