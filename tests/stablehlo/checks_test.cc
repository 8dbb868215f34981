// The check custom calls' comparison rules, the checks run inside a program, and .npy files.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/conformance.h"
#include "tlaloc/stablehlo/npy.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

TEST(CompareLiterals, EqIsExactAndNamesTheFirstMismatch) {
  auto a = Literal::FromVector<int32_t>({2, 2}, {1, 2, 3, 4});
  auto b = Literal::FromVector<int32_t>({2, 2}, {1, 2, 5, 4});
  EXPECT_TRUE(CompareLiterals(CheckKind::kEq, a, a).ok());
  Status s = CompareLiterals(CheckKind::kEq, a, b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("first at [1, 0]: got 3, expected 5"), std::string::npos)
      << s.message();
  auto c = Literal::FromVector<int64_t>({2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(CompareLiterals(CheckKind::kEq, a, c).ok());  // type differs
}

TEST(CompareLiterals, CloseCountsUlpsInTheElementType) {
  float one = 1.0f;
  float three_up = std::nextafter(std::nextafter(std::nextafter(one, 2.0f), 2.0f), 2.0f);
  float four_up = std::nextafter(three_up, 2.0f);
  auto x = Literal::FromVector<float>({1}, {one});
  EXPECT_TRUE(
      CompareLiterals(CheckKind::kClose, Literal::FromVector<float>({1}, {three_up}), x).ok());
  EXPECT_FALSE(
      CompareLiterals(CheckKind::kClose, Literal::FromVector<float>({1}, {four_up}), x).ok());
  // Across zero: -min_denorm and +min_denorm are 2 ULP apart.
  float d = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(CompareLiterals(CheckKind::kClose, Literal::FromVector<float>({1}, {-d}),
                              Literal::FromVector<float>({1}, {d}))
                  .ok());
  // bf16: 3 steps of the bf16 grid, not of f32.
  bf16 b1(1.0f), b4 = bf16::FromBits(b1.bits + 4), b3 = bf16::FromBits(b1.bits + 3);
  EXPECT_TRUE(CompareLiterals(CheckKind::kClose, Literal::FromVector<bf16>({1}, {b3}),
                              Literal::FromVector<bf16>({1}, {b1}))
                  .ok());
  EXPECT_FALSE(CompareLiterals(CheckKind::kClose, Literal::FromVector<bf16>({1}, {b4}),
                               Literal::FromVector<bf16>({1}, {b1}))
                   .ok());
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(CompareLiterals(CheckKind::kClose, Literal::FromVector<float>({1}, {nan}),
                              Literal::FromVector<float>({1}, {-nan}))
                  .ok());
  EXPECT_FALSE(CompareLiterals(CheckKind::kClose, Literal::FromVector<float>({1}, {3e38f}),
                               Literal::FromVector<float>({1}, {inf}))
                   .ok());
}

TEST(CompareLiterals, AlmostEqUsesAnAbsoluteTolerance) {
  auto e = Literal::FromVector<double>({2}, {1.0, -5.0});
  EXPECT_TRUE(
      CompareLiterals(CheckKind::kAlmostEq, Literal::FromVector<double>({2}, {1.0009, -5.0}), e)
          .ok());
  EXPECT_FALSE(
      CompareLiterals(CheckKind::kAlmostEq, Literal::FromVector<double>({2}, {1.0, -5.002}), e)
          .ok());
}

// A self-checking program: one check passes, one fails; both are recorded and the run goes on.
TEST(ConformanceChecks, RecordEveryCheckOfAProgram) {
  const char* text = R"(module {
  func.func public @main() -> tensor<2xf32> {
    %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %b = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%a, %a) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%a, %b) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %a : tensor<2xf32>
  }
})";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto recorder = std::make_shared<CheckRecorder>();
  InterpreterOptions options;
  AddConformanceChecks(options, recorder);
  auto out = Interpret(**m, "main", {}, nullptr, options);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto results = recorder->results();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].passed);
  EXPECT_EQ(results[0].target, "check.expect_close");
  EXPECT_FALSE(results[1].passed);
  EXPECT_NE(results[1].message.find("got 2.0, expected 2.5"), std::string::npos)
      << results[1].message;
  EXPECT_EQ(recorder->failed(), 1);
}

