// The builder's and nn's named composites (builder/composite.h: tlaloc.rms_norm,
// tlaloc.silu_and_mul, tlaloc.rotary, tlaloc.argmax; nn/paged_attention.h: tlaloc.paged_dot;
// nn/int8_linear.h: tlaloc.int8_linear in the exact form) on the TLALOC_TEST_PJRT_TARGET lane's
// plugin: the module as printed compiles and
// runs (XLA lowers each composite to a call of its decomposition) and gives what the interpreter
// gives, which runs the composite as its kernel with the decomposition's bits. Tlaloc's plugin
// runs the interpreter: the same bits. XLA:CPU runs the decompositions with its own code (its
// reduce may sum a row in another order, its rsqrt, logistic and exponential are its own
// approximations, it may contract a product and a sum into an FMA): the test prints how many
// elements differ and asserts a difference (absolute below 1, relative above) under 1e-5 in f32
// and under 2^-7 in bf16 (two bf16 steps: an f32 value may cross one rounding boundary before
// the bf16 product). The rotary's cos and sin tables are inputs, so only the composite is
// compared, not XLA's cos and sin of large angles. (Measured on XLA:CPU, lammps-jax-pjrt-cpu
// 0.11.2: in f32 a third to two thirds of the elements differ, by at most 2.6e-7 relative; bf16
// results are identical.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/builder/composite.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/paged_attention.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/support/half.h"

namespace tlaloc::pjrt {
namespace {

float ValueAt(const Literal& l, int64_t i) {
  if (l.element_type() == ElementType::kF32) return l.span<float>()[i];
  if (l.element_type() == ElementType::kS32) return static_cast<float>(l.span<int32_t>()[i]);
  return Bf16BitsToFloat(reinterpret_cast<const uint16_t*>(l.data())[i]);
}

Literal Random(const TensorType& t, uint32_t seed, float mean = 0.0f, float stddev = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(mean, stddev);
  Literal l(t);
  for (int64_t i = 0; i < l.num_elements(); ++i) {
    const float v = nd(rng);
    if (t.element_type == ElementType::kF32)
      l.span<float>()[i] = v;
    else
      reinterpret_cast<uint16_t*>(l.data())[i] = FloatToBf16Bits(v);
  }
  return l;
}

class LaneNnComposite : public ::testing::Test {
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

  // Builds main(args) = build(args), checks the composite is in the printed module, parses the
  // text back and runs it on the plugin and in the interpreter; compares element by element.
  void Check(const std::string& what, std::string_view composite, const std::vector<Literal>& args,
             const std::function<Tensor(const std::vector<Tensor>&)>& build) {
    auto built = std::make_shared<Module>("composite");
    FunctionBuilder fb(built.get(), "main");
    std::vector<Tensor> in;
    for (const Literal& a : args) in.push_back(fb.AddArg(a.type()));
    ASSERT_TRUE(fb.Return({build(in)}).ok()) << fb.status().ToString();
    const std::string text = PrintModule(*built);
    ASSERT_NE(text.find("stablehlo.composite \"" + std::string(composite) + "\""),
              std::string::npos)
        << text;
    auto parsed = ParseModule(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    std::shared_ptr<Module> module(std::move(*parsed));
    auto want = Interpret(*module, "main", args);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto program = backend_->Compile(module);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto got = backend_->Run(**program, args);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    const Literal& g = (*got)[0];
    const Literal& w = (*want)[0];
    ASSERT_EQ(g.type(), w.type());
    int64_t differing = 0;
    double worst = 0;
    for (int64_t i = 0; i < w.num_elements(); ++i) {
      const float a = ValueAt(g, i), b = ValueAt(w, i);
      if (std::memcmp(&a, &b, sizeof a) != 0) ++differing;
      worst = std::max(worst, std::fabs(double{a} - b) / std::max(1.0, std::fabs(double{b})));
    }
    std::printf("  %s: %s: %lld of %lld elements differ, worst relative %.3g\n", platform_.c_str(),
                what.c_str(), static_cast<long long>(differing),
                static_cast<long long>(w.num_elements()), worst);
    if (exact_) {
      EXPECT_EQ(differing, 0) << what;
    }
    EXPECT_LT(worst, w.element_type() == ElementType::kF32 ? 1e-5 : 1.0 / 128) << what;
  }

  std::unique_ptr<Backend> backend_;
  std::string platform_;
  bool exact_ = true;
};

TEST_F(LaneNnComposite, RmsNorm) {
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    const std::string what = "rms_norm " + std::string(MlirName(et)) + " [2, 7, 256]";
    Check(what, "tlaloc.rms_norm",
          {Random(TensorType(et, {2, 7, 256}), 1), Random(TensorType(et, {256}), 2, 1.0f, 0.3f)},
          [](const std::vector<Tensor>& a) { return RmsNorm(a[0], a[1], 1e-6); });
  }
}

TEST_F(LaneNnComposite, SiluAndMul) {
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    const std::string what = "silu_and_mul " + std::string(MlirName(et)) + " [3, 700]";
    Check(what, "tlaloc.silu_and_mul",
          {Random(TensorType(et, {3, 700}), 3, 0.0f, 4.0f), Random(TensorType(et, {3, 700}), 4)},
          [](const std::vector<Tensor>& a) { return nn::SiluAndMul(a[0], a[1]); });
  }
}

TEST_F(LaneNnComposite, Rotary) {
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    const std::string what = "rotary " + std::string(MlirName(et)) + " [2, 5, 4, 64]";
    // Tables of angles p * 10000^(-2i/64) over the two halves, as nn::RotaryTables makes them.
    std::vector<float> c(2 * 5 * 64), s(2 * 5 * 64);
    for (int64_t p = 0; p < 10; ++p)
      for (int64_t i = 0; i < 64; ++i) {
        const double angle = static_cast<double>(p * 37 + 5) * std::pow(1e4, -2.0 * (i % 32) / 64);
        c[p * 64 + i] = static_cast<float>(std::cos(angle));
        s[p * 64 + i] = static_cast<float>(std::sin(angle));
      }
    Check(what, "tlaloc.rotary",
          {Random(TensorType(et, {2, 5, 4, 64}), 5), Literal::FromVector<float>({2, 5, 64}, c),
           Literal::FromVector<float>({2, 5, 64}, s)},
          [](const std::vector<Tensor>& a) { return nn::ApplyRotary(a[0], a[1], a[2]); });
  }
}

