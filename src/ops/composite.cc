// stablehlo.composite: a named op whose meaning is a function of the module, its decomposition.
//   %r = stablehlo.composite "ns.name" %a, %b {composite_attributes = {...},
//          decomposition = @f, version = 1 : i32} : (t, t) -> t
// The interpreter evaluates it by calling the decomposition (unless a fusion maps the name to a
// kernel with the same bits, interp/fusion_int8.cc); XLA receives it as written and lowers it to
// a call of the decomposition; autodiff differentiates through the decomposition (autodiff/vjp.cc).
// The verifier checks the decomposition's signature against the op (ir/verify.cc).
#include "op_areas.h"
#include "op_helpers.h"

namespace tlaloc::ops {

namespace {

Status CheckCompositeAttrs(const AttrDict& attrs) {
  const Attribute* name = FindAttr(attrs, "name");
  if (!name || name->kind() != Attribute::Kind::kString)
    return InvalidArgument("stablehlo.composite expects a string 'name' attribute");
  const Attribute* decomposition = FindAttr(attrs, "decomposition");
  if (!decomposition || decomposition->kind() != Attribute::Kind::kSymbol)
    return InvalidArgument("stablehlo.composite \"" + name->as_string() +
                           "\" expects a 'decomposition' symbol attribute (@function)");
  const Attribute* attributes = FindAttr(attrs, "composite_attributes");
  if (attributes && attributes->kind() != Attribute::Kind::kDict)
    return InvalidArgument("stablehlo.composite \"" + name->as_string() +
                           "\": 'composite_attributes' must be a dictionary");
  const Attribute* version = FindAttr(attrs, "version");
  if (version && version->kind() != Attribute::Kind::kInt)
    return InvalidArgument("stablehlo.composite \"" + name->as_string() +
                           "\": 'version' must be an integer (i32)");
  return OkStatus();
}

}  // namespace

void RegisterComposite(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.composite";
  d.traits.writes_all_results = true;  // replaced by the decomposition's results
  d.traits.replaces_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(CheckCompositeAttrs(in.attrs));
    if (!in.declared_results)
      return InvalidArgument("stablehlo.composite: the result types must be given");
    return *in.declared_results;  // checked against the decomposition by Verify()
  };
  d.eval = [](const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) -> Status {
    std::vector<Literal> args(operands.begin(), operands.end());
    TL_ASSIGN_OR_RETURN(results,
                        ctx.CallFunction(GetStringAttr(op.attrs(), "decomposition"), args));
    return OkStatus();
  };
  // As StableHLO's assembly format: $name $inputs attr-dict `:` functional-type. The defaults
  // (empty composite_attributes, version 0) are left out, as MLIR leaves them out.
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintAttribute(*FindAttr(op.attrs(), "name"));
    if (op.num_operands() > 0) p.Print(" ");
    p.PrintOperands(op.operands());
    std::vector<std::string> elided = {"name"};
    const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
    if (attributes && attributes->kind() == Attribute::Kind::kDict && attributes->as_dict().empty())
      elided.push_back("composite_attributes");
    const Attribute* version = FindAttr(op.attrs(), "version");
    if (version && version->kind() == Attribute::Kind::kInt && version->as_int() == 0)
      elided.push_back("version");
    p.PrintOptionalAttrDict(op.attrs(), elided);
    p.Print(" : ");
    p.PrintFunctionalType(op);
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Attribute name, p.ParseAttribute());
    if (name.kind() != Attribute::Kind::kString)
      return p.Error("expected the composite's name as a string after stablehlo.composite");
    op.attrs["name"] = std::move(name);
    TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
    TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
    TL_RETURN_IF_ERROR(p.ParsePunct(":"));
    std::vector<Type> inputs;
    return p.ParseFunctionalType(inputs, op.result_types);
  };
  // No rule here: autodiff differentiates the decomposition in the op's place (vjp.cc), which
  // needs the module, and the ops layer sees only the op.
  r.Register(std::move(d));
}

}  // namespace tlaloc::ops
