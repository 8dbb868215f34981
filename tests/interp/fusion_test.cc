// Fused chains (src/interp/fusion.h): the softmax chain builder::Softmax emits and broadcasts
// read in place each run as one kernel, and attention's masked softmax is the composite
// tlaloc.masked_softmax run as its kernel, with bit for bit the results of the ops one by one,
// special values included. (The int8 product is the composite tlaloc.int8_linear now:
// tests/nn/int8_linear_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

#include "tlaloc/builder/composite.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

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

// Attention's masked softmax (nn::GroupedAttention): softmax over the last axis of
// select(broadcast_in_dim(mask [B, T, S]), scores [B, H, G, T, S], broadcast(-1e30)), one kernel
// with the ops' bits: a fully masked row, a masked-out NaN and an unmasked one included. With
// `composite` it is builder::MaskedSoftmax (the composite); otherwise the same ops written out
// in the program, as attention emitted them before the composite.
SoftmaxRun RunMaskedSoftmax(const Literal& scores, const Literal& mask, bool fuse, bool composite,
                            bool to_bf16 = false) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor x = fb.AddArg(scores.type()), m = fb.AddArg(mask.type());
  Tensor probs;
  if (composite) {
    probs = MaskedSoftmax(x * 0.25, m, {0, 3, 4}, -1e30);
  } else {
    Tensor bm = BroadcastInDim(m, scores.dims(), {0, 3, 4});
    probs = Softmax(Where(bm, x * 0.25, FullLike(x, -1e30)), -1);
  }
  // Attention over a bf16 cache rounds the probabilities to bf16 (their only use).
  if (to_bf16) probs = Convert(probs, ElementType::kBF16);
  EXPECT_TRUE(fb.Return({probs}).ok());
  int composites = 0;
  for (const auto& op : fb.function()->entry().operations())
    composites += op->name() == "stablehlo.composite" &&
                  GetStringAttr(op->attrs(), "name") == kMaskedSoftmaxComposite;
  EXPECT_EQ(composites, composite ? 1 : 0);
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({scores, mask}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? (*out)[0] : Literal(), stats.ops_executed};
}

TEST(FusionTest, MaskedSoftmaxFusedIsBitIdenticalToTheOpsOneByOne) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (const auto& [b, h, g, t, s] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 8, 2, 1, 256},
        {1, 8, 2, 1, 600},  // a decode step's 16 rows long enough to split over the pool
        {2, 2, 2, 5, 37},
        {1, 3, 1, 16, 16}}) {
    std::vector<float> xv(static_cast<size_t>(b * h * g * t * s));
    for (float& f : xv) f = dist(rng);
    xv[1] = std::numeric_limits<float>::quiet_NaN();  // unmasked below: NaN spreads over its row
    xv[s + 2] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint8_t> mv(static_cast<size_t>(b * t * s));
    for (int64_t i = 0; i < b * t * s; ++i) mv[i] = (i * 7 % 5) != 0;
    if (t > 1) {
      // Causal rows (a masked tail whose exponentials are skipped) from row 2 on; row 3's
      // unmasked scores lie below the fill (no skip: the fill is the maximum) and row 4 holds
      // +inf (NaN sum: the tail is NaN too).
      for (int64_t i = 2; i < t; ++i)
        for (int64_t j = 0; j < s; ++j) mv[i * s + j] = j <= i;
      for (int64_t j = 0; j < s; ++j) xv[3 * s + j] = -5e30f;
      xv[4 * s] = std::numeric_limits<float>::infinity();
    }
    mv[1] = 1;
    if (t > 1)
      for (int64_t j = 0; j < s; ++j) mv[s + j] = 0;  // a fully masked (padding) row
    else
      mv[2] = 0;
    Literal mask(TensorType(ElementType::kPred, {b, t, s}));
    std::memcpy(mask.data(), mv.data(), mv.size());
    const Literal x = Literal::FromVector<float>({b, h, g, t, s}, xv);
    // The composite's kernel, its decomposition op by op, and the ops attention wrote out
    // before the composite (op by op and through the plain softmax's fused chain).
    SoftmaxRun fused = RunMaskedSoftmax(x, mask, true, true),
               decomposed = RunMaskedSoftmax(x, mask, false, true),
               inline_ops = RunMaskedSoftmax(x, mask, false, false),
               inline_fused = RunMaskedSoftmax(x, mask, true, false);
    for (const SoftmaxRun* other : {&decomposed, &inline_ops, &inline_fused}) {
      ASSERT_EQ(fused.out.byte_size(), other->out.byte_size());
      EXPECT_EQ(std::memcmp(fused.out.data(), other->out.data(), other->out.byte_size()), 0)
          << "t " << t << " s " << s;
    }
    // The softmax's seven ops, the select and the two broadcasts ran as one.
    EXPECT_LE(fused.ops, inline_ops.ops - 9) << "t " << t << ": not fused";
    // Rounded to bf16 after it: the kernel takes the convert (no more ops than without it) and
    // gives the convert's bits, NaN rows and rounding ties included.
    SoftmaxRun fused_bf16 = RunMaskedSoftmax(x, mask, true, true, true),
               decomposed_bf16 = RunMaskedSoftmax(x, mask, false, true, true);
    ASSERT_EQ(fused_bf16.out.element_type(), ElementType::kBF16);
    ASSERT_EQ(fused_bf16.out.byte_size(), decomposed_bf16.out.byte_size());
    EXPECT_EQ(std::memcmp(fused_bf16.out.data(), decomposed_bf16.out.data(),
                          decomposed_bf16.out.byte_size()),
              0)
        << "t " << t << " s " << s;
    EXPECT_EQ(fused_bf16.ops, fused.ops) << "t " << t << ": the convert ran apart";
  }
}

