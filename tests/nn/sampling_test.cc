// nn::SampleRows gathers only the sampled rows into the candidate selection: every row of a mixed
// batch must get the token it gets alone (a batch of one runs the whole-batch draw, no gather),
// whichever rows sample and however many (each bucket of sampled rows is a separate branch).
#include "tlaloc/nn/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc::nn {
namespace {

constexpr int64_t kVocab = 300;
constexpr int64_t kCandidates = 64;  // below the vocabulary, so the candidate cap is exercised

struct Rows {
  std::vector<float> logits, temperature, top_p;
  std::vector<int32_t> top_k;
  std::vector<uint32_t> keys, steps;
  int64_t size() const { return static_cast<int64_t>(temperature.size()); }
};

// Runs SampleRows over `rows` in one program and returns its tokens.
std::vector<int32_t> Sample(const Rows& rows) {
  const int64_t n = rows.size();
  Module module("t");
  FunctionBuilder fb(&module, "main");
  Tensor logits = fb.AddArg(TensorType(ElementType::kF32, {n, kVocab}));
  RowSamplingInputs in;
  in.temperature = fb.AddArg(TensorType(ElementType::kF32, {n}));
  in.top_k = fb.AddArg(TensorType(ElementType::kS32, {n}));
  in.top_p = fb.AddArg(TensorType(ElementType::kF32, {n}));
  in.keys = fb.AddArg(TensorType(ElementType::kU32, {n, 2}));
  in.steps = fb.AddArg(TensorType(ElementType::kU32, {n}));
  Status built = fb.Return({SampleRows(logits, in, kCandidates)});
  EXPECT_TRUE(built.ok()) << built.ToString();
  if (!built.ok()) return {};
  auto out = Interpret(
      module, "main",
      {Literal::FromVector<float>({n, kVocab}, rows.logits),
       Literal::FromVector<float>({n}, rows.temperature),
       Literal::FromVector<int32_t>({n}, rows.top_k), Literal::FromVector<float>({n}, rows.top_p),
       Literal::FromVector<uint32_t>({n, 2}, rows.keys),
       Literal::FromVector<uint32_t>({n}, rows.steps)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  auto span = (*out)[0].span<int32_t>();
  return {span.begin(), span.end()};
}

Rows RowOf(const Rows& rows, int64_t r) {
  Rows one;
  one.logits.assign(rows.logits.begin() + r * kVocab, rows.logits.begin() + (r + 1) * kVocab);
  one.temperature = {rows.temperature[r]};
  one.top_p = {rows.top_p[r]};
  one.top_k = {rows.top_k[r]};
  one.keys = {rows.keys[2 * r], rows.keys[2 * r + 1]};
  one.steps = {rows.steps[r]};
  return one;
}

// `n` rows with flat logits (so a draw differs from the argmax), each with its own settings and
// key; rows in `sampled` sample, the others are greedy.
Rows MakeRows(int64_t n, const std::vector<int64_t>& sampled, uint32_t seed) {
  Rows rows;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  rows.logits.resize(n * kVocab);
  for (float& x : rows.logits) x = d(rng);
  for (int64_t r = 0; r < n; ++r) {
    rows.temperature.push_back(0.0f);
    rows.top_k.push_back(r % 3 == 0 ? 0 : static_cast<int32_t>(8 + r));
    rows.top_p.push_back(r % 2 == 0 ? 1.0f : 0.9f);
    rows.keys.push_back(static_cast<uint32_t>(r));
    rows.keys.push_back(static_cast<uint32_t>(1000 + 7 * r));
    rows.steps.push_back(static_cast<uint32_t>(3 + r));
  }
  for (int64_t r : sampled) rows.temperature[r] = 0.5f + 0.25f * static_cast<float>(r % 4);
  return rows;
}

TEST(Sampling, SampledRowsGatheredDrawWhatTheyDrawAlone) {
  // One sampled row, a few (bucket 4 of 8), the first and last, every row, and none.
  const std::vector<std::vector<int64_t>> patterns = {
      {3}, {0, 5, 6}, {0, 7}, {1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6, 7}, {}};
  int sampled_differs_from_argmax = 0;
  for (size_t p = 0; p < patterns.size(); ++p) {
    Rows rows = MakeRows(8, patterns[p], static_cast<uint32_t>(p + 1));
    std::vector<int32_t> batch = Sample(rows);
    ASSERT_EQ(batch.size(), 8u);
    for (int64_t r = 0; r < 8; ++r) {
      std::vector<int32_t> alone = Sample(RowOf(rows, r));
      ASSERT_EQ(alone.size(), 1u);
      EXPECT_EQ(batch[r], alone[0]) << "pattern " << p << ", row " << r;
      const float* row = rows.logits.data() + r * kVocab;
      const int32_t argmax = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
      if (rows.temperature[r] <= 0.0f) {
        EXPECT_EQ(batch[r], argmax) << "greedy row " << r << " of pattern " << p;
      } else {
        EXPECT_GE(batch[r], 0);
        EXPECT_LT(batch[r], kVocab);
        sampled_differs_from_argmax += batch[r] != argmax;
      }
    }
  }
  // The flat logits make most draws miss the argmax; otherwise the sampled path went unchecked.
  EXPECT_GT(sampled_differs_from_argmax, 5);
}

}  // namespace
}  // namespace tlaloc::nn
