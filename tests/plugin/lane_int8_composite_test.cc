// stablehlo.composite on the TLALOC_TEST_PJRT_TARGET lane's plugin (Tlaloc's own by default,
// XLA:CPU with xla-cpu): a program with a composite compiles and runs (XLA lowers it to a call of
// its decomposition), and the int8 linear's q8_0 composite (nn/int8_linear.h) gives what the
// interpreter gives. Tlaloc's plugin runs the interpreter: the same bits. XLA:CPU runs the
// decomposition with its own code; the test records how many elements differ and by how much.
// (Measured: XLA:CPU contracts the block's multiply into the add of the block reduce, an FMA,
// and with more than two blocks sums them in another order as well: about half the elements
// differ, by up to ~1e-4 relative on small values; a k of two blocks matches an in-order FMA
// sum exactly.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/support/half.h"

namespace tlaloc::pjrt {
namespace {

class LaneComposite : public ::testing::Test {
 protected:
  void SetUp() override {
    const testing::Lane lane = testing::TestLane();
    ASSERT_TRUE(lane.error.empty()) << lane.error;
    if (!lane.skip.empty()) GTEST_SKIP() << lane.skip;
    exact_ = lane.is_tlaloc_plugin();
    SessionOptions o;
    o.target = lane.target;
    auto s = PjrtSession::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    platform_ = (*s)->platform_name() + " (" + lane.target.ToString() + ")";
    backend_ = MakePjrtBackend(std::move(*s));
  }
  void RunBoth(std::shared_ptr<Module> module, const std::vector<Literal>& args,
               std::vector<Literal>* plugin, std::vector<Literal>* interp) {
    auto want = Interpret(*module, module->Entry()->name(), args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto program = backend_->Compile(module);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto got = backend_->Run(**program, args);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    *plugin = std::move(*got);
    *interp = std::move(*want);
  }
  std::unique_ptr<Backend> backend_;
  std::string platform_;
  bool exact_ = true;
};

TEST_F(LaneComposite, ACompositeRunsItsDecomposition) {
  auto m = ParseModule(R"(module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.composite "my.scaled_add" %arg0, %arg1 {composite_attributes = {alpha = 2.0 : f32}, decomposition = @scaled_add, version = 1 : i32} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @scaled_add(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<2.0> : tensor<4xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
    %1 = stablehlo.add %0, %arg1 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
)");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<Literal> got, want;
  RunBoth(std::shared_ptr<Module>(std::move(*m)),
          {Literal::FromVector<float>({4}, {1, 2, 3, 4}),
           Literal::FromVector<float>({4}, {0.5f, 0, -1, 10})},
          &got, &want);
  ASSERT_EQ(got.size(), 1u);
  auto v = got[0].span<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{2.5f, 4, 5, 18}));
}

TEST_F(LaneComposite, Int8LinearQ8_0MatchesTheInterpreter) {
  struct Shape {
    int64_t m, k, n;
  };
  for (const Shape& s : {Shape{1, 1024, 96}, Shape{2, 64, 33}, Shape{13, 256, 70}}) {
    std::mt19937 rng(static_cast<uint32_t>(s.m * 1000 + s.n));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> qd(-127, 127);
    std::uniform_real_distribution<float> sd(0.001f, 0.02f);
    Literal x(TensorType(ElementType::kF32, {s.m, s.k}));
    Literal q(TensorType(ElementType::kS8, {s.n, s.k}));
    Literal scale(TensorType(ElementType::kF16, {s.n, s.k / 32}));
    for (auto& v : x.span<float>()) v = nd(rng);
    for (auto& v : q.span<int8_t>()) v = static_cast<int8_t>(qd(rng));
    for (auto& v : scale.span<uint16_t>()) v = FloatToHalfBits(sd(rng));
    auto module = std::make_shared<Module>("int8_linear");
    FunctionBuilder fb(module.get(), "main", {Type(x.type()), Type(q.type()), Type(scale.type())});
    ASSERT_TRUE(fb.Return({nn::Int8LinearQ8_0(fb.arg(0), fb.arg(1), fb.arg(2))}).ok());
    std::vector<Literal> got, want;
    RunBoth(module, {x, q, scale}, &got, &want);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].type(), want[0].type());
    int64_t differing = 0;
    double worst = 0;
    for (int64_t i = 0; i < want[0].num_elements(); ++i) {
      const float a = got[0].span<float>()[i], b = want[0].span<float>()[i];
      if (std::memcmp(&a, &b, sizeof a) != 0) ++differing;
      worst = std::max(worst, std::fabs(double{a} - b) / (1e-3 + std::fabs(double{b})));
    }
    const std::string what =
        std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    RecordProperty("differing_" + what, std::to_string(differing));
    std::printf("  %s: int8_linear q8_0 %s: %lld of %lld elements differ, worst relative %.3g\n",
                platform_.c_str(), what.c_str(), static_cast<long long>(differing),
                static_cast<long long>(want[0].num_elements()), worst);
    if (exact_) {
      EXPECT_EQ(differing, 0) << what;
    }
    // Another compiler may order the block sum differently or contract multiply and add; a
    // quant off by one (a rounding tie decided otherwise) moves a result by ~1/127 of a block.
    EXPECT_LT(worst, 1e-2) << what;
  }
}

}  // namespace
}  // namespace tlaloc::pjrt
