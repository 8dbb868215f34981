#include "tlaloc/builder/random.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc {
namespace {

// Builds a no-argument function from `body` and runs it on the interpreter.
std::vector<Literal> RunProgram(const std::function<std::vector<Tensor>(OpBuilder&)>& body) {
  Module m("random_test");
  FunctionBuilder fb(&m, "main");
  auto outs = body(fb.ops());
  Status s = fb.Return(outs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto r = Interpret(m, "main", {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : std::vector<Literal>{};
}

std::vector<uint32_t> Words(const Literal& l) {
  auto s = l.span<uint32_t>();
  return {s.begin(), s.end()};
}

struct Kat {
  uint32_t k0, k1, x0, x1, y0, y1;
};

// Known-answer vectors of threefry2x32 with 20 rounds (Random123's kat_vectors).
TEST(Threefry, KnownAnswerVectors) {
  const Kat kats[] = {
      {0, 0, 0, 0, 0x6b200159, 0x99ba4efe},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
      {0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3, 0xc4923a9c, 0x483df7a0},
  };
  for (const Kat& k : kats) {
    auto out = RunProgram([&](OpBuilder& b) {
      Tensor key = Constant(b, Literal::FromVector<uint32_t>({2}, {k.k0, k.k1}));
      Tensor x0 = Constant(b, Literal::FromVector<uint32_t>({1}, {k.x0}));
      Tensor x1 = Constant(b, Literal::FromVector<uint32_t>({1}, {k.x1}));
      auto [y0, y1] = Threefry2x32Block(key, x0, x1);
      return std::vector<Tensor>{y0, y1};
    });
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].span<uint32_t>()[0], k.y0);
    EXPECT_EQ(out[1].span<uint32_t>()[0], k.y1);
  }
}

// jax.random.split(jax.random.PRNGKey(0)) with jax_threefry_partitionable=False, as printed in
// JAX's documentation of the original PRNG.
TEST(Threefry, SplitOfKeyZeroMatchesJaxOriginal) {
  auto out = RunProgram([](OpBuilder& b) {
    return std::vector<Tensor>{SplitKey(PrngKey(b, 0), 2, ThreefryMode::kOriginal)};
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Words(out[0]),
            (std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u, 1272950319u}));
}

TEST(Threefry, PrngKeyHoldsSeedWords) {
  auto out = RunProgram(
      [](OpBuilder& b) { return std::vector<Tensor>{PrngKey(b, 0x0000000500000007ull)}; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Words(out[0]), (std::vector<uint32_t>{5, 7}));
}

// The partitionable scheme hashes (0, i) for the i-th key; check against the block function.
TEST(Threefry, PartitionableSplitHashesFlatIndex) {
  auto out = RunProgram([](OpBuilder& b) {
    Tensor key = PrngKey(b, 42);
    Tensor keys = SplitKey(key, 3);
    auto [y0, y1] = Threefry2x32Block(key, Zeros(b, {3}, ElementType::kU32),
                                      Iota(b, {3}, 0, ElementType::kU32));
    return std::vector<Tensor>{keys, y0, y1};
  });
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[0].span<uint32_t>()[2 * i], out[1].span<uint32_t>()[i]);
    EXPECT_EQ(out[0].span<uint32_t>()[2 * i + 1], out[2].span<uint32_t>()[i]);
  }
}

TEST(Random, UniformIsInRangeAndSpread) {
  auto out = RunProgram([](OpBuilder& b) {
    return std::vector<Tensor>{Uniform(PrngKey(b, 1), {4096}, ElementType::kF32, -2, 3)};
  });
  ASSERT_EQ(out.size(), 1u);
  double sum = 0;
  for (float v : out[0].span<float>()) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / 4096, 0.5, 0.1);
}

TEST(Random, NormalHasUnitMoments) {
  auto out =
      RunProgram([](OpBuilder& b) { return std::vector<Tensor>{Normal(PrngKey(b, 3), {8192})}; });
  ASSERT_EQ(out.size(), 1u);
  double sum = 0, sq = 0;
  for (float v : out[0].span<float>()) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  double mean = sum / 8192, var = sq / 8192 - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.07);
}

