// Fused chains (src/interp/fusion.h): the softmax chain builder::Softmax emits runs as one
// kernel, with bit for bit the results of the ops one by one, special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"

namespace tlaloc {
namespace {

struct SoftmaxRun {
  Literal out;
  int64_t ops = 0;
};

// softmax(x * scale) over the last axis of an f32 [2, 5, n] tensor; `extra` also returns the
// max, so the chain's intermediate has another user and must not fuse.
SoftmaxRun RunSoftmax(const Literal& x, bool fuse, bool extra = false) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(x.type());
  Tensor p = Softmax(in * 0.5, -1);
  std::vector<Tensor> outs{p};
  if (extra) outs.push_back(ReduceMax(in * 0.5, {-1}, true));
  EXPECT_TRUE(fb.Return(outs).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {(*out)[0], stats.ops_executed};
}

Literal Scores(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(2 * 5 * n);
  for (float& f : v) f = dist(rng);
  const float inf = std::numeric_limits<float>::infinity();
  v[3] = -inf;                                             // a masked position
  for (int64_t j = 0; j < n; ++j) v[n + j] = -1e30f;       // a fully masked (padding) row
  for (int64_t j = 0; j < n; ++j) v[2 * n + j] = -inf;     // an all -inf row: NaN throughout
  v[3 * n + 1] = std::numeric_limits<float>::quiet_NaN();  // NaN spreads over its row
  v[4 * n + 2] = inf;                                      // +inf: NaN at it, 0 elsewhere
  v[5 * n] = -0.0f;
  return Literal::FromVector<float>({2, 5, n}, v);
}

TEST(FusionTest, SoftmaxFusedIsBitIdenticalToTheOpsOneByOne) {
  for (int64_t n : {1, 7, 33, 512}) {
    Literal x = Scores(n, static_cast<uint32_t>(n));
    SoftmaxRun fused = RunSoftmax(x, true), plain = RunSoftmax(x, false);
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
        << "n=" << n;
    // The chain's seven ops (two reduces, two broadcasts, subtract, exp, divide) and the
    // reshapes between them ran as one. (With n = 1 the builder emits no broadcasts, so there
    // is no chain to fuse; the results must still agree.)
    if (n > 1) {
      EXPECT_LE(fused.ops, plain.ops - 6) << "n=" << n << ": the chain did not fuse";
    }
  }
}

TEST(FusionTest, ChainWhoseIntermediateIsUsedElsewhereIsNotFused) {
  Literal x = Scores(16, 3);
  SoftmaxRun fused = RunSoftmax(x, true, /*extra=*/true), plain = RunSoftmax(x, false, true);
  // The max is also a function result (a separate reduce, here), so the first softmax's own
  // reduce still fuses; the outputs must agree either way.
  EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0);
}

}  // namespace
}  // namespace tlaloc
