// A fused chain's operand that another op reads between the chain's first and last op: the
// broadcast of a row sum added to x (the chain runs at the add) while a second reduce of the
// row sums sits between them. The row sums must live until the fused kernel runs; they were
// released at the second reduce, and the kernel read freed storage (a crash, found in the body
// of sdy.manual_computation's gradient). Fused and unfused runs give the same bits.
#include <gtest/gtest.h>

#include <cstring>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

constexpr char kProgram[] = R"(module @m {
  func.func public @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<f32>) {
    %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<8xf32>) -> tensor<8x4xf32>
    %3 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %4 = stablehlo.add %arg0, %2 : tensor<8x4xf32>
    return %4, %3 : tensor<8x4xf32>, tensor<f32>
  }
}
)";

TEST(FusionRelease, AnOperandReadBetweenTheChainsOpsLivesUntilTheKernelRuns) {
  auto parsed = ParseModule(kProgram);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  std::shared_ptr<Module> module = std::move(*parsed);
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * static_cast<float>(i) - 1.f;
  std::vector<std::vector<Literal>> runs;
  std::vector<int64_t> ops;
  for (bool fuse : {false, true}) {
    InterpreterOptions options;
    options.fuse = fuse;
    auto exe = Executable::Prepare(module, "main", options);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    ExecutionStats stats;
    auto out = (*exe)->Execute({Literal::FromVector<float>({8, 4}, x)}, &stats);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ops.push_back(stats.ops_executed);
    runs.push_back(std::move(*out));
  }
  // Fused, the broadcast and the add are one kernel: one op fewer ran.
  EXPECT_EQ(ops[1], ops[0] - 1);
  ASSERT_EQ(runs[0].size(), 2u);
  ASSERT_EQ(runs[1].size(), 2u);
  for (size_t r = 0; r < 2; ++r)
    EXPECT_EQ(std::memcmp(runs[0][r].data(), runs[1][r].data(), runs[0][r].byte_size()), 0)
        << "result " << r;
  // Row 0 of x is -1.0, -0.9, -0.8, -0.7: its sum is added to each.
  EXPECT_FLOAT_EQ(runs[1][0].span<float>()[0], -1.f + (-1.f - 0.9f - 0.8f - 0.7f));
}

}  // namespace
}  // namespace tlaloc
