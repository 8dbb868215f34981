// Gradient rules of the collectives. They are linear maps across devices, so each rule must be
// the adjoint: sum over devices of <ct, op(x)> equals sum over devices of <vjp(ct), x>, with
// random x and ct per device. Each program runs on 4 devices (interp/multi_device.h).
#include <gtest/gtest.h>

#include <random>

#include "reduction_test_util.h"
#include "tlaloc/interp/multi_device.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

Literal Random(const TensorType& t, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-8, 8);  // small integers: exact f32 sums
  Literal l(t);
  for (int64_t i = 0; i < l.num_elements(); ++i) l.SetFromDouble(i, dist(rng));
  return l;
}

double Dot(const Literal& a, const Literal& b) {
  double s = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) s += a.GetAsDouble(i) * b.GetAsDouble(i);
  return s;
}

Literal GroupsAttr(std::vector<std::vector<int64_t>> rows) {
  std::vector<int64_t> flat;
  for (auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return Literal::FromVector<int64_t>(
      {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, flat);
}

// Builds @main(x, ct) -> (op(x), vjp(ct)) and checks the adjoint identity on `grid`.
void CheckAdjoint(const std::string& name, const TensorType& in, const AttrDict& attrs,
                  bool with_region, std::optional<TensorType> out_type, ProcessGrid grid) {
  auto module = std::make_shared<Module>("t");
  TensorType out = out_type ? *out_type : in;
  Function* fn = module->AddFunction("main", {Type(in), Type(out)}, {});
  OpBuilder b(&fn->entry(), module.get());
  Value x = fn->entry().argument(0), ct = fn->entry().argument(1);
  std::vector<std::unique_ptr<Region>> regions;
  if (with_region) regions.push_back(rdtest::BinaryRegion("stablehlo.add", in.element_type));
  std::optional<std::vector<Type>> results;
  if (out_type) results = std::vector<Type>{Type(*out_type)};
  std::vector<Value> y = b.Create(name, {x}, attrs, results, std::move(regions));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto grads = b.last_op()->def().vjp(b, *b.last_op(), {x}, y, {ct});
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  ASSERT_TRUE((*grads)[0]);
  fn->set_result_types({Type(out), Type(in)});
  b.Create("func.return", {y[0], (*grads)[0]});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(Verify(*module).ok()) << PrintModule(*module);
  auto exe = Executable::Prepare(module, "main");
  ASSERT_TRUE(exe.ok()) << exe.status().ToString();
  std::mt19937 rng(7);
  std::vector<std::vector<Literal>> args;
  for (int64_t d = 0; d < grid.num_processes(); ++d)
    args.push_back({Random(in, rng), Random(out, rng)});
  auto r = ExecuteOnDevices(**exe, args, grid);
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << PrintModule(*module);
  double forward = 0, backward = 0;
  for (size_t d = 0; d < args.size(); ++d) {
    forward += Dot(args[d][1], (*r)[d][0]);
    backward += Dot((*r)[d][1], args[d][0]);
  }
  EXPECT_EQ(forward, backward) << name << "\n" << PrintModule(*module);
}

TEST(CollectiveVjp, AllReduceSumIsItsOwnAdjoint) {
  CheckAdjoint("stablehlo.all_reduce", TensorType(ElementType::kF32, {3}),
               {{"replica_groups", Attribute::Elements(GroupsAttr({{0, 1}, {2, 3}}))}}, true, {},
               {4, 1});
}

TEST(CollectiveVjp, AllGatherAndReduceScatterAreAdjoints) {
  AttrDict g{{"replica_groups", Attribute::Elements(GroupsAttr({{0, 1, 2, 3}}))},
             {"all_gather_dim", Attribute::Int(1)}};
  CheckAdjoint("stablehlo.all_gather", TensorType(ElementType::kF32, {2, 3}), g, false,
               TensorType(ElementType::kF32, {2, 12}), {4, 1});
  AttrDict s{{"replica_groups", Attribute::Elements(GroupsAttr({{0, 2}, {1, 3}}))},
             {"scatter_dimension", Attribute::Int(0)}};
  CheckAdjoint("stablehlo.reduce_scatter", TensorType(ElementType::kF32, {4, 3}), s, true,
               TensorType(ElementType::kF32, {2, 3}), {4, 1});
}

TEST(CollectiveVjp, AllToAllReversedIsItsAdjoint) {
  AttrDict a{{"replica_groups", Attribute::Elements(GroupsAttr({{0, 1, 2, 3}}))},
             {"split_dimension", Attribute::Int(1)},
             {"concat_dimension", Attribute::Int(0)},
             {"split_count", Attribute::Int(4)}};
  CheckAdjoint("stablehlo.all_to_all", TensorType(ElementType::kF32, {2, 8}), a, false,
               TensorType(ElementType::kF32, {8, 2}), {4, 1});
}

TEST(CollectiveVjp, CollectivePermuteInverseIsItsAdjoint) {
  // Partitions, with a partial chain: partition 3 receives nothing, partition 1 sends nothing.
  AttrDict a{{"source_target_pairs",
              Attribute::Elements(Literal::FromVector<int64_t>({3, 2}, {0, 1, 2, 0, 3, 2}))},
             {"channel_handle",
              Attribute::Struct("stablehlo.channel_handle",
                                {{"handle", Attribute::Int(1)}, {"type", Attribute::Int(1)}})}};
  CheckAdjoint("stablehlo.collective_permute", TensorType(ElementType::kF32, {5}), a, false, {},
               {1, 4});
}

// Shape rules refuse what the specification's constraints rule out, naming the attribute.
TEST(CollectiveShapes, BadAttributesAreRefused) {
  auto error = [](const std::string& op_text) {
    auto m = ParseModule("func.func @main(%x: tensor<2x6xf32>) -> tensor<2x6xf32> {\n  " + op_text +
                         "\n  return %x : tensor<2x6xf32>\n}");
    return m.ok() ? std::string() : m.status().message();
  };
  std::string e = error(
      "%r = \"stablehlo.all_to_all\"(%x) {split_dimension = 1 : i64, concat_dimension = 0 : i64, "
      "split_count = 4 : i64} : (tensor<2x6xf32>) -> tensor<8x1xf32>");
  EXPECT_NE(e.find("dimension 1 of tensor<2x6xf32> does not split into 4 parts"), std::string::npos)
      << e;
  e = error(
      "%r = \"stablehlo.all_gather\"(%x) {all_gather_dim = 2 : i64, replica_groups = "
      "dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x6xf32>) -> tensor<2x12xf32>");
  EXPECT_NE(e.find("'all_gather_dim' is 2, expected [0, 2)"), std::string::npos) << e;
  e = error(
      "%r = \"stablehlo.all_gather\"(%x) {all_gather_dim = 1 : i64, replica_groups = "
      "dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x6xf32>) -> tensor<2x7xf32>");
  EXPECT_NE(e.find("cannot come from operand tensor<2x6xf32>"), std::string::npos) << e;
  e = error(
      "%r = \"stablehlo.collective_permute\"(%x) {source_target_pairs = dense<[[0, 1], [1, 1]]> "
      ": tensor<2x2xi64>} : (tensor<2x6xf32>) -> tensor<2x6xf32>");
  EXPECT_NE(e.find("source_target_pairs: target 1 appears twice"), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc
