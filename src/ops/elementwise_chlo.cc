// The elementwise chlo ops the conformance programs use. XLA expands these composites into
// StableHLO; the interpreter evaluates them directly, in double with libm (or the short routines
// below where libm has none), then rounds to the element type.
//   chlo.acosh %0 : tensor<20x20xf16> -> tensor<20x20xf16>
//   chlo.next_after %0, %1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
#include <map>
#include <numbers>

#include "elementwise_kernels.h"

namespace tlaloc::ops::ew {

namespace {

using Values = std::vector<Value>;
constexpr double kPi = std::numbers::pi;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double LogGamma(double x) {
  int sign;
  return lgamma_r(x, &sign);  // lgamma itself writes the global signgam: a data race in threads
}

// psi(x): reflection for negative x, the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 20,
// then the asymptotic series. Poles (0, -1, -2, ...) give NaN.
double Digamma(double x) {
  if (std::isnan(x) || x == kInf) return x;
  if (x <= 0 && x == std::floor(x)) return kNaN;
  if (x < 0) {
    // psi(1 - x) - psi(x) = pi / tan(pi x); tan has period 1, so reduce x first for accuracy.
    double frac = x - std::floor(x);
    return Digamma(1 - x) - kPi / std::tan(kPi * frac);
  }
  double result = 0;
  while (x < 20) {
    result -= 1 / x;
    x += 1;
  }
  // -sum B_2k / (2k x^2k) for k = 1..6; the first term left out is below 1e-18 at x >= 20.
  const double f = 1 / (x * x);
  const double series =
      f *
      (1.0 / 12 -
       f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * (691.0 / 32760))))));
  return result + std::log(x) - 0.5 / x - series;
}

// erf^-1(y): a rough closed-form start (Winitzki's approximation), then Halley steps on
// erf(x) - y, using erfc near |y| = 1 where erf(x) - y would cancel.
double ErfInv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNaN;
  if (y == 1) return kInf;
  if (y == -1) return -kInf;
  if (y == 0) return y;
  const double ay = std::fabs(y);
  const double a = 0.147;
  const double ln = std::log((1 - ay) * (1 + ay));
  const double t = 2 / (kPi * a) + ln / 2;
  double x = std::sqrt(std::sqrt(t * t - ln / a) - t);
  for (int i = 0; i < 5; ++i) {
    const double err = ay < 0.5 ? std::erf(x) - ay : (1 - ay) - std::erfc(x);
    const double deriv = 2 / std::sqrt(kPi) * std::exp(-x * x);
    if (deriv == 0) break;
    const double step = err / (deriv + x * err);
    x -= step;
    if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
  }
  return std::copysign(x, y);
}

// Exponentially scaled modified Bessel function of order one: exp(-|x|) I1(x), an odd function.
double BesselI1e(double x) {
  if (std::isnan(x) || x == 0) return x;
  const double ax = std::fabs(x);
  double r;
  if (ax == kInf) {
    r = 0;
  } else if (ax <= 500) {
    r = std::cyl_bessel_i(1.0, ax) * std::exp(-ax);
  } else {
    // Hankel's asymptotic expansion; exp(x) I1(x) itself would overflow.
    const double mu = 4;  // 4 nu^2
    double term = 1, sum = 1;
    for (int k = 1; k <= 12; ++k) {
      const double odd = 2.0 * k - 1;
      term *= -(mu - odd * odd) / (k * 8 * ax);
      sum += term;
    }
    r = sum / std::sqrt(2 * kPi * ax);
  }
  return std::copysign(r, x);
}

