// Gradients of composite functions checked against central finite differences in f64 on random
// inputs, second-order checks (the gradient program differentiated again), and the errors a
// caller gets for integer arguments and ops without a rule.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::autodiff {
namespace {

using Dims = std::vector<int64_t>;
using Body = std::function<Tensor(FunctionBuilder&)>;

Literal RandomF64(const Dims& dims, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  Literal l(TensorType(ElementType::kF64, dims));
  for (double& v : l.span<double>()) v = u(rng);
  return l;
}

// Builds @f(args) -> scalar with `body`, then @grad = Grad(f).
std::shared_ptr<Module> BuildWithGrad(const std::vector<Type>& arg_types, const Body& body,
                                      std::vector<int> wrt, const Marks* marks = nullptr) {
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", arg_types);
  Tensor y = body(fb);
  Status returned = fb.Return({y});
  EXPECT_TRUE(returned.ok()) << returned.ToString();
  auto g = Grad(*m, *fb.function(), GradOptions{wrt, 0, marks}, "grad");
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Verify(*m).ok());
  return m;
}

double ScalarOf(const Literal& l) { return l.GetAsDouble(0); }

// Central differences of @f along every element of each wrt argument against @grad.
void CheckAgainstFiniteDifferences(const Module& m, std::vector<Literal> args,
                                   const std::vector<int>& wrt, double tol = 1e-6) {
  auto grads = Interpret(m, "grad", args);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  ASSERT_EQ(grads->size(), wrt.size());
  const double h = 1e-6;
  for (size_t k = 0; k < wrt.size(); ++k) {
    Literal& x = args[wrt[k]];
    const Literal& g = (*grads)[k];
    ASSERT_EQ(g.type(), x.type());
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const double x0 = x.GetAsDouble(i);
      std::vector<Literal> plus, minus;
      x.SetFromDouble(i, x0 + h);
      for (const Literal& a : args) plus.push_back(a.Clone());
      x.SetFromDouble(i, x0 - h);
      for (const Literal& a : args) minus.push_back(a.Clone());
      x.SetFromDouble(i, x0);
      auto fp = Interpret(m, "f", plus);
      auto fm = Interpret(m, "f", minus);
      ASSERT_TRUE(fp.ok() && fm.ok());
      const double fd = (ScalarOf((*fp)[0]) - ScalarOf((*fm)[0])) / (2 * h);
      EXPECT_NEAR(g.GetAsDouble(i), fd, tol * (1 + std::fabs(fd)))
          << "argument " << wrt[k] << " element " << i;
    }
  }
}

Type F64(const Dims& d) { return Type(TensorType(ElementType::kF64, d)); }
Type S32(const Dims& d) { return Type(TensorType(ElementType::kS32, d)); }

TEST(Grad, BroadcastingElementwiseAndReductions) {
  // sum_j log(1 + exp(tanh(x_ij * w_j) + b)) / mean(x^2)
  auto body = [](FunctionBuilder& fb) {
    Tensor x = fb.arg(0), w = fb.arg(1), b = fb.arg(2);
    Tensor t = Tanh(x * w) + b;
    Tensor s = Sum(Log(1.0 + Exp(t)), {0, 1});
    return s / Mean(x * x, {0, 1});
  };
  auto m = BuildWithGrad({F64({3, 4}), F64({4}), F64({})}, body, {0, 1, 2});
  CheckAgainstFiniteDifferences(*m, {RandomF64({3, 4}, 1), RandomF64({4}, 2), RandomF64({}, 3)},
                                {0, 1, 2});
}

TEST(Grad, SoftmaxMaxAndSelect) {
  auto body = [](FunctionBuilder& fb) {
    Tensor x = fb.arg(0);
    Tensor p = Softmax(x * 2.0, -1);
    Tensor piecewise = Where(Gt(x, FullLike(x, 0.1)), x * x, Sin(x));
    return Sum(p * piecewise, {0, 1}) + Sum(ReduceMax(x, {1}), {0}) + Sum(LogSumExp(x, 0), {0});
  };
  auto m = BuildWithGrad({F64({3, 5})}, body, {0});
  CheckAgainstFiniteDifferences(*m, {RandomF64({3, 5}, 4)}, {0});
}

