// VJP rules of dot_general, dot and reduce, checked against central differences of the op
// itself. The rules build ordinary IR, so the gradient programs are verified and interpreted.
#include <cmath>

#include "reduction_test_util.h"

namespace tlaloc {
namespace {

using rdtest::RunOp;

// Builds @main(xs..., ct) computing op(xs) and its VJP; returns the operands' cotangents (an
// invalid Literal where the rule gives none).
std::vector<Literal> RunVjp(const std::string& name, const std::vector<Literal>& xs,
                            const Literal& ct, const AttrDict& attrs,
                            const std::function<std::vector<std::unique_ptr<Region>>()>& regions) {
  Module m("t");
  std::vector<Type> types;
  for (const Literal& x : xs) types.push_back(Type(x.type()));
  types.push_back(Type(ct.type()));
  Function* fn = m.AddFunction("main", types, {});
  OpBuilder b(&fn->entry(), &m);
  std::vector<Value> args = fn->entry().arguments();
  Value ct_value = args.back();
  args.pop_back();
  std::vector<Value> y =
      b.Create(name, args, attrs, {}, regions ? regions() : decltype(regions())());
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return {};
  const OpDef& def = b.last_op()->def();
  EXPECT_TRUE(def.vjp) << name << " has no VJP rule";
  if (!def.vjp) return {};
  auto grads = def.vjp(b, *b.last_op(), args, y, {ct_value});
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return {};
  std::vector<Value> outs;
  std::vector<size_t> where;
  for (size_t i = 0; i < grads->size(); ++i)
    if ((*grads)[i]) {
      outs.push_back((*grads)[i]);
      where.push_back(i);
    }
  std::vector<Type> rt;
  for (Value v : outs) rt.push_back(v.type());
  fn->set_result_types(rt);
  b.Create("func.return", outs);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  std::vector<Literal> in(xs.begin(), xs.end());
  in.push_back(ct);
  auto r = Interpret(m, "main", in);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<Literal> out(xs.size());
  if (!r.ok()) return out;
  for (size_t k = 0; k < where.size(); ++k) out[where[k]] = (*r)[k];
  return out;
}

// <ct, d op(xs) / d xs[i][j]> for every j, by central differences.
std::vector<double> Numeric(const std::string& name, const std::vector<Literal>& xs, size_t i,
                            const Literal& ct, const AttrDict& attrs,
                            const std::function<std::vector<std::unique_ptr<Region>>()>& regions) {
  const double h = 1e-6;
  std::vector<double> g(xs[i].num_elements());
  for (int64_t j = 0; j < xs[i].num_elements(); ++j) {
    double f[2];
    for (int s = 0; s < 2; ++s) {
      std::vector<Literal> v;
      for (const Literal& x : xs) v.push_back(x.Clone());
      v[i].SetFromDouble(j, v[i].GetAsDouble(j) + (s ? -h : h));
      auto r = RunOp(name, v, attrs, {}, regions ? regions() : decltype(regions())());
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      f[s] = 0;
      for (int64_t k = 0; r.ok() && k < ct.num_elements(); ++k)
        f[s] += ct.GetAsDouble(k) * (*r)[0].GetAsDouble(k);
    }
    g[j] = (f[0] - f[1]) / (2 * h);
  }
  return g;
}

Literal Ramp(std::vector<int64_t> dims, double scale, double offset) {
  Literal l(TensorType(ElementType::kF64, std::move(dims)));
  for (int64_t i = 0; i < l.num_elements(); ++i)
    l.SetFromDouble(i, std::sin(scale * static_cast<double>(i) + offset));
  return l;
}

void CheckVjp(const std::string& name, const std::vector<Literal>& xs,
              std::vector<int64_t> out_dims, const AttrDict& attrs,
              const std::function<std::vector<std::unique_ptr<Region>>()>& regions,
              std::vector<bool> differentiable) {
  Literal ct = Ramp(std::move(out_dims), 0.7, 0.3);
  std::vector<Literal> got = RunVjp(name, xs, ct, attrs, regions);
  ASSERT_EQ(got.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!differentiable[i]) continue;
    ASSERT_TRUE(got[i].valid()) << name << " operand " << i << " got no cotangent";
    ASSERT_EQ(got[i].dims(), xs[i].dims());
    std::vector<double> want = Numeric(name, xs, i, ct, attrs, regions);
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(got[i].GetAsDouble(static_cast<int64_t>(j)), want[j],
                  1e-6 * (1 + std::fabs(want[j])))
          << name << " operand " << i << " element " << j;
  }
}

using rdtest::DotAttrs;

class ReductionVjp : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every op is registered: a registry regression must fail here, not skip.
    ASSERT_TRUE(rdtest::HasOps({"stablehlo.transpose", "stablehlo.broadcast_in_dim",
                                "stablehlo.add", "stablehlo.compare", "stablehlo.convert",
                                "stablehlo.divide", "stablehlo.multiply"}))
        << "a data-movement or elementwise op used by the gradients is not registered";
  }
};

