// The matrix-vector kernel's dot products give one set of bits on every x86 CPU with AVX2 or
// AVX-512: both kernels are checked against a scalar model of the AVX-512 kernel's lanes (which
// elements each of 2 x 16 lanes accumulates with a fused multiply-add, and the order the lanes
// are then folded in).
#include "cpu/dots_avx2.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "cpu/reduction_matmul.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc {
namespace {

using cputest::RandomBf16;

// DotsAvx512's arithmetic, one lane at a time: 32-element steps (element e of a step goes to
// accumulator e % 8 < 4 ? 0 : 1, lane (e / 8) * 4 + e % 4), then a 16-element tail into
// accumulator 0 in natural order, then SumLanes' folds.
float LaneModel(const std::vector<float>& x, const std::vector<float>& w) {
  const int64_t k = static_cast<int64_t>(x.size());
  float acc[2][16] = {};
  int64_t i = 0;
  for (; i + 32 <= k; i += 32)
    for (int e = 0; e < 32; ++e) {
      float& a = acc[e % 8 < 4 ? 0 : 1][(e / 8) * 4 + e % 4];
      a = std::fma(x[i + e], w[i + e], a);
    }
  for (; i < k; i += 16)
    for (int l = 0; l < 16; ++l) {
      const bool live = i + l < k;
      acc[0][l] = std::fma(live ? x[i + l] : 0.0f, live ? w[i + l] : 0.0f, acc[0][l]);
    }
  float v[16];
  for (int l = 0; l < 16; ++l) v[l] = acc[0][l] + acc[1][l];
  for (int half = 8; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) v[l] = v[l] + v[l + half];
  return v[0];
}

const int64_t kLengths[] = {1, 7, 15, 16, 17, 31, 32, 33, 40, 64, 100, 1000, 1024, 1056};

TEST(DotKernels, DotBF16AndDotF32AreTheLaneModelBitForBit) {
  if (!HasAvx2() && !HasAvx512Core())
    GTEST_SKIP() << "no AVX2 or AVX-512 here: the portable loop sums in another order";
  for (int64_t k : kLengths) {
    std::vector<float> x = rdtest::RandomFloats(k, static_cast<uint32_t>(k), 2.0f);
    std::vector<bf16> row = RandomBf16(k, static_cast<uint32_t>(k + 1));
    std::vector<uint16_t> bits;
    std::vector<float> widened;
    for (bf16 b : row) {
      bits.push_back(b.bits);
      widened.push_back(b.f());
    }
    const float want = LaneModel(x, widened);
    EXPECT_EQ(std::bit_cast<uint32_t>(cpu::DotBF16(x.data(), bits.data(), k)),
              std::bit_cast<uint32_t>(want))
        << "bf16 k=" << k;
    EXPECT_EQ(std::bit_cast<uint32_t>(cpu::DotF32(x.data(), widened.data(), k)),
              std::bit_cast<uint32_t>(want))
        << "f32 k=" << k;
  }
}

// The AVX2 kernel itself, one and two vectors at once (on AVX-512 CPUs too, where DotBF16 runs
// the other kernel): so the two kernels are one model's bits wherever either runs.
TEST(DotKernels, Avx2KernelIsTheLaneModelBitForBit) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2 and FMA here: the AVX2 kernel cannot run";
  for (int64_t k : kLengths) {
    std::vector<float> x0 = rdtest::RandomFloats(k, static_cast<uint32_t>(3 * k), 2.0f);
    std::vector<float> x1 = rdtest::RandomFloats(k, static_cast<uint32_t>(3 * k + 1), 2.0f);
    std::vector<bf16> row = RandomBf16(k, static_cast<uint32_t>(3 * k + 2));
    std::vector<uint16_t> bits;
    std::vector<float> widened;
    for (bf16 b : row) {
      bits.push_back(b.bits);
      widened.push_back(b.f());
    }
    const float* x[2] = {x0.data(), x1.data()};
    float bf16_out[2], f32_out[2];
    cpu::DotsAvx2<2, uint16_t>(x, bits.data(), k, bf16_out);
    cpu::DotsAvx2<2, float>(x, widened.data(), k, f32_out);
    const float want[2] = {LaneModel(x0, widened), LaneModel(x1, widened)};
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(std::bit_cast<uint32_t>(bf16_out[s]), std::bit_cast<uint32_t>(want[s]))
          << "bf16 k=" << k << " vector " << s;
      EXPECT_EQ(std::bit_cast<uint32_t>(f32_out[s]), std::bit_cast<uint32_t>(want[s]))
          << "f32 k=" << k << " vector " << s;
    }
  }
}

// The column kernel (attention's probabilities times V): each output is the FMAs over the
// positions in order from 0, as the portable loop and the AVX-512 kernel do, for 1 and 2
// vectors, bf16 and f32 rows with a row step, and widths with a tail.
TEST(DotKernels, Avx2ColumnKernelIsOneFmaPerPositionInOrder) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2 and FMA here: the AVX2 kernel cannot run";
  for (int64_t nb : {32, 31, 17, 8, 3}) {
    for (int64_t k : {1, 7, 64, 513}) {
      const int64_t step = 40;  // row p at p * step: wider than the block, as a cache row is
      std::vector<bf16> rows = RandomBf16(k * step, static_cast<uint32_t>(nb * 1000 + k));
      std::vector<uint16_t> bits;
      std::vector<float> widened;
      for (bf16 b : rows) {
        bits.push_back(b.bits);
        widened.push_back(b.f());
      }
      const std::vector<float> vecs =
          rdtest::RandomFloats(2 * k, static_cast<uint32_t>(nb * 7 + k), 1.0f);
      const int64_t n = 48;  // the output's row stride
      std::vector<float> want(2 * n, -1.0f), from_bf16(2 * n, -1.0f), from_f32(2 * n, -1.0f),
          one(2 * n, -1.0f);
      for (int s = 0; s < 2; ++s)
        for (int64_t j = 0; j < nb; ++j) {
          float acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc = std::fma(vecs[s * k + p], widened[p * step + j], acc);
          want[s * n + j] = acc;
        }
      const uint16_t* b = bits.data();
      const float* f = widened.data();
      cpu::ColumnsAvx2At<2>([b](int64_t p) { return b + p * step; }, vecs.data(), k, nb,
                            from_bf16.data(), n);
      cpu::ColumnsAvx2At<2>([f](int64_t p) { return f + p * step; }, vecs.data(), k, nb,
                            from_f32.data(), n);
      cpu::ColumnsAvx2At<1>([b](int64_t p) { return b + p * step; }, vecs.data() + k, k, nb,
                            one.data() + n, n);
      for (int64_t i = 0; i < 2 * n; ++i) {
        const std::string at =
            "nb=" + std::to_string(nb) + " k=" + std::to_string(k) + " output " + std::to_string(i);
        EXPECT_EQ(std::bit_cast<uint32_t>(from_bf16[i]), std::bit_cast<uint32_t>(want[i])) << at;
        EXPECT_EQ(std::bit_cast<uint32_t>(from_f32[i]), std::bit_cast<uint32_t>(want[i])) << at;
        if (i >= n) {
          EXPECT_EQ(std::bit_cast<uint32_t>(one[i]), std::bit_cast<uint32_t>(want[i])) << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tlaloc
