// Helpers for the reduction and control-flow op tests: region bodies built with OpBuilder and a
// one-op @main run through the interpreter.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::rdtest {

inline Type Scalar(ElementType et) { return Type(TensorType(et, {})); }

using BodyFn = std::function<std::vector<Value>(OpBuilder&, const std::vector<Value>&)>;

// A one-block region with arguments of `arg_types` whose body `fn` builds; fn's values are
// returned with stablehlo.return.
inline std::unique_ptr<Region> MakeRegion(const std::vector<Type>& arg_types, const BodyFn& fn) {
  auto region = std::make_unique<Region>();
  Block& block = region->AddBlock();
  for (const Type& t : arg_types) block.AddArgument(t);
  OpBuilder b(&block);
  std::vector<Value> out = fn(b, block.arguments());
  b.Create("stablehlo.return", out);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return region;
}

// `%r = op %a0, %a1; return %r` over scalars of `et`.
inline std::unique_ptr<Region> BinaryRegion(const std::string& op, ElementType et) {
  return MakeRegion({Scalar(et), Scalar(et)}, [&](OpBuilder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.CreateOne(op, {a[0], a[1]})};
  });
}

// `%r = compare DIR, %a0, %a1 [, TYPE]; return %r` for a comparator of `n` operands.
inline std::unique_ptr<Region> CompareRegion(const std::string& dir, const std::string& type,
                                             const std::vector<ElementType>& ets, int lhs = 0) {
  std::vector<Type> args;
  for (ElementType et : ets) {
    args.push_back(Scalar(et));
    args.push_back(Scalar(et));
  }
  return MakeRegion(args, [&](OpBuilder& b, const std::vector<Value>& a) {
    AttrDict attrs{{"comparison_direction", Attribute::Enum(dir, "comparison_direction")}};
    if (!type.empty()) attrs["compare_type"] = Attribute::Enum(type, "comparison_type");
    return std::vector<Value>{
        b.CreateOne("stablehlo.compare", {a[2 * lhs], a[2 * lhs + 1]}, attrs)};
  });
}

inline bool HasOps(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (!OpRegistry::Global().Find(n)) return false;
  return true;
}

// Builds @main(args...) -> op(args) and runs it.
inline StatusOr<std::vector<Literal>> RunOp(const std::string& name, std::vector<Literal> args,
                                            AttrDict attrs,
                                            std::optional<std::vector<Type>> result = {},
                                            std::vector<std::unique_ptr<Region>> regions = {},
                                            InterpreterOptions options = {}) {
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
  return Interpret(m, "main", std::move(args), nullptr, std::move(options));
}

template <typename T>
std::vector<T> Values(const Literal& l) {
  auto s = l.span<T>();
  return std::vector<T>(s.begin(), s.end());
}

// Deterministic pseudo-random values in [-range, range] (a small LCG; tests need variety, not
// quality).
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float range = 4.0f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.0f - 1.0f) * range;
  }
  return v;
}

// dot_general's dimension numbers: batching and contracting dimensions of each side.
inline AttrDict DotAttrs(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                         std::vector<int64_t> rc) {
  return {{"dot_dimension_numbers",
           Attribute::Struct("stablehlo.dot",
                             {{"lhs_batching_dimensions", Attribute::IntArray(lb)},
                              {"rhs_batching_dimensions", Attribute::IntArray(rb)},
                              {"lhs_contracting_dimensions", Attribute::IntArray(lc)},
                              {"rhs_contracting_dimensions", Attribute::IntArray(rc)}})}};
}

}  // namespace tlaloc::rdtest