// The cross-entropy's row work as train::CrossEntropy and its gradient emit it, over
// [rows, n] logits: shifted = x - max, e = exp(shifted), s = sum(e), lse = log(s), and the
// softmax-gradient term g / s * e; a log-sum-exp whose exponentials only feed the sum; plus a
// scalar scale (AdamW's hyperparameters) and a vector tiled along the last axis (a norm
// weight), each broadcast feeding one arithmetic op (fused.broadcast_*). The outputs must have
// the unfused ops' bits. (The LM head's loss is the composite tlaloc.linear_cross_entropy now,
// with a kernel of its own: no row chain of it is recognised.)
struct RowRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
};

RowRun RunRowChain(const Literal& x, const Literal& g, const Literal& w, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(x.type());
  Tensor gin = fb.AddArg(g.type());
  Tensor win = fb.AddArg(w.type());
  const int64_t rows = x.dims()[0], n = x.dims()[1];
  Tensor shifted = in - ReduceMax(in, {1}, true);
  Tensor e = Exp(shifted);
  Tensor s = Sum(e, {1});
  Tensor lse = Log(s);
  Tensor grad = BroadcastInDim(gin / s, {rows, n}, {0}) * e;     // dims [0]: a row's value
  Tensor scaled = (grad * 0.25) / 3.0;                           // scalars, either side
  Tensor tiled = BroadcastInDim(win, {rows, n}, {1}) - shifted;  // a row tiled, on the left
  // The forward pass's chunk: the exponentials feed only their sum.
  Tensor lse_only = Log(Sum(Exp(in - ReduceMax(in, {1}, true)), {1}));
  EXPECT_TRUE(fb.Return({shifted, lse, grad, scaled, tiled, lse_only}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x, g, w}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? *out : std::vector<Literal>{}, stats.ops_executed};
}

TEST(FusionTest, BroadcastsReadInPlaceGiveTheOpsBitsOnTheCrossEntropyRows) {
  for (int64_t n : {1, 7, 33, 1000, 2500}) {  // 2500: several of fused.exp_sum's blocks
    Literal x = Scores(n, static_cast<uint32_t>(n) + 11);
    // Scores is [2, 5, n]: as [10, n] rows, -inf, -1e30, NaN, +inf and -0 rows included; add
    // large logits.
    std::vector<float> v(x.span<float>().begin(), x.span<float>().end());
    for (int64_t j = 0; j < n; j += 3) v[6 * n + j] = 3e38f;
    for (int64_t j = 1; j < n; j += 3) v[7 * n + j] = -3e38f;
    Literal x2 = Literal::FromVector<float>({10, n}, v);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> gv(10), wv(n);
    for (float& f : gv) f = dist(rng);
    for (float& f : wv) f = dist(rng);
    gv[4] = -0.0f;
    Literal g = Literal::FromVector<float>({10}, gv), w = Literal::FromVector<float>({n}, wv);
    RowRun fused = RunRowChain(x2, g, w, true), plain = RunRowChain(x2, g, w, false);
    ASSERT_EQ(fused.outs.size(), 6u);
    ASSERT_EQ(plain.outs.size(), 6u);
    for (size_t k = 0; k < plain.outs.size(); ++k) {
      ASSERT_EQ(fused.outs[k].byte_size(), plain.outs[k].byte_size());
      EXPECT_EQ(std::memcmp(fused.outs[k].data(), plain.outs[k].data(), plain.outs[k].byte_size()),
                0)
          << "n=" << n << " output " << k;
    }
    // Fused: the broadcasts of g / s, two scalars and w, and of both row maxima into their
    // subtractions (1 op fewer each). With n = 1 the builder emits no broadcast for the
    // [10, 1] maxima, so only the four others fuse.
    EXPECT_LE(fused.ops, plain.ops - (n > 1 ? 6 : 4)) << "n=" << n;
  }
}

TEST(FusionTest, BroadcastWithAnotherUserIsNotFused) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(TensorType(ElementType::kF32, {4, 8}));
  Tensor row = fb.AddArg(TensorType(ElementType::kF32, {4}));
  Tensor b = BroadcastInDim(row, {4, 8}, {0});
  EXPECT_TRUE(fb.Return({in * b, b}).ok());  // b is also a result: it must be materialised
  for (bool fuse : {true, false}) {
    InterpreterOptions options;
    options.fuse = fuse;
    auto exe = Executable::Prepare(module, "main", options);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    std::vector<float> xv(32), rv{1, -2, 3.5f, -0.0f};
    for (int i = 0; i < 32; ++i) xv[i] = static_cast<float>(i) - 7.5f;
    auto out = (*exe)->Execute(
        {Literal::FromVector<float>({4, 8}, xv), Literal::FromVector<float>({4}, rv)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto prod = (*out)[0].span<float>(), bcast = (*out)[1].span<float>();
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(bcast[i], rv[i / 8]);
      EXPECT_EQ(prod[i], xv[i] * rv[i / 8]);
    }
  }
}

}  // namespace
}  // namespace tlaloc
