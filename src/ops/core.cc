// Core ops: constant, the two returns, func.call and (composite.cc) stablehlo.composite.
#include "op_areas.h"
#include "op_helpers.h"

namespace tlaloc::ops {

namespace {

void RegisterConstant(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.constant";
  d.traits.writes_all_results = true;  // replaced by the attribute
  d.traits.replaces_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 0));
    const Attribute* v = FindAttr(in.attrs, "value");
    if (!v || v->kind() != Attribute::Kind::kElements)
      return InvalidArgument("expected a 'value' attribute holding dense elements");
    return std::vector<Type>{v->as_elements().type()};
  };
  d.eval = [](const Operation& op, std::span<const Literal>, std::vector<Literal>& results,
              EvalContext&) -> Status {
    results[0] = FindAttr(op.attrs(), "value")->as_elements();  // shares the constant's bytes
    return OkStatus();
  };
  // stablehlo.constant dense<...> : tensor<...>
  d.print = [](const Operation& op, OpPrinter& p) {
    p.PrintOptionalAttrDict(op.attrs(), {"value"});
    p.Print(" ");
    p.PrintAttribute(*FindAttr(op.attrs(), "value"));
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_ASSIGN_OR_RETURN(Attribute value, p.ParseAttribute());
    if (value.kind() != Attribute::Kind::kElements)
      return p.Error("expected dense elements with a tensor type after stablehlo.constant");
    op.result_types = {value.as_elements().type()};
    op.attrs["value"] = std::move(value);
    return OkStatus();
  };
  d.vjp = [](OpBuilder&, const Operation&, const std::vector<Value>&, const std::vector<Value>&,
             const std::vector<Value>&) -> StatusOr<std::vector<Value>> {
    return std::vector<Value>{};
  };
  r.Register(std::move(d));
}

// "stablehlo.return %a, %b : t1, t2" and "return %a : t" (func.return).
void RegisterReturn(OpRegistry& r, const std::string& name) {
  OpDef d;
  d.name = name;
  d.traits.terminator = true;
  d.infer = [](const InferInput&) -> StatusOr<std::vector<Type>> { return std::vector<Type>{}; };
  d.eval = [](const Operation&, std::span<const Literal>, std::vector<Literal>&,
              EvalContext&) -> Status { return OkStatus(); };
  d.print = [](const Operation& op, OpPrinter& p) {
    if (op.num_operands() == 0) return;
    p.Print(" ");
    p.PrintOperands(op.operands());
    p.Print(" : ");
    for (int i = 0; i < op.num_operands(); ++i) {
      if (i) p.Print(", ");
      p.PrintType(op.operand(i).type());
    }
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
    if (op.operands.empty()) return OkStatus();
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (i) TL_RETURN_IF_ERROR(p.ParsePunct(","));
      TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
      (void)t;  // operand types come from the operands themselves
    }
    return OkStatus();
  };
  r.Register(std::move(d));
}

// "call @f(%a, %b) : (t, t) -> t"
void RegisterCall(OpRegistry& r) {
  OpDef d;
  d.name = "func.call";
  d.traits.writes_all_results = true;  // replaced by the callee
  d.traits.replaces_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    const Attribute* callee = FindAttr(in.attrs, "callee");
    if (!callee || callee->kind() != Attribute::Kind::kSymbol)
      return InvalidArgument("expected a 'callee' symbol attribute");
    if (!in.declared_results) return InvalidArgument("the callee's result types must be given");
    return *in.declared_results;  // checked against the callee by Verify()
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    std::vector<Literal> args(operands.begin(), operands.end());
    TL_ASSIGN_OR_RETURN(results, ctx.CallFunction(GetStringAttr(op.attrs(), "callee"), args));
    return OkStatus();
  };
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintAttribute(*FindAttr(op.attrs(), "callee"));  // quotes names like @"<lambda>"
    p.Print("(");
    p.PrintOperands(op.operands());
    p.Print(")");
    p.PrintOptionalAttrDict(op.attrs(), {"callee"});
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Attribute callee, p.ParseAttribute());
    if (callee.kind() != Attribute::Kind::kSymbol) return p.Error("expected @callee");
    op.attrs["callee"] = callee;
    TL_RETURN_IF_ERROR(p.ParsePunct("("));
    TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
    TL_RETURN_IF_ERROR(p.ParsePunct(")"));
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    std::vector<Type> inputs;
    return p.ParseFunctionalType(inputs, op.result_types);
  };
  r.Register(std::move(d));
}

}  // namespace

void RegisterCoreOps(OpRegistry& r) {
  RegisterConstant(r);
  RegisterReturn(r, "stablehlo.return");
  RegisterReturn(r, "func.return");
  RegisterReturn(r, "sdy.return");  // ends sdy.manual_computation's body (collective_manual.cc)
  RegisterCall(r);
  RegisterComposite(r);
}

}  // namespace tlaloc::ops
