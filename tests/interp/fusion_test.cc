// Fused chains (src/interp/fusion.h): the softmax chain builder::Softmax emits (masked too), the
// int8 product and broadcasts read in place each run as one kernel, with bit for bit the results of
// the ops one by one, special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>

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
// with the ops' bits: a fully masked row, a masked-out NaN and an unmasked one included.
SoftmaxRun RunMaskedSoftmax(const Literal& scores, const Literal& mask, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor x = fb.AddArg(scores.type()), m = fb.AddArg(mask.type());
  Tensor bm = BroadcastInDim(m, scores.dims(), {0, 3, 4});
  EXPECT_TRUE(fb.Return({Softmax(Where(bm, x * 0.25, FullLike(x, -1e30)), -1)}).ok());
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
    SoftmaxRun fused = RunMaskedSoftmax(x, mask, true), plain = RunMaskedSoftmax(x, mask, false);
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
        << "t " << t << " s " << s;
    // The softmax's seven ops, the select and the two broadcasts ran as one.
    EXPECT_LE(fused.ops, plain.ops - 9) << "t " << t << ": not fused";
  }
}

// The int8 product as nn::Linear emits it for int8 weights (nn::DequantizeInt8, then
// dot_general), on x f32 [rows, k], q s8 [n, k], scales f16 [n, k / 32].
SoftmaxRun RunInt8Dot(const Literal& x, const Literal& q, const Literal& scales, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor xin = fb.AddArg(x.type()), qin = fb.AddArg(q.type()), sin = fb.AddArg(scales.type());
  const int64_t n = q.dims()[0], k = q.dims()[1];
  Tensor values = Convert(Reshape(qin, {n, k / 32, 32}), ElementType::kF32);
  Tensor sc = BroadcastInDim(Convert(sin, ElementType::kF32), {n, k / 32, 32}, {0, 1});
  Tensor w = Reshape(values * sc, {n, k});
  // x doubled first: an intermediate that dies at the product (with n == k its buffer has the
  // result's type, and must not be taken over while the kernel reads it).
  EXPECT_TRUE(fb.Return({DotGeneral(xin * 2.0, w, {}, {}, {1}, {1})}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x, q, scales}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {(*out)[0], stats.ops_executed};
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

// Decode's 1-4 rows (the int8 matrix-vector kernel) and prefill's more (dequantise, then the f32
// product) return the unfused chain's exact bits; both agree with a double-precision reference.
TEST(FusionTest, Int8DotFusedIsBitIdenticalToTheOpsOneByOne) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> qdist(-127, 127);
  for (const auto& [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 96},
                                   {2, 64, 1024},
                                   {3, 9, 32},
                                   {4, 130, 160},
                                   {5, 33, 64},
                                   {17, 70, 128},
                                   {1, 96, 96},
                                   {3, 64, 64},
                                   {6, 64, 64},
                                   // Over 4 rows and 1024 columns: dequantised and multiplied
                                   // 256 rows of the matrix at a time.
                                   {6, 1100, 64},
                                   {9, 1024, 96}}) {
    std::vector<float> xv(static_cast<size_t>(rows * k));
    for (float& v : xv) v = dist(rng);
    std::vector<int8_t> qv(static_cast<size_t>(n * k));
    for (int8_t& v : qv) v = static_cast<int8_t>(qdist(rng));
    std::vector<uint16_t> sv(static_cast<size_t>(n * k / 32));
    for (uint16_t& v : sv) v = FloatToHalfBits(std::fabs(dist(rng)) * 0.01f);
    const Literal x = Literal::FromVector<float>({rows, k}, xv);
    const Literal q = Literal::FromVector<int8_t>({n, k}, qv);
    Literal s(TensorType(ElementType::kF16, {n, k / 32}));
    std::memcpy(s.data(), sv.data(), sv.size() * 2);
    SoftmaxRun fused = RunInt8Dot(x, q, s, true), plain = RunInt8Dot(x, q, s, false);
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
        << "rows " << rows << ", n " << n << ", k " << k;
    // The seven-op chain ran as one, and x * 2's scalar broadcast was read in place.
    EXPECT_EQ(fused.ops, plain.ops - 7) << "the seven-op chain did not run as one";
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double w =
              qv[j * k + i] * static_cast<double>(HalfBitsToFloat(sv[(j * k + i) / 32]));
          ref += 2.0 * xv[r * k + i] * w;
          mag += std::fabs(2.0 * xv[r * k + i] * w);
        }
        worst =
            std::max(worst, std::fabs(fused.out.span<float>()[r * n + j] - ref) / (mag + 1e-30));
      }
    EXPECT_LT(worst, 1e-5) << "rows " << rows;
  }
}

}  // namespace
}  // namespace tlaloc
