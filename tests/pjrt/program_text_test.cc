// The text a plugin receives: the entry becomes @main (XLA compiles only @main), calls follow.
#include "tlaloc/pjrt/program_text.h"

#include <gtest/gtest.h>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc::pjrt {
namespace {

constexpr const char* kNamedEntry = R"(
func.func public @forward(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @main(%a) : (tensor<2xf32>) -> tensor<2xf32>
  %1 = call @twice(%0) : (tensor<2xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}
func.func private @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
func.func private @twice(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
})";

TEST(ProgramText, TheEntryBecomesMainAndCallsFollow) {
  auto module = ParseModule(kNamedEntry);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  const Function* entry = (*module)->Find("forward");
  ASSERT_NE(entry, nullptr);
  auto text = PrintProgramText(**module, *entry);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("func.func public @main("), std::string::npos) << *text;
  EXPECT_EQ(text->find("@forward"), std::string::npos) << *text;
  EXPECT_NE(text->find("call @main_("), std::string::npos) << *text;  // the old main, renamed
  // Same program: the renamed module computes what the original entry did.
  auto renamed = ParseModule(*text);
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  std::vector<Literal> args = {Literal::FromVector<float>({2}, {1.5f, -2})};
  auto want = Interpret(**module, "forward", args);
  auto got = Interpret(**renamed, "main", args);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_TRUE((*want)[0].BitwiseEquals((*got)[0])) << (*got)[0].ToString();
}

TEST(ProgramText, AModuleWhoseEntryIsMainPrintsUnchanged) {
  auto module = ParseModule(R"(
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
})");
  ASSERT_TRUE(module.ok());
  auto text = PrintProgramText(**module, *(*module)->Entry());
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("@main("), std::string::npos);
}

// chlo.ragged_dot in each form Tlaloc emits, with an empty group and a row past the last group.
std::string RaggedProgram(const std::string& rhs_type, const std::string& result_type, int lc,
                          int rc) {
  const std::string lhs = "tensor<6x4xf32>";
  const std::string dims = "#chlo.ragged_dot<lhs_contracting_dimensions = [" + std::to_string(lc) +
                           "], rhs_contracting_dimensions = [" + std::to_string(rc) +
                           "], lhs_ragged_dimensions = [0]" +
                           (lc == 1 ? ", rhs_group_dimensions = [0]>" : ">");
  return "func.func public @main(%x: " + lhs + ", %w: " + rhs_type + ", %g: tensor<3xi32>) -> " +
         result_type + " {\n  %0 = \"chlo.ragged_dot\"(%x, %w, %g) " +
         "<{ragged_dot_dimension_numbers = " + dims + "}> : (" + lhs + ", " + rhs_type +
         ", tensor<3xi32>) -> " + result_type + "\n  return %0 : " + result_type + "\n}\n";
}

Literal Ramp(const std::vector<int64_t>& dims, float scale) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(scale * static_cast<float>((i * 7) % 11 - 5));
  return Literal::FromVector<float>(dims, v);
}

