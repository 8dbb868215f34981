// Parser tests: what JAX writes, errors with positions, limits, and print/parse round trips.
#include "tlaloc/stablehlo/parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "test_ops.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

ParseOptions TestOptions() {
  ParseOptions o;
  o.registry = &testing_ops::TestRegistry();
  return o;
}

StatusOr<std::unique_ptr<Module>> Parse(std::string_view text) {
  return ParseModule(text, "t.mlir", TestOptions());
}

constexpr const char* kJaxStyle = R"(// RUN: some tool
#loc = loc(unknown)
module @jit_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32> {tf.aliasing_output = 0 : i32, mhlo.sharding = "{replicated}"} loc("x")) -> (tensor<2xf32> {jax.result_info = "", mhlo.layout_mode = "default"}, tensor<2xf32>) {
    %0:2 = call @inputs() : () -> (tensor<2xf32>, tensor<2xf32>) loc(#loc)
    %cst = stablehlo.constant dense<[0x7FC00000, 2.500000e+00]> : tensor<2xf32>
    %1 = test.add %0#0, %cst : tensor<2xf32>
    %2 = "test.generic_add"(%1, %arg0) <{}> {foo = #sdy.sharding<@mesh, [{"x"}]>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %a, %b = "test.split"(%2) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
    return %a, %b : tensor<2xf32>, tensor<2xf32>
  }
  func.func private @inputs() -> (tensor<2xf32> {mhlo.layout_mode = "default"}, tensor<2xf32>) {
    %cst = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
    %cst_0 = stablehlo.constant dense<1.0> : tensor<2xf32>
    return %cst, %cst_0 : tensor<2xf32>, tensor<2xf32>
  }
}
)";

TEST(Parser, ReadsJaxStyleModule) {
  auto m = Parse(kJaxStyle);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->name(), "jit_main");
  EXPECT_EQ((*m)->attrs().at("mhlo.num_partitions").scalar_type(), ElementType::kS32);
  Function* main = (*m)->Find("main");
  ASSERT_NE(main, nullptr);
  EXPECT_TRUE(main->is_public());
  EXPECT_FALSE((*m)->Find("inputs")->is_public());
  EXPECT_EQ(main->arg_attrs(0).at("tf.aliasing_output").as_int(), 0);
  EXPECT_EQ(main->arg_attrs(0).at("mhlo.sharding").as_string(), "{replicated}");
  EXPECT_EQ(main->result_attrs(0).at("jax.result_info").kind(), Attribute::Kind::kString);
  const auto& ops = main->entry().operations();
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[0]->name(), "func.call");
  EXPECT_EQ(ops[3]->attrs().at("foo").kind(), Attribute::Kind::kOpaque);
  EXPECT_EQ(ops[3]->attrs().at("foo").as_string(), "#sdy.sharding<@mesh, [{\"x\"}]>");
  const Literal& c = ops[1]->attrs().at("value").as_elements();
  EXPECT_TRUE(std::isnan(c.span<float>()[0]));
  EXPECT_EQ(c.span<float>()[1], 2.5f);
  const Literal& hex =
      (*m)->Find("inputs")->entry().operations()[0]->attrs().at("value").as_elements();
  EXPECT_EQ(hex.span<float>()[0], 1.0f);
  EXPECT_EQ(hex.span<float>()[1], 2.0f);
  // Round trip: print -> parse -> print is stable.
  std::string once = PrintModule(**m);
  auto again = Parse(once);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << once;
  EXPECT_EQ(PrintModule(**again), once);
}

TEST(Parser, BareFunctionWithoutModule) {
  auto m = Parse("func.func @f(%x: tensor<i32>) -> tensor<i32> {\n  return %x : tensor<i32>\n}\n");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->functions().size(), 1u);
  EXPECT_EQ((*m)->name(), "");
}

