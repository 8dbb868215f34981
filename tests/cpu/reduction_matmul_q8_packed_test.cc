// The in-order q8_0 product on repacked weights (cpu/reduction_matmul_q8_packed.h): bit for bit
// Q8Kernel::kInOrder and the portable loop (both sum in the tlaloc.int8_linear decomposition's
// order) over every tail of rows, columns and blocks, with each prefetch choice, on one thread
// and on a pool; and the per-buffer cache: a hit for the same buffers, a new packing for another
// buffer, and an entry dropped once nobody else holds its buffers.
#include "cpu/reduction_matmul_q8_packed.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "cpu/kernel_test_util.h"
#include "cpu/reduction_matmul_q8.h"

namespace tlaloc {
namespace {

using cputest::PoolContext;
using cputest::SerialContext;
using Case = cputest::Q8Case;

void ExpectPackedIsInOrder(int64_t m, int64_t n, int64_t k, EvalContext& ctx) {
  const Case c = cputest::MakeQ8Case(m, n, k, static_cast<uint32_t>(m * 131 + n * 7 + k));
  auto packed = cpu::PackQ8Weights(c.w.data(), c.ws.data(), n, k, ctx);
  ASSERT_NE(packed, nullptr);
  if (packed->layout == cpu::Q8Layout::kVnni32) {
    EXPECT_EQ(packed->bytes(), (n + 31) / 32 * 32 * (k + k / 32 * 2))
        << "the packed copy should be the weights' size (rows padded to 32)";
  } else {
    EXPECT_EQ(packed->bytes(), (n + 7) / 8 * 8 * ((k / 32 + 3) / 4 * 4) * 34)
        << "the packed copy should be the weights' size (rows padded to 8, blocks to 4)";
  }
  std::vector<float> in_order(m * n), portable(m * n);
  cpu::Int8MatmulQ8_0(c.x.data(), m, c.w.data(), c.ws.data(), n, k, in_order.data(), ctx,
                      cpu::Q8Kernel::kInOrder);
  cpu::Int8MatmulQ8_0(c.x.data(), m, c.w.data(), c.ws.data(), n, k, portable.data(), ctx,
                      cpu::Q8Kernel::kPortable);
  EXPECT_EQ(std::memcmp(in_order.data(), portable.data(), in_order.size() * sizeof(float)), 0)
      << "kInOrder vs portable: m=" << m << " n=" << n << " k=" << k;
  // Each prefetch choice, named and by default: only what the caches are asked for differs.
  for (auto prefetch : {cpu::Q8PackedPrefetch::kAuto, cpu::Q8PackedPrefetch::kWeights,
                        cpu::Q8PackedPrefetch::kAll}) {
    std::vector<float> got(m * n, -1.f);
    cpu::Int8MatmulQ8_0Packed(c.x.data(), m, *packed, got.data(), ctx, prefetch);
    EXPECT_EQ(std::memcmp(got.data(), in_order.data(), got.size() * sizeof(float)), 0)
        << "packed (prefetch " << static_cast<int>(prefetch) << ") vs kInOrder: m=" << m
        << " n=" << n << " k=" << k;
  }
}

bool Packs() { return cpu::Q8PackingAvailable(); }

TEST(Q8Packed, BitForBitTheInOrderKernelsOverEveryTail) {
  if (!Packs()) GTEST_SKIP() << "neither AVX512-VNNI nor AVX2 here: nothing is packed (nullptr)";
  SerialContext serial;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 13})
    for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 70})
      for (int64_t k : {32, 64, 96, 544}) ExpectPackedIsInOrder(m, n, k, serial);
  PoolContext pool;
  ExpectPackedIsInOrder(1, 20000, 64, pool);
  ExpectPackedIsInOrder(2, 3000, 1024, pool);
  // Decode's shapes with the rows that the prefetch choices treat apart (up to four).
  ExpectPackedIsInOrder(3, 1000, 3072, pool);
  ExpectPackedIsInOrder(4, 2050, 1024, pool);
  ExpectPackedIsInOrder(64, 300, 1024, pool);
}

TEST(Q8Packed, LayoutFollowsTheCpu) {
  SerialContext ctx;
  const Case c = cputest::MakeQ8Case(1, 4, 32, 1);
  auto packed = cpu::PackQ8Weights(c.w.data(), c.ws.data(), 4, 32, ctx);
  if (cpu::Q8UsesVnni()) {
    ASSERT_NE(packed, nullptr);
    EXPECT_EQ(packed->layout, cpu::Q8Layout::kVnni32);
    EXPECT_EQ(packed->tile_rows, 32);
  } else if (Packs()) {
    ASSERT_NE(packed, nullptr);
    EXPECT_EQ(packed->layout, cpu::Q8Layout::kAvx2Rows8);
    EXPECT_EQ(packed->tile_rows, 8);
  } else {
    EXPECT_EQ(packed, nullptr) << "no kernel here reads a packed copy";
  }
}

TEST(Q8Packed, CacheKeepsOnePackingPerBufferAndDropsFreedOnes) {
  if (!Packs()) GTEST_SKIP() << "neither AVX512-VNNI nor AVX2 here: nothing is cached";
  SerialContext ctx;
  cpu::ClearQ8Cache();
  const int64_t n = 40, k = 64;
  const Case c = cputest::MakeQ8Case(1, n, k, 5);
  Literal q = Literal::FromVector<int8_t>({n, k}, c.w);
  Literal s(TensorType(ElementType::kF16, {n, k / 32}));
  std::memcpy(s.data(), c.ws.data(), c.ws.size() * 2);
  const cpu::Q8CacheStats before = cpu::GetQ8CacheStats();
  auto first = cpu::CachedQ8Weights(q, s, ctx);
  ASSERT_NE(first, nullptr);
  auto again = cpu::CachedQ8Weights(q, s, ctx);
  EXPECT_EQ(first.get(), again.get()) << "the same buffers should hit the cache";
  EXPECT_EQ(cpu::GetQ8CacheStats().packs, before.packs + 1);
  EXPECT_EQ(cpu::GetQ8CacheStats().bytes, first->bytes());
  // The cache holds the weights: the interpreter may not write into them in place.
  EXPECT_FALSE(q.HasUniqueStorage());

  // Another buffer with other values: its own packing, and its own product.
  Case other = cputest::MakeQ8Case(1, n, k, 6);
  Literal q2 = Literal::FromVector<int8_t>({n, k}, other.w);
  auto second = cpu::CachedQ8Weights(q2, s, ctx);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second.get(), first.get());
  std::vector<float> a(n), b(n);
  cpu::Int8MatmulQ8_0Packed(c.x.data(), 1, *second, a.data(), ctx);
  cpu::Int8MatmulQ8_0(c.x.data(), 1, other.w.data(), c.ws.data(), n, k, b.data(), ctx,
                      cpu::Q8Kernel::kPortable);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0);

  // Freed by its owner: the next miss drops the entry and its reference.
  std::weak_ptr<std::byte> q2_storage = q2.storage();
  q2 = Literal();
  second.reset();
  Literal q3 = Literal::FromVector<int8_t>({n, k}, c.w);
  ASSERT_NE(cpu::CachedQ8Weights(q3, s, ctx), nullptr);
  EXPECT_TRUE(q2_storage.expired()) << "the cache should have let go of a freed weight";
  EXPECT_EQ(cpu::GetQ8CacheStats().entries, 2);  // q and q3
  cpu::ClearQ8Cache();
  EXPECT_EQ(cpu::GetQ8CacheStats().entries, 0);
  EXPECT_TRUE(q.HasUniqueStorage());
}

}  // namespace
}  // namespace tlaloc
