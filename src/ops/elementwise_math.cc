// Unary elementwise math ops: abs, negate, sign, exp/log family, trigonometric, rounding and
// is_finite. Floats are computed in their own precision (f16/bf16 in float, rounded to nearest
// even); integer negation wraps.
#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

using Values = std::vector<Value>;

// VJP of a unary op whose derivative is built from the operand x and the result y.
template <typename F>
VjpFn UnaryVjp(F dydx) {
  return [dydx](OpBuilder& b, const Operation&, const Values& operands, const Values& results,
                const Values& cts) -> StatusOr<Values> {
    Value d = dydx(b, operands[0], results[0]);
    Value g = hlo::Mul(b, cts[0], d);
    TL_RETURN_IF_ERROR(b.status());
    return Values{g};
  };
}

// Rounding and sign have zero derivative almost everywhere: no cotangent flows back.
VjpFn ZeroVjp() {
  return [](OpBuilder&, const Operation&, const Values&, const Values&,
            const Values&) -> StatusOr<Values> { return Values{Value()}; };
}

template <typename C>
C SignOf(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x) || x == 0) return x;  // NaN stays NaN, -0 stays -0
    return std::copysign(C{1}, x);
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<C>((x > 0) - (x < 0));
  } else {
    return static_cast<C>(x > 0);
  }
}

void RegisterFloatUnary(OpRegistry& r, const std::string& name, EvalFn eval, VjpFn vjp = {}) {
  DefineSameType(r, name, 1, kFloatK, std::move(eval)).vjp = std::move(vjp);
}

}  // namespace

