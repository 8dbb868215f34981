// Paged attention against dense attention over the same keys (GroupedAttention) and a
// double-precision reference for its log-sum-exp; attention over two halves of a sequence's
// pages merged by LSE equals attention over all of them; a query that sees no key gives 0 and
// -inf, never NaN.
#include "tlaloc/nn/paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc::nn {
namespace {

constexpr int64_t kB = 2, kT = 3, kHq = 4, kHkv = 2, kD = 8, kP = 4, kN = 7, kM = 3;
constexpr int64_t kS = kM * kP;
const double kScale = 1.0 / std::sqrt(static_cast<double>(kD));

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Inputs {
  std::vector<float> q = Random(kB * kT * kHq * kD, 1);
  std::vector<float> k = Random(kN * kHkv * kP * kD, 2);
  std::vector<float> v = Random(kN * kHkv * kP * kD, 3);
  std::vector<int32_t> table = {5, 1, 3, 2, 6, 0};  // scrambled: pages are not in order
  std::vector<int32_t> q_pos = {7, 8, 9, 4, 5, 6};
  std::vector<int32_t> lengths = {10, 7};
  // Key j of row b in dense layout [B, Hkv, S, D].
  float K(int64_t b, int64_t h, int64_t j, int64_t e, const std::vector<float>& pages) const {
    const int64_t block = table[b * kM + j / kP];
    return pages[((block * kHkv + h) * kP + j % kP) * kD + e];
  }
};

// Runs main(args) -> body(args) on the interpreter; returns every result.
template <typename Body>
std::vector<Literal> RunMain(const std::vector<Literal>& args, Body body) {
  Module module("t");
  std::vector<Type> types;
  for (const auto& a : args) types.push_back(Type(a.type()));
  FunctionBuilder fb(&module, "main", types);
  std::vector<Tensor> in;
  for (size_t i = 0; i < args.size(); ++i) in.push_back(fb.arg(static_cast<int>(i)));
  Status s = fb.Return(body(in));
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto r = Interpret(module, "main", args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Literal>{};
}

std::vector<Literal> Args(const Inputs& x, const std::vector<int32_t>& table, int64_t blocks,
                          const std::vector<int32_t>& start, const std::vector<int32_t>& len) {
  return {Literal::FromVector<float>({kB, kT, kHq, kD}, x.q),
          Literal::FromVector<int32_t>({kB, kT}, x.q_pos),
          Literal::FromVector<float>({kN, kHkv, kP, kD}, x.k),
          Literal::FromVector<float>({kN, kHkv, kP, kD}, x.v),
          Literal::FromVector<int32_t>({kB, blocks}, table),
          Literal::FromVector<int32_t>({kB}, start),
          Literal::FromVector<int32_t>({kB}, len)};
}

std::vector<Tensor> Paged(const std::vector<Tensor>& in) {
  AttentionPartial r = PagedAttention(in[0], in[1], in[2], in[3], in[4], in[5], in[6], kScale);
  return {r.out, r.lse};
}

TEST(PagedAttention, EqualsDenseAttentionOverTheSameKeys) {
  Inputs x;
  auto paged = RunMain(Args(x, x.table, kM, {0, 0}, x.lengths), Paged);
  ASSERT_EQ(paged.size(), 2u);
  // Dense: the same keys laid out in order, masked by length and causality.
  std::vector<float> kd(kB * kHkv * kS * kD), vd(kd.size());
  std::vector<uint8_t> mask(kB * kT * kS);
  for (int64_t b = 0; b < kB; ++b) {
    for (int64_t h = 0; h < kHkv; ++h)
      for (int64_t j = 0; j < kS; ++j)
        for (int64_t e = 0; e < kD; ++e) {
          kd[((b * kHkv + h) * kS + j) * kD + e] = x.K(b, h, j, e, x.k);
          vd[((b * kHkv + h) * kS + j) * kD + e] = x.K(b, h, j, e, x.v);
        }
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t j = 0; j < kS; ++j)
        mask[(b * kT + t) * kS + j] = j < x.lengths[b] && j <= x.q_pos[b * kT + t];
  }
  Literal mask_lit(TensorType(ElementType::kPred, {kB, kT, kS}));
  std::copy(mask.begin(), mask.end(), mask_lit.span<uint8_t>().begin());
  auto dense =
      RunMain({Literal::FromVector<float>({kB, kT, kHq, kD}, x.q),
               Literal::FromVector<float>({kB, kHkv, kS, kD}, kd),
               Literal::FromVector<float>({kB, kHkv, kS, kD}, vd), mask_lit},
              [](const std::vector<Tensor>& in) {
                return std::vector<Tensor>{GroupedAttention(in[0], in[1], in[2], in[3], kScale)};
              });
  ASSERT_EQ(dense.size(), 1u);
  auto po = paged[0].span<float>(), dout = dense[0].span<float>();
  ASSERT_EQ(po.size(), dout.size());
  for (size_t i = 0; i < po.size(); ++i) EXPECT_NEAR(po[i], dout[i], 1e-5) << "element " << i;
  // The log-sum-exp against a double-precision loop.
  auto lse = paged[1].span<float>();
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t h = 0; h < kHq; ++h) {
        double sum = 0;
        for (int64_t j = 0; j < kS; ++j) {
          if (!mask[(b * kT + t) * kS + j]) continue;
          double dot = 0;
          for (int64_t e = 0; e < kD; ++e)
            dot += x.q[((b * kT + t) * kHq + h) * kD + e] * x.K(b, h / (kHq / kHkv), j, e, x.k);
          sum += std::exp(dot * kScale);
        }
        EXPECT_NEAR(lse[(b * kT + t) * kHq + h], std::log(sum), 1e-5) << b << "," << t << "," << h;
      }
}

