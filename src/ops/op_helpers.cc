#include "op_helpers.h"

namespace tlaloc::ops {

Status ExpectOperandCount(const InferInput& in, size_t n) {
  if (in.operand_types.size() != n)
    return InvalidArgument("expected " + std::to_string(n) + " operand(s), got " +
                           std::to_string(in.operand_types.size()));
  return OkStatus();
}

Status ExpectTensorOperands(const InferInput& in) {
  for (size_t i = 0; i < in.operand_types.size(); ++i)
    if (!in.operand_types[i].is_tensor())
      return InvalidArgument("operand " + std::to_string(i) + " must be a tensor, got " +
                             in.operand_types[i].ToString());
  return OkStatus();
}

Status ExpectSameOperandTypes(const InferInput& in) {
  for (size_t i = 1; i < in.operand_types.size(); ++i)
    if (!(in.operand_types[i] == in.operand_types[0]))
      return InvalidArgument("operands must have the same type, got " +
                             in.operand_types[0].ToString() + " and " +
                             in.operand_types[i].ToString());
  return OkStatus();
}

StatusOr<std::vector<Type>> DeclaredResults(const InferInput& in, size_t count) {
  if (!in.declared_results)
    return InvalidArgument("the result type cannot be inferred; it must be given");
  if (in.declared_results->size() != count)
    return InvalidArgument("expected " + std::to_string(count) + " result(s), got " +
                           std::to_string(in.declared_results->size()));
  return *in.declared_results;
}

StatusOr<std::vector<Type>> InferSameAsOperands(const InferInput& in) {
  if (in.operand_types.empty()) return InvalidArgument("expected at least one operand");
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  TL_RETURN_IF_ERROR(ExpectSameOperandTypes(in));
  return std::vector<Type>{in.operand_types[0]};
}

void PrintSameTypeOrFunctional(const Operation& op, OpPrinter& p,
                               const std::vector<std::string>& elided) {
  p.Print(" ");
  p.PrintOperands(op.operands());
  p.PrintOptionalAttrDict(op.attrs(), elided);
  p.Print(" : ");
  bool same = op.num_results() == 1;
  for (const Value& v : op.operands()) same = same && v.type() == op.result(0).type();
  if (same) {
    p.PrintType(op.result(0).type());
  } else {
    p.PrintFunctionalType(op);
  }
}

Status ParseAttrDictAndResultType(OpParser& p, ParsedOp& op) {
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
  op.result_types = {t};
  return OkStatus();
}

Status ParseSameTypeOrFunctional(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  if (p.Peek("(")) {
    std::vector<Type> inputs;
    TL_RETURN_IF_ERROR(p.ParseFunctionalType(inputs, op.result_types));
    if (inputs.size() != op.operands.size())
      return p.Error("expected " + std::to_string(op.operands.size()) +
                     " operand types in the functional type");
    return OkStatus();
  }
  TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
  op.result_types = {t};
  return OkStatus();
}

void PrintFunctional(const Operation& op, OpPrinter& p, const std::vector<std::string>& elided) {
  p.Print(" ");
  p.PrintOperands(op.operands());
  p.PrintOptionalAttrDict(op.attrs(), elided);
  p.Print(" : ");
  p.PrintFunctionalType(op);
}

std::vector<int64_t> IntList(const Operation& op, const std::string& name) {
  return GetIntArrayAttr(op.attrs(), name);
}

Status ReadIntListField(const Attribute& strukt, const std::string& attr_name, const char* field,
                        std::vector<int64_t>& out) {
  const Attribute* f = FindAttr(strukt.as_dict(), field);
  if (!f) return OkStatus();
  if (f->kind() != Attribute::Kind::kIntArray)
    return InvalidArgument(attr_name + " field '" + field + "' must be an integer list");
  out = f->as_int_array();
  return OkStatus();
}

}  // namespace tlaloc::ops