void RegisterElementwiseMathOps(OpRegistry& r) {
  DefineSameType(r, "stablehlo.abs", 1, kSignedK | kFloatK,
                 UnaryEval<kSignedK | kFloatK>([](auto x) {
                   using C = decltype(x);
                   if constexpr (std::is_floating_point_v<C>)
                     return std::fabs(x);
                   else
                     return x < 0 ? WrapNeg(x) : x;  // abs(INT_MIN) wraps to INT_MIN
                 }))
      .vjp = UnaryVjp([](OpBuilder& b, Value x, Value) { return hlo::Sign(b, x); });

  DefineSameType(r, "stablehlo.negate", 1, kNumericK, UnaryEval<kNumericK>([](auto x) {
                   using C = decltype(x);
                   if constexpr (std::is_floating_point_v<C>)
                     return -x;
                   else
                     return WrapNeg(x);
                 }))
      .vjp = [](OpBuilder& b, const Operation&, const Values&, const Values&,
                const Values& cts) -> StatusOr<Values> {
    Value g = hlo::Neg(b, cts[0]);
    TL_RETURN_IF_ERROR(b.status());
    return Values{g};
  };

  DefineSameType(r, "stablehlo.sign", 1, kSignedK | kFloatK,
                 UnaryEval<kSignedK | kFloatK>([](auto x) { return SignOf(x); }))
      .vjp = ZeroVjp();

  // exp, logistic and rsqrt are defined in bulk_math.h, next to their bulk f32 loops.
  RegisterFloatUnary(r, "stablehlo.exponential",
                     FloatUnaryEvalWithF32Kernel(InDouble(vmath::Exp), &vmath::BulkKernels::exp),
                     UnaryVjp([](OpBuilder&, Value, Value y) { return y; }));
  RegisterFloatUnary(r, "stablehlo.exponential_minus_one",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::expm1(x); })),
                     UnaryVjp([](OpBuilder& b, Value x, Value) { return hlo::Exp(b, x); }));
  RegisterFloatUnary(r, "stablehlo.log",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::log(x); })),
                     UnaryVjp([](OpBuilder& b, Value x, Value) {
                       return hlo::Div(b, hlo::SplatLike(b, x, 1), x);
                     }));
  RegisterFloatUnary(r, "stablehlo.log_plus_one",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::log1p(x); })),
                     UnaryVjp([](OpBuilder& b, Value x, Value) {
                       Value one = hlo::SplatLike(b, x, 1);
                       return hlo::Div(b, one, hlo::Add(b, one, x));
                     }));
  RegisterFloatUnary(
      r, "stablehlo.logistic",
      FloatUnaryEvalWithF32Kernel(InDouble(vmath::Logistic), &vmath::BulkKernels::logistic),
      UnaryVjp([](OpBuilder& b, Value, Value y) {
        Value one_minus_y = hlo::Sub(b, hlo::SplatLike(b, y, 1), y);
        return hlo::Mul(b, y, one_minus_y);
      }));
  RegisterFloatUnary(r, "stablehlo.sqrt", UnaryEval<kFloatK>([](auto x) { return std::sqrt(x); }),
                     UnaryVjp([](OpBuilder& b, Value, Value y) {
                       return hlo::Div(b, hlo::SplatLike(b, y, 0.5), y);
                     }));
  RegisterFloatUnary(
      r, "stablehlo.rsqrt",
      FloatUnaryEvalWithF32Kernel(InDouble(vmath::Rsqrt), &vmath::BulkKernels::rsqrt),
      // d/dx x^-1/2 = -1/2 * y / x
      UnaryVjp([](OpBuilder& b, Value x, Value y) {
        Value t = hlo::Div(b, y, x);
        return hlo::Mul(b, hlo::SplatLike(b, x, -0.5), t);
      }));
  RegisterFloatUnary(r, "stablehlo.cbrt",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::cbrt(x); })),
                     // d/dx x^1/3 = 1 / (3 y^2)
                     UnaryVjp([](OpBuilder& b, Value, Value y) {
                       Value y2 = hlo::Mul(b, y, y);
                       Value den = hlo::Mul(b, hlo::SplatLike(b, y, 3), y2);
                       return hlo::Div(b, hlo::SplatLike(b, y, 1), den);
                     }));
  RegisterFloatUnary(r, "stablehlo.sine",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::sin(x); })),
                     UnaryVjp([](OpBuilder& b, Value x, Value) { return hlo::Cos(b, x); }));
  RegisterFloatUnary(
      r, "stablehlo.cosine", UnaryEval<kFloatK>(InDouble([](auto x) { return std::cos(x); })),
      UnaryVjp([](OpBuilder& b, Value x, Value) { return hlo::Neg(b, hlo::Sin(b, x)); }));
  RegisterFloatUnary(r, "stablehlo.tan",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::tan(x); })),
                     UnaryVjp([](OpBuilder& b, Value, Value y) {  // 1 + tan^2
                       Value y2 = hlo::Mul(b, y, y);
                       return hlo::Add(b, hlo::SplatLike(b, y, 1), y2);
                     }));
  RegisterFloatUnary(r, "stablehlo.tanh",
                     UnaryEval<kFloatK>(InDouble([](auto x) { return std::tanh(x); })),
                     UnaryVjp([](OpBuilder& b, Value, Value y) {  // 1 - tanh^2
                       Value y2 = hlo::Mul(b, y, y);
                       return hlo::Sub(b, hlo::SplatLike(b, y, 1), y2);
                     }));
  RegisterFloatUnary(r, "stablehlo.floor", UnaryEval<kFloatK>([](auto x) { return std::floor(x); }),
                     ZeroVjp());
  RegisterFloatUnary(r, "stablehlo.ceil", UnaryEval<kFloatK>([](auto x) { return std::ceil(x); }),
                     ZeroVjp());
  // Halfway cases away from zero.
  RegisterFloatUnary(r, "stablehlo.round_nearest_afz",
                     UnaryEval<kFloatK>([](auto x) { return std::round(x); }), ZeroVjp());
  // Halfway cases to even: nearbyint under the default round-to-nearest-even mode.
  RegisterFloatUnary(r, "stablehlo.round_nearest_even",
                     UnaryEval<kFloatK>([](auto x) { return std::nearbyint(x); }), ZeroVjp());

  DefineSameType(
      r, "stablehlo.is_finite", 1, kFloatK,
      [](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
         EvalContext& ctx) -> Status {
        return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
          if constexpr (kIsFloatLike<T>) {
            Map1<T, bool>(ctx, in[0], out[0], [](T v) { return std::isfinite(Up(v)); });
            return OkStatus();
          } else {
            return UnsupportedElementType(op, in[0].element_type());
          }
        });
      },
      /*result_pred=*/true);
}

}  // namespace tlaloc::ops::ew
