// The small-M bf16 kernel (cpu/matmul_small_m.cc): a few rows of A against bf16 weight rows, each
// (row, weight row) result bit for bit the matrix-vector kernel's (DotBF16), whatever the number
// of rows, the tile a pair falls in, a tail of k past whole 32-blocks, A's type and layout, and a
// batch. That is what keeps a sequence's logits the same alone and in a batched decode step.
#include "cpu/matmul_small_m.h"

#include <string>
#include <vector>

#include "cpu/kernel_test_util.h"

namespace tlaloc {
namespace {

using cputest::Bf16RowsTimesRowsT;
using cputest::ExpectPairsAreDotBF16;
using cputest::RandomBf16;

TEST(SmallMMatmulTest, EveryPairIsTheMatrixVectorKernelsDotBitForBit) {
  const int64_t n = 11;  // two four-row tiles and three single rows
  for (int64_t k : {1056, 1000, 40})
    for (int64_t m : {1, 2, 3, 5, 16, 33, 64, 65}) {
      std::vector<bf16> x = RandomBf16(m * k, static_cast<uint32_t>(m + k));
      std::vector<bf16> w = RandomBf16(n * k, 6);
      const std::vector<float> got = Bf16RowsTimesRowsT(x, w, m, k, n);
      if (m > cpu::kSmallMMaxRows) continue;  // past the kernel: only that it still runs
      ExpectPairsAreDotBF16(
          got, m, k, n, [&](int64_t s, int64_t i) { return x[s * k + i].f(); }, w.data(),
          "k=" + std::to_string(k) + " m=" + std::to_string(m));
    }
}

// f32 activations, A stored transposed ([k, m], contracted over its first dimension) and a batch
// of three: the same bits per pair as a row alone.
TEST(SmallMMatmulTest, F32TransposedBatchedActivationsGiveTheSameBits) {
  const int64_t batch = 3, m = 6, k = 96, n = 9;
  std::vector<float> a = rdtest::RandomFloats(batch * k * m, 21, 2.0f);
  std::vector<bf16> w = RandomBf16(batch * n * k, 22);
  Type result(TensorType(ElementType::kF32, {batch, m, n}));
  auto out = rdtest::RunOp(
      "stablehlo.dot_general",
      {Literal::FromVector<float>({batch, k, m}, a), Literal::FromVector<bf16>({batch, n, k}, w)},
      rdtest::DotAttrs({0}, {0}, {1}, {2}), std::vector<Type>{result});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto got = rdtest::Values<float>((*out)[0]);
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<float> batch_got(got.begin() + b * m * n, got.begin() + (b + 1) * m * n);
    ExpectPairsAreDotBF16(
        batch_got, m, k, n, [&](int64_t s, int64_t i) { return a[(b * k + i) * m + s]; },
        w.data() + b * n * k, "batch " + std::to_string(b));
  }
}

}  // namespace
}  // namespace tlaloc
