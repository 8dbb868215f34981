// The grouped bf16, f32 and int8 tile kernels of chlo.ragged_dot (src/cpu/ragged_dot_grouped.h)
// against a double loop over the same values, for every tile shape they have (1-4 rows, 1-6
// weight rows) and contraction lengths with and without a masked tail.
#include "cpu/ragged_dot_grouped.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {
namespace {

std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (auto& v : out) v = FloatToBf16Bits(d(rng));
  return out;
}

TEST(GroupedBf16Kernel, MatchesDoubleLoopForEveryTileShape) {
  if (!HasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512_BF16 (the kernel declines)";
  for (int64_t k : {1, 31, 32, 64, 97}) {
    for (int64_t rows = 1; rows <= 9; ++rows) {
      const int64_t n = 13, lda = k + 3, ldw = k + 5, ldc = n + 2;  // strides wider than rows
      auto a = RandomBf16(rows * lda, 1 + k);
      auto w = RandomBf16(n * ldw, 2 + k);
      std::vector<float> c(rows * ldc, -7.0f);
      ASSERT_TRUE(Bf16RowsTimesRowsT(a.data(), lda, rows, w.data(), ldw, n, k, c.data(), ldc));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, scale = 0;
          for (int64_t i = 0; i < k; ++i) {
            const double p = static_cast<double>(Bf16BitsToFloat(a[r * lda + i])) *
                             Bf16BitsToFloat(w[j * ldw + i]);
            want += p;
            scale += std::fabs(p);
          }
          // f32 accumulation of exact products: within a few ulps of the magnitudes summed.
          EXPECT_NEAR(c[r * ldc + j], want, 1e-6 * (1 + scale))
              << "k " << k << " rows " << rows << " (" << r << ", " << j << ")";
        }
        for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[r * ldc + j], -7.0f) << "wrote past n";
      }
    }
  }
}

// The int8 tile kernel is the f32 one on the dequantised rows, bit for bit: what lets the fused
// int8 expert product return the unfused chain's bits (ragged_dot_int8.cc).
TEST(GroupedInt8Kernel, EqualsTheF32KernelOnDequantisedRowsBitForBit) {
  if (!HasAvx512Core()) GTEST_SKIP() << "this CPU has no AVX-512 (the kernel declines)";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> scale(1e-4f, 0.05f);
  for (int64_t k : {32, 64, 96, 2048}) {
    for (int64_t rows = 1; rows <= 9; ++rows) {
      const int64_t n = 13, lda = k + 3, ldc = n + 2, blocks = k / 32;
      std::vector<float> a(rows * lda), dense(n * k), want(rows * ldc, -7.0f),
          got(rows * ldc, -7.0f);
      std::vector<int8_t> w(n * k);
      std::vector<uint16_t> scales(n * blocks);
      for (float& v : a) v = d(rng);
      for (int8_t& v : w) v = static_cast<int8_t>(q(rng));
      for (uint16_t& v : scales) v = FloatToHalfBits(scale(rng));
      for (int64_t i = 0; i < n * k; ++i)
        dense[i] = static_cast<float>(w[i]) * HalfBitsToFloat(scales[i / 32]);
      ASSERT_TRUE(F32RowsTimesRowsT(a.data(), lda, rows, dense.data(), k, n, k, want.data(), ldc));
      ASSERT_TRUE(
          Int8RowsTimesRowsT(a.data(), lda, rows, w.data(), scales.data(), n, k, got.data(), ldc));
      for (int64_t i = 0; i < rows * ldc; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "k " << k << " rows " << rows << " at " << i;
    }
  }
  std::vector<float> a(16), c(1);
  std::vector<int8_t> w(16);
  std::vector<uint16_t> scales(1);
  EXPECT_FALSE(Int8RowsTimesRowsT(a.data(), 16, 1, w.data(), scales.data(), 1, 16, c.data(), 1))
      << "k must be a multiple of 32";
}

TEST(GroupedF32Kernel, MatchesDoubleLoopForEveryTileShape) {
  if (!HasAvx512Core()) GTEST_SKIP() << "this CPU has no AVX-512 (the kernel declines)";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int64_t k : {1, 15, 16, 33, 97}) {
    for (int64_t rows = 1; rows <= 9; ++rows) {
      const int64_t n = 13, lda = k + 3, ldw = k + 5, ldc = n + 2;  // strides wider than rows
      std::vector<float> a(rows * lda), w(n * ldw), c(rows * ldc, -7.0f);
      for (float& v : a) v = d(rng);
      for (float& v : w) v = d(rng);
      ASSERT_TRUE(F32RowsTimesRowsT(a.data(), lda, rows, w.data(), ldw, n, k, c.data(), ldc));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, scale = 0;
          for (int64_t i = 0; i < k; ++i) {
            const double p = static_cast<double>(a[r * lda + i]) * w[j * ldw + i];
            want += p;
            scale += std::fabs(p);
          }
          EXPECT_NEAR(c[r * ldc + j], want, 1e-6 * (1 + scale))
              << "k " << k << " rows " << rows << " (" << r << ", " << j << ")";
        }
        for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[r * ldc + j], -7.0f) << "wrote past n";
      }
    }
  }
}

}  // namespace
}  // namespace tlaloc::cpu
