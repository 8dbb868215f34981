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

}  // namespace
}  // namespace tlaloc::pjrt
