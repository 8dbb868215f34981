// The q8_0 kernels on AVX2 (cpu/reduction_matmul_q8_avx2.h): the quantiser gives the portable
// one's q and d bits, and the product the portable loop's bits over many shapes and extreme
// values (-128 weights, +-127, zero blocks, large and tiny scales); without VNNI, every Q8Kernel
// mode runs it and so gives those bits too.
#include "cpu/reduction_matmul_q8_avx2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "cpu/reduction_matmul_q8.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

using cputest::PoolContext;
using cputest::SerialContext;

#if defined(__x86_64__)

#define SKIP_WITHOUT_AVX2()                                                                      \
  if (!cpu::q8_internal::Q8UsesAvx2())                                                           \
  GTEST_SKIP() << "this CPU has no AVX2 + FMA: the q8_0 products run the portable loop, tested " \
                  "in reduction_matmul_q8_test.cc"

struct Operands {
  std::vector<float> x;      // [m, k]
  std::vector<int8_t> w;     // [n, k], every s8 value, -128 included
  std::vector<uint16_t> ws;  // [n, k / 32] f16
};

// Random operands with the extremes in place: all-zero activation blocks, blocks of +-127
// (largest magnitude exactly representable), weight blocks of -128 and 127 only, zero, large and
// tiny (subnormal f16) weight scales, and activation blocks of very different magnitudes.
Operands MakeOperands(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-3.f, 3.f);
  Operands o;
  o.x.resize(m * k);
  for (int64_t i = 0; i < m * k; ++i) {
    const int64_t block = i / 32;
    const float magnitude = block % 5 == 3 ? 1e6f : block % 7 == 4 ? 1e-6f : 1.f;
    o.x[i] = uni(rng) * magnitude;
  }
  for (int64_t i = 0; i < m * k; i += 32 * 9)
    for (int e = 0; e < 32; ++e) o.x[i + e] = 0;  // every ninth block all zero
  for (int64_t i = 64; i + 32 <= m * k; i += 32 * 11) {
    o.x[i] = 127.f, o.x[i + 1] = -127.f, o.x[i + 2] = 2.5f, o.x[i + 3] = -0.5f;
  }
  o.w.resize(n * k);
  for (int8_t& v : o.w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  for (int64_t i = 0; i + 32 <= n * k; i += 32 * 5)
    for (int e = 0; e < 32; ++e) o.w[i + e] = (e % 2) ? 127 : -128;
  o.ws.resize(n * k / 32);
  for (size_t b = 0; b < o.ws.size(); ++b) {
    const float mantissa = 1.f + (rng() % 64) / 64.f;
    const int exponent = b % 6 == 1 ? 10 : b % 6 == 2 ? -20 : -8;  // large, subnormal f16, usual
    o.ws[b] = FloatToHalfBits(std::ldexp(mantissa, exponent));
  }
  if (!o.ws.empty()) o.ws[0] = 0;
  return o;
}

// The bits of every element of a and b are the same; reports the first few that differ.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 3; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ++bad;
      ADD_FAILURE() << what << " at " << i << ": " << got[i] << " vs " << want[i];
    }
}

std::vector<float> Portable(const Operands& o, int64_t m, int64_t n, int64_t k) {
  std::vector<float> c(m * n, std::nanf(""));
  SerialContext serial;
  cpu::Int8MatmulQ8_0(o.x.data(), m, o.w.data(), o.ws.data(), n, k, c.data(), serial,
                      cpu::Q8Kernel::kPortable);
  return c;
}

