// Rows fused into one pass (src/interp/fusion_norm.cc, fusion_argmax.cc): the composites
// tlaloc.rms_norm (builder::RmsNorm, bf16 and f32 rows) and tlaloc.argmax (builder::Argmax),
// mapped to their kernels by name, each with bit for bit the results of the ops run one by one
// (the composite's decomposition), special values included; an argmax over another axis runs its
// decomposition. The unweighted norm chain, which is no composite,
// runs op by op: same bits either way.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "tlaloc/builder/composite.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

struct NormRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
};

// rms_norm(x + 0, w) and, unweighted, the norm of x itself; `residual` also returns x + x, so
// an f32 x has a user outside the chain (the decoder's residual stream).
NormRun RunNorm(const Literal& x, const Literal& w, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(x.type());
  Tensor win = fb.AddArg(w.type());
  const ElementType et = x.element_type();
  Tensor weighted = RmsNorm(in, win, 1e-6);
  // The builder's norm without the weight: the same chain ending at the rounding.
  Tensor xf = Convert(in, ElementType::kF32);
  Tensor plain =
      Convert(xf * Rsqrt(Mean(xf * xf, {-1}, true) + 1e-5), et);  // a second eps, unweighted
  EXPECT_TRUE(fb.Return({weighted, plain, in + in}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x, w}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? *out : std::vector<Literal>{}, stats.ops_executed};
}

// Rows of normal values with a zero row, a row of huge values (the square overflows: rsqrt of
// +inf is 0), a NaN, an infinity and subnormals.
std::vector<float> Rows(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (float& f : v) f = dist(rng);
  if (rows >= 5) {
    for (int64_t j = 0; j < n; ++j) v[n + j] = 0.0f;
    for (int64_t j = 0; j < n; ++j) v[2 * n + j] = 3e38f;
    v[3 * n + n / 2] = std::numeric_limits<float>::quiet_NaN();
    v[4 * n] = std::numeric_limits<float>::infinity();
    v[4 * n + n - 1] = 1e-40f;
  }
  return v;
}

Literal AsType(const std::vector<int64_t>& dims, const std::vector<float>& v, ElementType et) {
  Literal f = Literal::FromVector<float>(dims, v);
  if (et == ElementType::kF32) return f;
  Literal out(TensorType(et, dims));
  auto* bits = reinterpret_cast<uint16_t*>(out.data());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = FloatToBf16Bits(v[i]);
  return out;
}

TEST(FusionRowsTest, RmsNormFusedIsBitIdenticalToTheOpsOneByOne) {
  for (ElementType et : {ElementType::kBF16, ElementType::kF32}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{
             {1, 1, 1024}, {1, 1, 16, 128}, {2, 9, 64}, {1, 1, 1}, {33, 16}, {3, 40, 256}}) {
      const int64_t n = dims.back();
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
      const Literal x = AsType(dims, Rows(rows, n, static_cast<uint32_t>(rows * n)), et);
      std::vector<float> wv(static_cast<size_t>(n));
      std::mt19937 rng(static_cast<uint32_t>(n));
      std::normal_distribution<float> dist(1.0f, 0.5f);
      for (float& f : wv) f = dist(rng);
      const Literal w = AsType({n}, wv, et);
      NormRun fused = RunNorm(x, w, true), plain = RunNorm(x, w, false);
      ASSERT_EQ(fused.outs.size(), 3u);
      ASSERT_EQ(plain.outs.size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        ASSERT_EQ(fused.outs[k].byte_size(), plain.outs[k].byte_size());
        EXPECT_EQ(
            std::memcmp(fused.outs[k].data(), plain.outs[k].data(), plain.outs[k].byte_size()), 0)
            << MlirName(et) << " rows " << rows << " n " << n << " output " << k;
      }
      // The composite ran as one kernel, not its decomposition (the square, the sum and its
      // reshape, two scalar constants and their broadcasts, the divide, add, rsqrt, the row
      // broadcast and its reshape, the scaling, the weight's broadcast and product: 13 or more
      // ops, and the call's return), whatever n is.
      EXPECT_LE(fused.ops, plain.ops - 12) << MlirName(et) << " n " << n << ": not fused";
    }
  }
}

