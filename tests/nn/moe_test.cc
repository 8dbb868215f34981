// The MoE router and the expert forms: the router's three top-k methods agree (ties to the
// lower id) and match a double-precision loop; the sparse forms equal the dense-masked one and
// a double-precision loop over experts in prefill- and decode-sized batches, f32 and bf16.
#include "tlaloc/nn/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/support/half.h"

namespace tlaloc::nn {
namespace {

std::vector<float> RandomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Builds main(args...) -> body(args), runs it, returns the results.
template <typename Body>
std::vector<Literal> RunBody(const std::vector<Literal>& args, Body body) {
  Module module("t");
  std::vector<Type> types;
  for (const auto& a : args) types.push_back(Type(a.type()));
  FunctionBuilder fb(&module, "main", types);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < args.size(); ++i) ins.push_back(fb.arg(static_cast<int>(i)));
  std::vector<Tensor> outs = body(ins);
  Status s = fb.Return(outs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto r = Interpret(module, "main", args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Literal>{};
}

TEST(MoeRouter, TopKMethodsAgreeWithTiesToTheLowerId) {
  const int64_t n = 33, e = 16, k = 4;
  std::vector<float> logits = RandomVector(n * e, 1);
  // Exact ties within rows: the lower id must win in every method.
  for (int64_t r = 0; r < n; r += 3) logits[r * e + 5] = logits[r * e + 2];
  for (int64_t r = 1; r < n; r += 4)
    for (int64_t j = 0; j < e; ++j) logits[r * e + j] = 0.5f;
  Literal in = Literal::FromVector<float>({n, e}, logits);
  for (bool norm : {false, true}) {
    std::vector<std::vector<Literal>> got;
    for (TopKMethod m : {TopKMethod::kMaxMask, TopKMethod::kChloTopK, TopKMethod::kSort})
      got.push_back(RunBody({in}, [&](const std::vector<Tensor>& a) {
        MoeRouting r = RouteTopK(a[0], k, norm, m);
        return std::vector<Tensor>{r.weights, r.experts};
      }));
    ASSERT_EQ(got[0].size(), 2u);
    for (size_t m = 1; m < got.size(); ++m) {
      ASSERT_EQ(got[m].size(), 2u);
      EXPECT_TRUE(got[m][1].BitwiseEquals(got[0][1])) << "ids of method " << m;
      EXPECT_TRUE(got[m][0].BitwiseEquals(got[0][0])) << "weights of method " << m;
    }
    // Against a double loop: softmax, stable sort, optional renormalisation.
    auto ids = got[0][1].span<int32_t>();
    auto w = got[0][0].span<float>();
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> p(e);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < e; ++j) mx = std::max(mx, double(logits[r * e + j]));
      for (int64_t j = 0; j < e; ++j) sum += (p[j] = std::exp(logits[r * e + j] - mx));
      for (auto& x : p) x /= sum;
      std::vector<int64_t> order(e);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return p[a] > p[b]; });
      double top = 0;
      for (int64_t j = 0; j < k; ++j) top += p[order[j]];
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(ids[r * k + j], order[j]) << "row " << r << " pick " << j;
        EXPECT_NEAR(w[r * k + j], p[order[j]] / (norm ? top : 1.0), 1e-6) << "row " << r;
      }
    }
  }
}

struct MoeCase {
  int64_t h = 16, width = 12, experts = 8, k = 2;
};

// A double loop over experts (transformers' Qwen3MoeSparseMoeBlock) on f32 values.
std::vector<double> ReferenceMoe(const std::vector<float>& x, const std::vector<float>& router,
                                 const std::vector<float>& gate, const std::vector<float>& up,
                                 const std::vector<float>& down, int64_t n, const MoeCase& c,
                                 bool norm) {
  const int64_t h = c.h, wd = c.width, e = c.experts;
  std::vector<double> out(n * h, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> p(e);
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < e; ++j) {
      double s = 0;
      for (int64_t i = 0; i < h; ++i) s += double(router[j * h + i]) * x[t * h + i];
      p[j] = s;
      mx = std::max(mx, s);
    }
    for (auto& v : p) sum += (v = std::exp(v - mx));
    for (auto& v : p) v /= sum;
    std::vector<int64_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double top = 0;
    for (int64_t j = 0; j < c.k; ++j) top += p[order[j]];
    for (int64_t j = 0; j < c.k; ++j) {
      const int64_t ex = order[j];
      const double weight = p[ex] / (norm ? top : 1.0);
      std::vector<double> act(wd);
      for (int64_t o = 0; o < wd; ++o) {
        double g = 0, u = 0;
        for (int64_t i = 0; i < h; ++i) {
          g += double(gate[(ex * wd + o) * h + i]) * x[t * h + i];
          u += double(up[(ex * wd + o) * h + i]) * x[t * h + i];
        }
        act[o] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t o = 0; o < h; ++o) {
        double y = 0;
        for (int64_t i = 0; i < wd; ++i) y += double(down[(ex * h + o) * wd + i]) * act[i];
        out[t * h + o] += weight * y;
      }
    }
  }
  return out;
}