TEST(Q8Avx2, QuantiserGivesThePortableBits) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<std::vector<float>> blocks;
  for (int b = 0; b < 2000; ++b) {
    std::vector<float> x(32);
    const float scale = std::ldexp(1.f, static_cast<int>(rng() % 200) - 100);
    for (float& v : x) v = uni(rng) * scale;
    blocks.push_back(x);
  }
  blocks.push_back(std::vector<float>(32, 0.f));   // all zero
  blocks.push_back(std::vector<float>(32, -0.f));  // all negative zero
  std::vector<float> ties(32, 0.f);                // amax 127: x * id is x, ties go to even
  for (int i = 0; i < 32; ++i) ties[i] = (i % 2 ? -1.f : 1.f) * (i * 4 + 0.5f);
  ties[31] = 127.f;
  blocks.push_back(ties);
  std::vector<float> tiny(32);  // amax so small that 127 / amax overflows to infinity
  for (int i = 0; i < 32; ++i) tiny[i] = (i % 3 ? 1e-39f : -2e-39f);
  blocks.push_back(tiny);
  std::vector<float> huge(32);  // near FLT_MAX
  for (int i = 0; i < 32; ++i) huge[i] = (i % 2 ? 3e38f : -1e38f) / (i + 1);
  blocks.push_back(huge);
  for (const std::vector<float>& x : blocks) {
    int8_t q[32], want_q[32];
    float dx = -1, want_dx = -2;
    uint16_t d = 1, want_d = 2;
    const int32_t sum = cpu::q8_internal::QuantizeBlockAvx2(x.data(), q, &dx, &d);
    const int32_t want_sum =
        cpu::q8_internal::QuantizeBlockPortable(x.data(), want_q, &want_dx, &want_d);
    EXPECT_EQ(std::memcmp(q, want_q, 32), 0) << "block starting " << x[0];
    EXPECT_EQ(sum, want_sum);
    EXPECT_EQ(d, want_d);
    EXPECT_EQ(std::memcmp(&dx, &want_dx, sizeof(float)), 0);
  }
}

TEST(Q8Avx2, ProductGivesThePortableBitsOverManyShapes) {
  SKIP_WITHOUT_AVX2();
  PoolContext pool;
  SerialContext serial;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 64})
    for (int64_t n : {1, 7, 8, 9, 15, 33, 70})
      for (int64_t k : {32, 64, 96, 544, 1024, 4096}) {
        if (m * n * k > (int64_t{1} << 22)) continue;
        const Operands o = MakeOperands(m, n, k, static_cast<uint32_t>(m * 131 + n * 7 + k));
        const std::vector<float> want = Portable(o, m, n, k);
        const cpu::q8_internal::QuantizedRows xq =
            cpu::q8_internal::QuantizeRows(o.x.data(), m, k, serial);
        const cpu::Q8RowGroup all{0, 0, m};
        std::vector<float> got(m * n, std::nanf(""));
        cpu::q8_internal::Avx2Groups(xq, o.w.data(), o.ws.data(), n, k, {&all, 1}, got.data(),
                                     n * k > 4096 ? static_cast<EvalContext&>(pool) : serial);
        ExpectSameBits(
            got, want,
            "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      }
}

// The portable loop's arithmetic on already quantised activations (which may hold q = -128,
// which no quantiser here gives): each block's int32 sum times (dx * dw), rounded, then added.
std::vector<float> PortableOnQuantized(const cpu::q8_internal::QuantizedRows& xq, int64_t m,
                                       const Operands& o, int64_t n, int64_t k) {
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t b = 0; b < k / 32; ++b) {
        int32_t sum = 0;
        for (int64_t e = b * 32; e < (b + 1) * 32; ++e)
          sum += int32_t{xq.Q(i)[e]} * int32_t{o.w[j * k + e]};
        volatile float p =  // rounded before the add
            static_cast<float>(sum) * (xq.Dx(i)[b] * HalfBitsToFloat(o.ws[j * (k / 32) + b]));
        acc += p;
      }
      c[i * n + j] = acc;
    }
  return c;
}

