// The small-M bf16 kernel (cpu/matmul_small_m.cc): a few rows of A against bf16 weight rows, each
// (row, weight row) result bit for bit the matrix-vector kernel's (DotBF16), whatever the number
// of rows, the tile a pair falls in, a tail of k past whole 32-blocks, A's type and layout, and a
// batch. That is what keeps a sequence's logits the same alone and in a batched decode step.
#include "cpu/matmul_small_m.h"

#include "ops/reduction_test_util.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc {
namespace {

using rdtest::DotAttrs;
using rdtest::RunOp;
using rdtest::Values;

std::vector<bf16> RandomBf16(size_t n, uint32_t seed) {
  std::vector<bf16> out;
  for (float f : rdtest::RandomFloats(n, seed, 2.0f)) out.push_back(bf16(f));
  return out;
}

float Expected(const std::vector<float>& x, const std::vector<bf16>& w, int64_t k) {
  std::vector<uint16_t> bits;
  for (bf16 b : w) bits.push_back(b.bits);
  return cpu::DotBF16(x.data(), bits.data(), k);
}

TEST(SmallMMatmulTest, EveryPairIsTheMatrixVectorKernelsDotBitForBit) {
  const int64_t n = 11;  // two four-row tiles and three single rows
  for (int64_t k : {1056, 1000, 40})
    for (int64_t m : {1, 2, 3, 5, 16, 33, 64, 65}) {
      std::vector<bf16> x = RandomBf16(m * k, static_cast<uint32_t>(m + k));
      std::vector<bf16> w = RandomBf16(n * k, 6);
      Type f32_result(TensorType(ElementType::kF32, {m, n}));
      auto out = RunOp("stablehlo.dot_general",
                       {Literal::FromVector<bf16>({m, k}, x), Literal::FromVector<bf16>({n, k}, w)},
                       DotAttrs({}, {}, {1}, {1}), std::vector<Type>{f32_result});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      auto got = Values<float>((*out)[0]);
      if (m > cpu::kSmallMMaxRows) continue;  // past the kernel: only that it still runs
      for (int64_t s = 0; s < m; ++s) {
        std::vector<float> xf;
        for (int64_t i = 0; i < k; ++i) xf.push_back(x[s * k + i].f());
        for (int64_t r = 0; r < n; ++r) {
          std::vector<bf16> row(w.begin() + r * k, w.begin() + (r + 1) * k);
          ASSERT_EQ(got[s * n + r], Expected(xf, row, k))
              << "k=" << k << " m=" << m << " vector " << s << " row " << r;
        }
      }
    }
}

// f32 activations, A stored transposed ([k, m], contracted over its first dimension) and a batch
// of three: the same bits per pair as a row alone.
TEST(SmallMMatmulTest, F32TransposedBatchedActivationsGiveTheSameBits) {
  const int64_t batch = 3, m = 6, k = 96, n = 9;
  std::vector<float> a = rdtest::RandomFloats(batch * k * m, 21, 2.0f);
  std::vector<bf16> w = RandomBf16(batch * n * k, 22);
  Type result(TensorType(ElementType::kF32, {batch, m, n}));
  auto out = RunOp(
      "stablehlo.dot_general",
      {Literal::FromVector<float>({batch, k, m}, a), Literal::FromVector<bf16>({batch, n, k}, w)},
      DotAttrs({0}, {0}, {1}, {2}), std::vector<Type>{result});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = Values<float>((*out)[0]);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < m; ++s) {
      std::vector<float> xf;
      for (int64_t i = 0; i < k; ++i) xf.push_back(a[(b * k + i) * m + s]);
      for (int64_t r = 0; r < n; ++r) {
        std::vector<bf16> row(w.begin() + (b * n + r) * k, w.begin() + (b * n + r + 1) * k);
        ASSERT_EQ(got[(b * m + s) * n + r], Expected(xf, row, k))
            << "batch " << b << " vector " << s << " row " << r;
      }
    }
}

}  // namespace
}  // namespace tlaloc
