// Decode attention's products over a paged KV pool: the composite tlaloc.paged_dot
// (nn::PagedDot), whose decomposition is gather -> reshape -> dot_general, run by the interpreter
// as one kernel with the pages read in place through the block table (src/interp/fusion_paged.cc)
// and bit for bit the decomposition's results (keys and values forms, bf16 and f32, 1-4 query
// vectors per head, table entries out of range clamped as gather clamps them); more vectors than
// a decode step's run the decomposition. The program holds the composites, not the chain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "testing/random_literal.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/paged_attention.h"
#include "tlaloc/support/half.h"

namespace tlaloc::nn {
namespace {

struct PagedRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
  int composites = 0;  // tlaloc.paged_dot ops in main
  int chain_ops = 0;   // gathers and dot_generals in main (outside the decompositions)
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
  Tensor scores = PagedDot(qin, kin, tin, PagedProduct::kKeys);
  Tensor out = PagedDot(pin, vin, tin, PagedProduct::kValues);
  EXPECT_TRUE(fb.Return({scores, out}).ok()) << fb.status().ToString();
  PagedRun r;
  for (const auto& op : fb.function()->entry().operations()) {
    r.composites += op->name() == "stablehlo.composite" &&
                    GetStringAttr(op->attrs(), "name") == kPagedDotComposite;
    r.chain_ops += op->name() == "stablehlo.gather" || op->name() == "stablehlo.dot_general";
  }
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto run = (*exe)->Execute({q, probs, k_pool, v_pool, table}, &stats);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  r.outs = run.ok() ? *run : std::vector<Literal>{};
  r.ops = stats.ops_executed;
  return r;
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, std::mt19937& rng) {
  return testing::RandomNormalLiteral(dims, et, rng, 1.0f);
}

// Random queries q [B, H, G, T, D], probabilities [B, H, G, T, S] and key and value pools
// [pages, H, page, D] of one type.
struct PagedInputs {
  Literal q, probs, k_pool, v_pool;
};
PagedInputs RandomInputs(int64_t b, int64_t h, int64_t g, int64_t t, int64_t s, int64_t pages,
                         int64_t page, int64_t d, ElementType et, std::mt19937& rng) {
  PagedInputs in;
  in.q = Random({b, h, g, t, d}, et, rng);
  in.probs = Random({b, h, g, t, s}, et, rng);
  in.k_pool = Random({pages, h, page, d}, et, rng);
  in.v_pool = Random({pages, h, page, d}, et, rng);
  return in;
}

TEST(PagedDot, KernelGivesTheDecompositionsBits) {
  std::mt19937 rng(7);
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    // (B, heads, G, T, pages in the pool, table blocks, page, D)
    for (const auto& [b, h, g, t, pages, m, page, d] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>{
              1, 8, 2, 1, 40, 16, 16, 128},
          {2, 2, 1, 1, 9, 4, 16, 64},
          {1, 3, 2, 2, 5, 3, 12, 40},  // 4 vectors; a page size that is not a power of two
          {3, 1, 3, 1, 6, 2, 8, 17}}) {
      const PagedInputs in = RandomInputs(b, h, g, t, m * page, pages, page, d, et, rng);
      std::vector<int32_t> tv(static_cast<size_t>(b * m));
      for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int32_t>((i * 7 + 3) % pages);
      tv[0] = static_cast<int32_t>(pages + 5);  // past the pool: gather clamps to the last page
      if (tv.size() > 1) tv[1] = -2;            // before it: the first page
      const Literal table = Literal::FromVector<int32_t>({b, m}, tv);
      PagedRun fused = RunPaged(in.q, in.probs, in.k_pool, in.v_pool, table, true);
      PagedRun plain = RunPaged(in.q, in.probs, in.k_pool, in.v_pool, table, false);
      ASSERT_EQ(fused.outs.size(), 2u);
      ASSERT_EQ(plain.outs.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ(fused.outs[i].byte_size(), plain.outs[i].byte_size());
        EXPECT_EQ(
            std::memcmp(fused.outs[i].data(), plain.outs[i].data(), plain.outs[i].byte_size()), 0)
            << MlirName(et) << " heads " << h << " page " << page << " output " << i;
      }
      EXPECT_EQ(fused.composites, 2);
      EXPECT_EQ(fused.chain_ops, 0) << "a gather or product outside the composites";
      // Each composite ran as its kernel: none of its decomposition's three ops ran.
      EXPECT_EQ(fused.ops, plain.ops - 6) << MlirName(et) << ": a decomposition ran";
    }
  }
}

}  // namespace
}  // namespace tlaloc::nn

