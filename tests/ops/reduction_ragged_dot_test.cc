// chlo.ragged_dot: against a loop of per-group dot_generals (f32 and bf16, both rhs layouts,
// empty groups, one group holding every row, rows past the last group, groups large enough for
// the grouped kernels), the generic form JAX
// prints, shape-rule refusals, and its VJP for both operands by central differences.
#include <cmath>
#include <cstring>
#include <string>

#include "reduction_test_util.h"
#include "tlaloc/ir/typed_builder.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

using rdtest::RunOp;

AttrDict RaggedAttrs(std::vector<int64_t> lc, std::vector<int64_t> rc, std::vector<int64_t> group) {
  hlo::RaggedDotDimensionNumbers d;
  d.lhs_contracting = std::move(lc);
  d.rhs_contracting = std::move(rc);
  d.lhs_ragged = {0};
  d.rhs_group = std::move(group);
  return {{"ragged_dot_dimension_numbers", hlo::RaggedDotDimensionsAttr(d)}};
}

Literal Random(ElementType et, std::vector<int64_t> dims, uint32_t seed) {
  Literal l(TensorType(et, dims));
  auto v = rdtest::RandomFloats(static_cast<size_t>(l.num_elements()), seed, 1.0f);
  for (int64_t i = 0; i < l.num_elements(); ++i) l.SetFromDouble(i, v[i]);
  return l;
}

Literal Sizes(const std::vector<int32_t>& s) {
  return Literal::FromVector<int32_t>({static_cast<int64_t>(s.size())}, s);
}

// Rows [begin, begin + rows) of x [M, K] (or block g of x [G, ...]) as its own literal.
Literal Rows(const Literal& x, int64_t begin, int64_t rows) {
  std::vector<int64_t> dims = x.dims();
  const int64_t inner = x.num_elements() / dims[0];
  dims[0] = rows;
  Literal out(TensorType(x.element_type(), dims));
  const int64_t bytes = BitWidth(x.element_type()) / 8;
  std::memcpy(out.data(), x.data() + begin * inner * bytes, rows * inner * bytes);
  return out;
}

// The reference: one dot_general per group over its rows, zero rows past the last group.
Literal PerGroupDots(const Literal& lhs, const Literal& rhs, const std::vector<int32_t>& sizes,
                     int64_t rhs_contract, ElementType result_type) {
  const int64_t m = lhs.dims()[0];
  const int64_t n = rhs.dims()[rhs_contract == 1 ? 2 : 1];
  Literal out(TensorType(result_type, {m, n}));
  int64_t start = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const int64_t rows = std::min<int64_t>(sizes[g], m - start);
    if (rows > 0) {
      Literal w = Rows(rhs, static_cast<int64_t>(g), 1);
      auto w2 = w.Reshaped({rhs.dims()[1], rhs.dims()[2]});
      EXPECT_TRUE(w2.ok());
      auto r = RunOp("stablehlo.dot_general", {Rows(lhs, start, rows), *w2},
                     rdtest::DotAttrs({}, {}, {1}, {rhs_contract - 1}),
                     std::vector<Type>{Type(TensorType(result_type, {rows, n}))});
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return out;
      for (int64_t i = 0; i < rows * n; ++i)
        out.SetFromDouble(start * n + i, (*r)[0].GetAsDouble(i));
    }
    start += rows;
  }
  return out;
}

