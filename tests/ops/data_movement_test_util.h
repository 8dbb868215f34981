// Helpers for the data-movement op tests: build a one-op function and run it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::dmtest {

inline TensorType T(ElementType et, std::vector<int64_t> dims) { return {et, std::move(dims)}; }

// Builds @main(args...) -> op(args) with the given attributes and declared result types (when
// `result` is set), runs it, and returns the results (or the error).
inline StatusOr<std::vector<Literal>> RunOp(const std::string& name, std::vector<Literal> args,
                                            AttrDict attrs,
                                            std::optional<std::vector<Type>> result = {},
                                            std::vector<std::unique_ptr<Region>> regions = {}) {
  Module m("t");
  std::vector<Type> arg_types;
  for (const Literal& a : args) arg_types.push_back(Type(a.type()));
  Function* fn = m.AddFunction("main", arg_types, {});
  OpBuilder b(&fn->entry(), &m);
  std::vector<Value> outs =
      b.Create(name, fn->entry().arguments(), std::move(attrs), result, std::move(regions));
  if (!b.ok()) return b.status();
  std::vector<Type> rt;
  for (Value v : outs) rt.push_back(v.type());
  fn->set_result_types(rt);
  b.Create("func.return", outs);
  if (!b.ok()) return b.status();
  return Interpret(m, "main", std::move(args));
}

template <typename T>
std::vector<T> Values(const Literal& l) {
  auto s = l.span<T>();
  return std::vector<T>(s.begin(), s.end());
}

inline std::vector<int64_t> Iota(int64_t n, int64_t start = 0) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

}  // namespace tlaloc::dmtest
