// Pretty syntax of the reduction and control-flow ops: the forms JAX emits parse, print back in
// the same pretty form, and the printed text parses to a module that prints identically and
// computes the same results.
#include <string>

#include "reduction_test_util.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {
namespace {

struct Case {
  const char* name;
  const char* text;
  std::vector<const char*> printed;  // fragments the printed text must contain
};

const Case kCases[] = {
    {"reduce_applies",
     R"(func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2xf32> {
  %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.reduce(%arg0 init: %0) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
})",
     {"stablehlo.reduce(%arg0 init: %", "applies stablehlo.add across dimensions = [1]"}},
    {"reduce_reducer",
     R"(func.func @main(%arg0: tensor<4xf32>, %arg5: tensor<4xi32>) -> (tensor<f32>, tensor<i32>) {
  %0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %1 = stablehlo.constant dense<0> : tensor<i32>
  %2:2 = stablehlo.reduce(%arg0 init: %0), (%arg5 init: %1) across dimensions = [0] : (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
   reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
    %3 = stablehlo.compare  GT, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %4 = stablehlo.select %3, %arg1, %arg3 : tensor<i1>, tensor<f32>
    %5 = stablehlo.select %3, %arg2, %arg4 : tensor<i1>, tensor<i32>
    stablehlo.return %4, %5 : tensor<f32>, tensor<i32>
  }
  return %2#0, %2#1 : tensor<f32>, tensor<i32>
})",
     {"across dimensions = [0]", " reducer("}},
    {"dot_general",
     R"(func.func @main(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, HIGHEST] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
})",
     {"batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, HIGHEST]"}},
    {"dot_general_preferred",
     R"(func.func @main(%arg0: tensor<3x4xbf16>, %arg1: tensor<4xbf16>) -> tensor<3xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<3x4xbf16>, tensor<4xbf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
})",
     {"contracting_dims = [1] x [0] : (tensor<3x4xbf16>, tensor<4xbf16>) -> tensor<3xf32>"}},
    {"while",
     R"(func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %0) : tensor<i32>, tensor<i32>
   cond {
    %c = stablehlo.constant dense<100> : tensor<i32>
    %2 = stablehlo.compare  LT, %iterArg_0, %c,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<i32>
    %3 = stablehlo.add %iterArg, %0 : tensor<i32>
    stablehlo.return %3, %2 : tensor<i32>, tensor<i32>
  }
  return %1#0 : tensor<i32>
})",
     {"stablehlo.while(", " cond {", "} do {"}},
    {"custom_call",
     R"(func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  stablehlo.custom_call @check.noop(%arg0, %arg0) {has_side_effect = true, backend_config = "cfg"} : (tensor<3xf32>, tensor<3xf32>) -> ()
  return %arg0 : tensor<3xf32>
})",
     {"stablehlo.custom_call @check.noop(%arg0, %arg0) {"}},
    {"rng_bit_generator",
     R"(func.func @main(%arg0: tensor<2xui64>) -> (tensor<2xui64>, tensor<4x4xui32>) {
  %output_state, %output = stablehlo.rng_bit_generator %arg0, algorithm =  THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4x4xui32>)
  return %output_state, %output : tensor<2xui64>, tensor<4x4xui32>
})",
     {"stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : "}},
    {"top_k",
     R"(func.func @main(%arg0: tensor<5x3xi64>) -> (tensor<5x2xi64>, tensor<5x2xi32>) {
  %values, %indices = chlo.top_k(%arg0, k = 2) : tensor<5x3xi64> -> (tensor<5x2xi64>, tensor<5x2xi32>)
  return %values, %indices : tensor<5x2xi64>, tensor<5x2xi32>
})",
     {"chlo.top_k(%arg0, k = 2) : tensor<5x3xi64> -> (tensor<5x2xi64>, tensor<5x2xi32>)"}},
    {"optimization_barrier",
     R"(func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<i32>) -> tensor<i32> {
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<3xf32>, tensor<i32>
  return %0#1 : tensor<i32>
})",
     {"stablehlo.optimization_barrier %arg0, %arg1 : tensor<3xf32>, tensor<i32>"}},
    {"generic_window_sort_case",
     R"(func.func @main(%arg0: tensor<4x6xf32>, %arg1: tensor<i32>) -> (tensor<4x6xf32>, tensor<2x6xf32>, tensor<i32>) {
  %0 = "stablehlo.sort"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %c = stablehlo.compare  LT, %a, %b,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1 = "stablehlo.reduce_window"(%arg0, %cst) <{padding = dense<[[1, 0], [0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x6xf32>, tensor<f32>) -> tensor<2x6xf32>
  %2 = "stablehlo.case"(%arg1) ({
    %k = stablehlo.constant dense<10> : tensor<i32>
    stablehlo.return %k : tensor<i32>
  }, {
    %k = stablehlo.constant dense<20> : tensor<i32>
    stablehlo.return %k : tensor<i32>
  }) : (tensor<i32>) -> tensor<i32>
  return %0, %1, %2 : tensor<4x6xf32>, tensor<2x6xf32>, tensor<i32>
})",
     {"\"stablehlo.sort\"", "\"stablehlo.reduce_window\"", "\"stablehlo.case\""}},
};

