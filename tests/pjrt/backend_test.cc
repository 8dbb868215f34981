// The same programs on the interpreter backend and the PJRT backend (Tlaloc's plugin, or the
// TLALOC_TEST_PJRT_TARGET lane): the interpreter is the oracle.
#include <gtest/gtest.h>

#include <cstdio>

#include "pjrt_test_util.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::pjrt {
namespace {

constexpr const char* kPrograms[] = {
    R"(func.func public @main(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.tanh %0 : tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
})",
    R"(func.func public @main(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi1>) {
  %0 = stablehlo.multiply %a, %b : tensor<4xi32>
  %1 = stablehlo.compare GT, %0, %a, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0, %1 : tensor<4xi32>, tensor<4xi1>
})",
};

std::vector<Literal> InputsFor(const Function& f) {
  std::vector<Literal> args;
  int k = 1;
  for (const Type& t : f.argument_types()) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.tensor.num_elements(); ++i) v.push_back((k++ % 7) - 3);
    args.push_back(Literal::FromDoubles(t.tensor.element_type, t.tensor.dims, v));
  }
  return args;
}

class BackendParity : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::Lane lane = testing::TestLane();
    ASSERT_TRUE(lane.error.empty()) << lane.error;
    if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
    SessionOptions o;
    o.target = lane.target;
    auto b = MakePjrtBackend(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    pjrt_ = std::move(*b);
    interp_ = MakeInterpreterBackend();
    exact_ = lane.is_tlaloc_plugin();
  }
  // Tlaloc's plugin runs the interpreter: bit-identical. Another plugin's float results may
  // differ by this many f32 ulps; integers stay exact everywhere.
  static constexpr int64_t kForeignUlps = 4;
  std::unique_ptr<Backend> pjrt_, interp_;
  bool exact_ = true;
};

TEST_F(BackendParity, SameResultsAsTheInterpreter) {
  EXPECT_EQ(pjrt_->name().rfind("pjrt:", 0), 0u);
  for (const char* text : kPrograms) {
    auto parsed = ParseModule(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    std::shared_ptr<const Module> module(std::move(*parsed));
    std::vector<Literal> args = InputsFor(*module->Entry());
    auto p1 = interp_->Compile(module);
    auto p2 = pjrt_->Compile(module);
    ASSERT_TRUE(p1.ok() && p2.ok()) << p2.status().ToString();
    auto want = interp_->Run(**p1, args);
    auto got = pjrt_->Run(**p2, args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(want->size(), got->size());
    for (size_t i = 0; i < want->size(); ++i) {
      if (exact_ || (*want)[i].element_type() != ElementType::kF32) {
        EXPECT_TRUE((*want)[i].BitwiseEquals((*got)[i]))
            << (*want)[i].ToString() << " vs " << (*got)[i].ToString();
        continue;
      }
      // Another compiler's tanh is its own approximation (XLA:CPU: 1 ulp from the
      // interpreter's at tanh(4); docs/PJRT.md, "What XLA:CPU does differently").
      const int64_t ulp = testing::MaxUlpDistance((*want)[i], (*got)[i]);
      std::printf("  %s result %zu: largest difference %lld ulp\n", pjrt_->name().c_str(), i,
                  static_cast<long long>(ulp));
      EXPECT_TRUE(ulp >= 0 && ulp <= kForeignUlps)
          << (*want)[i].ToString() << " vs " << (*got)[i].ToString();
    }
  }
}

TEST_F(BackendParity, DonationFollowsTheCaller) {
  auto parsed = ParseModule(R"(
func.func public @main(%w: tensor<3xf32> {tf.aliasing_output = 0 : i32}, %g: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.subtract %w, %g : tensor<3xf32>
  return %0 : tensor<3xf32>
})");
  ASSERT_TRUE(parsed.ok());
  auto program = pjrt_->Compile(std::shared_ptr<const Module>(std::move(*parsed)));
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto w = pjrt_->ToDevice(Literal::FromVector<float>({3}, {1, 2, 3}));
  auto g = pjrt_->ToDevice(Literal::FromVector<float>({3}, {1, 1, 1}));
  ASSERT_TRUE(w.ok() && g.ok());
  auto kept = pjrt_->Execute(**program, {{w->get(), false}, {g->get(), false}});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_FALSE((*w)->is_deleted());
  auto donated = pjrt_->Execute(**program, {{w->get(), true}, {g->get(), false}});
  ASSERT_TRUE(donated.ok()) << donated.status().ToString();
  EXPECT_TRUE((*w)->is_deleted());
  auto host = pjrt_->ToHost(*(*donated)[0]);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->span<float>()[0], 0.0f);
  auto stats = pjrt_->MemoryStats(**program);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->argument_bytes, 24);
}

TEST(MakeBackend, InterpreterByDefault) {
  auto b = MakeBackend(BackendChoice{});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->name(), "interp");
}

}  // namespace
}  // namespace tlaloc::pjrt
