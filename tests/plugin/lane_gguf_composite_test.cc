// The composite tlaloc.gguf_linear (nn/gguf_linear.h: GGUF Q4_0 / Q4_K / Q6_K weights kept
// packed, dequantised in StableHLO) on the TLALOC_TEST_PJRT_TARGET lane's plugin (Tlaloc's own by
// default, XLA:CPU with xla-cpu): XLA lowers the composite to a call of its decomposition (u8
// shifts, ands, ors, converts, the scales, a dot_general) and must agree with the interpreter's
// fused kernel. Tlaloc's plugin runs the interpreter: the same bits. XLA:CPU dequantises to the
// same f32 weights, bit for bit (checked: every step is exact or rounded once), but sums the
// dot products in its own order (and may contract multiply and add), so each result may differ
// by f32 rounding of a K-term sum: bounded here by 1e-6 of sum_k |x_k w_k| (a K-term sum's
// rounding can reach about K * 2^-24 of it, 6e-5 for K = 1024; measured at most 7.6e-8).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "pjrt/pjrt_test_util.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/gguf_linear.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/support/half.h"

namespace tlaloc::pjrt {
namespace {

class LaneGgufComposite : public ::testing::Test {
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
  std::unique_ptr<Backend> backend_;
  std::string platform_;
  bool exact_ = true;
};

TEST_F(LaneGgufComposite, GgufLinearMatchesTheInterpreter) {
  struct Shape {
    nn::GgufFormat format;
    int64_t m, k, n;
  };
  const Shape shapes[] = {
      {nn::GgufFormat::kQ4_0, 1, 1024, 96}, {nn::GgufFormat::kQ4_0, 13, 256, 70},
      {nn::GgufFormat::kQ4_K, 1, 512, 64},  {nn::GgufFormat::kQ4_K, 6, 256, 40},
      {nn::GgufFormat::kQ6_K, 1, 1024, 48}, {nn::GgufFormat::kQ6_K, 5, 256, 33}};
  for (const Shape& s : shapes) {
    const std::string what = std::string(nn::GgufFormatName(s.format)) + " " + std::to_string(s.m) +
                             "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    SCOPED_TRACE(what);
    std::mt19937 rng(static_cast<uint32_t>(s.m * 1000 + s.n));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> sd(0.001f, 0.02f);
    const auto [qt, st] = nn::GgufPackedTypes(s.format, s.n, s.k);
    Literal x(TensorType(ElementType::kF32, {s.m, s.k})), q(qt), scale(st);
    for (auto& v : x.span<float>()) v = nd(rng);
    for (auto& v : q.span<uint8_t>()) v = static_cast<uint8_t>(byte(rng));
    if (st.element_type == ElementType::kF16) {
      for (auto& v : scale.span<uint16_t>()) v = FloatToHalfBits(sd(rng));
    } else {
      // As the import makes them: an f16 super-block scale times a 6-bit (Q4_K) or 8-bit signed
      // (Q6_K) sub-block scale, exact in f32. (Q4_K's d * q is then exact too, so XLA's
      // contraction of d * q - m into one FMA rounds as the separate steps do; with arbitrary
      // f32 scales it would not.)
      std::uniform_int_distribution<int> sub(s.format == nn::GgufFormat::kQ4_K ? 0 : -128,
                                             s.format == nn::GgufFormat::kQ4_K ? 63 : 127);
      for (auto& v : scale.span<float>())
        v = HalfBitsToFloat(FloatToHalfBits(sd(rng))) * static_cast<float>(sub(rng));
    }
    auto module = std::make_shared<Module>("gguf_linear");
    FunctionBuilder fb(module.get(), "main", {Type(x.type()), Type(q.type()), Type(scale.type())});
    ASSERT_TRUE(fb.Return({nn::GgufLinear(fb.arg(0), fb.arg(1), fb.arg(2))}).ok());
    auto want = Interpret(*module, "main", {x, q, scale});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto program = backend_->Compile(module);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    auto got = backend_->Run(**program, {x, q, scale});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    ASSERT_EQ((*got)[0].type(), (*want)[0].type());
    // The dequantised weights (the interpreter's run of the StableHLO dequantisation) for each
    // result's condition sum_k |x_k w_k|.
    auto dm = std::make_shared<Module>("dequantise");
    FunctionBuilder db(dm.get(), "main", {Type(q.type()), Type(scale.type())});
    ASSERT_TRUE(db.Return({nn::GgufDequantize(db.arg(0), db.arg(1))}).ok());
    auto w = Interpret(*dm, "main", {q, scale});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    {
      auto dprogram = backend_->Compile(dm);
      ASSERT_TRUE(dprogram.ok()) << dprogram.status().ToString();
      auto dw = backend_->Run(**dprogram, {q, scale});
      ASSERT_TRUE(dw.ok()) << dw.status().ToString();
      ASSERT_EQ((*dw)[0].type(), (*w)[0].type());
      EXPECT_EQ(std::memcmp((*dw)[0].data(), (*w)[0].data(), (*w)[0].byte_size()), 0)
          << "the dequantised weights differ from the interpreter's";
    }
    const float* wd = (*w)[0].span<float>().data();
    const float* xd = x.span<float>().data();
    int64_t differing = 0;
    double worst = 0;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        const float a = (*got)[0].span<float>()[i * s.n + j];
        const float b = (*want)[0].span<float>()[i * s.n + j];
        if (std::memcmp(&a, &b, sizeof a) != 0) ++differing;
        double cond = 0;
        for (int64_t e = 0; e < s.k; ++e)
          cond += std::fabs(double{xd[i * s.k + e]} * wd[j * s.k + e]);
        worst = std::max(worst, std::fabs(double{a} - b) / cond);
      }
    RecordProperty("differing_" + what, std::to_string(differing));
    std::printf("  %s: gguf_linear %s: %lld of %lld elements differ, worst %.3g of sum |x w|\n",
                platform_.c_str(), what.c_str(), static_cast<long long>(differing),
                static_cast<long long>(s.m * s.n), worst);
    if (exact_) {
      EXPECT_EQ(differing, 0);
    }
    EXPECT_LT(worst, 1e-6);
  }
}

}  // namespace
}  // namespace tlaloc::pjrt
