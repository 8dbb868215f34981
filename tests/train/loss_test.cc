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

// The loss and its gradients through the composite tlaloc.linear_cross_entropy: its kernel
// (fuse) or its decomposition.
LossRun RunLmHeadLoss(int64_t chunk, const Literal& hidden, const Literal& head,
                      const Literal& labels, bool fuse) {
  auto m = std::make_shared<Module>("t");
  autodiff::Marks marks;
  FunctionBuilder fb(m.get(), "f", {Type(hidden.type()), Type(head.type()), Type(labels.type())});
  LossTerms t = LmHeadCrossEntropy(fb.arg(0), fb.arg(1), fb.arg(2), chunk, &marks);
  EXPECT_TRUE(fb.Return({t.loss_sum, t.count}).ok()) << fb.status().ToString();
  auto g = autodiff::ValueAndGrad(*m, *fb.function(), {{0, 1}, 0, &marks}, "vg");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  ExecutionStats stats;
  InterpreterOptions options;
  options.fuse = fuse;
  auto r = Interpret(*m, "vg", {hidden, head, labels}, &stats, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return {r.ok() ? std::move(*r) : std::vector<Literal>{}, stats.peak_live_bytes};
}

TEST(LmHeadCrossEntropy, ChunkedEqualsFullWithAThirdOfThePeak) {
  // Vocabulary-heavy: 256 tokens, hidden 16, vocabulary 2048; chunks of 32 tokens.
  const int64_t n = 256, h = 16, v = 2048;
  Literal hidden = RandomF32({n, h}, 2, 1.0), head = RandomF32({v, h}, 3, 0.5);
  Literal labels = RandomLabels(n, v, 4);
  // The decomposition (what XLA runs), whose peak the chunks bound.
  LossRun full = RunLmHeadLoss(0, hidden, head, labels, false);
  LossRun chunked = RunLmHeadLoss(32, hidden, head, labels, false);
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

// Largest |a - b| over the elements, relative to the largest |b|.
double RelativeDiff(const Literal& a, const Literal& b) {
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    scale = std::max(scale, std::fabs(b.GetAsDouble(i)));
    diff = std::max(diff, std::fabs(a.GetAsDouble(i) - b.GetAsDouble(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

// The loss sum and its gradients in double on the host: {loss, d hidden, d head}.
std::vector<std::vector<double>> HostLmHeadLoss(const Literal& hidden, const Literal& head,
                                                const Literal& labels) {
  const int64_t n = hidden.dims()[0], h = hidden.dims()[1], v = head.dims()[0];
  std::vector<double> loss(1, 0.0), dx(n * h, 0.0), dw(v * h, 0.0), z(v);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels.span<int32_t>()[i];
    if (label == kIgnoreLabel) continue;
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < v; ++j) {
      z[j] = 0;
      for (int64_t k = 0; k < h; ++k)
        z[j] += hidden.GetAsDouble(i * h + k) * head.GetAsDouble(j * h + k);
      mx = std::max(mx, z[j]);
    }
    for (int64_t j = 0; j < v; ++j) sum += std::exp(z[j] - mx);
    loss[0] += mx + std::log(sum) - z[label];
    for (int64_t j = 0; j < v; ++j) {
      const double g = std::exp(z[j] - mx) / sum - (j == label ? 1 : 0);
      for (int64_t k = 0; k < h; ++k) {
        dx[i * h + k] += g * head.GetAsDouble(j * h + k);
        dw[j * h + k] += g * hidden.GetAsDouble(i * h + k);
      }
    }
  }
  return {loss, dx, dw};
}

// Largest |a - b| over the elements, relative to the largest |b|.
double RelativeToHost(const Literal& a, const std::vector<double>& b) {
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a.GetAsDouble(i) - b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

TEST(LmHeadCrossEntropy, KernelMatchesTheDecomposition) {
  // A vocabulary of several of the kernel's blocks and a ragged last one; chunks of 48 tokens,
  // the last one short; a fifth of the labels ignored.
  const int64_t n = 200, h = 24, v = 3000;
  Literal hidden = RandomF32({n, h}, 5, 1.0), head = RandomF32({v, h}, 6, 0.5);
  Literal labels = RandomLabels(n, v, 7);
  LossRun fused = RunLmHeadLoss(48, hidden, head, labels, true);
  LossRun plain = RunLmHeadLoss(48, hidden, head, labels, false);
  ASSERT_EQ(fused.out.size(), 4u);
  ASSERT_EQ(plain.out.size(), 4u);
  EXPECT_EQ(fused.out[1].GetAsDouble(0), plain.out[1].GetAsDouble(0));
  // Each against the host's double, and against each other: both are f32 roundings of the
  // same sums in different orders.
  const auto host = HostLmHeadLoss(hidden, head, labels);
  const char* names[] = {"loss", "d hidden", "d head"};
  for (int k = 0; k < 3; ++k) {
    const int out = k == 0 ? 0 : k + 1;
    const double kernel = RelativeToHost(fused.out[out], host[k]);
    const double decomposition = RelativeToHost(plain.out[out], host[k]);
    const double between = RelativeDiff(fused.out[out], plain.out[out]);
    std::printf(
        "%s, relative to the host's double: kernel %.3g, decomposition %.3g; between "
        "them %.3g\n",
        names[k], kernel, decomposition, between);
    EXPECT_LE(kernel, 2 * decomposition + 1e-7) << names[k] << ": no worse than the ops";
    EXPECT_LE(between, 4e-6) << names[k];
  }
}

TEST(LmHeadCrossEntropy, GradientReadsTheCompositesGradientsInsteadOfRecomputing) {
  const int64_t n = 8, h = 4, v = 32;
  auto m = std::make_shared<Module>("t");
  autodiff::Marks marks;
  FunctionBuilder fb(
      m.get(), "f",
      {Type(TensorType(ElementType::kF32, {n, h})), Type(TensorType(ElementType::kF32, {v, h})),
       Type(TensorType(ElementType::kS32, {n}))});
  LossTerms t = LmHeadCrossEntropy(fb.arg(0), fb.arg(1), fb.arg(2), 4, &marks);
  ASSERT_TRUE(fb.Return({t.loss_sum, t.count}).ok()) << fb.status().ToString();
  auto g = autodiff::ValueAndGrad(*m, *fb.function(), {{0, 1}, 0, &marks}, "vg");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  int composites = 0, products = 0;
  for (const auto& op : (*g)->entry().operations()) {
    if (op->name() == "stablehlo.dot_general") ++products;
    if (op->name() != "stablehlo.composite") continue;
    ++composites;
    EXPECT_EQ(GetStringAttr(op->attrs(), "name"), "tlaloc.linear_cross_entropy");
    EXPECT_EQ(op->num_results(), 4);
  }
  EXPECT_EQ(composites, 1);  // the forward's, not a second one in the backward
  EXPECT_EQ(products, 0);    // the logits' products are the composite's alone
}

}  // namespace
}  // namespace tlaloc::train