TEST(Grad, DotGeneralWithBatchDimensions) {
  auto body = [](FunctionBuilder& fb) {
    Tensor a = fb.arg(0), b = fb.arg(1);
    Tensor c = Einsum("bij,bjk->bik", a, b);
    Tensor d = Einsum("bik,bjk->bij", c, b);  // contracts the other way, same batch
    return Sum(d * d, {0, 1, 2});
  };
  auto m = BuildWithGrad({F64({2, 3, 4}), F64({2, 4, 5})}, body, {0, 1});
  CheckAgainstFiniteDifferences(*m, {RandomF64({2, 3, 4}, 5), RandomF64({2, 4, 5}, 6)}, {0, 1});
}

TEST(Grad, GatherEmbeddingAndSlicesWithIntegerInputs) {
  // Embedding lookup with repeated ids (the cotangents must add), a slice and a concat; the
  // integer ids and the iota-based mask get no cotangent and need no rule.
  auto body = [](FunctionBuilder& fb) {
    Tensor table = fb.arg(0), ids = fb.arg(1);
    Tensor e = Take(table, ids);  // [2, 3, 4]
    Tensor mask = Lt(Iota(fb.ops(), {2, 3, 4}, 1), Full(fb.ops(), {2, 3, 4}, 2, ElementType::kS32));
    Tensor masked = Where(mask, e, FullLike(e, 0));
    Tensor cat = Concat({SliceAxis(masked, 2, 1, 3), masked}, 2);
    return Sum(cat * cat * Convert(ExpandDims(ids, 2), ElementType::kF64), {0, 1, 2});
  };
  auto m = BuildWithGrad({F64({5, 4}), S32({2, 3})}, body, {0});
  CheckAgainstFiniteDifferences(
      *m, {RandomF64({5, 4}, 7), Literal::FromVector<int32_t>({2, 3}, {1, 3, 1, 4, 0, 3})}, {0});
}

TEST(Grad, ScatterAdd) {
  // A scatter-add built as the transpose of a gather (the VJP of Take) is itself differentiated.
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", {F64({5, 3}), F64({4, 3})});
  Tensor table = fb.arg(0), upd = fb.arg(1);
  Tensor ids = Constant(fb.ops(), Literal::FromVector<int32_t>({4}, {0, 2, 2, 4}));
  Tensor picked = Take(table, ids);
  ASSERT_TRUE(fb.Return({Sum(picked * upd, {0, 1})}).ok());
  // The gradient w.r.t. table is a scatter-add of upd; differentiate sum(sin(it)) w.r.t. upd.
  auto m2 = std::make_shared<Module>("t2");
  FunctionBuilder fb3(m2.get(), "f", {F64({5, 3}), F64({4, 3})});
  auto inner = EmitGradient(fb3.ops(), *fb.function(), {fb3.arg(0).value(), fb3.arg(1).value()},
                            {Full(fb3.ops(), {}, 1.0, ElementType::kF64).value()},
                            GradOptions{{0}, 0, nullptr});
  ASSERT_TRUE(inner.ok()) << inner.status().ToString();
  Tensor scattered(inner->gradients[0], &fb3.ops());
  ASSERT_TRUE(fb3.Return({Sum(Sin(scattered), {0, 1})}).ok()) << fb3.status().ToString();
  ASSERT_TRUE(Grad(*m2, *fb3.function(), {{1}, 0, nullptr}, "grad").ok());
  CheckAgainstFiniteDifferences(*m2, {RandomF64({5, 3}, 8), RandomF64({4, 3}, 9)}, {1});
}

TEST(Grad, SortAndTopKPermuteTheCotangentBack) {
  // Top-k values (a stable sort with an index operand, then a slice) flow back through the
  // sort's VJP; the indices, used as weights, carry no gradient.
  auto body = [](FunctionBuilder& fb) {
    Tensor x = fb.arg(0), w = fb.arg(1);
    auto [values, indices] = TopK(x, 2);
    Tensor weighted = Sum(values * SliceAxis(w, 1, 0, 2), {0, 1});
    Tensor idx = Convert(indices, ElementType::kF64);
    return weighted + Sum(SliceAxis(Sin(Softmax(x, 0)), 1, 0, 2) * idx, {0, 1});
  };
  auto m = BuildWithGrad({F64({3, 5}), F64({3, 5})}, body, {0, 1});
  CheckAgainstFiniteDifferences(*m, {RandomF64({3, 5}, 15), RandomF64({3, 5}, 16)}, {0, 1});
}