// Inputs for @main: small deterministic values of each argument type.
std::vector<Literal> Inputs(const Function& fn) {
  std::vector<Literal> args;
  for (const Type& t : fn.argument_types()) {
    Literal l(t.tensor);
    for (int64_t i = 0; i < l.num_elements(); ++i)
      l.SetFromDouble(i, static_cast<double>((i * 7 + 3) % 11) - 4.0);
    args.push_back(std::move(l));
  }
  return args;
}

TEST(ReductionRoundTrip, PrettyFormsParsePrintAndRunTheSame) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    auto m1 = ParseModule(c.text, c.name);
    ASSERT_TRUE(m1.ok()) << m1.status().ToString();
    std::string t1 = PrintModule(**m1);
    for (const char* frag : c.printed)
      EXPECT_NE(t1.find(frag), std::string::npos) << "missing '" << frag << "' in\n" << t1;
    auto m2 = ParseModule(t1, "printed");
    ASSERT_TRUE(m2.ok()) << m2.status().ToString() << "\n" << t1;
    EXPECT_EQ(PrintModule(**m2), t1);
    InterpreterOptions opts;
    opts.custom_calls["check.noop"] = [](std::span<const Literal>, std::vector<Literal>&) {
      return OkStatus();
    };
    const Function* f1 = (*m1)->Entry();
    ASSERT_NE(f1, nullptr);
    auto r1 = Interpret(**m1, f1->name(), Inputs(*f1), nullptr, opts);
    auto r2 = Interpret(**m2, f1->name(), Inputs(*f1), nullptr, opts);
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    ASSERT_EQ(r1->size(), r2->size());
    for (size_t i = 0; i < r1->size(); ++i) EXPECT_TRUE((*r1)[i].BitwiseEquals((*r2)[i])) << i;
  }
}

TEST(ReductionRoundTrip, MalformedPrettyFormsAreErrors) {
  const std::pair<const char*, const char*> bad[] = {
      // 'applies' with two inputs
      {R"(func.func @main(%a: tensor<2xf32>, %b: tensor<f32>) -> tensor<f32> {
  %0:2 = stablehlo.reduce(%a init: %b), (%a init: %b) applies stablehlo.add across dimensions = [0] : (tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %0#0 : tensor<f32>
})",
       "'applies' needs exactly one input"},
      // missing contracting_dims
      {R"(func.func @main(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.dot_general %a, %a, batching_dims = [0] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
})",
       "expected 'contracting_dims"},
      // unknown rng algorithm
      {R"(func.func @main(%a: tensor<2xui64>) -> tensor<2xui64> {
  %s, %o = stablehlo.rng_bit_generator %a, algorithm = MERSENNE : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2xui32>)
  return %s : tensor<2xui64>
})",
       "found MERSENNE"},
      // while iteration type mismatch
      {R"(func.func @main(%a: tensor<i32>) -> tensor<i32> {
  %0 = stablehlo.while(%it = %a) : tensor<f32>
   cond {
    %c = stablehlo.constant dense<false> : tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    stablehlo.return %it : tensor<f32>
  }
  return %0 : tensor<i32>
})",
       "iteration argument 0 is declared"},
  };
  for (const auto& [text, expect] : bad) {
    auto m = ParseModule(text, "bad");
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_NE(m.status().message().find("bad:"), std::string::npos) << m.status().message();
    EXPECT_NE(m.status().message().find(expect), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace tlaloc
