// Trees of f32 elementwise arithmetic run tile by tile (fusion_train_elementwise.cc): AdamW's
// update as train::EmitAdamW writes it, with broadcasts of scalars, rows and tiled vectors as
// leaves, must give the ops' bits one by one, special values included, at sizes with a partial
// last tile and several threads' shares, and when the result takes over a dying operand's buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/typed_builder.h"

namespace tlaloc {
namespace {

struct TreeRun {
  std::vector<Literal> outs;
  int64_t ops = 0;
};

// p, g, m, v: [rows, cols]; row: [rows]; col: [cols]; lr: a scalar.
TreeRun RunUpdate(const std::vector<Literal>& in, bool fuse) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  std::vector<Tensor> a;
  for (const Literal& l : in) a.push_back(fb.AddArg(l.type()));
  const Tensor &p = a[0], &g = a[1], &m = a[2], &v = a[3], &row = a[4], &col = a[5], &lr = a[6];
  const std::vector<int64_t> dims = p.dims();
  // AdamW (train::EmitAdamW's expression, with its scalars as broadcast tensors or constants).
  Tensor gs = g * BroadcastInDim(lr, dims, {});
  Tensor mi = m * 0.9 + gs * (1.0 - 0.9);
  Tensor vi = v * 0.999 + gs * gs * (1.0 - 0.999);
  Tensor denom = Sqrt(vi) / BroadcastInDim(lr, dims, {}) + 1e-8;
  Tensor step = p * 0.99 - BroadcastInDim(lr, dims, {}) * (mi / denom);
  // A row value and a tiled vector as leaves, and a negate.
  Tensor rows = -(g - BroadcastInDim(row, dims, {0})) * BroadcastInDim(col, dims, {1}) + m;
  // The tree's first operand is an exponential that dies at it: the result reuses its buffer.
  Tensor reuse = (Exp(g) * 2.0 + v) / 3.0;
  EXPECT_TRUE(fb.Return({step, mi, vi, rows, reuse}).ok());
  InterpreterOptions options;
  options.fuse = fuse;
  options.num_threads = 2;
  auto exe = Executable::Prepare(module, "main", options);
  EXPECT_TRUE(exe.ok()) << exe.status().ToString();
  ExecutionStats stats;
  auto out = (*exe)->Execute(in, &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return {out.ok() ? *out : std::vector<Literal>{}, stats.ops_executed};
}

TEST(FusionTrainElementwiseTest, AdamWUpdateGivesTheOpsBits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 4100 elements: one partial tile over the fusion's 4096-element minimum; 300 x 257: several
  // threads' shares of 64 tiles.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{4, 1025}, {300, 257}}) {
    std::mt19937 rng(static_cast<uint32_t>(rows));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    auto fill = [&](std::vector<int64_t> d, bool positive) {
      int64_t n = 1;
      for (int64_t x : d) n *= x;
      std::vector<float> f(static_cast<size_t>(n));
      for (float& x : f) x = positive ? std::fabs(dist(rng)) * 1e-3f : dist(rng);
      return f;
    };
    std::vector<float> p = fill({rows, cols}, false), g = fill({rows, cols}, false);
    std::vector<float> m = fill({rows, cols}, false), v = fill({rows, cols}, true);
    // Special values in every input: NaN, infinities, -0, a denormal, a negative second moment
    // (sqrt of it is NaN), huge gradients whose squares overflow.
    g[1] = nan, g[2] = inf, g[3] = -inf, g[4] = -0.0f, g[5] = 1e-40f, g[6] = 3e38f;
    p[7] = nan, p[8] = -0.0f, m[9] = inf, v[10] = -1.0f, v[11] = 0.0f, v[12] = nan;
    const std::vector<float> row = fill({rows}, false), col = fill({cols}, false);
    std::vector<Literal> in = {
        Literal::FromVector<float>({rows, cols}, p), Literal::FromVector<float>({rows, cols}, g),
        Literal::FromVector<float>({rows, cols}, m), Literal::FromVector<float>({rows, cols}, v),
        Literal::FromVector<float>({rows}, row),     Literal::FromVector<float>({cols}, col),
        Literal::FromVector<float>({}, {1e-3f})};
    TreeRun fused = RunUpdate(in, true), plain = RunUpdate(in, false);
    ASSERT_EQ(fused.outs.size(), 5u);
    ASSERT_EQ(plain.outs.size(), 5u);
    for (size_t k = 0; k < plain.outs.size(); ++k) {
      ASSERT_EQ(fused.outs[k].byte_size(), plain.outs[k].byte_size());
      EXPECT_EQ(std::memcmp(fused.outs[k].data(), plain.outs[k].data(), plain.outs[k].byte_size()),
                0)
          << rows << " x " << cols << ", output " << k;
    }
    // step's tree alone holds nine arithmetic ops and four broadcasts; far fewer ops ran.
    EXPECT_LE(fused.ops, plain.ops - 20) << rows << " x " << cols;
  }
}

TEST(FusionTrainElementwiseTest, SmallTensorsAndSharedIntermediatesStayUnfused) {
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor x = fb.AddArg(TensorType(ElementType::kF32, {8, 8}));
  Tensor y = fb.AddArg(TensorType(ElementType::kF32, {64, 128}));
  Tensor shared = y * 2.0;  // read twice below: materialised, a leaf of both trees
  EXPECT_TRUE(fb.Return({(x + 1.0) * 3.0, shared + y * y, shared - 1.0}).ok());
  for (bool fuse : {true, false}) {
    InterpreterOptions options;
    options.fuse = fuse;
    auto exe = Executable::Prepare(module, "main", options);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    std::vector<float> xv(64), yv(64 * 128);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i) - 7.5f;
    for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
    auto out = (*exe)->Execute(
        {Literal::FromVector<float>({8, 8}, xv), Literal::FromVector<float>({64, 128}, yv)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto a = (*out)[0].span<float>(), b = (*out)[1].span<float>(), c = (*out)[2].span<float>();
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(a[i], (xv[i] + 1.0f) * 3.0f);
    for (size_t i = 0; i < yv.size(); ++i) {
      EXPECT_EQ(b[i], yv[i] * 2.0f + yv[i] * yv[i]) << i;
      EXPECT_EQ(c[i], yv[i] * 2.0f - 1.0f) << i;
    }
  }
}

// The cross-entropy's logits gradient: bcast(g / s) * e plus the scatter-add of the picked
// logits' cotangents into zeros (the gather's VJP), whose zeros and scatter become a sparse leaf
// of the tree. Duplicate coordinates (added in the scatter's order), an out-of-range one (skipped)
// and -0 updates included.
TEST(FusionTrainElementwiseTest, ScatterOfZerosIntoTheTreeGivesTheOpsBits) {
  const int64_t rows = 6, cols = 1500;
  auto module = std::make_shared<Module>("t");
  FunctionBuilder fb(module.get(), "main");
  Tensor e = fb.AddArg(TensorType(ElementType::kF32, {rows, cols}));
  Tensor scale = fb.AddArg(TensorType(ElementType::kF32, {rows}));
  Tensor idx = fb.AddArg(TensorType(ElementType::kS32, {8, 2}));
  Tensor upd = fb.AddArg(TensorType(ElementType::kF32, {8}));
  OpBuilder& b = *e.builder();
  hlo::ScatterDimensionNumbers sd;
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 1;
  Tensor zeros = Zeros(b, {rows, cols});
  Tensor picked(hlo::Scatter(b, zeros.value(), idx.value(), upd.value(), sd,
                             hlo::ScalarBinaryRegion(ElementType::kF32, hlo::Add)),
                &b);
  // exp(e) dies at the tree but is not its first operand: the result takes over its buffer.
  Tensor grad = BroadcastInDim(scale, {rows, cols}, {0}) * Exp(e) + picked;
  EXPECT_TRUE(fb.Return({grad}).ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> ev(rows * cols), sv(rows);
  for (float& x : ev) x = dist(rng);
  for (float& x : sv) x = dist(rng);
  ev[5] = -0.0f, ev[cols + 7] = std::numeric_limits<float>::quiet_NaN(), sv[2] = -0.0f;
  ev[2 * cols + 9] = 0.0f;  // -0 * exp(0) = -0; the -0 update lands on +0: -0 + +0 = +0
  const std::vector<int32_t> iv = {
      0, 5,    1, 7, 2,  9, 3, 1499,
      3, 1499, 4, 0, 99, 3, 5, 1000};  // (3, 1499) twice; row 99 is outside
  const std::vector<float> uv = {-1.5f, 2.0f, -0.0f, 0.1f, 0.2f, 3.0f, 9.0f, -2.5f};
  std::vector<Literal> outs[2];
  int64_t ops[2] = {0, 0};
  for (bool fuse : {true, false}) {
    InterpreterOptions options;
    options.fuse = fuse;
    auto exe = Executable::Prepare(module, "main", options);
    ASSERT_TRUE(exe.ok()) << exe.status().ToString();
    ExecutionStats stats;
    auto out = (*exe)->Execute(
        {Literal::FromVector<float>({rows, cols}, ev), Literal::FromVector<float>({rows}, sv),
         Literal::FromVector<int32_t>({8, 2}, iv), Literal::FromVector<float>({8}, uv)},
        &stats);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    outs[fuse] = *out;
    ops[fuse] = stats.ops_executed;
  }
  ASSERT_EQ(outs[0][0].byte_size(), outs[1][0].byte_size());
  EXPECT_EQ(std::memcmp(outs[0][0].data(), outs[1][0].data(), outs[0][0].byte_size()), 0);
  // The zeros' broadcast, the scatter, the row broadcast, the multiply and the add ran as one.
  EXPECT_LE(ops[1], ops[0] - 4);
  const auto g = outs[1][0].span<float>();
  EXPECT_FALSE(std::signbit(g[2 * cols + 9])) << g[2 * cols + 9];
}

}  // namespace
}  // namespace tlaloc
