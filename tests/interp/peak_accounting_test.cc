// ExecutionStats::peak_live_bytes counts an op's results from the moment they are allocated,
// beside the operands that are still live, through the callee or region the op runs, until the
// operands dying there are released. Each expected peak below is computed by hand from the
// program's sizes. Ops that replace their results (calls, views) or take over a dying operand's
// buffer get no buffer of their own, so none is counted.
#include <gtest/gtest.h>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/stablehlo/parser.h"

namespace tlaloc {
namespace {

int64_t PeakOf(const char* text, std::vector<Literal> args) {
  auto module = ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return -1;
  ExecutionStats stats;
  auto out = Interpret(**module, "main", std::move(args), &stats);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return stats.peak_live_bytes;
}

Literal Floats(int64_t n) { return Literal(TensorType(ElementType::kF32, {n})); }

// a -> b = a + a -> c = b + b -> d = c + c over 1 KiB tensors; the caller keeps `a`. At most
// `a` and two intermediates are live at once (an add's operand dies after the add): 3 KiB.
TEST(PeakAccounting, ChainOfAddsHoldsTheInputAndTwoIntermediates) {
  constexpr const char* kChain = R"(
func.func public @main(%a: tensor<256xf32>) -> tensor<256xf32> {
  %b = stablehlo.add %a, %a : tensor<256xf32>
  %c = stablehlo.add %b, %b : tensor<256xf32>
  %d = stablehlo.add %c, %c : tensor<256xf32>
  return %d : tensor<256xf32>
})";
  Literal a = Floats(256);
  EXPECT_EQ(PeakOf(kChain, {a}), 3 * 1024);
}

// A call's results are the callee's own buffers (OpTraits::replaces_results: nothing is allocated
// for them up front); inside, x + x and then (x + x) + (x + x) are live together beside `a`:
// 3 KiB (the accounting before placeholders counted a fourth, never-used buffer).
TEST(PeakAccounting, ACallAllocatesNothingForItsResults) {
  constexpr const char* kCall = R"(
func.func public @main(%a: tensor<256xf32>) -> tensor<256xf32> {
  %0 = func.call @double_twice(%a) : (tensor<256xf32>) -> tensor<256xf32>
  return %0 : tensor<256xf32>
}
func.func private @double_twice(%x: tensor<256xf32>) -> tensor<256xf32> {
  %1 = stablehlo.add %x, %x : tensor<256xf32>
  %2 = stablehlo.add %1, %1 : tensor<256xf32>
  return %2 : tensor<256xf32>
})";
  Literal a = Floats(256);
  EXPECT_EQ(PeakOf(kCall, {a}), 3 * 1024);
}

// An update written into a donated 4 KiB cache: the cache dies there, so the interpreter places it
// in the result's slot (OpTraits::in_place) and allocates no second 4 KiB buffer: 4096 + 64 + 4
// (8,260 when a result buffer was allocated first and then dropped).
TEST(PeakAccounting, AnInPlaceUpdateAllocatesNoSecondCache) {
  constexpr const char* kUpdate = R"(
func.func public @main(%cache: tensor<1024xf32>, %update: tensor<16xf32>, %i: tensor<i32>) -> tensor<1024xf32> {
  %0 = stablehlo.dynamic_update_slice %cache, %update, %i : (tensor<1024xf32>, tensor<16xf32>, tensor<i32>) -> tensor<1024xf32>
  return %0 : tensor<1024xf32>
})";
  std::vector<Literal> args;
  args.push_back(Floats(1024));  // unique storage: donated
  args.push_back(Floats(16));
  args.push_back(Literal::Scalar<int32_t>(3));
  EXPECT_EQ(PeakOf(kUpdate, std::move(args)), 4096 + 64 + 4);
}

}  // namespace
}  // namespace tlaloc
