// Bitwise ops: and, or, xor, not (logical on i1), the three shifts, popcnt and
// count_leading_zeros. Shift counts are read as unsigned, so a count that is negative or at
// least the bit width shifts everything out: 0 for left and logical shifts, the sign fill for
// the arithmetic shift (which works on the bit pattern, unsigned types included).
#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

template <typename T>
T ShiftLeft(T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr U kBits = sizeof(T) * 8;
  if (static_cast<U>(b) >= kBits) return 0;
  return static_cast<T>(static_cast<WideUnsigned<T>>(static_cast<U>(a)) << static_cast<U>(b));
}

template <typename T>
T ShiftRightLogical(T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr U kBits = sizeof(T) * 8;
  if (static_cast<U>(b) >= kBits) return 0;
  return static_cast<T>(static_cast<U>(a) >> static_cast<U>(b));
}

template <typename T>
T ShiftRightArithmetic(T a, T b) {
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  constexpr U kBits = sizeof(T) * 8;
  S sa = static_cast<S>(a);  // the bit pattern read as two's complement
  if (static_cast<U>(b) >= kBits) return static_cast<T>(sa < 0 ? S{-1} : S{0});
  return static_cast<T>(static_cast<S>(sa >> static_cast<U>(b)));
}

}  // namespace

void RegisterElementwiseBitwiseOps(OpRegistry& r) {
  OpDef& a = DefineSameType(
      r, "stablehlo.and", 2, kIntOrPredK,
      BinaryEval<kIntOrPredK>([](auto x, auto y) { return static_cast<decltype(x)>(x & y); }));
  a.traits.commutative = true;
  OpDef& o = DefineSameType(
      r, "stablehlo.or", 2, kIntOrPredK,
      BinaryEval<kIntOrPredK>([](auto x, auto y) { return static_cast<decltype(x)>(x | y); }));
  o.traits.commutative = true;
  OpDef& x = DefineSameType(
      r, "stablehlo.xor", 2, kIntOrPredK,
      BinaryEval<kIntOrPredK>([](auto p, auto q) { return static_cast<decltype(p)>(p ^ q); }));
  x.traits.commutative = true;
  DefineSameType(r, "stablehlo.not", 1, kIntOrPredK, UnaryEval<kIntOrPredK>([](auto v) {
                   using C = decltype(v);
                   if constexpr (std::is_same_v<C, bool>)
                     return !v;
                   else
                     return static_cast<C>(~v);
                 }));

  DefineSameType(r, "stablehlo.shift_left", 2, kIntK,
                 BinaryEval<kIntK>([](auto p, auto q) { return ShiftLeft(p, q); }));
  DefineSameType(r, "stablehlo.shift_right_logical", 2, kIntK,
                 BinaryEval<kIntK>([](auto p, auto q) { return ShiftRightLogical(p, q); }));
  DefineSameType(r, "stablehlo.shift_right_arithmetic", 2, kIntK,
                 BinaryEval<kIntK>([](auto p, auto q) { return ShiftRightArithmetic(p, q); }));

  DefineSameType(r, "stablehlo.popcnt", 1, kIntK, UnaryEval<kIntK>([](auto v) {
                   using C = decltype(v);
                   return static_cast<C>(std::popcount(static_cast<std::make_unsigned_t<C>>(v)));
                 }));
  DefineSameType(r, "stablehlo.count_leading_zeros", 1, kIntK, UnaryEval<kIntK>([](auto v) {
                   using C = decltype(v);
                   return static_cast<C>(std::countl_zero(static_cast<std::make_unsigned_t<C>>(v)));
                 }));
}

}  // namespace tlaloc::ops::ew
