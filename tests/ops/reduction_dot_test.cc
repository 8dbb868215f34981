// Tests of stablehlo.dot_general and stablehlo.dot.
#include <cmath>
#include <limits>

#include "reduction_test_util.h"

namespace tlaloc {
namespace {

using rdtest::RunOp;
using rdtest::Values;

using rdtest::DotAttrs;

TEST(DotGeneralTest, MatmulMatchesNaiveLoop) {
  const int64_t m = 7, k = 13, n = 5;
  std::vector<float> a = rdtest::RandomFloats(m * k, 11), b = rdtest::RandomFloats(k * n, 12);
  auto out = RunOp("stablehlo.dot_general",
                   {Literal::FromVector<float>({m, k}, a), Literal::FromVector<float>({k, n}, b)},
                   DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{m, n}));
  auto got = Values<float>((*out)[0]);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      EXPECT_NEAR(got[i * n + j], s, 1e-4) << i << "," << j;
    }
}

TEST(DotGeneralTest, BatchedWithPermutedDimensions) {
  // lhs [k=3, b=2, m=4], rhs [n=5, b=2, k=3]: batch (1 x 1), contract (0 x 2).
  const int64_t B = 2, M = 4, K = 3, N = 5;
  std::vector<double> lhs(K * B * M), rhs(N * B * K);
  for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  for (size_t i = 0; i < rhs.size(); ++i) rhs[i] = 0.5 * static_cast<double>(i % 5) - 1.0;
  auto out = RunOp(
      "stablehlo.dot_general",
      {Literal::FromVector<double>({K, B, M}, lhs), Literal::FromVector<double>({N, B, K}, rhs)},
      DotAttrs({1}, {1}, {0}, {2}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{B, M, N}));
  auto got = Values<double>((*out)[0]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t p = 0; p < K; ++p) s += lhs[(p * B + b) * M + i] * rhs[(j * B + b) * K + p];
        EXPECT_DOUBLE_EQ(got[(b * M + i) * N + j], s);
      }
}

TEST(DotGeneralTest, Bf16InputsWithF32ResultAccumulateInF32) {
  // 1 + 2^-9 * 4: in bf16 each partial sum would round back to 1; in f32 it does not.
  std::vector<bf16> a = {bf16(1.0f), bf16(1.0f), bf16(1.0f), bf16(1.0f), bf16(1.0f)};
  std::vector<bf16> b = {bf16(1.0f), bf16(0.001953125f), bf16(0.001953125f), bf16(0.001953125f),
                         bf16(0.001953125f)};
  Type f32_result(TensorType(ElementType::kF32, {}));
  auto out = RunOp("stablehlo.dot_general",
                   {Literal::FromVector<bf16>({5}, a), Literal::FromVector<bf16>({5}, b)},
                   DotAttrs({}, {}, {0}, {0}), std::vector<Type>{f32_result});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0])[0], 1.0078125f);
  // With a bf16 result the f32 sum is rounded once: 1.0078125 is representable in bf16.
  auto half = RunOp("stablehlo.dot_general",
                    {Literal::FromVector<bf16>({5}, a), Literal::FromVector<bf16>({5}, b)},
                    DotAttrs({}, {}, {0}, {0}));
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ(Values<bf16>((*half)[0])[0].f(), 1.0078125f);
}

TEST(DotGeneralTest, IntegersWrapAndWidenToPreferredType) {
  std::vector<int8_t> a = {127, 127, -128}, b = {127, 127, -128};
  auto wide =
      RunOp("stablehlo.dot_general",
            {Literal::FromVector<int8_t>({3}, a), Literal::FromVector<int8_t>({3}, b)},
            DotAttrs({}, {}, {0}, {0}), std::vector<Type>{Type(TensorType(ElementType::kS32, {}))});
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(Values<int32_t>((*wide)[0])[0], 127 * 127 * 2 + 128 * 128);
  auto narrow = RunOp("stablehlo.dot_general",
                      {Literal::FromVector<int8_t>({3}, a), Literal::FromVector<int8_t>({3}, b)},
                      DotAttrs({}, {}, {0}, {0}));
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  EXPECT_EQ(Values<int8_t>((*narrow)[0])[0],
            static_cast<int8_t>(static_cast<uint8_t>((127 * 127 * 2 + 128 * 128) & 0xff)));
  std::vector<uint32_t> u = {0xffffffffu, 2};
  auto wrap =
      RunOp("stablehlo.dot_general",
            {Literal::FromVector<uint32_t>({1, 2}, u), Literal::FromVector<uint32_t>({2, 1}, u)},
            DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(wrap.ok()) << wrap.status().ToString();
  EXPECT_EQ(Values<uint32_t>((*wrap)[0])[0], static_cast<uint32_t>(1u + 4u));  // (2^32-1)^2+4
}

TEST(DotGeneralTest, NaNAndInfPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  auto out = RunOp("stablehlo.dot_general",
                   {Literal::FromVector<float>({2, 2}, {inf, 1, 0, 1}),
                    Literal::FromVector<float>({2, 1}, {1, 0})},
                   DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto v = Values<float>((*out)[0]);
  EXPECT_EQ(v[0], inf);
  EXPECT_EQ(v[1], 0.0f);
  auto nan = RunOp(
      "stablehlo.dot_general",
      {Literal::FromVector<float>({1, 2}, {inf, 1}), Literal::FromVector<float>({2, 1}, {0, 1})},
      DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(Values<float>((*nan)[0])[0]));  // inf * 0
}

TEST(DotGeneralTest, MismatchedContractingSizesAreErrors) {
  auto out = RunOp("stablehlo.dot_general",
                   {Literal(TensorType(ElementType::kF32, {2, 3})),
                    Literal(TensorType(ElementType::kF32, {4, 2}))},
                   DotAttrs({}, {}, {1}, {0}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("contracting dimension 0 has size 3"), std::string::npos)
      << out.status().message();
  auto bad_dim = RunOp("stablehlo.dot_general",
                       {Literal(TensorType(ElementType::kF32, {2, 3})),
                        Literal(TensorType(ElementType::kF32, {3, 2}))},
                       DotAttrs({}, {}, {2}, {0}));
  ASSERT_FALSE(bad_dim.ok());
}

TEST(DotTest, MatrixVector) {
  auto out = RunOp("stablehlo.dot",
                   {Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                    Literal::FromVector<float>({3}, {1, 0, -1})},
                   {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-2, -2}));
}

TEST(DotGeneralTest, LargeMatmulRunsInParallelChunksCorrectly) {
  const int64_t m = 64, k = 96, n = 80;
  std::vector<int32_t> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i % 11) - 5;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>(i % 7) - 3;
  auto out =
      RunOp("stablehlo.dot_general",
            {Literal::FromVector<int32_t>({m, k}, a), Literal::FromVector<int32_t>({k, n}, b)},
            DotAttrs({}, {}, {1}, {0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = Values<int32_t>((*out)[0]);
  for (int64_t i = 0; i < m; i += 7)
    for (int64_t j = 0; j < n; j += 3) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
      EXPECT_EQ(got[i * n + j], s);
    }
}

}  // namespace
}  // namespace tlaloc