TEST(FusionRowsTest, ANormWhoseIntermediateIsUsedElsewhereIsNotFused) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(TensorType(ElementType::kF32, {3, 8}));
  Tensor w = fb.AddArg(TensorType(ElementType::kF32, {8}));
  Tensor r = Rsqrt(Mean(in * in, {-1}, true) + 1e-6);
  Tensor y = in * r * w;
  EXPECT_TRUE(fb.Return({y, r}).ok());  // the row factor is also a result
  std::vector<float> xv(24), wv(8, 0.5f);
  for (int i = 0; i < 24; ++i) xv[i] = static_cast<float>(i) - 11.5f;
  std::vector<Literal> outs[2];
  for (bool fuse : {true, false}) {
    InterpreterOptions options;
    options.fuse = fuse;
    auto exe = Executable::Prepare(module, "main", options);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    auto out = (*exe)->Execute(
        {Literal::FromVector<float>({3, 8}, xv), Literal::FromVector<float>({8}, wv)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    outs[fuse] = *out;
  }
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(std::memcmp(outs[0][k].data(), outs[1][k].data(), outs[0][k].byte_size()), 0);
  for (float f : outs[1][1].span<float>()) EXPECT_GT(f, 0.0f);  // the factors, not placeholders
}

// Argmax over [rows, n] f32 (builder::Argmax: the first index of the maximum, NaN the largest).
struct ArgmaxRun {
  Literal out;
  int64_t ops = 0;
};

ArgmaxRun RunArgmax(const Literal& x, bool fuse, int64_t axis = -1) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(x.type());
  EXPECT_TRUE(fb.Return({Argmax(in, axis), in}).ok());  // x is also a result, as decode's logits
  // One composite, and no reduce outside its decomposition.
  int composites = 0, reduces = 0;
  for (const auto& op : fb.function()->entry().operations()) {
    composites += op->name() == "stablehlo.composite" &&
                  GetStringAttr(op->attrs(), "name") == kArgmaxComposite;
    reduces += op->name() == "stablehlo.reduce";
  }
  EXPECT_EQ(composites, 1);
  EXPECT_EQ(reduces, 0);
  InterpreterOptions options;
  options.fuse = fuse;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute({x}, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? (*out)[0] : Literal(), stats.ops_executed};
}

TEST(FusionRowsTest, ArgmaxFusedGivesTheOpsIndices) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {2, 17, 151936}) {
    const int64_t rows = 7;
    std::vector<float> v = Rows(rows, n, static_cast<uint32_t>(n));
    // Row 0: a tie (the first wins); row 1: all zeros, -0 first; row 2: all -inf; row 3: a NaN
    // (it wins); row 4: +inf last; row 5: two NaNs (the first); row 6: normal values.
    v[n / 2] = 100.0f;
    v[n - 1] = 100.0f;
    v[n] = -0.0f;
    for (int64_t j = 0; j < n; ++j) v[2 * n + j] = -inf;
    for (int64_t j = 0; j < n; ++j) v[3 * n + j] = 1.0f;
    v[3 * n + n - 1] = nan;
    for (int64_t j = 0; j < n; ++j) v[4 * n + j] = static_cast<float>(j % 5);
    v[4 * n + n - 1] = inf;
    v[5 * n + 1] = nan;
    v[5 * n + n - 1] = nan;
    const Literal x = Literal::FromVector<float>({rows, n}, v);
    ArgmaxRun fused = RunArgmax(x, true), plain = RunArgmax(x, false);
    ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
    EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0)
        << "n " << n;
    auto ids = fused.out.span<int32_t>();
    EXPECT_EQ(ids[0], n / 2);
    EXPECT_EQ(ids[1], 0);
    EXPECT_EQ(ids[2], 0);
    EXPECT_EQ(ids[3], n - 1);
    EXPECT_EQ(ids[4], n - 1);
    EXPECT_EQ(ids[5], 1);
    // The composite ran as its kernel, not its fifteen ops (two reduces, three reshapes, three
    // broadcasts, three compares, and, or, iota, select).
    EXPECT_LE(fused.ops, plain.ops - 12) << "n " << n << ": not fused";
  }
}

// Over the first axis the kernel does not apply: the decomposition runs, fused or not.
TEST(FusionRowsTest, ArgmaxOverAnotherAxisRunsTheDecomposition) {
  const int64_t rows = 9, n = 5;
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i * 37 % 11) - 5.0f;
  v[4 * n + 2] = std::numeric_limits<float>::quiet_NaN();
  const Literal x = Literal::FromVector<float>({rows, n}, v);
  ArgmaxRun fused = RunArgmax(x, true, 0), plain = RunArgmax(x, false, 0);
  ASSERT_EQ(fused.out.byte_size(), plain.out.byte_size());
  EXPECT_EQ(std::memcmp(fused.out.data(), plain.out.data(), plain.out.byte_size()), 0);
  EXPECT_EQ(fused.out.span<int32_t>()[2], 4);  // the NaN wins its column
  EXPECT_EQ(fused.ops, plain.ops);
}

}  // namespace
}  // namespace tlaloc