TEST(Grad, SecondOrderHessianVectorProducts) {
  // g = grad f; Vjp(g) at v is the Hessian-vector product H v, checked against differences of g.
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", {F64({4}), F64({4})});
  Tensor x = fb.arg(0), w = fb.arg(1);
  ASSERT_TRUE(fb.Return({Sum(Sin(x) * x * w + Exp(x * w) / (1.0 + x * x), {0})}).ok());
  auto g = Grad(*m, *fb.function(), {{0, 1}, 0, nullptr}, "g");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto hvp = Vjp(*m, **g, {{0, 1}, 0, nullptr}, "hvp");
  ASSERT_TRUE(hvp.ok()) << hvp.status().ToString();
  ASSERT_TRUE(Verify(*m).ok());
  // The second-order program prints as StableHLO and parses back.
  std::string text = PrintModule(*m);
  EXPECT_NE(text.find("func.func public @hvp"), std::string::npos) << text.substr(0, 400);
  auto parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();

  Literal x0 = RandomF64({4}, 10), w0 = RandomF64({4}, 11), vx = RandomF64({4}, 12),
          vw = RandomF64({4}, 13);
  auto r = Interpret(*m, "hvp", {x0, w0, vx, vw});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);  // g's two results, then H v for x and w
  const double h = 1e-6;
  auto shifted = [&](double s) {
    Literal xs = x0.Clone(), ws = w0.Clone();
    for (int64_t i = 0; i < 4; ++i) {
      xs.SetFromDouble(i, x0.GetAsDouble(i) + s * vx.GetAsDouble(i));
      ws.SetFromDouble(i, w0.GetAsDouble(i) + s * vw.GetAsDouble(i));
    }
    auto out = Interpret(*m, "g", {xs, ws});
    EXPECT_TRUE(out.ok());
    return std::move(*out);
  };
  auto gp = shifted(h), gm = shifted(-h);
  // H is symmetric, so the VJP with v equals the directional derivative of g along v.
  for (int k = 0; k < 2; ++k)
    for (int64_t i = 0; i < 4; ++i) {
      const double fd = (gp[k].GetAsDouble(i) - gm[k].GetAsDouble(i)) / (2 * h);
      EXPECT_NEAR((*r)[2 + k].GetAsDouble(i), fd, 1e-6 * (1 + std::fabs(fd)))
          << "block " << k << " element " << i;
    }
}

TEST(Grad, ValueAndGradReturnsResultsAndIntegerPathsGiveZero) {
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", {F64({3}), S32({3})});
  Tensor x = fb.arg(0), n = fb.arg(1);
  // Rounding through an integer conversion carries no gradient; x * x does.
  Tensor through_int = Convert(Convert(x * 10.0, ElementType::kS32) + n, ElementType::kF64);
  ASSERT_TRUE(fb.Return({Sum(x * x + through_int, {0}), n}).ok());
  auto vg = ValueAndGrad(*m, *fb.function(), {{0}, 0, nullptr}, "vg");
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  Literal x0 = Literal::FromVector<double>({3}, {0.5, -1.25, 2.0});
  auto r = Interpret(*m, "vg", {x0, Literal::FromVector<int32_t>({3}, {1, 2, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  auto f = Interpret(*m, "f", {x0, Literal::FromVector<int32_t>({3}, {1, 2, 3})});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*r)[0].GetAsDouble(0), (*f)[0].GetAsDouble(0));
  for (int64_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ((*r)[2].GetAsDouble(i), 2 * x0.GetAsDouble(i));
}

TEST(Grad, ErrorsNameTheArgumentOrOp) {
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", {F64({3}), S32({3})});
  ASSERT_TRUE(fb.Return({Sum(fb.arg(0) * Convert(fb.arg(1), ElementType::kF64), {0})}).ok());
  auto bad = Grad(*m, *fb.function(), {{1}, 0, nullptr}, "g1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("argument 1 of @f"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("floating-point"), std::string::npos);
  auto range = Grad(*m, *fb.function(), {{2}, 0, nullptr}, "g2");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("out of range"), std::string::npos);
  EXPECT_EQ(m->Find("g1"), nullptr) << "a failed gradient leaves no function behind";

  // A while loop whose result depends on the argument: no rule, so a clear error.
  const char* text = R"(
func.func @w(%x: tensor<f64>) -> tensor<f64> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<f64>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %u = stablehlo.multiply %v, %v : tensor<f64>
      stablehlo.return %j, %u : tensor<i32>, tensor<f64>
    }
  return %r#1 : tensor<f64>
})";
  auto parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto w = Grad(**parsed, *(*parsed)->Find("w"), {{0}, 0, nullptr}, "gw");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("stablehlo.while"), std::string::npos)
      << w.status().message();
}