TEST(PagedAttention, HalvesMergedByLogSumExpEqualTheWhole) {
  Inputs x;
  x.lengths = {12, 7};  // row 1's second half sees no key: its merge is its first half
  auto whole = RunMain(Args(x, x.table, kM, {0, 0}, x.lengths), Paged);
  // First half: the first two pages (keys 0..7); second half: the last page (keys 8..11).
  std::vector<int32_t> first = {x.table[0], x.table[1], x.table[3], x.table[4]};
  std::vector<int32_t> second = {x.table[2], x.table[5]};
  std::vector<int32_t> first_len = {std::min(x.lengths[0], 8), std::min(x.lengths[1], 8)};
  std::vector<int32_t> second_len = {std::max(x.lengths[0] - 8, 0), std::max(x.lengths[1] - 8, 0)};
  std::vector<Literal> args = Args(x, first, 2, {0, 0}, first_len);
  args.push_back(Literal::FromVector<int32_t>({kB, 1}, second));
  args.push_back(Literal::FromVector<int32_t>({kB}, {8, 8}));
  args.push_back(Literal::FromVector<int32_t>({kB}, second_len));
  auto merged = RunMain(args, [](const std::vector<Tensor>& in) {
    AttentionPartial a = PagedAttention(in[0], in[1], in[2], in[3], in[4], in[5], in[6], kScale);
    AttentionPartial b = PagedAttention(in[0], in[1], in[2], in[3], in[7], in[8], in[9], kScale);
    AttentionPartial m = MergeAttention(a, b);
    return std::vector<Tensor>{m.out, m.lse, b.lse};
  });
  ASSERT_EQ(whole.size(), 2u);
  ASSERT_EQ(merged.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    auto w = whole[i].span<float>(), m = merged[i].span<float>();
    for (size_t e = 0; e < w.size(); ++e)
      EXPECT_NEAR(m[e], w[e], 1e-5) << "result " << i << " " << e;
  }
  // Row 1's second half saw nothing: -inf, and the merge still finite.
  auto second_lse = merged[2].span<float>();
  EXPECT_TRUE(std::isinf(second_lse[kT * kHq]) && second_lse[kT * kHq] < 0);
}

TEST(PagedAttention, QueryThatSeesNoKeyGivesZeroAndMinusInfinity) {
  Inputs x;
  auto r = RunMain(Args(x, x.table, kM, {0, 0}, {0, 3}), Paged);
  ASSERT_EQ(r.size(), 2u);
  auto out = r[0].span<float>();
  auto lse = r[1].span<float>();
  for (int64_t i = 0; i < kT * kHq * kD; ++i) EXPECT_EQ(out[i], 0.f);  // row 0: length 0
  for (int64_t i = 0; i < kT * kHq; ++i) EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << lse[i];
  for (size_t i = kT * kHq * kD; i < out.size(); ++i) EXPECT_TRUE(std::isfinite(out[i]));
}

}  // namespace
}  // namespace tlaloc::nn
