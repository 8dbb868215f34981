// A registry with the built-in ops plus a few test-only ops whose syntax the printer/parser
// tests control: a pretty binary op, an op with a region and no pretty form, a multi-result op.
#pragma once

#include "ops/op_helpers.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::testing_ops {

inline const OpRegistry& TestRegistry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterBuiltinOps(*r);
    auto add = [&](const std::string& name, bool pretty) {
      if (r->Find(name)) return;
      OpDef d;
      d.name = name;
      d.infer = ops::InferSameAsOperands;
      if (pretty) {
        d.print = [](const Operation& op, OpPrinter& p) { ops::PrintSameTypeOrFunctional(op, p); };
        d.parse = ops::ParseSameTypeOrFunctional;
      }
      r->Register(std::move(d));
    };
    add("test.add", true);
    add("test.generic_add", false);
    {
      OpDef d;
      d.name = "test.apply";  // one region, applied by nobody: exercises region syntax
      d.num_regions = 1;
      d.infer = ops::InferSameAsOperands;
      r->Register(std::move(d));
    }
    {
      OpDef d;
      d.name = "test.split";  // two results of the operand's type
      d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
        TL_RETURN_IF_ERROR(ops::ExpectOperandCount(in, 1));
        return std::vector<Type>{in.operand_types[0], in.operand_types[0]};
      };
      r->Register(std::move(d));
    }
    return r;
  }();
  return *registry;
}

}  // namespace tlaloc::testing_ops
