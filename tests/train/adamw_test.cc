// AdamW as a program, step by step against the update computed on the host in double, with the
// parameters and moments donated and updated in place.
#include "tlaloc/train/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc::train {
namespace {

TEST(AdamW, MatchesHostFormulaStepByStepInPlace) {
  AdamWConfig c;
  c.lr = 0.05;
  c.weight_decay = 0.1;
  c.grad_clip_norm = 0.8;
  c.warmup_steps = 2;
  c.total_steps = 5;
  c.min_lr_ratio = 0.1;
  const std::vector<TensorType> types{TensorType(ElementType::kF32, {3, 4}),
                                      TensorType(ElementType::kF32, {5})};
  const size_t n = types.size();
  auto module = BuildAdamWProgram(c, types);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto exe = Executable::Prepare(*module, "adamw_step");
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();

  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0, 1);
  std::vector<Literal> p, m, v;
  std::vector<std::vector<double>> hp, hm, hv;  // the host's state, in double
  for (const auto& t : types) {
    Literal l(t);
    for (float& x : l.span<float>()) x = static_cast<float>(nd(rng));
    hp.emplace_back(l.span<float>().begin(), l.span<float>().end());
    hm.emplace_back(l.num_elements(), 0.0);
    hv.emplace_back(l.num_elements(), 0.0);
    p.push_back(std::move(l));
    m.emplace_back(t);
    v.emplace_back(t);
  }
  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<Literal> g;
    std::vector<std::vector<double>> hg;
    double sq = 0;
    for (const auto& t : types) {
      Literal l(t);
      for (float& x : l.span<float>()) x = static_cast<float>(nd(rng));
      hg.emplace_back(l.span<float>().begin(), l.span<float>().end());
      for (double x : hg.back()) sq += x * x;
      g.push_back(std::move(l));
    }
    const double norm = std::sqrt(sq);
    const double clip = std::min(1.0, c.grad_clip_norm / (norm + 1e-6));
    const double lr = LearningRateAt(c, step);
    std::vector<const std::byte*> donated;
    std::vector<Literal> args;
    for (auto* group : {&p, &g, &m, &v})
      for (Literal& l : *group) {
        donated.push_back(l.data());
        args.push_back(std::move(l));
      }
    args.push_back(Literal::Scalar<int32_t>(step));
    auto r = (*exe)->Execute(std::move(args));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 3 * n + 2);
    EXPECT_NEAR((*r)[3 * n].GetAsDouble(0), norm, 1e-5 * norm);
    EXPECT_NEAR((*r)[3 * n + 1].GetAsDouble(0), lr, 1e-7);
    const double bc1 = 1 - std::pow(c.beta1, step), bc2 = 1 - std::pow(c.beta2, step);
    for (size_t k = 0; k < n; ++k) {
      // In place: each updated tensor lives in its donated parameter or moment buffer.
      EXPECT_EQ((*r)[k].data(), donated[k]) << "param " << k;
      EXPECT_EQ((*r)[n + k].data(), donated[2 * n + k]) << "m " << k;
      EXPECT_EQ((*r)[2 * n + k].data(), donated[3 * n + k]) << "v " << k;
      for (size_t i = 0; i < hp[k].size(); ++i) {
        const double gi = hg[k][i] * clip;
        hm[k][i] = c.beta1 * hm[k][i] + (1 - c.beta1) * gi;
        hv[k][i] = c.beta2 * hv[k][i] + (1 - c.beta2) * gi * gi;
        hp[k][i] = hp[k][i] * (1 - lr * c.weight_decay) -
                   lr / bc1 * hm[k][i] / (std::sqrt(hv[k][i] / bc2) + c.eps);
        const int64_t e = static_cast<int64_t>(i);
        EXPECT_NEAR((*r)[k].GetAsDouble(e), hp[k][i], 1e-5 * (1 + std::fabs(hp[k][i])));
        EXPECT_NEAR((*r)[n + k].GetAsDouble(e), hm[k][i], 1e-6 * (1 + std::fabs(hm[k][i])));
        EXPECT_NEAR((*r)[2 * n + k].GetAsDouble(e), hv[k][i], 1e-6 * (1 + std::fabs(hv[k][i])));
      }
    }
    p.clear();
    m.clear();
    v.clear();
    for (size_t k = 0; k < n; ++k) {
      p.push_back(std::move((*r)[k]));
      m.push_back(std::move((*r)[n + k]));
      v.push_back(std::move((*r)[2 * n + k]));
    }
  }
}

TEST(AdamW, ScheduleWarmsUpThenDecays) {
  AdamWConfig c;
  c.lr = 1.0;
  c.warmup_steps = 4;
  c.total_steps = 12;
  c.min_lr_ratio = 0.2;
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 1), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 4), 1.0);
  EXPECT_NEAR(LearningRateAt(c, 8), 0.2 + 0.8 * 0.5, 1e-12);  // halfway through the decay
  EXPECT_NEAR(LearningRateAt(c, 12), 0.2, 1e-12);
  EXPECT_NEAR(LearningRateAt(c, 30), 0.2, 1e-12);
  c.total_steps = 0;
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 30), 1.0);
}

TEST(AdamW, RefusesNonF32Parameters) {
  auto m = BuildAdamWProgram(AdamWConfig{}, {TensorType(ElementType::kBF16, {2})});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("expected f32"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::train