void ExpectRaggedMatchesLoop(ElementType operand_type, ElementType result_type, int64_t m,
                             int64_t k, int64_t n, const std::vector<int32_t>& sizes,
                             int64_t rhs_contract, double tol) {
  const int64_t g = static_cast<int64_t>(sizes.size());
  Literal lhs = Random(operand_type, {m, k}, 3);
  Literal rhs =
      Random(operand_type,
             rhs_contract == 1 ? std::vector<int64_t>{g, k, n} : std::vector<int64_t>{g, n, k}, 5);
  auto got =
      RunOp("chlo.ragged_dot", {lhs, rhs, Sizes(sizes)}, RaggedAttrs({1}, {rhs_contract}, {0}),
            std::vector<Type>{Type(TensorType(result_type, {m, n}))});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  Literal want = PerGroupDots(lhs, rhs, sizes, rhs_contract, result_type);
  ASSERT_EQ((*got)[0].dims(), want.dims());
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR((*got)[0].GetAsDouble(i), want.GetAsDouble(i),
                tol * (1 + std::fabs(want.GetAsDouble(i))))
        << "element " << i;
}

TEST(RaggedDot, F32MatchesPerGroupDotsWithEmptyGroups) {
  // Groups of 3, 0, 1, 6 rows and an empty group at the end: rhs [G, K, N] sends the small
  // groups to the matrix-vector path, rhs [G, N, K] to the tile kernel, and 6 rows to BLAS.
  ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 10, 7, 9, {3, 0, 1, 6, 0}, 1, 1e-6);
  ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 10, 7, 9, {3, 0, 1, 6, 0}, 2, 1e-6);
}

TEST(RaggedDot, Bf16MatchesPerGroupDots) {
  // f32 accumulation in both; a bf16 result is rounded once.
  ExpectRaggedMatchesLoop(ElementType::kBF16, ElementType::kF32, 12, 16, 5, {2, 7, 0, 3}, 2, 1e-6);
  ExpectRaggedMatchesLoop(ElementType::kBF16, ElementType::kBF16, 12, 16, 5, {2, 7, 0, 3}, 1, 1e-2);
}

// rhs [G, N, K] sends every bf16 and f32 group to ragged_dot_grouped's tile kernels
// (AVX512_BF16, AVX-512); with rhs [G, K, N] f32 groups of more than four rows go to one sgemm
// per block and the small ones to the matrix-vector path, all in one call: groups of 13, 5 and 22
// rows leave partial 4-row tiles, n = 200 three column blocks (96, 96, 8; the last a partial
// 6-column tile) and k = 70 two 32-element steps and a masked tail.
TEST(RaggedDot, GroupedKernelsMatchPerGroupDotsOverTilesAndBlocks) {
  const std::vector<int32_t> sizes{13, 0, 5, 4, 22, 16};
  for (int64_t rc : {1, 2}) {
    ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 60, 70, 200, sizes, rc, 1e-5);
    ExpectRaggedMatchesLoop(ElementType::kBF16, ElementType::kF32, 60, 70, 200, sizes, rc, 1e-5);
  }
  ExpectRaggedMatchesLoop(ElementType::kBF16, ElementType::kBF16, 60, 70, 200, sizes, 2, 1e-2);
}

TEST(RaggedDot, AllRowsInOneGroupAndRowsPastTheGroups) {
  ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 8, 6, 4, {0, 8, 0}, 1, 1e-6);
  // 5 of 8 rows grouped: the last three come out zero (PerGroupDots leaves them zero too).
  ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 8, 6, 4, {2, 3}, 2, 1e-6);
  // Sizes adding up past M are clipped to the rows there are.
  ExpectRaggedMatchesLoop(ElementType::kF32, ElementType::kF32, 8, 6, 4, {5, 9}, 1, 1e-6);
}

TEST(RaggedDot, RaggedContractionIsPerGroupLhsTransposeTimesRhs) {
  const int64_t m = 9, k = 4, n = 3;
  const std::vector<int32_t> sizes{4, 0, 5};
  Literal a = Random(ElementType::kF32, {m, k}, 7), b = Random(ElementType::kF32, {m, n}, 9);
  auto got = RunOp("chlo.ragged_dot", {a, b, Sizes(sizes)}, RaggedAttrs({0}, {0}, {}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ((*got)[0].dims(), (std::vector<int64_t>{3, k, n}));
  int64_t start = 0;
  for (int64_t g = 0; g < 3; ++g) {
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t r = start; r < start + sizes[g]; ++r)
          s += a.GetAsDouble(r * k + i) * b.GetAsDouble(r * n + j);
        EXPECT_NEAR((*got)[0].GetAsDouble((g * k + i) * n + j), s, 1e-5) << g << " " << i;
      }
    start += sizes[g];
  }
}

