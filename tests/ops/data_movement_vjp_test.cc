// The data-movement VJP rules. Every op here is linear in its differentiable operands, so a
// rule is right exactly when it is the transpose of the op: <ct, f(x)> == sum_i <g_i, x_i> for
// any x and ct (the "dot-product test"). The gradient programs are built with OpBuilder and
// interpreted, so this also checks that each verifies and runs.
#include <cmath>
#include <functional>

#include "ops/data_movement_test_util.h"

namespace tlaloc::dmtest {
namespace {

using Dims = std::vector<int64_t>;

Literal Pseudo(Dims dims, uint64_t seed) {
  Literal l(T(ElementType::kF64, dims));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& v : l.span<double>()) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<double>(s >> 11) / static_cast<double>(1ull << 53) * 4.0 - 2.0;
  }
  return l;
}

double Dot(const Literal& a, const Literal& b) {
  double s = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) s += a.GetAsDouble(i) * b.GetAsDouble(i);
  return s;
}

// Builds f(xs) and its VJP at cotangent ct; returns {y, grads...} (an invalid Literal where
// the rule gives no cotangent).
using RegionFactory = std::function<std::vector<std::unique_ptr<Region>>()>;

void CheckTranspose(const std::string& name, std::vector<Literal> xs, AttrDict attrs,
                    std::optional<std::vector<Type>> result = {}, RegionFactory regions = {}) {
  auto make_regions = [&] { return regions ? regions() : std::vector<std::unique_ptr<Region>>{}; };
  SCOPED_TRACE(name);
  Module m("t");
  std::vector<Type> types;
  for (const Literal& x : xs) types.push_back(Type(x.type()));
  Function* fwd = m.AddFunction("main", types, {});
  OpBuilder b(&fwd->entry(), &m);
  std::vector<Value> args = fwd->entry().arguments();
  Value y = b.CreateOne(name, args, attrs, result, make_regions());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const TensorType yt = y.tensor_type();
  // Gradient program: same op applied to the arguments, then its VJP at the extra argument ct.
  types.push_back(Type(yt));
  Function* grad = m.AddFunction("grad", types, {});
  OpBuilder g(&grad->entry(), &m);
  std::vector<Value> gargs = grad->entry().arguments();
  Value ct = gargs.back();
  gargs.pop_back();
  Value gy = g.CreateOne(name, gargs, attrs, result, make_regions());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const OpDef& def = g.last_op()->def();
  ASSERT_TRUE(def.vjp) << name << " has no VJP rule";
  auto cts = def.vjp(g, *g.last_op(), gargs, {gy}, {ct});
  ASSERT_TRUE(cts.ok()) << cts.status().ToString();
  ASSERT_EQ(cts->size(), xs.size());
  std::vector<Value> outs{gy};
  std::vector<size_t> where;
  for (size_t i = 0; i < cts->size(); ++i) {
    if (!(*cts)[i]) {
      EXPECT_TRUE(IsInteger(xs[i].element_type())) << "operand " << i << " got no cotangent";
      continue;
    }
    EXPECT_EQ((*cts)[i].type(), Type(xs[i].type())) << "cotangent " << i;
    outs.push_back((*cts)[i]);
    where.push_back(i);
  }
  std::vector<Type> rt;
  for (Value v : outs) rt.push_back(v.type());
  grad->set_result_types(rt);
  g.Create("func.return", outs);
  fwd->set_result_types({Type(yt)});
  b.Create("func.return", {y});
  ASSERT_TRUE(b.ok() && g.ok()) << g.status().ToString();

  for (uint64_t seed : {1, 2}) {
    Literal ctv = Pseudo(yt.dims, 100 + seed);
    std::vector<Literal> in = xs;
    in.push_back(ctv);
    auto r = Interpret(m, "grad", in);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    double lhs = Dot(ctv, (*r)[0]), rhs = 0, scale = 1;
    for (size_t k = 0; k < where.size(); ++k) {
      rhs += Dot((*r)[k + 1], xs[where[k]]);
      scale += std::fabs(Dot((*r)[k + 1], xs[where[k]]));
    }
    EXPECT_NEAR(lhs, rhs, 1e-12 * scale) << "seed " << seed;
    // Fresh values for the differentiable operands on the second round.
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i].element_type() == ElementType::kF64) xs[i] = Pseudo(xs[i].dims(), 7 + i);
  }
}