TEST(Random, CategoricalFollowsLogits) {
  // Probabilities 0.7, 0.2, 0.1 over 4000 draws (one row each).
  auto out = RunProgram([](OpBuilder& b) {
    std::vector<float> row{std::log(0.7f), std::log(0.2f), std::log(0.1f)};
    std::vector<float> logits;
    for (int i = 0; i < 4000; ++i) logits.insert(logits.end(), row.begin(), row.end());
    Tensor l = Constant(b, Literal::FromVector<float>({4000, 3}, logits));
    return std::vector<Tensor>{Categorical(PrngKey(b, 9), l)};
  });
  ASSERT_EQ(out.size(), 1u);
  int counts[3] = {0, 0, 0};
  for (int32_t c : out[0].span<int32_t>()) {
    ASSERT_GE(c, 0);
    ASSERT_LT(c, 3);
    ++counts[c];
  }
  EXPECT_NEAR(counts[0] / 4000.0, 0.7, 0.04);
  EXPECT_NEAR(counts[1] / 4000.0, 0.2, 0.04);
  EXPECT_NEAR(counts[2] / 4000.0, 0.1, 0.03);
}

TEST(Random, SameSeedSameBitsDifferentSeedDifferentBits) {
  auto out = RunProgram([](OpBuilder& b) {
    return std::vector<Tensor>{RandomBits(PrngKey(b, 5), {64}), RandomBits(PrngKey(b, 5), {64}),
                               RandomBits(PrngKey(b, 6), {64})};
  });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].BitwiseEquals(out[1]));
  EXPECT_FALSE(out[0].BitwiseEquals(out[2]));
}

// A key per row draws, row by row, exactly what that key draws alone.
TEST(Threefry, RowKeysDrawWhatEachKeyDrawsAlone) {
  const std::vector<uint64_t> seeds{0, 42, (uint64_t{7} << 32) | 9};
  const std::vector<uint32_t> data{3, 0, 1234567};
  auto out = RunProgram([&](OpBuilder& b) {
    std::vector<uint32_t> words;
    for (uint64_t s : seeds) {
      words.push_back(static_cast<uint32_t>(s >> 32));
      words.push_back(static_cast<uint32_t>(s));
    }
    Tensor keys = Constant(b, Literal::FromVector<uint32_t>({3, 2}, words));
    Tensor d = Constant(b, Literal::FromVector<uint32_t>({3}, data));
    Tensor folded = RowFoldIn(keys, d);
    std::vector<Tensor> outs{folded, RowGumbel(folded, 5)};
    for (size_t r = 0; r < seeds.size(); ++r) {
      Tensor one = FoldIn(PrngKey(b, seeds[r]), Scalar(b, data[r], ElementType::kU32));
      outs.push_back(one);
      outs.push_back(Gumbel(one, {5}));
    }
    return outs;
  });
  ASSERT_EQ(out.size(), 2 + 2 * seeds.size());
  auto folded = out[0].span<uint32_t>();
  auto gumbel = out[1].span<float>();
  for (size_t r = 0; r < seeds.size(); ++r) {
    auto key = out[2 + 2 * r].span<uint32_t>();
    EXPECT_EQ(folded[2 * r], key[0]) << "row " << r;
    EXPECT_EQ(folded[2 * r + 1], key[1]) << "row " << r;
    auto alone = out[3 + 2 * r].span<float>();
    for (int j = 0; j < 5; ++j) EXPECT_EQ(gumbel[5 * r + j], alone[j]) << "row " << r;
  }
}

// Cond runs one branch at run time; the branches may use tensors built before it.
TEST(Cond, RunsTheBranchThePredicateChooses) {
  for (bool which : {true, false}) {
    auto out = RunProgram([&](OpBuilder& b) {
      Tensor x = Constant(b, Literal::FromVector<float>({3}, {1, 2, 3}));
      Tensor pred = Constant(b, Literal::FromVector<bool>({}, {which}));
      auto r = Cond(
          pred,
          [&]() {
            return std::vector<Tensor>{x * 2.0, Sum(x, {0})};
          },
          [&]() {
            return std::vector<Tensor>{x + 1.0, ReduceMax(x, {0})};
          });
      return r;
    });
    ASSERT_EQ(out.size(), 2u);
    auto v = out[0].span<float>();
    EXPECT_EQ(v[2], which ? 6.f : 4.f);
    EXPECT_EQ(out[1].span<float>()[0], which ? 6.f : 3.f);
  }
}

}  // namespace
}  // namespace tlaloc