TEST(HostChecks, ChecksBecomeResultsAndRunAfterTheProgram) {
  const char* text = R"(module {
  func.func public @main() -> tensor<2xf32> {
    %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %b = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>
    %c = stablehlo.add %a, %a : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%a, %a) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    stablehlo.custom_call @check.expect_eq(%c, %b) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %c : tensor<2xf32>
  }
})";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto moved = MoveChecksToHost(**m, "main");
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->original_results, 1);
  ASSERT_EQ(moved->checks.size(), 2u);
  ASSERT_TRUE(Verify(**m).ok()) << Verify(**m).ToString();
  // No check target is left for the backend to know: a plain interpreter (no check handlers)
  // runs it, returning the original result and then each check's two operands.
  const Function* main = (*m)->Find("main");
  EXPECT_EQ(main->result_types().size(), 5u);
  auto out = Interpret(**m, "main", {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 5u);
  auto checks = RunHostChecks(*moved, *out);
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks[0].passed);
  EXPECT_EQ(checks[1].target, "check.expect_eq");
  EXPECT_FALSE(checks[1].passed);
  EXPECT_NE(checks[1].message.find("got 2.0, expected 1.0"), std::string::npos)
      << checks[1].message;
  // Too few results (a backend that dropped some) fail the checks instead of reading past them.
  auto short_checks = RunHostChecks(*moved, std::span<const Literal>(out->data(), 2));
  EXPECT_FALSE(short_checks[0].passed);
}

TEST(HostChecks, ChecksOutsideTheEntryBlockAreRefusedByName) {
  const char* text = R"(module {
  func.func public @main() -> tensor<2xf32> {
    %a = call @helper() : () -> tensor<2xf32>
    return %a : tensor<2xf32>
  }
  func.func private @helper() -> tensor<2xf32> {
    %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    stablehlo.custom_call @check.expect_eq(%a, %a) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %a : tensor<2xf32>
  }
})";
  auto m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto moved = MoveChecksToHost(**m, "main");
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("@helper calls a check target"), std::string::npos)
      << moved.status().message();
}

TEST(Npy, RoundTripAndErrors) {
  auto lit = Literal::FromVector<int16_t>({2, 3}, {1, -2, 3, -4, 5, -6});
  auto bytes = SerializeNpy(lit);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((bytes->size() - lit.byte_size()) % 64, 0u);  // data starts 64-byte aligned
  auto back = ParseNpy(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->BitwiseEquals(lit));
  auto scalar = ParseNpy(*SerializeNpy(Literal::Scalar<double>(2.5)));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->dims().size(), 0u);
  auto vec = ParseNpy(*SerializeNpy(Literal::FromVector<bool>({3}, {true, false, true})));
  ASSERT_TRUE(vec.ok());
  EXPECT_EQ(vec->dims(), std::vector<int64_t>{3});
  // Big-endian data is swapped.
  std::string be = *SerializeNpy(Literal::FromVector<int32_t>({1}, {0x01020304}));
  be.replace(be.find("<i4"), 3, ">i4");
  std::reverse(be.end() - 4, be.end());
  auto swapped = ParseNpy(be);
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(swapped->span<int32_t>()[0], 0x01020304);
  EXPECT_FALSE(ParseNpy("not numpy").ok());
  EXPECT_FALSE(ParseNpy(bytes->substr(0, bytes->size() - 1)).ok());  // truncated data
  EXPECT_FALSE(SerializeNpy(Literal::FromVector<bf16>({1}, {bf16(1.0f)})).ok());
}

}  // namespace
}  // namespace tlaloc