TEST(RaggedDot, ShapeRuleAndGroupSizesAreChecked) {
  Literal lhs = Random(ElementType::kF32, {4, 3}, 1), rhs = Random(ElementType::kF32, {2, 3, 5}, 2);
  auto wrong_groups =
      RunOp("chlo.ragged_dot", {lhs, rhs, Sizes({1, 1, 2})}, RaggedAttrs({1}, {1}, {0}));
  ASSERT_FALSE(wrong_groups.ok());
  EXPECT_NE(wrong_groups.status().message().find("groups"), std::string::npos)
      << wrong_groups.status().ToString();
  auto wrong_k = RunOp("chlo.ragged_dot", {lhs, rhs, Sizes({2, 2})}, RaggedAttrs({1}, {2}, {0}));
  ASSERT_FALSE(wrong_k.ok());
  EXPECT_NE(wrong_k.status().message().find("contracting"), std::string::npos);
  hlo::RaggedDotDimensionNumbers batched;
  batched.lhs_batch = {0};
  batched.rhs_batch = {1};
  auto batch = RunOp("chlo.ragged_dot", {lhs, rhs, Sizes({2, 2})},
                     {{"ragged_dot_dimension_numbers", hlo::RaggedDotDimensionsAttr(batched)}});
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("batching"), std::string::npos);
  auto negative = RunOp("chlo.ragged_dot", {lhs, rhs, Sizes({3, -1})}, RaggedAttrs({1}, {1}, {0}));
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("group_sizes[1] = -1"), std::string::npos)
      << negative.status().ToString();
}

