// Binary arithmetic ops: add, subtract, multiply, divide, remainder, power, maximum, minimum,
// atan2. Integers wrap; integer division by zero and INT_MIN / -1 follow the StableHLO / XLA
// rules (x / 0 = all ones, x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0); maximum and
// minimum propagate NaN and order -0 below +0.
#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

using Values = std::vector<Value>;

template <typename C>
C Divide(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return a / b;
  } else {
    if (b == 0) return static_cast<C>(~C{0});  // -1 signed, all ones unsigned
    if constexpr (std::is_signed_v<C>)
      if (a == std::numeric_limits<C>::min() && b == -1) return a;
    return static_cast<C>(a / b);
  }
}

template <typename C>
C Remainder(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::fmod(a, b);  // sign of the dividend, as the specification requires
  } else {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<C>)
      if (b == -1) return 0;  // also covers INT_MIN % -1, which would trap
    return static_cast<C>(a % b);
  }
}

template <typename C>
C Power(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return InDouble([](auto x, auto y) { return std::pow(x, y); })(a, b);
  } else {
    if constexpr (std::is_signed_v<C>) {
      // A negative exponent makes 1/a^|b|, an integer only for a = 1 or a = -1.
      if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b & 1) ? C{-1} : C{1};
        return 0;
      }
    }
    C acc = 1, base = a;
    using U = std::make_unsigned_t<C>;
    for (U e = static_cast<U>(b); e != 0; e >>= 1) {
      if (e & 1) acc = WrapMul(acc, base);
      base = WrapMul(base, base);
    }
    return acc;
  }
}

// Cotangents of max/min: the one that was selected gets the cotangent (the first operand on
// ties, a choice the specification leaves open).
VjpFn SelectingVjp(hlo::CompareDirection direction) {
  return [direction](OpBuilder& b, const Operation&, const Values& operands, const Values&,
                     const Values& cts) -> StatusOr<Values> {
    Value first = hlo::Compare(b, operands[0], operands[1], direction);
    Value zero = hlo::SplatLike(b, cts[0], 0);
    Value ga = hlo::Select(b, first, cts[0], zero);
    Value gb = hlo::Select(b, first, zero, cts[0]);
    TL_RETURN_IF_ERROR(b.status());
    return Values{ga, gb};
  };
}

}  // namespace

