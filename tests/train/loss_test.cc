// Cross-entropy against a host computation in double, and the chunked LM-head loss against the
// full one: equal loss and gradients with at most a third of the peak live bytes.
#include "tlaloc/train/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {
namespace {

Literal RandomF32(const std::vector<int64_t>& dims, uint32_t seed, double scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, scale);
  Literal l(TensorType(ElementType::kF32, dims));
  for (float& v : l.span<float>()) v = static_cast<float>(n(rng));
  return l;
}

Literal RandomLabels(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> labels(n);
  for (auto& l : labels) l = rng() % 5 == 0 ? kIgnoreLabel : static_cast<int32_t>(rng() % vocab);
  return Literal::FromVector<int32_t>({n}, labels);
}

TEST(CrossEntropy, MatchesHostWithIgnoredLabelsAndGradient) {
  const int64_t n = 6, v = 7;
  Literal logits = RandomF32({n, v}, 1, 3.0);
  Literal labels = Literal::FromVector<int32_t>({n}, {3, kIgnoreLabel, 0, 6, kIgnoreLabel, 2});
  auto m = std::make_shared<Module>("t");
  autodiff::Marks marks;
  FunctionBuilder fb(m.get(), "f", {Type(logits.type()), Type(TensorType(ElementType::kS32, {n}))});
  LossTerms t = CrossEntropy(fb.arg(0), fb.arg(1), &marks);
  ASSERT_TRUE(fb.Return({t.loss_sum, t.count}).ok()) << fb.status().ToString();
  ASSERT_TRUE(autodiff::ValueAndGrad(*m, *fb.function(), {{0}, 0, &marks}, "vg").ok());
  auto r = Interpret(*m, "vg", {logits, labels});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels.span<int32_t>()[i];
    double mx = -1e30, z = 0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, logits.GetAsDouble(i * v + j));
    for (int64_t j = 0; j < v; ++j) z += std::exp(logits.GetAsDouble(i * v + j) - mx);
    for (int64_t j = 0; j < v; ++j) {
      const double p = std::exp(logits.GetAsDouble(i * v + j) - mx) / z;
      const double g = label == kIgnoreLabel ? 0 : p - (j == label ? 1 : 0);
      EXPECT_NEAR((*r)[2].GetAsDouble(i * v + j), g, 1e-6) << i << "," << j;
    }
    if (label != kIgnoreLabel) want += mx + std::log(z) - logits.GetAsDouble(i * v + label);
  }
  EXPECT_NEAR((*r)[0].GetAsDouble(0), want, 1e-5 * want);
  EXPECT_EQ((*r)[1].GetAsDouble(0), 4.0);
}

struct LossRun {
  std::vector<Literal> out;  // loss_sum, count, d hidden, d head
  int64_t peak = 0;
};

LossRun RunLmHeadLoss(int64_t chunk, const Literal& hidden, const Literal& head,
                      const Literal& labels) {
  auto m = std::make_shared<Module>("t");
  autodiff::Marks marks;
  FunctionBuilder fb(m.get(), "f", {Type(hidden.type()), Type(head.type()), Type(labels.type())});
  LossTerms t = LmHeadCrossEntropy(fb.arg(0), fb.arg(1), fb.arg(2), chunk, &marks);
  EXPECT_TRUE(fb.Return({t.loss_sum, t.count}).ok()) << fb.status().ToString();
  auto g = autodiff::ValueAndGrad(*m, *fb.function(), {{0, 1}, 0, &marks}, "vg");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  ExecutionStats stats;
  auto r = Interpret(*m, "vg", {hidden, head, labels}, &stats);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return {r.ok() ? std::move(*r) : std::vector<Literal>{}, stats.peak_live_bytes};
}

TEST(LmHeadCrossEntropy, ChunkedEqualsFullWithAThirdOfThePeak) {
  // Vocabulary-heavy: 256 tokens, hidden 16, vocabulary 2048; chunks of 32 tokens.
  const int64_t n = 256, h = 16, v = 2048;
  Literal hidden = RandomF32({n, h}, 2, 1.0), head = RandomF32({v, h}, 3, 0.5);
  Literal labels = RandomLabels(n, v, 4);
  LossRun full = RunLmHeadLoss(0, hidden, head, labels);
  LossRun chunked = RunLmHeadLoss(32, hidden, head, labels);
  ASSERT_EQ(full.out.size(), 4u);
  ASSERT_EQ(chunked.out.size(), 4u);
  EXPECT_NEAR(chunked.out[0].GetAsDouble(0), full.out[0].GetAsDouble(0),
              1e-5 * full.out[0].GetAsDouble(0));
  EXPECT_EQ(chunked.out[1].GetAsDouble(0), full.out[1].GetAsDouble(0));
  for (int k = 2; k < 4; ++k) {
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < full.out[k].num_elements(); ++i) {
      scale = std::max(scale, std::fabs(full.out[k].GetAsDouble(i)));
      diff = std::max(diff, std::fabs(full.out[k].GetAsDouble(i) - chunked.out[k].GetAsDouble(i)));
    }
    EXPECT_GT(scale, 0);
    EXPECT_LE(diff, 1e-5 * scale) << "gradient " << k - 2;
  }
  const double ratio = static_cast<double>(chunked.peak) / static_cast<double>(full.peak);
  std::printf("LM-head loss peak live bytes: chunked %lld, full %lld, ratio %.3f\n",
              static_cast<long long>(chunked.peak), static_cast<long long>(full.peak), ratio);
  EXPECT_LE(ratio, 1.0 / 3.0);
}

}  // namespace
}  // namespace tlaloc::train
