// Helpers for the elementwise op tests: run one op on literals, read results back.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::ewtest {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Builds @main(args...) -> op(args) and interprets it; the error of building or running.
inline StatusOr<std::vector<Literal>> RunOp(const std::string& name, std::vector<Literal> args,
                                            AttrDict attrs = {},
                                            std::optional<std::vector<Type>> result = {}) {
  Module m("t");
  std::vector<Type> arg_types;
  for (const Literal& a : args) arg_types.push_back(Type(a.type()));
  Function* fn = m.AddFunction("main", arg_types, {});
  OpBuilder b(&fn->entry(), &m);
  std::vector<Value> outs = b.Create(name, fn->entry().arguments(), std::move(attrs), result);
  if (!b.ok()) return b.status();
  std::vector<Type> rt;
  for (Value v : outs) rt.push_back(v.type());
  fn->set_result_types(rt);
  b.Create("func.return", outs);
  if (!b.ok()) return b.status();
  TL_RETURN_IF_ERROR(Verify(m));
  return Interpret(m, "main", std::move(args));
}

// Runs a one-result op and returns the result; fails the test on error.
inline Literal Run1(const std::string& name, std::vector<Literal> args, AttrDict attrs = {},
                    std::optional<std::vector<Type>> result = {}) {
  auto r = RunOp(name, std::move(args), std::move(attrs), std::move(result));
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  if (!r.ok() || r->empty()) return Literal();
  return (*r)[0];
}

inline Literal Doubles(ElementType et, const std::vector<double>& v) {
  return Literal::FromDoubles(et, {static_cast<int64_t>(v.size())}, v);
}

inline std::vector<double> AsDoubles(const Literal& l) {
  std::vector<double> out;
  for (int64_t i = 0; i < l.num_elements(); ++i) out.push_back(l.GetAsDouble(i));
  return out;
}

template <typename T>
std::vector<T> Elems(const Literal& l) {
  auto s = l.span<T>();
  return std::vector<T>(s.begin(), s.end());
}

// Same value, NaN matching NaN and the sign of zero checked.
inline bool SameDouble(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

inline void ExpectDoubles(const Literal& l, const std::vector<double>& want,
                          const std::string& what) {
  std::vector<double> got = AsDoubles(l);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(SameDouble(got[i], want[i]))
        << what << " element " << i << ": got " << got[i] << ", want " << want[i];
}

}  // namespace tlaloc::ewtest