// Hurwitz zeta(s, q) = sum_k (k + q)^-s for s > 1: nine terms summed directly, then the
// Euler-Maclaurin tail with Bernoulli-number corrections B_2j / (2j)!.
double Zeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q)) return kNaN;
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;  // a pole of the series
    if (s != std::floor(s)) return kNaN;  // (k + q)^-s is not real for some k
  }
  constexpr double kInvCoef[] = {12.0,
                                 -720.0,
                                 30240.0,
                                 -1209600.0,
                                 47900160.0,
                                 -1.8924375803183791606e9,
                                 7.47242496e10,
                                 -2.950130727918164224e12,
                                 1.1646782814350067249e14,
                                 -4.5979787224074726105e15,
                                 1.8152105401943546773e17,
                                 -7.1661652561756670113e18};
  double sum = 0;
  double a = q;
  for (int k = 0; k < 9; ++k, a += 1) sum += std::pow(a, -s);
  const double w = a;
  sum += std::pow(w, 1 - s) / (s - 1) + 0.5 * std::pow(w, -s);
  double fac = s * std::pow(w, -s - 1);  // s (s+1) ... (s+2j-2) w^(-s-2j+1)
  double k = s;
  for (double inv : kInvCoef) {
    const double term = fac / inv;
    sum += term;
    if (std::fabs(term) <= 1e-17 * std::fabs(sum)) break;
    fac *= (k + 1) * (k + 2) / (w * w);
    k += 2;
  }
  return sum;
}

// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for integer n >= 1; digamma for n = 0.
double Polygamma(double n, double x) {
  if (std::isnan(n) || std::isnan(x) || n < 0 || n != std::floor(n)) return kNaN;
  if (n == 0) return Digamma(x);
  const double sign = std::fmod(n, 2) == 0 ? -1 : 1;
  return sign * std::exp(LogGamma(n + 1)) * Zeta(n + 1, x);
}

double BesselI0e(double x) {
  if (std::isnan(x)) return x;
  const double ax = std::fabs(x);
  if (ax == kInf) return 0;
  if (ax <= 500) return std::cyl_bessel_i(0.0, ax) * std::exp(-ax);
  double term = 1, sum = 1;  // Hankel's expansion with 4 nu^2 = 0
  for (int k = 1; k <= 12; ++k) {
    const double odd = 2.0 * k - 1;
    term *= odd * odd / (k * 8 * ax);
    sum += term;
  }
  return sum / std::sqrt(2 * kPi * ax);
}

// The next representable value after x in the direction of y, on the element type's bits.
template <typename T>
T NextAfter(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(x, y);
  } else {
    const float fx = x.f(), fy = y.f();
    if (std::isnan(fx)) return x;
    if (std::isnan(fy)) return y;
    if (fx == fy) return y;
    const uint16_t sign = 0x8000;
    if (fx == 0) return T::FromBits(static_cast<uint16_t>((y.bits & sign) | 1));
    const bool away_from_zero = (fx < fy) == (fx > 0);
    return T::FromBits(static_cast<uint16_t>(away_from_zero ? x.bits + 1 : x.bits - 1));
  }
}

// "%a, %b {attrs} : t, t -> t"
void PrintChlo(const Operation& op, OpPrinter& p) {
  p.Print(" ");
  p.PrintOperands(op.operands());
  p.PrintOptionalAttrDict(op.attrs(), {});
  p.Print(" : ");
  for (int i = 0; i < op.num_operands(); ++i) {
    if (i) p.Print(", ");
    p.PrintType(op.operand(i).type());
  }
  p.Print(" -> ");
  p.PrintType(op.result(0).type());
}

Status ParseChlo(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i) TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
    if (!(t == op.operands[i].type()))
      return p.Error("operand " + std::to_string(i) + " has type " +
                     op.operands[i].type().ToString() + ", but the signature says " + t.ToString());
  }
  TL_RETURN_IF_ERROR(p.ParsePunct("->"));
  TL_ASSIGN_OR_RETURN(Type r, p.ParseType());
  op.result_types = {r};
  return OkStatus();
}

OpDef& DefineChlo(OpRegistry& r, const std::string& name, int num_operands, EvalFn eval,
                  bool result_pred = false) {
  OpDef& d = DefineSameType(r, name, num_operands, kFloatK, std::move(eval), result_pred);
  d.print = PrintChlo;
  d.parse = ParseChlo;
  return d;
}