TEST(Parser, AttributeKinds) {
  auto attr = [](std::string_view text) {
    auto a = ParseAttributeText(text);
    EXPECT_TRUE(a.ok()) << text << ": " << a.status().ToString();
    return a.ok() ? *a : Attribute();
  };
  EXPECT_EQ(attr("array<i64: 1, -2>").as_int_array(), (std::vector<int64_t>{1, -2}));
  EXPECT_TRUE(attr("array<i64>").as_int_array().empty());
  Attribute e = attr("#stablehlo<comparison_direction LT>");
  EXPECT_EQ(e.kind(), Attribute::Kind::kEnum);
  EXPECT_EQ(e.as_string(), "LT");
  EXPECT_EQ(e.enum_kind(), "comparison_direction");
  Attribute s = attr(
      "#stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], "
      "scatter_dims_to_operand_dims = [1], index_vector_dim = 1>");
  EXPECT_EQ(s.kind(), Attribute::Kind::kStruct);
  EXPECT_EQ(s.struct_kind(), "stablehlo.scatter");
  EXPECT_EQ(s.as_dict().at("inserted_window_dims").as_int_array(), std::vector<int64_t>{1});
  EXPECT_EQ(s.as_dict().at("index_vector_dim").as_int(), 1);
  EXPECT_EQ(attr("3 : i32").scalar_type(), ElementType::kS32);
  EXPECT_EQ(attr("3").scalar_type(), ElementType::kS64);
  EXPECT_EQ(attr("0x7FC00000 : f32").kind(), Attribute::Kind::kFloat);
  EXPECT_TRUE(std::isnan(attr("0x7FC00000 : f32").as_float()));
  EXPECT_EQ(attr("\"a\\\"b\\0A\"").as_string(), "a\"b\n");
  EXPECT_EQ(attr("{a, b = [1, true]}").as_dict().at("a").kind(), Attribute::Kind::kUnit);
  EXPECT_EQ(attr("@callee").as_string(), "callee");
  EXPECT_EQ(attr("#mhlo.foo<\"x->y\", {a = 1}>").as_string(), "#mhlo.foo<\"x->y\", {a = 1}>");
  // Every kind prints back to text that parses to an equal attribute.
  for (const char* text :
       {"array<i64: 1, 2>", "#stablehlo<precision DEFAULT>", "1.5 : f32", "\"s\"",
        "[1 : i64, false]", "{x = 2 : i32}", "dense<[1, 2]> : tensor<2xi8>",
        "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]>",
        "tensor<2xf32>", "@f", "unit"}) {
    Attribute a = attr(text);
    Attribute b = attr(PrintAttribute(a));
    EXPECT_TRUE(a == b) << text << " -> " << PrintAttribute(a);
  }
}

// Random bit patterns of every element type survive print -> parse exactly, in the nested
// list form (<= 64 elements) and the hex form (> 64), NaN payloads and -0 included.
TEST(Parser, DenseRoundTripEveryElementType) {
  std::mt19937_64 rng(42);
  for (ElementType et : kAllElementTypes) {
    for (int64_t n : {1, 7, 64, 65, 200}) {
      Literal lit(TensorType(et, {n}));
      for (int64_t i = 0; i < lit.byte_size(); ++i) lit.data()[i] = static_cast<std::byte>(rng());
      if (et == ElementType::kPred)
        for (int64_t i = 0; i < n; ++i) lit.data()[i] = static_cast<std::byte>(rng() & 1);
      std::string text = PrintDenseElements(lit);
      auto back = ParseAttributeText(text);
      ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
      EXPECT_TRUE(back->as_elements().BitwiseEquals(lit)) << MlirName(et) << " n=" << n << "\n"
                                                          << text;
    }
  }
}

TEST(Parser, DenseSplatAndDecimalForms) {
  auto a = ParseAttributeText("dense<-2> : tensor<2x2xi8>");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->as_elements().span<int8_t>()[3], -2);
  auto b = ParseAttributeText("dense<255> : tensor<ui8>");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->as_elements().span<uint8_t>()[0], 255);
  auto c = ParseAttributeText("dense<\"0x0000C03F\"> : tensor<3xf32>");  // hex splat
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->as_elements().span<float>()[2], 1.5f);
  auto d = ParseAttributeText("dense<[[0x7FC0, 1.5]]> : tensor<1x2xbf16>");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->as_elements().span<bf16>()[0].bits, 0x7FC0);
  EXPECT_EQ(d->as_elements().span<bf16>()[1].f(), 1.5f);
}

void ExpectError(std::string_view text, std::string_view fragment) {
  auto m = Parse(text);
  ASSERT_FALSE(m.ok()) << text;
  EXPECT_NE(m.status().message().find(fragment), std::string::npos)
      << "message: " << m.status().message() << "\nwanted: " << fragment;
}

TEST(Parser, ErrorsNamePositionAndExpectation) {
  ExpectError("module {\n  func.func @f() {\n    %0 = stablehlo.bogus_op %x\n  }\n}",
              "t.mlir:3:10: unknown operation 'stablehlo.bogus_op'");
  ExpectError("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %b : tensor<2xf32>\n}",
              "t.mlir:2:10: use of undefined value %b");
  ExpectError("func.func @f() {\n  %0 = stablehlo.constant dense<[1, 2]> : tensor<3xi32>\n}",
              "does not match the type tensor<3xi32>");
  ExpectError("func.func @f() {\n  %0 = stablehlo.constant dense<300> : tensor<i8>\n}",
              "expected an integer in range for i8, found '300'");
  ExpectError("func.func @f( {", "t.mlir:1:15: expected an argument (%name), found '{'");
  ExpectError("func.func @f() -> tensor<2x?xf32> {", "dynamic dimensions");
  ExpectError("module { func.func @f() {", "expected '}', found end of input");
  ExpectError("garbage", "t.mlir:1:1: expected 'module' or 'func.func', found 'garbage'");
  ExpectError(
      "func.func @f() {\n  %0 = stablehlo.constant dense<1.0> : tensor<1000000000000xf32>\n}",
      "exceeds the size limit");
  ExpectError(
      "func.func @f(%a: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = \"test.generic_add\"(%a, %a) : (tensor<f32>, tensor<i32>) -> tensor<f32>\n"
      "  return %0 : tensor<f32>\n}",
      "operand 1 has type tensor<f32>");
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  auto a = ParseAttributeText(deep);
  EXPECT_FALSE(a.ok());
  std::string dense =
      "dense<" + std::string(5000, '[') + "1" + std::string(5000, ']') + "> : tensor<1xf32>";
  EXPECT_FALSE(ParseAttributeText(dense).ok());
}