// The tiles (from eight activation rows) multiply |w| by sign(x, w) in int16 pairs: exact for
// weights of -128 against activations of +-127, the largest pair sums (2 * 128 * 127 = 32512,
// next to int16's limit). Weight rows of -128 only, of -128 and 127 alternating, and random,
// against activation blocks quantised to +-127 throughout.
TEST(Q8Avx2, TilesAreExactForMinimumWeightsAgainstExtremeActivations) {
  SKIP_WITHOUT_AVX2();
  PoolContext pool;
  for (int64_t m : {8, 9, 13, 64})
    for (int64_t n : {8, 17, 40})
      for (int64_t k : {32, 96, 1024}) {
        Operands o = MakeOperands(m, n, k, static_cast<uint32_t>(m * 5 + n * 3 + k));
        for (int64_t i = 0; i < m * k; ++i) {
          const int64_t block = i / 32;
          if (block % 3 == 0) o.x[i] = (i % 2 ? -1.f : 1.f);  // q = +-127 (amax 1)
          if (block % 3 == 1) o.x[i] = (i % 5 < 2 ? -3.f : 3.f);
        }
        for (int64_t j = 0; j < n; ++j)
          for (int64_t e = 0; e < k; ++e) {
            int8_t& v = o.w[j * k + e];
            if (j % 3 == 0) v = -128;
            if (j % 3 == 1) v = (e % 2) ? 127 : -128;
          }
        SerialContext serial;
        const cpu::q8_internal::QuantizedRows xq =
            cpu::q8_internal::QuantizeRows(o.x.data(), m, k, serial);
        int extremes = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t e = 0; e < k; ++e) extremes += std::abs(xq.Q(i)[e]) == 127;
        ASSERT_GT(extremes, m * k / 2) << "the activations should be mostly +-127";
        const cpu::Q8RowGroup all{0, 0, m};
        std::vector<float> got(m * n, std::nanf(""));
        cpu::q8_internal::Avx2Groups(xq, o.w.data(), o.ws.data(), n, k, {&all, 1}, got.data(),
                                     pool);
        const std::string what =
            "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
        ExpectSameBits(got, Portable(o, m, n, k), what);
        ExpectSameBits(got, PortableOnQuantized(xq, m, o, n, k), what + " (on q)");
      }
}

// An activation of -128 (the AVX-512 quantiser's saturation could give one on a CPU without
// VNNI) would break the tiles' sign trick against negative weights: such a call takes the
// int16 path, with the exact sums still.
TEST(Q8Avx2, MinimumActivationsKeepTheExactSums) {
  SKIP_WITHOUT_AVX2();
  PoolContext pool;
  const int64_t m = 16, n = 24, k = 256;
  const Operands o = MakeOperands(m, n, k, 5);
  cpu::q8_internal::QuantizedRows xq = cpu::q8_internal::QuantizeRows(o.x.data(), m, k, pool);
  for (int64_t i = 0; i < m; i += 3)
    for (int64_t e = 0; e < k; e += 7) xq.q[i * xq.padded_k + e] = -128;
  const cpu::Q8RowGroup all{0, 0, m};
  std::vector<float> got(m * n, std::nanf(""));
  cpu::q8_internal::Avx2Groups(xq, o.w.data(), o.ws.data(), n, k, {&all, 1}, got.data(), pool);
  ExpectSameBits(got, PortableOnQuantized(xq, m, o, n, k), "q = -128 present");
}

// Without VNNI, every mode but kPortable runs the AVX2 kernel: all give the portable bits (with
// VNNI, kRowStream and kTiles sum in other orders; kInOrder is checked in
// reduction_matmul_q8_test.cc there).
TEST(Q8Avx2, EveryModeGivesThePortableBitsWithoutVnni) {
  SKIP_WITHOUT_AVX2();
  if (cpu::Q8UsesVnni())
    GTEST_SKIP() << "this CPU has AVX512-VNNI: its own kernels run (reduction_matmul_q8_test.cc)";
  PoolContext pool;
  for (const auto kernel : {cpu::Q8Kernel::kAuto, cpu::Q8Kernel::kInOrder,
                            cpu::Q8Kernel::kRowStream, cpu::Q8Kernel::kTiles})
    for (int64_t m : {1, 2, 5, 17})
      for (int64_t n : {13, 1030}) {
        const int64_t k = 3072;
        const Operands o = MakeOperands(m, n, k, static_cast<uint32_t>(m + n));
        std::vector<float> got(m * n, std::nanf(""));
        cpu::Int8MatmulQ8_0(o.x.data(), m, o.w.data(), o.ws.data(), n, k, got.data(), pool, kernel);
        ExpectSameBits(got, Portable(o, m, n, k),
                       "kernel " + std::to_string(static_cast<int>(kernel)) +
                           " m=" + std::to_string(m) + " n=" + std::to_string(n));
      }
}