TEST(Remat, RecomputedRegionLowersPeakLiveBytes) {
  // f(x) = sum over 8 chunks of sum(exp(x_chunk^T x_chunk)) with x [8*16, 256]: each chunk's
  // [256, 256] intermediates are saved for the backward pass unless the chunk is a remat region.
  auto build = [](bool remat, Marks* marks) {
    auto m = std::make_shared<Module>("t");
    FunctionBuilder fb(m.get(), "f", {F64({128, 256})});
    Tensor x = fb.arg(0);
    Tensor total = Full(fb.ops(), {}, 0.0, ElementType::kF64);
    for (int c = 0; c < 8; ++c) {
      RematScope scope(remat ? marks : nullptr, fb.ops());
      Tensor xc = SliceAxis(x, 0, c * 16, (c + 1) * 16);
      Tensor gram = Einsum("ki,kj->ij", xc, xc);
      total = total + Sum(Exp(gram * 0.01) * Tanh(gram), {0, 1});
    }
    EXPECT_TRUE(fb.Return({total}).ok());
    EXPECT_TRUE(Grad(*m, *fb.function(), {{0}, 0, marks}, "grad").ok());
    return m;
  };
  Marks marks;
  auto plain = build(false, nullptr);
  auto rematted = build(true, &marks);
  EXPECT_EQ(marks.remat_regions().size(), 8u);
  Literal x = RandomF64({128, 256}, 14, 0.5);
  ExecutionStats s_plain, s_remat;
  auto a = Interpret(*plain, "grad", {x}, &s_plain);
  auto b = Interpret(*rematted, "grad", {x}, &s_remat);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < x.num_elements(); i += 97)
    EXPECT_DOUBLE_EQ((*a)[0].GetAsDouble(i), (*b)[0].GetAsDouble(i));
  EXPECT_LT(s_remat.peak_live_bytes * 3, s_plain.peak_live_bytes)
      << "remat " << s_remat.peak_live_bytes << " vs plain " << s_plain.peak_live_bytes;
  std::printf("remat peak %lld bytes, saved-activations peak %lld bytes\n",
              static_cast<long long>(s_remat.peak_live_bytes),
              static_cast<long long>(s_plain.peak_live_bytes));
}

TEST(StopGradient, BlocksOnlyThatUse) {
  Marks marks;
  auto m = std::make_shared<Module>("t");
  FunctionBuilder fb(m.get(), "f", {F64({3})});
  Tensor x = fb.arg(0);
  ASSERT_TRUE(fb.Return({Sum(x * StopGradient(x, &marks), {0})}).ok());
  ASSERT_TRUE(Grad(*m, *fb.function(), {{0}, 0, &marks}, "grad").ok());
  Literal x0 = Literal::FromVector<double>({3}, {1.5, -2, 3});
  auto r = Interpret(*m, "grad", {x0});
  ASSERT_TRUE(r.ok());
  for (int64_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ((*r)[0].GetAsDouble(i), x0.GetAsDouble(i));
}

}  // namespace
}  // namespace tlaloc::autodiff