// Every prefix of a valid module fails cleanly (no crash, no hang).
TEST(Parser, TruncatedInputsFailCleanly) {
  std::string text = kJaxStyle;
  int failures = 0;
  for (size_t n = 0; n < text.size(); n += 3) {
    auto m = Parse(text.substr(0, n));
    failures += m.ok() ? 0 : 1;
  }
  EXPECT_GT(failures, static_cast<int>(text.size() / 3) - 2);
}

// A module built with OpBuilder prints, parses and prints to the same text.
TEST(Parser, BuilderModuleRoundTrip) {
  auto m = std::make_unique<Module>("built");
  TensorType t(ElementType::kF16, {3});
  Function* f = m->AddFunction("main", {Type(t)}, {Type(t)});
  OpBuilder b(&f->entry(), m.get());
  Value k = b.CreateOne("stablehlo.constant", {},
                        {{"value", Attribute::Elements(Literal::FromVector<f16>(
                                       {3}, {f16(0.1f), f16(-2.0f), f16(65504.0f)}))}});
  Function* g = m->AddFunction("helper", {Type(t)}, {Type(t)});
  g->set_public(false);
  OpBuilder gb(&g->entry(), m.get());
  gb.Create("func.return", {g->entry().argument(0)});
  Value c = b.CreateOne("func.call", {k}, {{"callee", Attribute::Symbol("helper")}},
                        std::vector<Type>{Type(t)});
  b.Create("func.return", {c});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(Verify(*m).ok());
  std::string once = PrintModule(*m);
  auto parsed = Parse(once);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << once;
  EXPECT_EQ(PrintModule(**parsed), once);
}

TEST(Parser, RegionsAndGenericProperties) {
  const char* text = R"(func.func @f(%a: tensor<i32>) -> tensor<i32> {
  %0 = "test.apply"(%a) ({
  ^bb0(%x: tensor<i32>):
    "stablehlo.return"(%x) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
})";
  auto m = Parse(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Operation& apply = *(*m)->functions()[0]->entry().operations()[0];
  ASSERT_EQ(apply.num_regions(), 1);
  EXPECT_EQ(apply.region(0).front().num_arguments(), 1);
  std::string once = PrintModule(**m);
  auto again = Parse(once);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << once;
  EXPECT_EQ(PrintModule(**again), once);
  // A region value is not visible outside its region.
  ExpectError(R"(func.func @f(%a: tensor<i32>) -> tensor<i32> {
  %0 = "test.apply"(%a) ({
  ^bb0(%x: tensor<i32>):
    "stablehlo.return"(%x) : (tensor<i32>) -> ()
  }) : (tensor<i32>) -> tensor<i32>
  return %x : tensor<i32>
})",
              "use of undefined value %x");
}

// Every registered elementwise op that the builder can create on simple operands (f32, i32 or
// i1 vectors, one to three of them) goes through print -> parse -> print unchanged.
TEST(Parser, BuilderRoundTripOfEveryElementwiseOp) {
  auto m = std::make_unique<Module>("elementwise");
  const std::vector<Type> types = {Type(TensorType(ElementType::kF32, {2})),
                                   Type(TensorType(ElementType::kS32, {2})),
                                   Type(TensorType(ElementType::kPred, {2}))};
  Function* f = m->AddFunction("main", types, {});
  Block& b = f->entry();
  int created = 0;
  std::vector<Value> results;
  for (const OpDef* def : OpRegistry::Global().All()) {
    if (!def->traits.elementwise || def->num_regions != 0) continue;
    for (int t = 0; t < 3; ++t) {
      bool made = false;
      for (int arity = 1; arity <= 3 && !made; ++arity) {
        std::vector<Value> operands(arity, b.argument(t));
        if (def->name == "stablehlo.select" || def->name == "stablehlo.clamp") break;
        auto op = CreateOperation(*def, operands, {}, std::nullopt, {});
        if (!op.ok()) continue;
        made = true;
        ++created;
        Operation* added = b.Append(std::move(*op));
        for (const Value& r : added->results()) results.push_back(r);
      }
    }
  }
  ASSERT_GT(created, 0) << "no elementwise op is registered";
  std::vector<Type> result_types;
  for (const Value& r : results) result_types.push_back(r.type());
  f->set_result_types(result_types);
  b.Append(
      *CreateOperation(*OpRegistry::Global().Find("func.return"), results, {}, std::nullopt, {}));
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).ToString();
  std::string once = PrintModule(*m);
  auto parsed = ParseModule(once, "elementwise.mlir");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(PrintModule(**parsed), once);
  EXPECT_GT(created, 10);
}

}  // namespace
}  // namespace tlaloc
