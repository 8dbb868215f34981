// The small-M bf16 kernel (cpu/matmul_small_m.cc): a few rows of A against bf16 weight rows, each
// (row, weight row) result bit for bit the matrix-vector kernel's (DotBF16), whatever the number
// of rows, the tile a pair falls in, a tail of k past whole 32-blocks, A's type and layout, and a
// batch. That is what keeps a sequence's logits the same alone and in a batched decode step.
#include "cpu/matmul_small_m.h"

#include <string>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "cpu/matmul_small_m_avx2.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc {
namespace {

using cputest::Bf16RowsTimesRowsT;
using cputest::ExpectPairsAreDotBF16;
using cputest::PoolContext;
using cputest::RandomBf16;
using cputest::SerialContext;

// `run(out, ctx)` on one thread and on the pool: the same bits both ways, and each batch's pairs
// DotBF16's (x_at(bi, s, i): element i of vector s of batch bi, as f32).
template <typename Run, typename XAt>
void ExpectSerialAndPooledPairsAreDotBF16(const Run& run, int64_t batch, int64_t m, int64_t k,
                                          int64_t n, const XAt& x_at, const bf16* w,
                                          const std::string& what) {
  std::vector<float> serial(batch * m * n, -1.f), pooled(batch * m * n, -2.f);
  SerialContext serial_ctx;
  PoolContext pool_ctx;
  run(serial.data(), serial_ctx);
  run(pooled.data(), pool_ctx);
  EXPECT_EQ(serial, pooled) << what << ": two threads changed the bits";
  for (int64_t bi = 0; bi < batch; ++bi)
    ExpectPairsAreDotBF16(
        std::vector<float>(serial.begin() + bi * m * n, serial.begin() + (bi + 1) * m * n), m, k, n,
        [&](int64_t s, int64_t i) { return x_at(bi, s, i); }, w + bi * n * k,
        what + " batch " + std::to_string(bi));
}

TEST(SmallMMatmulTest, EveryPairIsTheMatrixVectorKernelsDotBitForBit) {
  // Without AVX-512 or AVX2 + FMA the products of several rows go to BLAS, whose sums are ordered
  // otherwise.
  if (!HasAvx512Core() && !HasAvx2())
    GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA here: the small-M kernel does not run";
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
  if (!HasAvx512Core() && !HasAvx2())
    GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA here: the small-M kernel does not run";
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

// Each way of tiling the bf16 products (on AVX2 CPUs kPerPair is 2 weight rows x 1 vector, the
// others 1 row x 3 vectors; on AVX-512 ones the packed one unpacks a tile's weight rows once into a
// buffer that the later vectors' tiles read, for k <= 1024, and the stream one reads one row at a
// time against 4 vectors a tile; kDefault picks by m) gives every pair the matrix-vector
// kernel's bits: m of one tile or several (and a last tile of fewer vectors), k with a pair of
// 32-blocks unfinished (1001: one 32-block through the FMAs, then an odd tail of 9) or an odd tail
// past the buffer's limit (1091), k under one pair of blocks (40), rows past the last whole
// tile, blocks of rows split over two threads, and two batches.
TEST(SmallMMatmulTest, EveryTilingGivesTheMatrixVectorKernelsBits) {
  if (!HasAvx512Core() && !HasAvx2())
    GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA here: the small-M kernel does not run";
  const int64_t batch = 2, n = 70;  // tiles of 3 and 4 rows leave rows over; blocks of ~30 rows
  using Tiles = cpu::SmallMTiles;
  for (Tiles tiles :
       {Tiles::kPerPair, Tiles::kPerGroup, Tiles::kPacked, Tiles::kStream, Tiles::kDefault})
    for (int64_t k : {int64_t{1091}, int64_t{1024}, int64_t{1001}, int64_t{40}})
      for (int64_t m : {2, 3, 4, 8, 13, 16}) {
        std::vector<bf16> x = RandomBf16(batch * m * k, static_cast<uint32_t>(3 * m + k));
        std::vector<bf16> w = RandomBf16(batch * n * k, static_cast<uint32_t>(k));
        const cpu::MatrixView a{reinterpret_cast<const std::byte*>(x.data()), ElementType::kBF16,
                                m * k, k, 1};
        const cpu::MatrixView b{reinterpret_cast<const std::byte*>(w.data()), ElementType::kBF16,
                                n * k, 1, k};
        const std::string what = "tiles " + std::to_string(static_cast<int>(tiles)) +
                                 " k=" + std::to_string(k) + " m=" + std::to_string(m);
        ExpectSerialAndPooledPairsAreDotBF16(
            [&](float* out, EvalContext& ctx) {
              ASSERT_TRUE(cpu::SmallMMatmul(a, b, batch, m, k, n, out, ctx, tiles)) << what;
            },
            batch, m, k, n,
            [&](int64_t bi, int64_t s, int64_t i) { return x[(bi * m + s) * k + i].f(); }, w.data(),
            what);
      }
}

// The AVX2 path called directly (so that an AVX-512 CPU runs it too, against its own
// matrix-vector kernel): f32 vectors permuted as SmallMMatmul permutes them, both tile shapes,
// every pair DotBF16's bits. m from 2 to 64 (tiles of 3 vectors with 1 or 2 over), an odd n (a
// weight row past the last 2-row tile; with the pool, blocks of rows split over threads), k of
// whole 32-blocks (1056), with a tail of 8 (1000) or 16 + 3 (1011), and under one block (7, 40);
// two batches.
TEST(SmallMMatmulTest, Avx2PathGivesEveryPairDotBF16sBits) {
  if (!HasAvx2()) GTEST_SKIP() << "no AVX2 + FMA here: the AVX2 path cannot run";
  constexpr int kLo[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  const int64_t batch = 2, n = 71;
  using Tiles = cpu::SmallMAvx2Tiles;
  for (Tiles tiles : {Tiles::kOneRowThreeVectors, Tiles::kTwoRowsOneVector})
    for (int64_t k : {int64_t{1056}, int64_t{1000}, int64_t{1011}, int64_t{40}, int64_t{7}})
      for (int64_t m : {2, 3, 4, 5, 16, 33, 64}) {
        const std::vector<float> x =
            rdtest::RandomFloats(batch * m * k, static_cast<uint32_t>(7 * m + k), 2.0f);
        const std::vector<bf16> w = RandomBf16(batch * n * k, static_cast<uint32_t>(k + 1));
        const int64_t x_step = (k + 15) / 16 * 16, k32 = k / 32 * 32;
        std::vector<float> permuted(batch * m * x_step, 0.f);
        for (int64_t v = 0; v < batch * m; ++v) {
          const float* src = x.data() + v * k;
          float* dst = permuted.data() + v * x_step;
          for (int64_t i = 0; i < k32; i += 32)
            for (int l = 0; l < 16; ++l) {
              dst[i + l] = src[i + kLo[l]];
              dst[i + 16 + l] = src[i + kLo[l] + 4];
            }
          std::copy(src + k32, src + k, dst + k32);
        }
        const cpu::MatrixView b{reinterpret_cast<const std::byte*>(w.data()), ElementType::kBF16,
                                n * k, 1, k};
        const auto* weights = reinterpret_cast<const uint16_t*>(w.data());
        ExpectSerialAndPooledPairsAreDotBF16(
            [&](float* out, EvalContext& ctx) {
              cpu::SmallMAvx2(weights, b, batch, m, k, n, permuted.data(), x_step, out, ctx, tiles);
            },
            batch, m, k, n,
            [&](int64_t bi, int64_t s, int64_t i) { return x[(bi * m + s) * k + i]; }, w.data(),
            "tiles " + std::to_string(static_cast<int>(tiles)) + " k=" + std::to_string(k) +
                " m=" + std::to_string(m));
      }
}

}  // namespace
}  // namespace tlaloc
