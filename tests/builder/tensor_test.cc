#include "tlaloc/builder/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tlaloc/interp/interpreter.h"

namespace tlaloc {
namespace {

// Builds main(args...) with `body` and runs it on `inputs`.
std::vector<Literal> RunProgram(const std::vector<Literal>& inputs,
                                const std::function<std::vector<Tensor>(FunctionBuilder&)>& body) {
  Module m("tensor_test");
  std::vector<Type> types;
  for (const auto& l : inputs) types.push_back(l.type());
  FunctionBuilder fb(&m, "main", types);
  Status s = fb.Return(body(fb));
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto r = Interpret(m, "main", inputs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : std::vector<Literal>{};
}

Literal RandomF32(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(NumElements(dims));
  for (auto& x : v) x = dist(gen);
  return Literal::FromVector<float>(dims, v);
}

TEST(Tensor, BroadcastingArithmetic) {
  auto out = RunProgram(
      {Literal::FromVector<float>({2, 1}, {1, 2}), Literal::FromVector<float>({3}, {10, 20, 30})},
      [](FunctionBuilder& f) { return std::vector<Tensor>{f.arg(0) + f.arg(1) * 2.0}; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3}));
  std::vector<float> expect{21, 41, 61, 22, 42, 62};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].span<float>()[i], expect[i]);
}

TEST(Tensor, IncompatibleShapesGiveAClearError) {
  Module m("t");
  FunctionBuilder fb(
      &m, "main",
      {Type(TensorType(ElementType::kF32, {2})), Type(TensorType(ElementType::kF32, {3}))});
  Tensor r = fb.arg(0) + fb.arg(1);
  EXPECT_FALSE(fb.status().ok());
  EXPECT_NE(fb.status().message().find("do not broadcast"), std::string::npos)
      << fb.status().message();
  EXPECT_FALSE(r.valid());
}

TEST(Tensor, MatmulMatchesNaiveWithBatchBroadcast) {
  Literal a = RandomF32({2, 3, 4}, 1), b = RandomF32({4, 5}, 2);
  auto out = RunProgram(
      {a, b}, [](FunctionBuilder& f) { return std::vector<Tensor>{Matmul(f.arg(0), f.arg(1))}; });
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3, 5}));
  for (int bt = 0; bt < 2; ++bt)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k)
          s += a.span<float>()[(bt * 3 + i) * 4 + k] * b.span<float>()[k * 5 + j];
        EXPECT_NEAR(out[0].span<float>()[(bt * 3 + i) * 5 + j], s, 1e-4);
      }
}

TEST(Tensor, EinsumTransposesToRequestedOrder) {
  Literal q = RandomF32({2, 3, 4}, 3), k = RandomF32({2, 5, 4}, 4);
  auto out = RunProgram({q, k}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{Einsum("bqd,bkd->bkq", f.arg(0), f.arg(1))};
  });
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 5, 3}));
  for (int bt = 0; bt < 2; ++bt)
    for (int kk = 0; kk < 5; ++kk)
      for (int qq = 0; qq < 3; ++qq) {
        double s = 0;
        for (int d = 0; d < 4; ++d)
          s += q.span<float>()[(bt * 3 + qq) * 4 + d] * k.span<float>()[(bt * 5 + kk) * 4 + d];
        EXPECT_NEAR(out[0].span<float>()[(bt * 5 + kk) * 3 + qq], s, 1e-4);
      }
}

TEST(Tensor, SoftmaxLogSoftmaxLogSumExp) {
  Literal x = Literal::FromVector<float>({2, 3}, {1, 2, 3, -INFINITY, 0, 1000});
  auto out = RunProgram({x}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{Softmax(f.arg(0)), LogSoftmax(f.arg(0)), LogSumExp(f.arg(0), -1)};
  });
  ASSERT_EQ(out.size(), 3u);
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(out[0].span<float>()[2], std::exp(3.0) / z, 1e-6);
  EXPECT_EQ(out[0].span<float>()[3], 0.0f);
  EXPECT_NEAR(out[0].span<float>()[5], 1.0f, 1e-6);
  EXPECT_NEAR(out[1].span<float>()[0], 1.0 - std::log(z), 1e-5);
  EXPECT_NEAR(out[2].span<float>()[0], std::log(z), 1e-5);
  EXPECT_NEAR(out[2].span<float>()[1], 1000.0, 1e-3);
}

TEST(Tensor, RmsNormComputesInF32AndCastsBack) {
  Literal x = Literal::FromVector<float>({1, 4}, {1, 2, 3, 4});
  Literal w = Literal::FromVector<float>({4}, {1, 1, 2, 2});
  auto out = RunProgram({x, w}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{RmsNorm(f.arg(0), f.arg(1), 1e-6)};
  });
  ASSERT_EQ(out.size(), 1u);
  double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  EXPECT_NEAR(out[0].span<float>()[3], 2 * 4 / rms, 1e-5);
}

