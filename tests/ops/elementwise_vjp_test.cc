// The elementwise VJP rules, checked against central differences of the op itself. The rules
// are built as ordinary IR with OpBuilder and interpreted, so this also checks that every
// gradient program verifies and runs.
#include "elementwise_test_util.h"

namespace tlaloc::ewtest {
namespace {

// Runs op's VJP on f64 inputs `xs` with cotangent `ct`; the operands' cotangents (an invalid
// entry as an empty Literal).
std::vector<Literal> RunVjp(const std::string& name, const std::vector<Literal>& xs,
                            const Literal& ct, AttrDict attrs = {},
                            std::optional<std::vector<Type>> result_types = {}) {
  Module m("t");
  std::vector<Type> types;
  for (const Literal& x : xs) types.push_back(Type(x.type()));
  types.push_back(Type(ct.type()));
  Function* fn = m.AddFunction("main", types, {});
  OpBuilder b(&fn->entry(), &m);
  std::vector<Value> args = fn->entry().arguments();
  Value ct_value = args.back();
  args.pop_back();
  Value y = b.CreateOne(name, args, attrs, result_types);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  const OpDef& def = b.last_op()->def();
  EXPECT_TRUE(def.vjp) << name << " has no VJP rule";
  if (!def.vjp) return {};
  auto grads = def.vjp(b, *b.last_op(), args, {y}, {ct_value});
  EXPECT_TRUE(grads.ok()) << name << ": " << grads.status().ToString();
  if (!grads.ok()) return {};
  std::vector<Value> outs;
  std::vector<int> where;
  for (size_t i = 0; i < grads->size(); ++i)
    if ((*grads)[i]) {
      outs.push_back((*grads)[i]);
      where.push_back(static_cast<int>(i));
    }
  std::vector<Type> rt;
  for (Value v : outs) rt.push_back(v.type());
  fn->set_result_types(rt);
  b.Create("func.return", outs);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  std::vector<Literal> in(xs.begin(), xs.end());
  in.push_back(ct);
  auto r = Interpret(m, "main", in);
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  std::vector<Literal> result(xs.size());
  if (!r.ok()) return result;
  for (size_t k = 0; k < where.size(); ++k) result[where[k]] = (*r)[k];
  return result;
}

// ct * dy/dx_i by central differences (every element at once: the ops are elementwise).
std::vector<double> NumericCotangent(const std::string& name, const std::vector<Literal>& xs,
                                     size_t i, const std::vector<double>& ct, AttrDict attrs) {
  const double h = 1e-6;
  auto shifted = [&](double sign) {
    std::vector<Literal> v;
    for (size_t k = 0; k < xs.size(); ++k) {
      Literal c = xs[k].Clone();
      if (k == i)
        for (int64_t j = 0; j < c.num_elements(); ++j)
          c.SetFromDouble(j, c.GetAsDouble(j) + sign * h);
      v.push_back(c);
    }
    return AsDoubles(Run1(name, v, attrs));
  };
  std::vector<double> up = shifted(1), down = shifted(-1), g(ct.size());
  for (size_t j = 0; j < ct.size(); ++j) g[j] = ct[j] * (up[j] - down[j]) / (2 * h);
  return g;
}

void CheckVjp(const std::string& name, const std::vector<std::vector<double>>& inputs,
              AttrDict attrs = {}, std::vector<bool> differentiable = {}) {
  std::vector<Literal> xs;
  for (const auto& v : inputs) xs.push_back(Doubles(ElementType::kF64, v));
  std::vector<double> ct;
  for (size_t j = 0; j < inputs[0].size(); ++j) ct.push_back(0.75 + 0.5 * j);
  std::vector<Literal> got = RunVjp(name, xs, Doubles(ElementType::kF64, ct), attrs);
  ASSERT_EQ(got.size(), xs.size()) << name;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!differentiable.empty() && !differentiable[i]) {
      EXPECT_FALSE(got[i].valid()) << name << " operand " << i << " should get no cotangent";
      continue;
    }
    ASSERT_TRUE(got[i].valid()) << name << " operand " << i << " got no cotangent";
    std::vector<double> want = NumericCotangent(name, xs, i, ct, attrs);
    std::vector<double> have = AsDoubles(got[i]);
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(have[j], want[j], 1e-5 * (1 + std::fabs(want[j])))
          << name << " operand " << i << " element " << j;
  }
}

TEST(ElementwiseVjp, UnaryOpsMatchFiniteDifferences) {
  const std::vector<double> any = {-1.3, -0.4, 0.3, 1.7};
  const std::vector<double> positive = {0.2, 0.9, 1.6, 3.1};
  for (const char* op : {"stablehlo.abs", "stablehlo.negate", "stablehlo.exponential",
                         "stablehlo.exponential_minus_one", "stablehlo.logistic", "stablehlo.cbrt",
                         "stablehlo.sine", "stablehlo.cosine", "stablehlo.tan", "stablehlo.tanh"})
    CheckVjp(op, {any});
  for (const char* op : {"stablehlo.log", "stablehlo.log_plus_one", "stablehlo.sqrt",
                         "stablehlo.rsqrt", "chlo.lgamma", "chlo.digamma"})
    CheckVjp(op, {positive});
  for (const char* op :
       {"chlo.asinh", "chlo.atan", "chlo.cosh", "chlo.sinh", "chlo.tan", "chlo.erf", "chlo.erfc"})
    CheckVjp(op, {any});
  for (const char* op : {"chlo.acos", "chlo.asin", "chlo.atanh", "chlo.erf_inv"})
    CheckVjp(op, {{-0.7, -0.2, 0.3, 0.6}});
  CheckVjp("chlo.acosh", {{1.2, 2, 3.5, 5}});
}

TEST(ElementwiseVjp, BinaryOpsMatchFiniteDifferences) {
  const std::vector<double> a = {-1.3, 0.4, 2.5, 1.1};
  const std::vector<double> b = {0.7, -2.2, 1.9, 3.0};
  for (const char* op :
       {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
        "stablehlo.maximum", "stablehlo.minimum", "stablehlo.atan2"})
    CheckVjp(op, {a, b});
  CheckVjp("stablehlo.power", {{0.5, 1.5, 2.0, 3.0}, b});
}

TEST(ElementwiseVjp, SelectClampConvert) {
  Literal p = Literal::FromVector<bool>({3}, {true, false, true});
  Literal t = Doubles(ElementType::kF64, {1, 2, 3});
  Literal f = Doubles(ElementType::kF64, {4, 5, 6});
  Literal ct = Doubles(ElementType::kF64, {10, 20, 30});
  auto g = RunVjp("stablehlo.select", {p, t, f}, ct);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_FALSE(g[0].valid());
  ExpectDoubles(g[1], {10, 0, 30}, "on_true cotangent");
  ExpectDoubles(g[2], {0, 20, 0}, "on_false cotangent");
  CheckVjp("stablehlo.clamp", {{0, 0, 0}, {-1, 0.5, 2}, {1, 1, 1}}, {}, {false, true, false});
  Literal x = Doubles(ElementType::kF32, {1.5, -2});
  auto c = RunVjp("stablehlo.convert", {x}, Doubles(ElementType::kF64, {3, 4}), {},
                  std::vector<Type>{Type(TensorType(ElementType::kF64, {2}))});
  ASSERT_EQ(c.size(), 1u);
  ASSERT_TRUE(c[0].valid());
  EXPECT_EQ(c[0].element_type(), ElementType::kF32);
  ExpectDoubles(c[0], {3, 4}, "convert cotangent");
}

}  // namespace
}  // namespace tlaloc::ewtest