// An MoE layer's groups (Int8MatmulQ8_0Groups) in one AVX2 pass: each group's rows get the
// portable product with its expert, rows in no group are left alone.
TEST(Q8Avx2, GroupsGiveEachGroupsPortableBits) {
  SKIP_WITHOUT_AVX2();
  const int64_t n = 70, k = 256, experts = 4, m = 31;
  const std::vector<cpu::Q8RowGroup> groups = {{2, 1, 3}, {0, 4, 13}, {3, 17, 6}, {1, 24, 7}};
  const Operands o = MakeOperands(m, experts * n, k, 17);  // w: the stack [experts, n, k]
  std::vector<float> want(m * n, std::nanf("")), got(m * n, std::nanf(""));
  SerialContext serial;
  PoolContext pool;
  for (const auto& g : groups)
    cpu::Int8MatmulQ8_0(o.x.data() + g.start * k, g.rows, o.w.data() + g.expert * n * k,
                        o.ws.data() + g.expert * n * (k / 32), n, k, want.data() + g.start * n,
                        serial, cpu::Q8Kernel::kPortable);
  const cpu::q8_internal::QuantizedRows xq = cpu::q8_internal::QuantizeRows(o.x.data(), m, k, pool);
  cpu::q8_internal::Avx2Groups(xq, o.w.data(), o.ws.data(), n, k, groups, got.data(), pool);
  for (int64_t i = 0; i < m * n; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "row " << i / n << " is in no group: untouched";
      continue;
    }
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "at (" << i / n << ", " << i % n << "): " << got[i] << " vs " << want[i];
  }
  if (!cpu::Q8UsesVnni()) {  // the public entry runs the same kernel here
    std::vector<float> public_entry(m * n, std::nanf(""));
    cpu::Int8MatmulQ8_0Groups(o.x.data(), m, o.w.data(), o.ws.data(), n, k, groups,
                              public_entry.data(), pool);
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_EQ(std::memcmp(&public_entry[i], &got[i], sizeof(float)), 0) << i;
  }
}

// The packed layout (Avx2PackTile, Avx2PackedGroups): each tile packed by hand from the stack,
// then every group's rows through the sign-trick tiles, and again with -128 among the
// activations (the widening kernel's case), each with the portable bits on the same quantised
// rows. k = 288: nine blocks, so the last chunk of four holds one block and three of zeros.
TEST(Q8Avx2, PackedTilesGiveThePortableBitsWithAndWithoutMinimumActivations) {
  SKIP_WITHOUT_AVX2();
  const int64_t n = 24, k = 288, experts = 3, m = 14;
  const std::vector<cpu::Q8RowGroup> groups = {{1, 0, 1}, {0, 1, 4}, {2, 5, 9}};
  const Operands o = MakeOperands(m, experts * n, k, 23);
  namespace q8 = cpu::q8_internal;
  const int64_t tile_bytes = q8::Avx2TileBytes(k);
  ASSERT_EQ(tile_bytes, 3 * 1088);
  std::vector<uint8_t> packed(experts * n / q8::kAvx2TileRows * tile_bytes, 0xAB);
  for (int64_t t = 0; t < experts * n / q8::kAvx2TileRows; ++t)
    q8::Avx2PackTile(o.w.data(), o.ws.data(), experts * n, k, t * q8::kAvx2TileRows,
                     packed.data() + t * tile_bytes);
  PoolContext pool;
  for (bool minimum : {false, true}) {
    q8::QuantizedRows xq = q8::QuantizeRows(o.x.data(), m, k, pool);
    if (minimum)
      for (int64_t i = 0; i < m; i += 2) xq.q[i * xq.padded_k + 3 * i] = -128;
    const std::vector<float> want = PortableOnQuantized(xq, m, o, experts * n, k);
    std::vector<float> got(m * n, std::nanf(""));
    q8::Avx2PackedGroups(xq, packed.data(), n, k, groups, got.data(), pool);
    for (const auto& g : groups)
      for (int64_t i = g.start; i < g.start + g.rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(std::memcmp(&got[i * n + j], &want[i * experts * n + g.expert * n + j], 4), 0)
              << (minimum ? "with" : "without") << " -128: row " << i << " column " << j;
  }
}

#else

TEST(Q8Avx2, NeedsX86) { GTEST_SKIP() << "the AVX2 q8_0 kernels are x86-64 only"; }

#endif

}  // namespace
}  // namespace tlaloc
