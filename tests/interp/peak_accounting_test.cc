// ExecutionStats::peak_live_bytes counts an op's results from the moment they are allocated,
// beside the operands that are still live, through the callee or region the op runs, until the
// operands dying there are released. Each expected peak below is computed by hand from the
// program's sizes; the old accounting (results counted only after their op's eval) read the
// last two low.
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

// The call's result is allocated before the callee runs; inside, x + x and then (x + x) * 2 are
// live together: a, the call's result and the callee's two tensors, 4 KiB (old: 3 KiB).
TEST(PeakAccounting, ACallsResultIsLiveWhileItsCalleeRuns) {
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
  EXPECT_EQ(PeakOf(kCall, {a}), 4 * 1024);
}

// An update written into a donated 4 KiB cache: the op's result is allocated before the cache
// (dying there) takes its place, so both are live for a moment beside the 64-byte update and
// the 4-byte index: 2 x 4096 + 64 + 4 (old: 4096 + 64 + 4).
TEST(PeakAccounting, AnInPlaceUpdateCountsTheResultItReplaces) {
  constexpr const char* kUpdate = R"(
func.func public @main(%cache: tensor<1024xf32>, %update: tensor<16xf32>, %i: tensor<i32>) -> tensor<1024xf32> {
  %0 = stablehlo.dynamic_update_slice %cache, %update, %i : (tensor<1024xf32>, tensor<16xf32>, tensor<i32>) -> tensor<1024xf32>
  return %0 : tensor<1024xf32>
})";
  std::vector<Literal> args;
  args.push_back(Floats(1024));  // unique storage: donated
  args.push_back(Floats(16));
  args.push_back(Literal::Scalar<int32_t>(3));
  EXPECT_EQ(PeakOf(kUpdate, std::move(args)), 2 * 4096 + 64 + 4);
}

}  // namespace
}  // namespace tlaloc