OpDef& DefineChloUnary(OpRegistry& r, const std::string& name, double (*f)(double)) {
  return DefineChlo(r, name, 1,
                    [f](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
                        EvalContext& ctx) -> Status {
                      return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
                        if constexpr (kIsFloatLike<T>) {
                          Map1<T, T>(ctx, in[0], out[0],
                                     [f](T v) { return FromDouble<T>(f(ToDouble(v))); });
                          return OkStatus();
                        } else {
                          return UnsupportedElementType(op, in[0].element_type());
                        }
                      });
                    });
}

void DefineChloClassify(OpRegistry& r, const std::string& name, bool (*f)(double)) {
  DefineChlo(
      r, name, 1,
      [f](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
          EvalContext& ctx) -> Status {
        return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
          if constexpr (kIsFloatLike<T>) {
            Map1<T, bool>(ctx, in[0], out[0], [f](T v) { return f(ToDouble(v)); });
            return OkStatus();
          } else {
            return UnsupportedElementType(op, in[0].element_type());
          }
        });
      },
      /*result_pred=*/true);
}

void DefineChloBinary(OpRegistry& r, const std::string& name, double (*f)(double, double)) {
  DefineChlo(r, name, 2,
             [f](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
                 EvalContext& ctx) -> Status {
               return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
                 if constexpr (kIsFloatLike<T>) {
                   Map2<T, T, T>(ctx, in[0], in[1], out[0], [f](T a, T b) {
                     return FromDouble<T>(f(ToDouble(a), ToDouble(b)));
                   });
                   return OkStatus();
                 } else {
                   return UnsupportedElementType(op, in[0].element_type());
                 }
               });
             });
}

// VJP rules: the cotangent times a derivative built from the operand x and the result y.
Value Square(OpBuilder& b, Value x) { return hlo::Mul(b, x, x); }
// c0 + c2 * x^2
Value Quadratic(OpBuilder& b, Value x, double c0, double c2) {
  return hlo::Add(b, hlo::SplatLike(b, x, c0), hlo::Mul(b, hlo::SplatLike(b, x, c2), Square(b, x)));
}

using DerivFn = Value (*)(OpBuilder& b, Value x, Value y);
VjpFn ChloVjp(DerivFn deriv) {
  return [deriv](OpBuilder& b, const Operation&, const Values& x, const Values& y,
                 const Values& cts) -> StatusOr<Values> {
    Value g = hlo::Mul(b, cts[0], deriv(b, x[0], y[0]));
    TL_RETURN_IF_ERROR(b.status());
    return Values{g};
  };
}

