// Golden tests of the printer: one per attribute kind, dense literal forms, and op forms.
#include "tlaloc/stablehlo/printer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_ops.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

TEST(PrintAttribute, ScalarKinds) {
  EXPECT_EQ(PrintAttribute(Attribute::Unit()), "unit");
  EXPECT_EQ(PrintAttribute(Attribute::Bool(true)), "true");
  EXPECT_EQ(PrintAttribute(Attribute::Int(-3)), "-3 : i64");
  EXPECT_EQ(PrintAttribute(Attribute::Int(1, ElementType::kS32)), "1 : i32");
  EXPECT_EQ(PrintAttribute(Attribute::Int(-1, ElementType::kU64)), "18446744073709551615 : ui64");
  EXPECT_EQ(PrintAttribute(Attribute::Float(1.5, ElementType::kF32)), "1.5 : f32");
  EXPECT_EQ(PrintAttribute(Attribute::Float(2, ElementType::kF64)), "2.0 : f64");
  EXPECT_EQ(PrintAttribute(Attribute::Float(1e20, ElementType::kF64)), "1.0e+20 : f64");
  EXPECT_EQ(
      PrintAttribute(Attribute::Float(std::numeric_limits<double>::infinity(), ElementType::kF32)),
      "0x7F800000 : f32");
  EXPECT_EQ(PrintAttribute(Attribute::String("a\"b\\c\n")), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(PrintAttribute(Attribute::Symbol("main")), "@main");
  EXPECT_EQ(PrintAttribute(Attribute::Symbol("check.expect_eq")), "@check.expect_eq");
  EXPECT_EQ(PrintAttribute(Attribute::Opaque("#sdy.sharding<@mesh, [{}]>")),
            "#sdy.sharding<@mesh, [{}]>");
  EXPECT_EQ(PrintAttribute(Attribute::TypeAttr(TensorType(ElementType::kBF16, {2, 3}))),
            "tensor<2x3xbf16>");
}

TEST(PrintAttribute, Compound) {
  EXPECT_EQ(PrintAttribute(Attribute::IntArray({1, 2})), "array<i64: 1, 2>");
  EXPECT_EQ(PrintAttribute(Attribute::IntArray({})), "array<i64>");
  EXPECT_EQ(PrintAttribute(Attribute::Array({Attribute::Enum("DEFAULT", "precision"),
                                             Attribute::Enum("HIGHEST", "precision")})),
            "[#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]");
  EXPECT_EQ(PrintAttribute(Attribute::Enum("LT", "comparison_direction")),
            "#stablehlo<comparison_direction LT>");
  EXPECT_EQ(PrintAttribute(Attribute::Enum("LT")), "LT");
  EXPECT_EQ(PrintAttribute(Attribute::Dict({{"b", Attribute::Unit()},
                                            {"a", Attribute::Int(1, ElementType::kS32)},
                                            {"x-y", Attribute::Bool(false)}})),
            "{a = 1 : i32, b, \"x-y\" = false}");
  // Fields in the dialect's order, integer lists as [..] inside the struct.
  Attribute dot =
      Attribute::Struct("stablehlo.dot", {{"rhs_contracting_dimensions", Attribute::IntArray({1})},
                                          {"lhs_contracting_dimensions", Attribute::IntArray({2})},
                                          {"lhs_batching_dimensions", Attribute::IntArray({0})},
                                          {"rhs_batching_dimensions", Attribute::IntArray({0})}});
  EXPECT_EQ(PrintAttribute(dot),
            "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
            "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>");
  Attribute gather =
      Attribute::Struct("stablehlo.gather", {{"index_vector_dim", Attribute::Int(1)},
                                             {"start_index_map", Attribute::IntArray({0})},
                                             {"collapsed_slice_dims", Attribute::IntArray({0})}});
  EXPECT_EQ(PrintAttribute(gather),
            "#stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
            "index_vector_dim = 1>");
}

TEST(PrintDense, Forms) {
  EXPECT_EQ(PrintDenseElements(Literal::FromVector<float>({2, 2}, {1, 1, 1, 1})),
            "dense<1.0> : tensor<2x2xf32>");
  EXPECT_EQ(PrintDenseElements(Literal::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, -6})),
            "dense<[[1, 2, 3], [4, 5, -6]]> : tensor<2x3xi32>");
  EXPECT_EQ(PrintDenseElements(Literal::FromVector<bool>({3}, {true, false, true})),
            "dense<[true, false, true]> : tensor<3xi1>");
  EXPECT_EQ(PrintDenseElements(Literal::Scalar<double>(0.1)), "dense<0.1> : tensor<f64>");
  EXPECT_EQ(PrintDenseElements(Literal(TensorType(ElementType::kF32, {0, 3}))),
            "dense<> : tensor<0x3xf32>");
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(PrintDenseElements(Literal::FromVector<float>({3}, {nan, -nan, 2.0f})),
            "dense<[0x7FC00000, 0xFFC00000, 2.0]> : tensor<3xf32>");
  EXPECT_EQ(PrintDenseElements(Literal::FromVector<bf16>({2}, {bf16(1.5f), bf16(-0.0f)})),
            "dense<[1.5, -0.0]> : tensor<2xbf16>");
  // More than 64 elements: little-endian hex.
  std::vector<uint16_t> big(65);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint16_t>(i * 257);
  std::string hex = PrintDenseElements(Literal::FromVector<uint16_t>({65}, big));
  EXPECT_EQ(hex.substr(0, 19), "dense<\"0x0000010102");
  EXPECT_EQ(hex.substr(hex.size() - 20), "\"> : tensor<65xui16>");
}