TEST(DataMovementVjp, CopiesAndBroadcasts) {
  CheckTranspose("stablehlo.broadcast_in_dim", {Pseudo({3, 1}, 1)},
                 {{"broadcast_dimensions", Attribute::IntArray({1, 2})}},
                 std::vector<Type>{T(ElementType::kF64, {2, 3, 4})});
  CheckTranspose("stablehlo.broadcast_in_dim", {Pseudo({4, 3}, 2)},
                 {{"broadcast_dimensions", Attribute::IntArray({2, 1})}},
                 std::vector<Type>{T(ElementType::kF64, {2, 3, 4})});
  CheckTranspose("stablehlo.reshape", {Pseudo({2, 3}, 3)}, {},
                 std::vector<Type>{T(ElementType::kF64, {3, 2})});
  CheckTranspose("stablehlo.transpose", {Pseudo({2, 3, 4}, 4)},
                 {{"permutation", Attribute::IntArray({1, 2, 0})}});
  CheckTranspose("stablehlo.reverse", {Pseudo({3, 4}, 5)},
                 {{"dimensions", Attribute::IntArray({0, 1})}});
}

TEST(DataMovementVjp, SlicesConcatAndPad) {
  CheckTranspose("stablehlo.slice", {Pseudo({5, 7}, 6)},
                 {{"start_indices", Attribute::IntArray({1, 2})},
                  {"limit_indices", Attribute::IntArray({5, 7})},
                  {"strides", Attribute::IntArray({2, 2})}});
  CheckTranspose("stablehlo.concatenate", {Pseudo({2, 1}, 7), Pseudo({2, 3}, 8)},
                 {{"dimension", Attribute::Int(1, ElementType::kS64)}});
  for (auto [low, high] : {std::pair<Dims, Dims>{{1, 0}, {2, 1}}, {{-1, 2}, {1, -2}}}) {
    CheckTranspose("stablehlo.pad", {Pseudo({3, 4}, 9), Pseudo({}, 10)},
                   {{"edge_padding_low", Attribute::IntArray(low)},
                    {"edge_padding_high", Attribute::IntArray(high)},
                    {"interior_padding", Attribute::IntArray({1, 1})}});
  }
}

TEST(DataMovementVjp, DynamicSlicesWithClampedStarts) {
  CheckTranspose("stablehlo.dynamic_slice",
                 {Pseudo({5, 6}, 11), Literal::Scalar<int32_t>(2), Literal::Scalar<int32_t>(9)},
                 {{"slice_sizes", Attribute::IntArray({2, 3})}});
  CheckTranspose("stablehlo.dynamic_update_slice",
                 {Pseudo({5, 6}, 12), Pseudo({2, 3}, 13), Literal::Scalar<int64_t>(4),
                  Literal::Scalar<int64_t>(-1)},
                 {});
}

TEST(DataMovementVjp, GatherScattersBackToClampedWindows) {
  AttrDict rows{
      {"dimension_numbers",
       Attribute::Struct("stablehlo.gather", {{"offset_dims", Attribute::IntArray({1})},
                                              {"collapsed_slice_dims", Attribute::IntArray({0})},
                                              {"start_index_map", Attribute::IntArray({0})},
                                              {"index_vector_dim", Attribute::Int(1)}})},
      {"slice_sizes", Attribute::IntArray({1, 3})}};
  CheckTranspose("stablehlo.gather",
                 {Pseudo({5, 3}, 14), Literal::FromVector<int32_t>({4, 1}, {3, 0, 9, 3})}, rows);
  // Windows of 2x2 with starts past the edge, and a batching dimension.
  AttrDict batched{{"dimension_numbers",
                    Attribute::Struct("stablehlo.gather",
                                      {{"offset_dims", Attribute::IntArray({2})},
                                       {"collapsed_slice_dims", Attribute::IntArray({1})},
                                       {"operand_batching_dims", Attribute::IntArray({0})},
                                       {"start_indices_batching_dims", Attribute::IntArray({0})},
                                       {"start_index_map", Attribute::IntArray({1, 2})},
                                       {"index_vector_dim", Attribute::Int(2)}})},
                   {"slice_sizes", Attribute::IntArray({1, 1, 2})}};
  CheckTranspose("stablehlo.gather",
                 {Pseudo({2, 4, 5}, 15),
                  Literal::FromVector<int64_t>({2, 3, 2}, {0, 4, 3, 9, -2, 1, 1, 1, 2, 3, 7, 7})},
                 batched);
}

// Update computation (a, b) -> a + b, or -> b when `add` is false.
RegionFactory ScatterRegion(bool add) {
  return [add] {
    std::vector<std::unique_ptr<Region>> v;
    auto region = std::make_unique<Region>();
    Block& body = region->AddBlock();
    Value a = body.AddArgument(Type(T(ElementType::kF64, {})));
    Value u = body.AddArgument(Type(T(ElementType::kF64, {})));
    OpBuilder rb(&body);
    rb.Create("stablehlo.return", {add ? rb.CreateOne("stablehlo.add", {a, u}) : u});
    v.push_back(std::move(region));
    return v;
  };
}

AttrDict ScatterRows(bool unique) {
  return {{"scatter_dimension_numbers",
           Attribute::Struct("stablehlo.scatter",
                             {{"update_window_dims", Attribute::IntArray({1})},
                              {"inserted_window_dims", Attribute::IntArray({0})},
                              {"scatter_dims_to_operand_dims", Attribute::IntArray({0})},
                              {"index_vector_dim", Attribute::Int(1)}})},
          {"unique_indices", Attribute::Bool(unique)}};
}

TEST(DataMovementVjp, ScatterAddAndUniqueReplace) {
  // Row windows of 3 into 5 rows: a duplicate (3), and 9 / -1 skipped as out of bounds.
  Literal dup = Literal::FromVector<int32_t>({4, 1}, {3, 9, 3, -1});
  CheckTranspose("stablehlo.scatter", {Pseudo({5, 3}, 16), dup, Pseudo({4, 3}, 17)},
                 ScatterRows(false), {}, ScatterRegion(true));
  // 2-wide windows in a 2-D operand, index vector in dim 0, one window past the edge.
  AttrDict windows{
      {"scatter_dimension_numbers",
       Attribute::Struct("stablehlo.scatter",
                         {{"update_window_dims", Attribute::IntArray({1, 2})},
                          {"scatter_dims_to_operand_dims", Attribute::IntArray({0, 1})},
                          {"index_vector_dim", Attribute::Int(0)}})}};
  Literal starts = Literal::FromVector<int64_t>({2, 3}, {0, 2, 3, 1, 3, 0});
  CheckTranspose("stablehlo.scatter", {Pseudo({4, 4}, 18), starts, Pseudo({3, 2, 2}, 19)}, windows,
                 {}, ScatterRegion(true));
  Literal unique = Literal::FromVector<int32_t>({3, 1}, {4, 0, 7});
  CheckTranspose("stablehlo.scatter", {Pseudo({5, 3}, 20), unique, Pseudo({3, 3}, 21)},
                 ScatterRows(true), {}, ScatterRegion(false));
}

TEST(DataMovementVjp, ScatterWithOtherComputationsIsUnimplemented) {
  Module m("t");
  Function* fn =
      m.AddFunction("main",
                    {Type(T(ElementType::kF64, {5, 3})), Type(T(ElementType::kS32, {2, 1})),
                     Type(T(ElementType::kF64, {2, 3}))},
                    {});
  OpBuilder b(&fn->entry(), &m);
  auto args = fn->entry().arguments();
  Value y = b.CreateOne("stablehlo.scatter", args, ScatterRows(false), {}, ScatterRegion(false)());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto r = b.last_op()->def().vjp(b, *b.last_op(), args, {y}, {y});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unique_indices"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tlaloc::dmtest
