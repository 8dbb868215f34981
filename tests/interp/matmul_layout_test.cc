// dot_general's in-place matrix paths: operands read straight or transposed (no packing copy),
// the matrix-vector kernel for few rows or columns (f32 and bf16, several threads) and BLAS for
// the rest, each checked against a double-precision loop over the logical product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "ops/reduction_test_util.h"
#include "tlaloc/support/half.h"

namespace tlaloc {
namespace {

using rdtest::DotAttrs;

struct Case {
  int64_t batch, m, k, n;
  bool lhs_transposed, rhs_transposed, bf16;
};

// Values exactly representable in bf16, so f32 and bf16 runs multiply the same numbers.
std::vector<float> Bf16Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = bf16(dist(rng)).f();
  return v;
}

Literal MakeLiteral(const std::vector<int64_t>& dims, const std::vector<float>& values,
                    bool as_bf16) {
  if (!as_bf16) return Literal::FromVector<float>(dims, values);
  std::vector<bf16> h;
  for (float x : values) h.push_back(bf16(x));
  return Literal::FromVector<bf16>(dims, h);
}

// Runs A[b] (m x k) . B[b] (k x n) with each operand stored straight or transposed; returns the
// f32 result and the double-precision reference, both [batch, m, n].
void RunCase(const Case& c, std::vector<float>& got, std::vector<double>& want) {
  const bool batched = c.batch > 1;
  std::vector<float> a = Bf16Values(c.batch * c.m * c.k, 1), b = Bf16Values(c.batch * c.k * c.n, 2);
  // Logical element accessors over the stored layouts.
  auto a_at = [&](int64_t bi, int64_t i, int64_t p) {
    return c.lhs_transposed ? a[(bi * c.k + p) * c.m + i] : a[(bi * c.m + i) * c.k + p];
  };
  auto b_at = [&](int64_t bi, int64_t p, int64_t j) {
    return c.rhs_transposed ? b[(bi * c.n + j) * c.k + p] : b[(bi * c.k + p) * c.n + j];
  };
  std::vector<int64_t> adims =
      c.lhs_transposed ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k};
  std::vector<int64_t> bdims =
      c.rhs_transposed ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  int64_t off = 0;
  if (batched) {
    adims.insert(adims.begin(), c.batch);
    bdims.insert(bdims.begin(), c.batch);
    off = 1;
  }
  std::vector<int64_t> lb, rb;
  if (batched) lb = rb = {0};
  std::vector<int64_t> lc = {off + (c.lhs_transposed ? 0 : 1)};
  std::vector<int64_t> rc = {off + (c.rhs_transposed ? 1 : 0)};
  std::vector<Type> result{
      Type(TensorType(ElementType::kF32, batched ? std::vector<int64_t>{c.batch, c.m, c.n}
                                                 : std::vector<int64_t>{c.m, c.n}))};
  auto out = rdtest::RunOp("stablehlo.dot_general",
                           {MakeLiteral(adims, a, c.bf16), MakeLiteral(bdims, b, c.bf16)},
                           DotAttrs(lb, rb, lc, rc), result);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  got = rdtest::Values<float>((*out)[0]);
  want.assign(c.batch * c.m * c.n, 0);
  for (int64_t bi = 0; bi < c.batch; ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < c.k; ++p)
          s += static_cast<double>(a_at(bi, i, p)) * static_cast<double>(b_at(bi, p, j));
        want[(bi * c.m + i) * c.n + j] = s;
      }
}

class MatmulLayoutTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulLayoutTest, MatchesDoubleReference) {
  const Case& c = GetParam();
  std::vector<float> got;
  std::vector<double> want;
  RunCase(c, got, want);
  ASSERT_EQ(got.size(), want.size());
  // f32 accumulation of k products of magnitude <= 4: error grows at most like k * eps * 4.
  const double tol = 4.0 * c.k * 1.2e-7 + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> shapes = {
      {1, 1, 17, 29},    // matrix-vector: one row of A
      {1, 3, 100, 41},   // a few rows of A
      {3, 2, 33, 7},     // batched, a few rows (attention scores in decode)
      {1, 37, 100, 1},   // one column of B
      {2, 29, 31, 3},    // batched, a few columns
      {1, 37, 45, 23},   // BLAS
      {3, 19, 8, 13},    // batched BLAS
      {1, 1, 1024, 700}  // long rows split over threads
  };
  for (auto [batch, m, k, n] : shapes)
    for (bool lt : {false, true})
      for (bool rt : {false, true})
        for (bool h : {false, true}) out.push_back({batch, m, k, n, lt, rt, h});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, MatmulLayoutTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return "b" + std::to_string(c.batch) + "m" + std::to_string(c.m) + "k" +
                                  std::to_string(c.k) + "n" + std::to_string(c.n) +
                                  (c.lhs_transposed ? "_lhsT" : "") +
                                  (c.rhs_transposed ? "_rhsT" : "") + (c.bf16 ? "_bf16" : "_f32");
                         });

// The matrix-vector kernel widens bf16 exactly and keeps one summation order, so bf16 operands
// give bit for bit the result of the same values in f32.
TEST(MatmulLayoutTest, Bf16MatrixVectorEqualsF32OfSameValues) {
  Case c{1, 1, 1000, 300, false, true, false};
  std::vector<float> f32_out, bf16_out;
  std::vector<double> want;
  RunCase(c, f32_out, want);
  c.bf16 = true;
  RunCase(c, bf16_out, want);
  ASSERT_EQ(f32_out.size(), bf16_out.size());
  for (size_t i = 0; i < f32_out.size(); ++i) EXPECT_EQ(f32_out[i], bf16_out[i]) << i;
}

}  // namespace
}  // namespace tlaloc
