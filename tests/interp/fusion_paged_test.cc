// Decode attention's products over a paged KV pool (src/interp/fusion_paged.cc): gather ->
// reshape -> dot_general, as models/qwen3 emits them, run with the pages read in place through
// the block table, with bit for bit the ops' results (keys and values forms, bf16 and f32,
// 1-4 query vectors per head, table entries out of range clamped as gather clamps them).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "testing/random_literal.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct PagedRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
};

// q [B, H, G, T, D] against the keys, then probabilities [B, H, G, T, S] (rounded to the pool's
// type) against the values, both pools [N, H, P, D] read through table [B, M].
PagedRun RunPaged(const Literal& q, const Literal& probs, const Literal& k_pool,
                  const Literal& v_pool, const Literal& table, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor qin = fb.AddArg(q.type()), pin = fb.AddArg(probs.type());
  Tensor kin = fb.AddArg(k_pool.type()), vin = fb.AddArg(v_pool.type());
  Tensor tin = fb.AddArg(table.type());
  const int64_t b = table.dims()[0], m = table.dims()[1];
  const int64_t h = k_pool.dims()[1], page = k_pool.dims()[2], d = k_pool.dims()[3];
  auto gather = [&](const Tensor& pool) {
    return Reshape(Take(pool, tin, {1, 3, 4}), {b, h, m * page, d});
  };
  Tensor scores = DotGeneral(qin, gather(kin), {0, 1}, {0, 1}, {4}, {3}, ElementType::kF32,
                             /*same_as_lhs=*/false);
  Tensor out = DotGeneral(pin, gather(vin), {0, 1}, {0, 1}, {4}, {2}, ElementType::kF32,
                          /*same_as_lhs=*/false);
  EXPECT_TRUE(fb.Return({scores, out}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto run = (*exe)->Execute({q, probs, k_pool, v_pool, table}, &stats);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return {run.ok() ? *run : std::vector<Literal>{}, stats.ops_executed};
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, std::mt19937& rng) {
  return testing::RandomNormalLiteral(dims, et, rng, 1.0f);
}

TEST(FusionPagedTest, PagedKeysAndValuesProductsGiveTheGatheredProductsBits) {
  std::mt19937 rng(7);
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    // (B, heads, G, T, pages in the pool, table blocks, page, D)
    for (const auto& [b, h, g, t, pages, m, page, d] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>{
              1, 8, 2, 1, 40, 16, 16, 128},
          {2, 2, 1, 1, 9, 4, 16, 64},
          {1, 3, 2, 2, 5, 3, 12, 40},  // 4 vectors; a page size that is not a power of two
          {3, 1, 3, 1, 6, 2, 8, 17}}) {
      const int64_t s = m * page;
      const Literal q = Random({b, h, g, t, d}, et, rng);
      const Literal probs = Random({b, h, g, t, s}, et, rng);
      const Literal k_pool = Random({pages, h, page, d}, et, rng);
      const Literal v_pool = Random({pages, h, page, d}, et, rng);
      std::vector<int32_t> tv(static_cast<size_t>(b * m));
      for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int32_t>((i * 7 + 3) % pages);
      tv[0] = static_cast<int32_t>(pages + 5);  // past the pool: gather clamps to the last page
      if (tv.size() > 1) tv[1] = -2;            // before it: the first page
      const Literal table = Literal::FromVector<int32_t>({b, m}, tv);
      PagedRun fused = RunPaged(q, probs, k_pool, v_pool, table, true);
      PagedRun plain = RunPaged(q, probs, k_pool, v_pool, table, false);
      ASSERT_EQ(fused.outs.size(), 2u);
      ASSERT_EQ(plain.outs.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ(fused.outs[i].byte_size(), plain.outs[i].byte_size());
        EXPECT_EQ(
            std::memcmp(fused.outs[i].data(), plain.outs[i].data(), plain.outs[i].byte_size()), 0)
            << MlirName(et) << " heads " << h << " page " << page << " output " << i;
      }
      // Each gather, reshape and product ran as one.
      EXPECT_EQ(fused.ops, plain.ops - 4) << MlirName(et) << ": not fused";
    }
  }
}

}  // namespace
}  // namespace tlaloc