TEST(PrintModule, PrettyGenericAndMultiResult) {
  const OpRegistry& reg = testing_ops::TestRegistry();
  Module m("demo");
  m.attrs()["mhlo.num_partitions"] = Attribute::Int(1, ElementType::kS32);
  TensorType t(ElementType::kF32, {2});
  Function* f = m.AddFunction("main", {Type(t)}, {Type(t), Type(t)});
  f->result_attrs(0)["jax.result_info"] = Attribute::String("");
  Block& b = f->entry();
  auto make = [&](const char* name, std::vector<Value> operands,
                  std::vector<std::unique_ptr<Region>> regions = {}) {
    auto op = CreateOperation(*reg.Find(name), operands, {}, std::nullopt, std::move(regions));
    EXPECT_TRUE(op.ok()) << op.status().ToString();
    return b.Append(std::move(*op));
  };
  Operation* add = make("test.add", {b.argument(0), b.argument(0)});
  Operation* gen = make("test.generic_add", {add->result(0), b.argument(0)});
  Operation* split = make("test.split", {gen->result(0)});
  make("func.return", {split->result(0), split->result(1)});
  std::string text = PrintModule(m);
  EXPECT_EQ(text,
            "module @demo attributes {mhlo.num_partitions = 1 : i32} {\n"
            "  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32> {jax.result_info "
            "= \"\"}, tensor<2xf32>) {\n"
            "    %0 = test.add %arg0, %arg0 : tensor<2xf32>\n"
            "    %1 = \"test.generic_add\"(%0, %arg0) : (tensor<2xf32>, tensor<2xf32>) -> "
            "tensor<2xf32>\n"
            "    %2:2 = \"test.split\"(%1) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)\n"
            "    return %2#0, %2#1 : tensor<2xf32>, tensor<2xf32>\n"
            "  }\n"
            "}\n");
}

TEST(PrintModule, RegionArgumentsAreNumberedAfterFunctionArguments) {
  const OpRegistry& reg = testing_ops::TestRegistry();
  Module m("");
  TensorType t(ElementType::kS32, {});
  Function* f = m.AddFunction("f", {Type(t)}, {Type(t)});
  f->set_public(false);
  auto region = std::make_unique<Region>();
  Block& rb = region->AddBlock();
  Value ra = rb.AddArgument(Type(t));
  rb.Append(*CreateOperation(*reg.Find("stablehlo.return"), {ra}, {}, std::nullopt, {}));
  std::vector<std::unique_ptr<Region>> regions;
  regions.push_back(std::move(region));
  auto op = CreateOperation(*reg.Find("test.apply"), {f->entry().argument(0)}, {}, std::nullopt,
                            std::move(regions));
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  Operation* apply = f->entry().Append(std::move(*op));
  f->entry().Append(
      *CreateOperation(*reg.Find("func.return"), {apply->result(0)}, {}, std::nullopt, {}));
  EXPECT_EQ(PrintModule(m),
            "module {\n"
            "  func.func private @f(%arg0: tensor<i32>) -> tensor<i32> {\n"
            "    %0 = \"test.apply\"(%arg0) ({\n"
            "    ^bb0(%arg1: tensor<i32>):\n"
            "      stablehlo.return %arg1 : tensor<i32>\n"
            "    }) : (tensor<i32>) -> tensor<i32>\n"
            "    return %0 : tensor<i32>\n"
            "  }\n"
            "}\n");
}

// JAX-style text of the registered ops' pretty forms prints in the canonical form (values
// renumbered, region arguments named %argN) and that form is a fixed point.
TEST(PrintModule, RegisteredOpPrettyForms) {
  const char* input = R"(module @forms {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<2xi1>, tensor<i32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%0 init: %1) applies stablehlo.add across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %4 = stablehlo.compare  GT, %2, %3,  FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %5 = stablehlo.iota dim = 0 : tensor<4xi32>
    %6 = stablehlo.constant dense<0> : tensor<i32>
    %7:2 = stablehlo.while(%iterArg = %6, %iterArg_0 = %6) : tensor<i32>, tensor<i32>
     cond {
      %c = stablehlo.constant dense<3> : tensor<i32>
      %8 = stablehlo.compare  LT, %iterArg, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %8 : tensor<i1>
    } do {
      %c = stablehlo.constant dense<1> : tensor<i32>
      %8 = stablehlo.add %iterArg, %c : tensor<i32>
      stablehlo.return %8, %iterArg_0 : tensor<i32>, tensor<i32>
    }
    return %0, %4, %7#0 : tensor<2x4xf32>, tensor<2xi1>, tensor<i32>
  }
}
)";
  const char* expected = R"(module @forms {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>) -> (tensor<2x4xf32>, tensor<2xi1>, tensor<i32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%0 init: %1) applies stablehlo.add across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %4 = stablehlo.compare  GT, %2, %3,  FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %5 = stablehlo.iota dim = 0 : tensor<4xi32>
    %6 = stablehlo.constant dense<0> : tensor<i32>
    %7:2 = stablehlo.while(%arg2 = %6, %arg3 = %6) : tensor<i32>, tensor<i32> cond {
      %8 = stablehlo.constant dense<3> : tensor<i32>
      %9 = stablehlo.compare  LT, %arg2, %8,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %9 : tensor<i1>
    } do {
      %8 = stablehlo.constant dense<1> : tensor<i32>
      %9 = stablehlo.add %arg2, %8 : tensor<i32>
      stablehlo.return %9, %arg3 : tensor<i32>, tensor<i32>
    }
    return %0, %4, %7#0 : tensor<2x4xf32>, tensor<2xi1>, tensor<i32>
  }
}
)";
  auto m = ParseModule(input, "forms.mlir");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(PrintModule(**m), expected);
  auto again = ParseModule(expected, "expected.mlir");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(PrintModule(**again), expected);
}

}  // namespace
}  // namespace tlaloc