Literal Of(ElementType et, std::vector<int64_t> dims, const std::vector<float>& v) {
  Literal f = Literal::FromVector<float>(std::move(dims), v);
  return ConvertElementType(f, et);
}

// Every form on n tokens against the dense-masked form and the double loop.
void CheckForms(int64_t n, ElementType et, bool norm, double tol_vs_dense, double tol_vs_ref) {
  MoeCase c;
  auto x = RandomVector(n * c.h, 10 + n);
  auto router = RandomVector(c.experts * c.h, 11, 0.5f);
  auto gate = RandomVector(c.experts * c.width * c.h, 12, 0.3f);
  auto up = RandomVector(c.experts * c.width * c.h, 13, 0.3f);
  auto down = RandomVector(c.experts * c.h * c.width, 14, 0.3f);
  if (et == ElementType::kBF16) {
    // The reference sees the values the program sees.
    for (auto* v : {&x, &router, &gate, &up, &down})
      for (float& f : *v) f = Bf16BitsToFloat(FloatToBf16Bits(f));
  }
  std::vector<Literal> args{Of(et, {n, c.h}, x), Of(et, {c.experts, c.h}, router),
                            Of(et, {c.experts, c.width, c.h}, gate),
                            Of(et, {c.experts, c.width, c.h}, up),
                            Of(et, {c.experts, c.h, c.width}, down)};
  std::map<MoeForm, Literal> outs;
  for (MoeForm f : {MoeForm::kDenseMasked, MoeForm::kRaggedDot, MoeForm::kOneHotPermute,
                    MoeForm::kPairGather}) {
    auto r = RunBody(args, [&](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{SparseMoe(a[0], {a[1], a[2], a[3], a[4]}, c.k, norm, f)};
    });
    ASSERT_EQ(r.size(), 1u) << MoeFormName(f);
    ASSERT_EQ(r[0].element_type(), et);
    outs[f] = r[0];
  }
  const std::vector<double> ref = ReferenceMoe(x, router, gate, up, down, n, c, norm);
  const Literal& dense = outs[MoeForm::kDenseMasked];
  for (const auto& [f, out] : outs) {
    double vs_dense = 0, vs_ref = 0;
    for (int64_t i = 0; i < out.num_elements(); ++i) {
      vs_dense = std::max(vs_dense, std::fabs(out.GetAsDouble(i) - dense.GetAsDouble(i)) /
                                        (1 + std::fabs(dense.GetAsDouble(i))));
      vs_ref = std::max(vs_ref, std::fabs(out.GetAsDouble(i) - ref[i]) / (1 + std::fabs(ref[i])));
    }
    EXPECT_LE(vs_dense, tol_vs_dense) << MoeFormName(f) << " vs dense, n " << n;
    EXPECT_LE(vs_ref, tol_vs_ref) << MoeFormName(f) << " vs double loop, n " << n;
  }
}

// f32: the forms differ from the dense-masked one only in summation order (1e-6 relative).
TEST(MoeForms, EqualInDecodeAndPrefillF32) {
  for (int64_t n : {1, 3, 40})
    for (bool norm : {true, false}) CheckForms(n, ElementType::kF32, norm, 1e-5, 1e-5);
}

// bf16: each product rounded once to bf16, as the dense layer's Linear does.
TEST(MoeForms, EqualInBf16) {
  for (int64_t n : {1, 24}) CheckForms(n, ElementType::kBF16, true, 2e-2, 3e-2);
}

TEST(MoeForms, NamesParseAndBadShapesAreRefused) {
  for (MoeForm f : {MoeForm::kAuto, MoeForm::kRaggedDot, MoeForm::kOneHotPermute,
                    MoeForm::kPairGather, MoeForm::kDenseMasked}) {
    auto p = ParseMoeForm(MoeFormName(f));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, f);
  }
  auto bad = ParseMoeForm("sparse");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ragged_dot"), std::string::npos);
  Module module("t");
  FunctionBuilder fb(
      &module, "main",
      {Type(TensorType(ElementType::kF32, {2, 8})), Type(TensorType(ElementType::kF32, {4, 8})),
       Type(TensorType(ElementType::kF32, {4, 6, 8})),
       Type(TensorType(ElementType::kF32, {4, 6, 8})),
       Type(TensorType(ElementType::kF32, {4, 6, 8}))});  // down should be [4, 8, 6]
  Tensor out = SparseMoe(fb.arg(0), {fb.arg(1), fb.arg(2), fb.arg(3), fb.arg(4)}, 2, true);
  EXPECT_FALSE(out.valid());
  ASSERT_FALSE(fb.status().ok());
  EXPECT_NE(fb.status().message().find("down [E, H, I]"), std::string::npos)
      << fb.status().ToString();
}

}  // namespace
}  // namespace tlaloc::nn