// Decode attention's two products over a paged pool [6, 2, 16, 64] read through a table of 3
// blocks (one out of order), for one decode query per head group of 2.
TEST_F(LaneNnComposite, PagedDot) {
  const Literal table = Literal::FromVector<int32_t>({1, 3}, {4, 0, 2});
  for (ElementType et : {ElementType::kF32, ElementType::kBF16}) {
    const Literal pool = Random(TensorType(et, {6, 2, 16, 64}), 6);
    Check("paged_dot keys " + std::string(MlirName(et)), nn::kPagedDotComposite,
          {Random(TensorType(et, {1, 2, 2, 1, 64}), 7), pool, table},
          [](const std::vector<Tensor>& a) {
            return nn::PagedDot(a[0], a[1], a[2], nn::PagedProduct::kKeys);
          });
    Check("paged_dot values " + std::string(MlirName(et)), nn::kPagedDotComposite,
          {Random(TensorType(et, {1, 2, 2, 1, 48}), 8, 0.5f, 0.2f), pool, table},
          [](const std::vector<Tensor>& a) {
            return nn::PagedDot(a[0], a[1], a[2], nn::PagedProduct::kValues);
          });
  }
}

// Greedy decoding's pick over rows of logits (the indices must be equal on any plugin).
TEST_F(LaneNnComposite, Argmax) {
  Check("argmax f32 [4, 1000]", kArgmaxComposite,
        {Random(TensorType(ElementType::kF32, {4, 1000}), 9)},
        [](const std::vector<Tensor>& a) { return Argmax(a[0], -1); });
}

// The exact int8 form: f32 x times the dequantised s8 matrix.
TEST_F(LaneNnComposite, Int8LinearExact) {
  std::mt19937 rng(10);
  std::uniform_int_distribution<int> qd(-127, 127);
  Literal q(TensorType(ElementType::kS8, {48, 128}));
  for (auto& v : q.span<int8_t>()) v = static_cast<int8_t>(qd(rng));
  Literal scale(TensorType(ElementType::kF16, {48, 4}));
  for (auto& v : scale.span<uint16_t>()) v = FloatToHalfBits(0.01f);
  Check("int8_linear exact [3, 128] x [48, 128]", nn::kInt8LinearComposite,
        {Random(TensorType(ElementType::kF32, {3, 128}), 11), q, scale},
        [](const std::vector<Tensor>& a) { return nn::Int8LinearExact(a[0], a[1], a[2]); });
}

}  // namespace
}  // namespace tlaloc::pjrt