TEST(RaggedDot, JaxGenericFormParsesPrintsAndRuns) {
  // As JAX prints jax.lax.ragged_dot (MLIR's generic form with properties).
  const char* text =
      R"(func.func @main(%arg0: tensor<4x2xf32>, %arg1: tensor<2x2x3xf32>, %arg2: tensor<2xi32>) -> tensor<4x3xf32> {
  %0 = "chlo.ragged_dot"(%arg0, %arg1, %arg2) <{precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>], ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>}> : (tensor<4x2xf32>, tensor<2x2x3xf32>, tensor<2xi32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
})";
  auto m1 = ParseModule(text, "jax");
  ASSERT_TRUE(m1.ok()) << m1.status().ToString();
  const std::string printed = PrintModule(**m1);
  EXPECT_NE(printed.find("\"chlo.ragged_dot\"(%arg0, %arg1, %arg2)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("#chlo.ragged_dot<lhs_contracting_dimensions = [1], "
                         "rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], "
                         "rhs_group_dimensions = [0]>"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("#chlo<precision DEFAULT>"), std::string::npos) << printed;
  auto m2 = ParseModule(printed, "printed");
  ASSERT_TRUE(m2.ok()) << m2.status().ToString() << "\n" << printed;
  EXPECT_EQ(PrintModule(**m2), printed);
  Literal lhs = Random(ElementType::kF32, {4, 2}, 11),
          rhs = Random(ElementType::kF32, {2, 2, 3}, 12);
  auto r = Interpret(**m2, "main", {lhs, rhs, Sizes({1, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Literal want = PerGroupDots(lhs, rhs, {1, 3}, 1, ElementType::kF32);
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR((*r)[0].GetAsDouble(i), want.GetAsDouble(i), 1e-6);
}

// ---- VJP -----------------------------------------------------------------------------------

Literal Ramp(std::vector<int64_t> dims, double scale, double offset) {
  Literal l(TensorType(ElementType::kF64, std::move(dims)));
  for (int64_t i = 0; i < l.num_elements(); ++i)
    l.SetFromDouble(i, std::sin(scale * static_cast<double>(i) + offset));
  return l;
}

// <ct, op(x)>'s gradient from the rule against central differences, for lhs and rhs (f64).
void CheckRaggedVjp(const Literal& lhs, const Literal& rhs, const std::vector<int32_t>& sizes,
                    const AttrDict& attrs) {
  Literal gs = Sizes(sizes);
  auto fwd = RunOp("chlo.ragged_dot", {lhs, rhs, gs}, attrs);
  ASSERT_TRUE(fwd.ok()) << fwd.status().ToString();
  Literal ct = Ramp((*fwd)[0].dims(), 0.7, 0.3);
  Module m("t");
  Function* fn = m.AddFunction(
      "main", {Type(lhs.type()), Type(rhs.type()), Type(gs.type()), Type(ct.type())}, {});
  OpBuilder b(&fn->entry(), &m);
  std::vector<Value> args = fn->entry().arguments();
  std::vector<Value> x(args.begin(), args.begin() + 3);
  std::vector<Value> y = b.Create("chlo.ragged_dot", x, attrs);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto grads = b.last_op()->def().vjp(b, *b.last_op(), x, y, {args[3]});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  ASSERT_TRUE((*grads)[0] && (*grads)[1]);
  EXPECT_FALSE((*grads)[2]) << "group sizes are not differentiable";
  fn->set_result_types({(*grads)[0].type(), (*grads)[1].type()});
  b.Create("func.return", {(*grads)[0], (*grads)[1]});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto got = Interpret(m, "main", {lhs, rhs, gs, ct});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const double h = 1e-6;
  for (int operand = 0; operand < 2; ++operand) {
    const Literal& base = operand == 0 ? lhs : rhs;
    ASSERT_EQ((*got)[operand].dims(), base.dims());
    for (int64_t j = 0; j < base.num_elements(); ++j) {
      double f[2];
      for (int s = 0; s < 2; ++s) {
        std::vector<Literal> v{lhs.Clone(), rhs.Clone(), gs};
        v[operand].SetFromDouble(j, base.GetAsDouble(j) + (s ? -h : h));
        auto r = RunOp("chlo.ragged_dot", std::move(v), attrs);
        ASSERT_TRUE(r.ok());
        f[s] = 0;
        for (int64_t i = 0; i < ct.num_elements(); ++i)
          f[s] += ct.GetAsDouble(i) * (*r)[0].GetAsDouble(i);
      }
      const double want = (f[0] - f[1]) / (2 * h);
      EXPECT_NEAR((*got)[operand].GetAsDouble(j), want, 1e-6 * (1 + std::fabs(want)))
          << "operand " << operand << " element " << j;
    }
  }
}

class RaggedDotVjp : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every op is registered: a registry regression must fail here, not skip.
    ASSERT_TRUE(rdtest::HasOps({"stablehlo.dot_general"})) << "dot_general is not registered";
  }
};

TEST_F(RaggedDotVjp, GroupedRowsBothRhsLayouts) {
  // An empty group and a row past the last group (its lhs cotangent must be zero).
  CheckRaggedVjp(Ramp({6, 3}, 0.9, 0.1), Ramp({3, 3, 4}, 1.3, 0.7), {2, 0, 3},
                 RaggedAttrs({1}, {1}, {0}));
  CheckRaggedVjp(Ramp({6, 3}, 0.9, 0.1), Ramp({3, 4, 3}, 1.3, 0.7), {2, 0, 3},
                 RaggedAttrs({1}, {2}, {0}));
}

TEST_F(RaggedDotVjp, RaggedContraction) {
  CheckRaggedVjp(Ramp({7, 3}, 0.9, 0.1), Ramp({7, 2}, 1.3, 0.7), {3, 0, 4},
                 RaggedAttrs({0}, {0}, {}));
}

}  // namespace
}  // namespace tlaloc