namespace tlaloc::nn {
namespace {

// A prefill chunk's vectors (G * T above a decode step's four) run the decomposition: the same
// bits as without fusion, and its ops ran.
TEST(PagedDot, MoreVectorsThanADecodeStepRunTheDecomposition) {
  std::mt19937 rng(11);
  const int64_t b = 1, h = 2, g = 2, t = 5, pages = 6, m = 3, page = 4, d = 16, s = m * page;
  const PagedInputs in = RandomInputs(b, h, g, t, s, pages, page, d, ElementType::kBF16, rng);
  const Literal table = Literal::FromVector<int32_t>({b, m}, {4, 0, 2});
  PagedRun fused = RunPaged(in.q, in.probs, in.k_pool, in.v_pool, table, true);
  PagedRun plain = RunPaged(in.q, in.probs, in.k_pool, in.v_pool, table, false);
  ASSERT_EQ(fused.outs.size(), 2u);
  ASSERT_EQ(plain.outs.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::memcmp(fused.outs[i].data(), plain.outs[i].data(), plain.outs[i].byte_size()), 0)
        << "output " << i;
  EXPECT_EQ(fused.ops, plain.ops) << "a kernel ran for " << g * t << " vectors";
}

// The values kernel's arithmetic: each output is one FMA per cached position, in position order
// from 0, as the portable Axpy does, whatever column blocks the CPU's kernel takes (AVX-512:
// 128 columns for up to two vectors, 64 for more; AVX2: 32) and whatever it prefetches.
TEST(PagedDot, ValuesAreOneFmaPerPositionInOrder) {
  std::mt19937 rng(5);
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    // (heads, G, T, D): two vectors of 128 (one block on AVX-512), four of 128, two of 80.
    for (const auto& [h, g, t, d] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 2, 1, 128},
                                     {2, 2, 2, 128},
                                     {2, 1, 2, 80}}) {
      const int64_t b = 2, pages = 9, m = 5, page = 16, s = m * page;
      const PagedInputs in = RandomInputs(b, h, g, t, s, pages, page, d, et, rng);
      std::vector<int32_t> tv(static_cast<size_t>(b * m));
      for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int32_t>((i * 4 + 1) % pages);
      const Literal table = Literal::FromVector<int32_t>({b, m}, tv);
      PagedRun fused = RunPaged(in.q, in.probs, in.k_pool, in.v_pool, table, true);
      ASSERT_EQ(fused.outs.size(), 2u);
      auto value = [&](const Literal& l, int64_t i) {
        return et == ElementType::kF32 ? l.span<float>()[i]
                                       : Bf16BitsToFloat(l.span<uint16_t>()[i]);
      };
      const auto out = fused.outs[1].span<float>();
      int64_t mismatches = 0;
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t hi = 0; hi < h; ++hi)
          for (int64_t v = 0; v < g * t; ++v)
            for (int64_t j = 0; j < d; ++j) {
              float acc = 0.0f;
              for (int64_t p = 0; p < s; ++p) {
                const int64_t id = tv[bi * m + p / page];
                const float w = value(in.v_pool, ((id * h + hi) * page + p % page) * d + j);
                acc = std::fma(value(in.probs, ((bi * h + hi) * g * t + v) * s + p), w, acc);
              }
              const float got = out[((bi * h + hi) * g * t + v) * d + j];
              mismatches += std::memcmp(&acc, &got, sizeof acc) != 0;
            }
      EXPECT_EQ(mismatches, 0) << MlirName(et) << " heads " << h << " vectors " << g * t << " D "
                               << d;
    }
  }
}

TEST(PagedDot, RefusesMismatchedShapes) {
  Module module("t");
  FunctionBuilder fb(&module, "main");
  Tensor q = fb.AddArg(TensorType(ElementType::kF32, {1, 2, 1, 1, 8}));
  Tensor pool = fb.AddArg(TensorType(ElementType::kF32, {4, 2, 4, 16}));  // D 16, not 8
  Tensor table = fb.AddArg(TensorType(ElementType::kS32, {1, 2}));
  EXPECT_FALSE(PagedDot(q, pool, table, PagedProduct::kKeys).valid());
  EXPECT_NE(fb.status().message().find("PagedDot (keys)"), std::string::npos)
      << fb.status().ToString();
}

}  // namespace
}  // namespace tlaloc::nn