TEST(ProgramText, RaggedDotExpandsToTheSameProducts) {
  struct Case {
    const char* what;
    std::string text;
    Literal w;
  };
  const std::vector<Case> cases = {
      {"rows, [G, K, N]", RaggedProgram("tensor<3x4x5xf32>", "tensor<6x5xf32>", 1, 1),
       Ramp({3, 4, 5}, 0.25f)},
      {"rows, [G, N, K]", RaggedProgram("tensor<3x5x4xf32>", "tensor<6x5xf32>", 1, 2),
       Ramp({3, 5, 4}, 0.5f)},
      {"ragged contraction", RaggedProgram("tensor<6x5xf32>", "tensor<3x4x5xf32>", 0, 0),
       Ramp({6, 5}, 0.75f)}};
  for (const Case& c : cases) {
    auto module = ParseModule(c.text);
    ASSERT_TRUE(module.ok()) << c.what << ": " << module.status().ToString();
    // Groups of 2, 0 and 3 rows: row 5 is in none (zero in the first two forms).
    std::vector<Literal> args = {Ramp({6, 4}, 1.0f), c.w,
                                 Literal::FromVector<int32_t>({3}, {2, 0, 3})};
    auto want = Interpret(**module, "main", args);
    ASSERT_TRUE(want.ok()) << c.what << ": " << want.status().ToString();
    auto expanded = ParseModule(c.text);
    ASSERT_TRUE(expanded.ok());
    auto n = ExpandRaggedDot(**expanded);
    ASSERT_TRUE(n.ok()) << c.what << ": " << n.status().ToString();
    EXPECT_EQ(*n, 1);
    auto text = PrintProgramText(**expanded, *(*expanded)->Find("main"));
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text->find("chlo.ragged_dot"), std::string::npos) << *text;
    auto got = Interpret(**expanded, "main", args);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.status().ToString();
    // Small integers times powers of two: every product and sum is exact in f32.
    EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0]))
        << c.what << ": " << (*got)[0].ToString() << " vs " << (*want)[0].ToString();
  }
}

TEST(ProgramText, PerDeviceProgramsMarkTheirBoundaryManual) {
  auto module = ParseModule(R"(
func.func public @main(%a: tensor<2xf32>, %b: tensor<2xf32> {mhlo.sharding = "{replicated}"}) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  return %0 : tensor<2xf32>
})");
  ASSERT_TRUE(module.ok());
  ProgramTextOptions options;
  options.manual_shardings = true;
  auto text = PrintProgramText(**module, *(*module)->Entry(), options);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find(R"(%arg0: tensor<2xf32> {mhlo.sharding = "{manual}"})"), std::string::npos)
      << *text;
  // An argument that has a sharding keeps it; the result is marked too.
  EXPECT_NE(text->find(R"({mhlo.sharding = "{replicated}"})"), std::string::npos) << *text;
  EXPECT_NE(text->find(R"(-> (tensor<2xf32> {mhlo.sharding = "{manual}"}))"), std::string::npos)
      << *text;
}

// The TPU form: f32 dots (also inside a region) at HIGHEST; a bf16 dot and a dot that names its
// precision are left as they are.
TEST(ProgramText, TpuFormPutsF32DotsAtHighest) {
  auto module = ParseModule(R"(
func.func public @main(%a: tensor<2x2xf32>, %b: tensor<2x2xbf16>, %p: tensor<i1>) -> (tensor<2x2xf32>, tensor<2x2xbf16>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.dot_general %b, %b, contracting_dims = [1] x [0] : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  %2 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %3 = "stablehlo.if"(%p) ({
    %4 = stablehlo.dot_general %a, %a, contracting_dims = [0] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    stablehlo.return %4 : tensor<2x2xf32>
  }, {
    stablehlo.return %a : tensor<2x2xf32>
  }) : (tensor<i1>) -> tensor<2x2xf32>
  return %0, %1, %2, %3 : tensor<2x2xf32>, tensor<2x2xbf16>, tensor<2x2xf32>, tensor<2x2xf32>
})");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  ProgramTextOptions options;
  options.f32_dots_highest = true;
  auto text = PrintProgramText(**module, *(*module)->Entry(), options);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  int highest = 0;
  for (size_t at = text->find("precision = [HIGHEST, HIGHEST]"); at != std::string::npos;
       at = text->find("precision = [HIGHEST, HIGHEST]", at + 1))
    ++highest;
  EXPECT_EQ(highest, 2) << *text;
  EXPECT_NE(text->find("precision = [DEFAULT, DEFAULT]"), std::string::npos) << *text;
  // The form parses back (what aot --tpu-form and a TPU session send).
  EXPECT_TRUE(ParseModule(*text).ok()) << *text;
  // Without the option the text is unchanged.
  auto plain = PrintProgramText(**module, *(*module)->Entry());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("HIGHEST"), std::string::npos);
}

}  // namespace
}  // namespace tlaloc::pjrt
