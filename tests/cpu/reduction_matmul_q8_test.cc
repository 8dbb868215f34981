// The q8_0 activation mode of int8 products (cpu/reduction_matmul_q8.h): activation rounding
// against a scalar rendering of ggml's rule, and every kernel (row stream, VNNI tiles, portable)
// against a scalar reference of the same rounding with exact block sums, over every tail.
#include "cpu/reduction_matmul_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

using cputest::PoolContext;
using cputest::SerialContext;
using Case = cputest::Q8Case;

// ggml's x86 rounding of one block, written out plainly: d = f16(amax / 127),
// q = nearest-even(x * (127 / amax)).
void ReferenceQuantize(const float* x, int8_t* q, uint16_t* d) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  *d = FloatToHalfBits(amax / 127.f);
  const float id = amax == 0 ? 0.f : 127.f / amax;
  for (int i = 0; i < 32; ++i) {
    const float v = x[i] * id;
    float r = std::floor(v);
    const float frac = v - r;
    if (frac > 0.5f || (frac == 0.5f && std::fmod(r, 2.0f) != 0)) r += 1;
    q[i] = static_cast<int8_t>(r);
  }
}

// Exact block sums of the reference rounding, scaled by f32(dx * dw) and summed in double; the
// bound covers any f32 sum of the scaled partial sums of four products each (the row-stream
// kernel scales the sixteen four-product lanes of a 64-byte step, as ggml's AVX2 kernel does).
void Reference(const Case& c, int64_t m, int64_t n, int64_t k, std::vector<double>& value,
               std::vector<double>& bound) {
  const int64_t blocks = k / 32;
  std::vector<int8_t> q(m * k);
  std::vector<uint16_t> d(m * blocks);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < blocks; ++b)
      ReferenceQuantize(&c.x[i * k + b * 32], &q[i * k + b * 32], &d[i * blocks + b]);
  value.assign(m * n, 0);
  bound.assign(m * n, 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t block = 0, groups = 0;
        for (int64_t g = b * 32; g < (b + 1) * 32; g += 4) {
          int32_t group = 0;
          for (int64_t e = g; e < g + 4; ++e) group += q[i * k + e] * c.w[j * k + e];
          block += group;
          groups += std::abs(group);
        }
        const float scale =
            HalfBitsToFloat(d[i * blocks + b]) * HalfBitsToFloat(c.ws[j * blocks + b]);
        sum += static_cast<double>(block) * scale;
        magnitude += static_cast<double>(groups) * std::fabs(scale);
      }
      value[i * n + j] = sum;
      bound[i * n + j] = magnitude * (k / 4 + 2) * 0x1p-24 + 1e-30;
    }
}

TEST(Q8Activations, RoundingIsGgmlsQuantizeRowQ8_0) {
  std::vector<float> x(32 * 6);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  for (float& v : x) v = uni(rng);
  for (int i = 32; i < 64; ++i) x[i] = 0;  // zero block: d 0, q 0
  // Block 2: amax 127, so x * id is x itself: the ties 2.5, 3.5, -2.5 go to even.
  for (int i = 64; i < 96; ++i) x[i] = 0;
  x[64] = 127, x[65] = 2.5f, x[66] = 3.5f, x[67] = -2.5f, x[68] = -127;
  x[100] = 1e-30f;  // block 3: a subnormal-scale block (d underflows f16)
  for (int i = 96; i < 128; ++i) x[i] = i == 100 ? 1e-30f : 0.f;
  std::vector<int8_t> q(x.size()), want_q(x.size());
  std::vector<uint16_t> d(6), want_d(6);
  cpu::QuantizeRowQ8_0(x.data(), static_cast<int64_t>(x.size()), q.data(), d.data());
  for (int b = 0; b < 6; ++b) ReferenceQuantize(&x[b * 32], &want_q[b * 32], &want_d[b]);
  EXPECT_EQ(q, want_q);
  EXPECT_EQ(d, want_d);
  EXPECT_EQ(d[1], 0);
  EXPECT_EQ(q[64], 127);
  EXPECT_EQ(q[65], 2);
  EXPECT_EQ(q[66], 4);
  EXPECT_EQ(q[67], -2);
  EXPECT_EQ(q[68], -127);
  EXPECT_EQ(q[100], 127);
}

void ExpectKernelMatchesReference(cpu::Q8Kernel kernel, const char* name, int64_t m, int64_t n,
                                  int64_t k, bool threads = false) {
  const Case c = cputest::MakeQ8Case(m, n, k, static_cast<uint32_t>(m * 1000 + n * 10 + k));
  std::vector<double> want, bound;
  Reference(c, m, n, k, want, bound);
  std::vector<float> got(m * n, std::nanf(""));
  SerialContext serial;
  PoolContext pool;
  cpu::Int8MatmulQ8_0(c.x.data(), m, c.w.data(), c.ws.data(), n, k, got.data(),
                      threads ? static_cast<EvalContext&>(pool) : serial, kernel);
  int bad = 0;
  for (int64_t i = 0; i < m * n && bad < 3; ++i)
    if (!(std::fabs(got[i] - want[i]) <= bound[i])) {
      ++bad;
      ADD_FAILURE() << name << " m=" << m << " n=" << n << " k=" << k << " at (" << i / n << ", "
                    << i % n << "): " << got[i] << " vs " << want[i] << " (bound " << bound[i]
                    << ")";
    }
}

