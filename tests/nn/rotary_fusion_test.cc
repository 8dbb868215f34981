// nn::ApplyRotary's composite tlaloc.rotary runs as one kernel in the interpreter (src/interp/
// fusion_rotary.cc) with bit for bit the results of its decomposition run op by op, for bf16 and
// f32 q- and k-shaped inputs sharing one pair of tables, as a decoder layer uses them.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "testing/random_literal.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct RotaryRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
};

RotaryRun RunRotary(const Literal& q, const Literal& k, const Literal& positions, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor qin = fb.AddArg(q.type()), kin = fb.AddArg(k.type()), pin = fb.AddArg(positions.type());
  const int64_t d = q.dims().back();
  auto [cos, sin] = nn::RotaryTables(pin, d, 1e6);
  Tensor qr = nn::ApplyRotary(qin, cos, sin), kr = nn::ApplyRotary(kin, cos, sin);
  EXPECT_TRUE(fb.Return({qr, kr}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({q, k, positions}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? *out : std::vector<Literal>{}, stats.ops_executed};
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::RandomNormalLiteral(dims, et, rng, 3.0f,
                                      {std::numeric_limits<float>::quiet_NaN(),
                                       std::numeric_limits<float>::infinity(), -0.0f, 3e38f});
}

TEST(RotaryFusionTest, ApplyRotaryFusedIsBitIdenticalToTheOpsOneByOne) {
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    for (const auto& [b, t, d] :
         {std::tuple<int64_t, int64_t, int64_t>{1, 1, 128}, {2, 5, 64}, {1, 33, 2}}) {
      const Literal q = Random({b, t, 16, d}, et, static_cast<uint32_t>(t * d));
      const Literal k = Random({b, t, 8, d}, et, static_cast<uint32_t>(t * d + 1));
      std::vector<int32_t> pv(static_cast<size_t>(b * t));
      for (size_t i = 0; i < pv.size(); ++i) pv[i] = static_cast<int32_t>(i * 37 + 5);
      const Literal positions = Literal::FromVector<int32_t>({b, t}, pv);
      RotaryRun fused = RunRotary(q, k, positions, true);
      RotaryRun plain = RunRotary(q, k, positions, false);
      ASSERT_EQ(fused.outs.size(), 2u);
      ASSERT_EQ(plain.outs.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ(fused.outs[i].byte_size(), plain.outs[i].byte_size());
        EXPECT_EQ(
            std::memcmp(fused.outs[i].data(), plain.outs[i].data(), plain.outs[i].byte_size()), 0)
            << MlirName(et) << " t " << t << " d " << d << " output " << i;
      }
      // Each rotary ran as its kernel, not its decomposition (two slices, negate, concatenate,
      // the tables' reshapes and broadcasts, two products and their sum, the converts for bf16).
      EXPECT_LE(fused.ops, plain.ops - 2 * 10) << MlirName(et) << ": not fused";
    }
  }
}

}  // namespace
}  // namespace tlaloc