void RegisterElementwiseArithmeticOps(OpRegistry& r) {
  // On i1, add is logical or and multiply logical and (the specification's boolean semantics).
  OpDef& add = DefineSameType(r, "stablehlo.add", 2, kAnyK, BinaryEval<kAnyK>([](auto a, auto b) {
                                using C = decltype(a);
                                if constexpr (std::is_same_v<C, bool>)
                                  return a || b;
                                else if constexpr (std::is_floating_point_v<C>)
                                  return a + b;
                                else
                                  return WrapAdd(a, b);
                              }));
  add.traits.commutative = true;
  add.vjp = [](OpBuilder&, const Operation&, const Values&, const Values&,
               const Values& cts) -> StatusOr<Values> {
    return Values{cts[0], cts[0]};
  };

  DefineSameType(r, "stablehlo.subtract", 2, kNumericK, BinaryEval<kNumericK>([](auto a, auto b) {
                   using C = decltype(a);
                   if constexpr (std::is_floating_point_v<C>)
                     return a - b;
                   else
                     return WrapSub(a, b);
                 }))
      .vjp = [](OpBuilder& b, const Operation&, const Values&, const Values&,
                const Values& cts) -> StatusOr<Values> {
    Value neg = hlo::Neg(b, cts[0]);
    TL_RETURN_IF_ERROR(b.status());
    return Values{cts[0], neg};
  };

  OpDef& mul =
      DefineSameType(r, "stablehlo.multiply", 2, kAnyK, BinaryEval<kAnyK>([](auto a, auto b) {
                       using C = decltype(a);
                       if constexpr (std::is_same_v<C, bool>)
                         return a && b;
                       else if constexpr (std::is_floating_point_v<C>)
                         return a * b;
                       else
                         return WrapMul(a, b);
                     }));
  mul.traits.commutative = true;
  mul.vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
               const Values& cts) -> StatusOr<Values> {
    Value ga = hlo::Mul(b, cts[0], x[1]);
    Value gb = hlo::Mul(b, x[0], cts[0]);
    TL_RETURN_IF_ERROR(b.status());
    return Values{ga, gb};
  };

  DefineSameType(r, "stablehlo.divide", 2, kNumericK,
                 BinaryEval<kNumericK>([](auto a, auto b) { return Divide(a, b); }))
      .vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values& y,
                const Values& cts) -> StatusOr<Values> {
    // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
    Value ga = hlo::Div(b, cts[0], x[1]);
    Value gb = hlo::Neg(b, hlo::Mul(b, ga, y[0]));
    TL_RETURN_IF_ERROR(b.status());
    return Values{ga, gb};
  };

  DefineSameType(r, "stablehlo.remainder", 2, kNumericK,
                 BinaryEval<kNumericK>([](auto a, auto b) { return Remainder(a, b); }))
      .vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
                const Values& cts) -> StatusOr<Values> {
    // rem(a, b) = a - b * trunc(a / b): d/da = 1, d/db = -trunc(a / b) (away from the jumps).
    Value q = hlo::Div(b, x[0], x[1]);
    Value trunc = hlo::Mul(b, hlo::Sign(b, q), hlo::Floor(b, hlo::Abs(b, q)));
    Value gb = hlo::Neg(b, hlo::Mul(b, cts[0], trunc));
    TL_RETURN_IF_ERROR(b.status());
    return Values{cts[0], gb};
  };

  DefineSameType(r, "stablehlo.power", 2, kNumericK,
                 BinaryEval<kNumericK>([](auto a, auto b) { return Power(a, b); }))
      .vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values& y,
                const Values& cts) -> StatusOr<Values> {
    // d(a^b)/da = b * a^(b-1) = b * y / a (rewritten with a^(b-1) to stay finite at a = 0);
    // d(a^b)/db = log(a) * y
    Value one = hlo::SplatLike(b, x[1], 1);
    Value a_bm1 = hlo::Pow(b, x[0], hlo::Sub(b, x[1], one));
    Value ga = hlo::Mul(b, cts[0], hlo::Mul(b, x[1], a_bm1));
    Value gb = hlo::Mul(b, cts[0], hlo::Mul(b, hlo::Log(b, x[0]), y[0]));
    TL_RETURN_IF_ERROR(b.status());
    return Values{ga, gb};
  };

  OpDef& max = DefineSameType(r, "stablehlo.maximum", 2, kAnyK,
                              BinaryEval<kAnyK>([](auto a, auto b) { return Maximum(a, b); }));
  max.traits.commutative = true;
  max.vjp = SelectingVjp(hlo::CompareDirection::kGe);
  OpDef& min = DefineSameType(r, "stablehlo.minimum", 2, kAnyK,
                              BinaryEval<kAnyK>([](auto a, auto b) { return Minimum(a, b); }));
  min.traits.commutative = true;
  min.vjp = SelectingVjp(hlo::CompareDirection::kLe);

  DefineSameType(r, "stablehlo.atan2", 2, kFloatK,
                 BinaryEval<kFloatK>(InDouble([](auto a, auto b) { return std::atan2(a, b); })))
      .vjp = [](OpBuilder& b, const Operation&, const Values& x, const Values&,
                const Values& cts) -> StatusOr<Values> {
    // atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
    Value den = hlo::Add(b, hlo::Mul(b, x[0], x[0]), hlo::Mul(b, x[1], x[1]));
    Value s = hlo::Div(b, cts[0], den);
    Value ga = hlo::Mul(b, s, x[1]);
    Value gb = hlo::Neg(b, hlo::Mul(b, s, x[0]));
    TL_RETURN_IF_ERROR(b.status());
    return Values{ga, gb};
  };
}

}  // namespace tlaloc::ops::ew