// kInOrder's kernels (decode's rows one weight row at a time, more rows by the tiles, or the
// portable loop) all sum in block order, so they agree bit for bit (the composite
// tlaloc.int8_linear's decomposition has the same bits: tests/nn/int8_linear_test.cc).
TEST(Q8Activations, InOrderKernelsAgreeBitForBit) {
  PoolContext pool;
  for (int64_t m : {1, 2, 3, 7})
    for (int64_t n : {1, 5, 33, 70})
      for (int64_t k : {32, 64, 96, 544, 1024}) {
        const Case c = cputest::MakeQ8Case(m, n, k, static_cast<uint32_t>(m * 7 + n * 11 + k));
        std::vector<float> in_order(m * n), portable(m * n);
        cpu::Int8MatmulQ8_0(c.x.data(), m, c.w.data(), c.ws.data(), n, k, in_order.data(), pool,
                            cpu::Q8Kernel::kInOrder);
        cpu::Int8MatmulQ8_0(c.x.data(), m, c.w.data(), c.ws.data(), n, k, portable.data(), pool,
                            cpu::Q8Kernel::kPortable);
        EXPECT_EQ(std::memcmp(in_order.data(), portable.data(), in_order.size() * sizeof(float)), 0)
            << "m=" << m << " n=" << n << " k=" << k;
      }
}

TEST(Q8Activations, EveryKernelMatchesTheScalarReferenceOverEveryTail) {
  const std::pair<cpu::Q8Kernel, const char*> kernels[] = {
      {cpu::Q8Kernel::kAuto, "auto"},
      {cpu::Q8Kernel::kRowStream, "row stream"},
      {cpu::Q8Kernel::kTiles, "tiles"},
      {cpu::Q8Kernel::kPortable, "portable"},
      {cpu::Q8Kernel::kInOrder, "in order"}};
  for (const auto& [kernel, name] : kernels) {
    for (int64_t m = 1; m <= 17; ++m) ExpectKernelMatchesReference(kernel, name, m, 37, 96);
    for (int64_t n : {1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 64, 70, 1024})
      for (int64_t k : {32, 64, 96, 128, 192, 544, 1024}) {
        ExpectKernelMatchesReference(kernel, name, 1, n, k);
        ExpectKernelMatchesReference(kernel, name, 7, n, k);
      }
    // Many tasks on two threads: the LM head's shape and a wide contraction.
    ExpectKernelMatchesReference(kernel, name, 1, 20000, 64, true);
    ExpectKernelMatchesReference(kernel, name, 3, 2000, 1024, true);
    ExpectKernelMatchesReference(kernel, name, 9, 3000, 64, true);
  }
}

TEST(Q8Activations, VnniKernelsRunWhereTheCpuHasThem) {
  if (!cpu::Q8UsesVnni())
    GTEST_SKIP() << "this CPU (or TLALOC_VECTOR_MATH=0) has no AVX512-VNNI: the row-stream and "
                    "tile kernels fall back to the portable loop checked above";
  // The VNNI kernels and the portable loop add the same block terms in different orders: close,
  // not identical (and checked against the reference above).
  const Case c = cputest::MakeQ8Case(9, 70, 1024, 1);
  SerialContext ctx;
  std::vector<float> a(9 * 70), b(9 * 70);
  cpu::Int8MatmulQ8_0(c.x.data(), 9, c.w.data(), c.ws.data(), 70, 1024, a.data(), ctx,
                      cpu::Q8Kernel::kTiles);
  cpu::Int8MatmulQ8_0(c.x.data(), 9, c.w.data(), c.ws.data(), 70, 1024, b.data(), ctx,
                      cpu::Q8Kernel::kPortable);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3 * (1 + std::fabs(b[i])));
}

// The one-pass form of many groups (an MoE layer's experts at prefill) against each group's own
// tile product: the same bits, and rows in no group left alone.
TEST(Q8Activations, GroupsInOnePassAreEachGroupsTileProduct) {
  const int64_t n = 70, k = 96, experts = 4;
  const std::vector<cpu::Q8RowGroup> groups = {{2, 1, 3}, {0, 4, 13}, {3, 17, 6}, {1, 24, 7}};
  const int64_t m = 31;                                       // rows 0, 23 and 31.. are in no group
  const Case c = cputest::MakeQ8Case(m, experts * n, k, 11);  // w: the stack [experts, n, k]
  std::vector<float> want(m * n, std::nanf("")), got(m * n, std::nanf(""));
  SerialContext serial;
  PoolContext pool;
  for (const auto& g : groups)
    cpu::Int8MatmulQ8_0(c.x.data() + g.start * k, g.rows, c.w.data() + g.expert * n * k,
                        c.ws.data() + g.expert * n * (k / 32), n, k, want.data() + g.start * n,
                        serial, cpu::Q8Kernel::kTiles);
  cpu::Int8MatmulQ8_0Groups(c.x.data(), m, c.w.data(), c.ws.data(), n, k, groups, got.data(), pool);
  int bad = 0;
  for (int64_t i = 0; i < m * n && bad < 3; ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    if (!same) {
      ++bad;
      ADD_FAILURE() << "at (" << i / n << ", " << i % n << "): " << got[i] << " vs " << want[i];
    }
  }
  EXPECT_TRUE(std::isnan(got[23 * n]));  // between groups: untouched
  EXPECT_FALSE(std::isnan(got[24 * n]));
}

}  // namespace
}  // namespace tlaloc
