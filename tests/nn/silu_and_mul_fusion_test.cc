// SwiGLU's gate: the composite tlaloc.silu_and_mul that nn::SiluAndMul emits (decomposition:
// logistic, two products) runs as one kernel (src/interp/fusion_silu.cc) with bit for bit the
// results of its decomposition run op by op, for bf16 and f32, special values included.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "testing/random_literal.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct SiluRun {
  Literal out;
  int64_t ops = 0;
};

SiluRun RunSiluMul(const Literal& g, const Literal& u, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor gin = fb.AddArg(g.type()), uin = fb.AddArg(u.type());
  EXPECT_TRUE(fb.Return({nn::SiluAndMul(gin, uin)}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({g, u}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? (*out)[0] : Literal(), stats.ops_executed};
}

Literal Random(const std::vector<int64_t>& dims, ElementType et, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::RandomNormalLiteral(
      dims, et, rng, 4.0f,
      {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
       -std::numeric_limits<float>::infinity(), -0.0f, 3e38f, -100.0f});
}

TEST(FusionSiluTest, SiluTimesUpFusedIsBitIdenticalToTheOpsOneByOne) {
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{1, 1, 3072}, {3, 700}, {8}}) {
      const Literal g = Random(dims, et, 1), u = Random(dims, et, 2);
      SiluRun fused = RunSiluMul(g, u, true), plain = RunSiluMul(g, u, false);
      ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
      EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
          << MlirName(et) << " " << dims.back();
      // The composite ran as its kernel, not its decomposition's three ops.
      EXPECT_EQ(fused.ops, plain.ops - 3) << MlirName(et) << ": not fused";
    }
  }
}

}  // namespace
}  // namespace tlaloc