void AddChloVjps(const std::map<std::string, OpDef*>& defs) {
  auto set = [&](const char* name, DerivFn deriv) { defs.at(name)->vjp = ChloVjp(deriv); };
  set("chlo.acos", [](OpBuilder& b, Value x, Value) {
    return hlo::Neg(b, hlo::Rsqrt(b, Quadratic(b, x, 1, -1)));
  });
  set("chlo.acosh",
      [](OpBuilder& b, Value x, Value) { return hlo::Rsqrt(b, Quadratic(b, x, -1, 1)); });
  set("chlo.asin",
      [](OpBuilder& b, Value x, Value) { return hlo::Rsqrt(b, Quadratic(b, x, 1, -1)); });
  set("chlo.asinh",
      [](OpBuilder& b, Value x, Value) { return hlo::Rsqrt(b, Quadratic(b, x, 1, 1)); });
  set("chlo.atan", [](OpBuilder& b, Value x, Value) {
    return hlo::Div(b, hlo::SplatLike(b, x, 1), Quadratic(b, x, 1, 1));
  });
  set("chlo.atanh", [](OpBuilder& b, Value x, Value) {
    return hlo::Div(b, hlo::SplatLike(b, x, 1), Quadratic(b, x, 1, -1));
  });
  set("chlo.cosh", [](OpBuilder& b, Value x, Value) { return hlo::Sinh(b, x); });
  set("chlo.sinh", [](OpBuilder& b, Value x, Value) { return hlo::Cosh(b, x); });
  set("chlo.tan", [](OpBuilder& b, Value, Value y) { return Quadratic(b, y, 1, 1); });
  set("chlo.erf", [](OpBuilder& b, Value x, Value) {
    Value e = hlo::Exp(b, hlo::Neg(b, Square(b, x)));
    return hlo::Mul(b, hlo::SplatLike(b, x, 2 / std::sqrt(kPi)), e);
  });
  set("chlo.erfc", [](OpBuilder& b, Value x, Value) {
    Value e = hlo::Exp(b, hlo::Neg(b, Square(b, x)));
    return hlo::Mul(b, hlo::SplatLike(b, x, -2 / std::sqrt(kPi)), e);
  });
  set("chlo.erf_inv", [](OpBuilder& b, Value, Value y) {
    Value e = hlo::Exp(b, Square(b, y));
    return hlo::Mul(b, hlo::SplatLike(b, y, std::sqrt(kPi) / 2), e);
  });
  set("chlo.lgamma", [](OpBuilder& b, Value x, Value) { return hlo::Digamma(b, x); });
  set("chlo.digamma",
      [](OpBuilder& b, Value x, Value) { return hlo::Polygamma(b, hlo::SplatLike(b, x, 1), x); });
}

}  // namespace

void RegisterChloOps(OpRegistry& r) {
  std::map<std::string, OpDef*> defs;
  auto unary = [&](const char* name, double (*f)(double)) {
    defs[name] = &DefineChloUnary(r, name, f);
  };
  unary("chlo.acos", [](double x) { return std::acos(x); });
  unary("chlo.acosh", [](double x) { return std::acosh(x); });
  unary("chlo.asin", [](double x) { return std::asin(x); });
  unary("chlo.asinh", [](double x) { return std::asinh(x); });
  unary("chlo.atan", [](double x) { return std::atan(x); });
  unary("chlo.atanh", [](double x) { return std::atanh(x); });
  unary("chlo.cosh", [](double x) { return std::cosh(x); });
  unary("chlo.sinh", [](double x) { return std::sinh(x); });
  unary("chlo.tan", [](double x) { return std::tan(x); });
  unary("chlo.erf", [](double x) { return std::erf(x); });
  unary("chlo.erfc", [](double x) { return std::erfc(x); });
  unary("chlo.erf_inv", ErfInv);
  unary("chlo.lgamma", LogGamma);
  unary("chlo.digamma", Digamma);
  unary("chlo.bessel_i1e", BesselI1e);
  unary("chlo.bessel_i0e", BesselI0e);
  DefineChloBinary(r, "chlo.zeta", Zeta);
  DefineChloBinary(r, "chlo.polygamma", Polygamma);
  AddChloVjps(defs);
  DefineChloClassify(r, "chlo.is_inf", [](double x) { return std::isinf(x); });
  DefineChloClassify(r, "chlo.is_pos_inf", [](double x) { return x == kInf; });
  DefineChloClassify(r, "chlo.is_neg_inf", [](double x) { return x == -kInf; });
  DefineChlo(r, "chlo.next_after", 2,
             [](const Operation& op, std::span<const Literal> in, std::vector<Literal>& out,
                EvalContext& ctx) -> Status {
               return DispatchElementType(in[0].element_type(), [&]<typename T>() -> Status {
                 if constexpr (kIsFloatLike<T>) {
                   Map2<T, T, T>(ctx, in[0], in[1], out[0],
                                 [](T x, T y) { return NextAfter(x, y); });
                   return OkStatus();
                 } else {
                   return UnsupportedElementType(op, in[0].element_type());
                 }
               });
             });
}

}  // namespace tlaloc::ops::ew
