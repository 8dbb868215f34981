// Shared pieces of op definitions: common shape rules and the common pretty syntaxes.
#pragma once

#include <string>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

// "expected N operands" style checks; the op name is added by the caller's context.
Status ExpectOperandCount(const InferInput& in, size_t n);
Status ExpectTensorOperands(const InferInput& in);
// Error unless all operand tensor types are equal.
Status ExpectSameOperandTypes(const InferInput& in);
// The declared result types, or an error saying this op needs them spelled out.
StatusOr<std::vector<Type>> DeclaredResults(const InferInput& in, size_t count);
// Shape rule: one result of operand 0's type, all operands of the same type.
StatusOr<std::vector<Type>> InferSameAsOperands(const InferInput& in);

// Pretty syntax "op %a, %b {attrs} : t" when every operand and the result share a type, else
// "op %a, %b {attrs} : (t1, t2) -> t3". `elided` attributes are printed by the op itself.
void PrintSameTypeOrFunctional(const Operation& op, OpPrinter& p,
                               const std::vector<std::string>& elided = {});
Status ParseSameTypeOrFunctional(OpParser& p, ParsedOp& op);
// The tail "{attrs} : t" of a pretty syntax whose one result has type t.
Status ParseAttrDictAndResultType(OpParser& p, ParsedOp& op);
// Pretty syntax "op %a {attrs} : (t) -> t" (always functional type).
void PrintFunctional(const Operation& op, OpPrinter& p,
                     const std::vector<std::string>& elided = {});

// "[1, 2]" integer list of an attribute (empty when absent).
std::vector<int64_t> IntList(const Operation& op, const std::string& name);

// Reads the integer-list field `field` of the struct attribute `attr_name` (a dimension-numbers
// attribute such as #stablehlo.dot<...>) into `out`; absent lists are empty. An error names the
// attribute and field when the field is not an integer list.
Status ReadIntListField(const Attribute& strukt, const std::string& attr_name, const char* field,
                        std::vector<int64_t>& out);

}  // namespace tlaloc::ops
