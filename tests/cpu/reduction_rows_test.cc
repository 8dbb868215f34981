// Row folds (cpu/reduction_rows.h): the vector max / min (AVX-512 or AVX2, comparisons in lane
// order) against the sequential fold of ops::ApplyBinary bit for bit, on rows with NaNs, both
// zeros, infinities and subnormals, every length through a few vectors and a ragged tail.
#include "cpu/reduction_rows.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace tlaloc::cpu {
namespace {

using ops::BinaryKind;

float Sequential(BinaryKind kind, const std::vector<float>& x, float init) {
  float acc = init;
  for (float v : x) acc = ops::ApplyBinary<float>(kind, acc, v);
  return acc;
}

TEST(RowFolds, MaxAndMinAreTheSequentialFoldsBits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            inf,
                            -inf,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            -3.5f,
                            1e30f};
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> value(-100.0f, 100.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  int checked = 0;
  for (int64_t n = 0; n <= 41; ++n)
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      // Trial 0: plain values; then more and more special ones (and all-zero rows of mixed sign).
      for (float& v : x) {
        const int p = pick(rng);
        v = trial == 0 || p >= trial ? value(rng) : specials[p % std::size(specials)];
        if (trial == 39) v = p % 2 ? 0.0f : -0.0f;
      }
      for (BinaryKind kind : {BinaryKind::kMax, BinaryKind::kMin})
        for (float init : {-inf, inf, 0.0f, -0.0f, 5.0f}) {
          const float want = Sequential(kind, x, init), got = FoldRowF32(kind, x.data(), n, init);
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << (kind == BinaryKind::kMax ? "max" : "min") << " n=" << n << " trial " << trial
              << " init " << init;
          ++checked;
        }
    }
  EXPECT_EQ(checked, 42 * 40 * 2 * 5);
}

}  // namespace
}  // namespace tlaloc::cpu