TEST(Tensor, MeanVarSiluGelu) {
  Literal x = Literal::FromVector<float>({4}, {1, 2, 3, 6});
  auto out = RunProgram({x}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{Mean(f.arg(0), {0}), Var(f.arg(0), {0}), Silu(f.arg(0)),
                               Gelu(f.arg(0), false)};
  });
  ASSERT_EQ(out.size(), 4u);
  EXPECT_NEAR(out[0].span<float>()[0], 3.0, 1e-6);
  EXPECT_NEAR(out[1].span<float>()[0], 3.5, 1e-5);
  EXPECT_NEAR(out[2].span<float>()[1], 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(out[3].span<float>()[0], 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-5);
}

TEST(Tensor, ArgmaxPrefersFirstMaximumAndNaN) {
  Literal x = Literal::FromVector<float>({3, 4}, {1, 5, 5, 2, NAN, 1, 9, 3, -1, -2, -1, -3});
  auto out =
      RunProgram({x}, [](FunctionBuilder& f) { return std::vector<Tensor>{Argmax(f.arg(0), 1)}; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].span<int32_t>()[0], 1);
  EXPECT_EQ(out[0].span<int32_t>()[1], 0);
  EXPECT_EQ(out[0].span<int32_t>()[2], 0);
}

TEST(Tensor, CumsumOneHotTakeTopK) {
  Literal x = Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Literal ids = Literal::FromVector<int32_t>({2}, {2, 0});
  Literal table = Literal::FromVector<float>({3, 2}, {0, 1, 10, 11, 20, 21});
  auto out = RunProgram({x, ids, table}, [](FunctionBuilder& f) {
    auto [vals, idx] = TopK(f.arg(0) * -1.0, 2);
    return std::vector<Tensor>{Cumsum(f.arg(0), 1), OneHot(f.arg(1), 3), Take(f.arg(2), f.arg(1)),
                               vals, idx};
  });
  ASSERT_EQ(out.size(), 5u);
  std::vector<float> cs{1, 3, 6, 4, 9, 15};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0].span<float>()[i], cs[i]);
  std::vector<float> oh{0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[1].span<float>()[i], oh[i]);
  std::vector<float> tk{20, 21, 0, 1};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[2].span<float>()[i], tk[i]);
  EXPECT_EQ(out[3].span<float>()[0], -1.0f);
  EXPECT_EQ(out[3].span<float>()[1], -2.0f);
  EXPECT_EQ(out[4].span<int32_t>()[0], 0);
  EXPECT_EQ(out[4].span<int32_t>()[3], 1);
}

// The paged KV cache's gather: [N, H, P, D] pages by a [B, M] table straight into
// [B, H, M, P, D] must equal Take then Transpose, element for element (bf16, as the cache).
TEST(Tensor, TakeWithRowDimsEqualsTakeThenTranspose) {
  Literal pool(TensorType(ElementType::kBF16, {5, 3, 4, 8}));
  auto bits = pool.span<uint16_t>();
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(0x3f80 + i);
  Literal table = Literal::FromVector<int32_t>({2, 3}, {4, 0, 2, 1, 1, 3});
  auto out = RunProgram({pool, table}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{Take(f.arg(0), f.arg(1), {1, 3, 4}),
                               Transpose(Take(f.arg(0), f.arg(1)), {0, 2, 1, 3, 4})};
  });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3, 3, 4, 8}));
  ASSERT_EQ(out[0].dims(), out[1].dims());
  auto a = out[0].span<uint16_t>(), b = out[1].span<uint16_t>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "element " << i;
  // Row 1, head 2, block 0 (page 1), offset 3, element 5.
  EXPECT_EQ(a[(((1 * 3 + 2) * 3 + 0) * 4 + 3) * 8 + 5], bits[((1 * 3 + 2) * 4 + 3) * 8 + 5]);
}

TEST(Tensor, TakeRejectsRowDimsOutOfOrder) {
  Module m("take_test");
  FunctionBuilder fb(
      &m, "main",
      {Type(TensorType(ElementType::kF32, {5, 3, 4})), Type(TensorType(ElementType::kS32, {2}))});
  Tensor t = Take(fb.arg(0), fb.arg(1), {2, 1});
  EXPECT_FALSE(t.valid());
  Status s = fb.Return({fb.arg(0)});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("row_dims"), std::string::npos) << s.message();
}

TEST(Tensor, ReshapeInfersOneDimension) {
  Literal x = RandomF32({2, 6}, 5);
  auto out = RunProgram({x}, [](FunctionBuilder& f) {
    return std::vector<Tensor>{Transpose(Reshape(f.arg(0), {3, -1}), {1, 0})};
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(out[0].span<float>()[1], x.span<float>()[4]);
}

}  // namespace
}  // namespace tlaloc