TEST_F(ReductionVjp, DotGeneralMatmul) {
  CheckVjp("stablehlo.dot_general", {Ramp({3, 4}, 0.9, 0.1), Ramp({4, 2}, 1.3, 0.7)}, {3, 2},
           DotAttrs({}, {}, {1}, {0}), {}, {true, true});
}

TEST_F(ReductionVjp, DotGeneralPermutedBatchAndContraction) {
  // lhs [k=3, b=2, m=2, k2=2], rhs [k2=2, n=3, b=2, k=3]: result [b, m, n].
  CheckVjp("stablehlo.dot_general", {Ramp({3, 2, 2, 2}, 0.9, 0.1), Ramp({2, 3, 2, 3}, 1.3, 0.7)},
           {2, 2, 3}, DotAttrs({1}, {2}, {0, 3}, {3, 0}), {}, {true, true});
}

TEST_F(ReductionVjp, DotVectorMatrix) {
  CheckVjp("stablehlo.dot", {Ramp({3}, 0.9, 0.1), Ramp({3, 4}, 1.3, 0.7)}, {4}, {}, {},
           {true, true});
}

TEST_F(ReductionVjp, ReduceAdd) {
  auto body = [] {
    std::vector<std::unique_ptr<Region>> v;
    v.push_back(rdtest::BinaryRegion("stablehlo.add", ElementType::kF64));
    return v;
  };
  CheckVjp("stablehlo.reduce", {Ramp({2, 3, 2}, 0.9, 0.1), Literal::Scalar<double>(0.5)}, {3},
           {{"dimensions", Attribute::IntArray({0, 2})}}, body, {true, true});
}

TEST_F(ReductionVjp, ReduceMaxSharesTies) {
  auto body = [] {
    std::vector<std::unique_ptr<Region>> v;
    v.push_back(rdtest::BinaryRegion("stablehlo.maximum", ElementType::kF64));
    return v;
  };
  CheckVjp("stablehlo.reduce", {Ramp({2, 5}, 0.9, 0.1), Literal::Scalar<double>(-1e9)}, {2},
           {{"dimensions", Attribute::IntArray({1})}}, body, {true, false});
  // A tie: [3, 3, 1] -> each 3 gets half of the cotangent.
  Literal ct = Literal::Scalar<double>(2.0);
  std::vector<Literal> got =
      RunVjp("stablehlo.reduce",
             {Literal::FromVector<double>({3}, {3, 3, 1}), Literal::Scalar<double>(-1e9)}, ct,
             {{"dimensions", Attribute::IntArray({0})}}, body);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].valid());
  EXPECT_EQ(rdtest::Values<double>(got[0]), (std::vector<double>{1, 1, 0}));
}

TEST_F(ReductionVjp, IntegerDotHasNoCotangent) {
  std::vector<Literal> got =
      RunVjp("stablehlo.dot_general",
             {Literal::FromVector<int32_t>({2}, {1, 2}), Literal::FromVector<int32_t>({2}, {3, 4})},
             Literal::Scalar<int32_t>(1), DotAttrs({}, {}, {0}, {0}), {});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[0].valid());
  EXPECT_FALSE(got[1].valid());
}

}  // namespace
}  // namespace tlaloc
