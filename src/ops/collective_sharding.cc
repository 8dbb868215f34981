// sdy.sharding_constraint: Shardy's annotation of the sharding a value should have at one
// point of a global program (ir/sharding.h). On one device it is the identity, and so is its
// gradient; XLA's partitioner reads it.
#include "op_areas.h"
#include "op_helpers.h"
#include "sdy_syntax.h"
#include "tlaloc/ir/sharding.h"

namespace tlaloc::ops {

namespace {

StatusOr<Sharding> ShardingOf(const AttrDict& attrs) {
  const Attribute* a = FindAttr(attrs, "sharding");
  if (!a || a->kind() != Attribute::Kind::kOpaque)
    return InvalidArgument("expected a 'sharding' attribute (#sdy.sharding<...>)");
  return Sharding::FromSdy(a->as_string());
}

}  // namespace

Status ParseSdyAxisSet(OpParser& p, std::vector<std::string>& axes) {
  TL_RETURN_IF_ERROR(p.ParsePunct("{"));
  if (p.ParseOptionalPunct("}")) return OkStatus();
  do {
    TL_ASSIGN_OR_RETURN(Attribute a, p.ParseAttribute());
    if (a.kind() != Attribute::Kind::kString) return p.Error("expected a quoted axis name");
    axes.push_back(a.as_string());
  } while (p.ParseOptionalPunct(","));
  return p.ParsePunct("}");
}

StatusOr<Sharding> ParseSdyShardingBody(OpParser& p) {
  Sharding s;
  TL_RETURN_IF_ERROR(p.ParsePunct("<"));
  TL_ASSIGN_OR_RETURN(Attribute mesh, p.ParseAttribute());
  if (mesh.kind() != Attribute::Kind::kSymbol) return p.Error("expected a mesh symbol (@name)");
  s.mesh = mesh.as_string();
  TL_RETURN_IF_ERROR(p.ParsePunct(","));
  TL_RETURN_IF_ERROR(p.ParsePunct("["));
  if (!p.ParseOptionalPunct("]")) {
    do {
      s.dims.emplace_back();
      TL_RETURN_IF_ERROR(ParseSdyAxisSet(p, s.dims.back()));
    } while (p.ParseOptionalPunct(","));
    TL_RETURN_IF_ERROR(p.ParsePunct("]"));
  }
  if (p.ParseOptionalPunct(",")) {
    TL_RETURN_IF_ERROR(p.ParseKeyword("replicated"));
    TL_RETURN_IF_ERROR(p.ParsePunct("="));
    TL_RETURN_IF_ERROR(ParseSdyAxisSet(p, s.replicated));
  }
  TL_RETURN_IF_ERROR(p.ParsePunct(">"));
  return s;
}

void RegisterShardingOps(OpRegistry& r) {
  OpDef d;
  d.name = "sdy.sharding_constraint";
  d.traits.writes_all_results = true;  // replaced by the operand
  d.traits.replaces_results = true;
  d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
    TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
    TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
    TL_ASSIGN_OR_RETURN(Sharding s, ShardingOf(in.attrs));
    if (static_cast<int64_t>(s.dims.size()) != in.operand_types[0].tensor.rank())
      return InvalidArgument("the sharding " + s.ToSdy() + " names " +
                             std::to_string(s.dims.size()) + " dimension(s), the operand is " +
                             in.operand_types[0].ToString());
    return std::vector<Type>{in.operand_types[0]};
  };
  d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext&) -> Status {
    results[0] = operands[0];
    return OkStatus();
  };
  d.vjp = [](OpBuilder&, const Operation&, const std::vector<Value>&, const std::vector<Value>&,
             const std::vector<Value>& cts) -> StatusOr<std::vector<Value>> {
    return std::vector<Value>{cts[0]};
  };
  // sdy.sharding_constraint %0 <@mesh, [{}, {"model"}]> : tensor<8x16xf32>
  d.print = [](const Operation& op, OpPrinter& p) {
    p.Print(" ");
    p.PrintOperand(op.operand(0));
    auto s = ShardingOf(op.attrs());
    p.Print(" ");
    if (s.ok())
      p.Print(s->ToSdyBody());
    else
      p.PrintAttribute(*FindAttr(op.attrs(), "sharding"));
    p.PrintOptionalAttrDict(op.attrs(), {"sharding"});
    p.Print(" : ");
    p.PrintType(op.result(0).type());
  };
  d.parse = [](OpParser& p, ParsedOp& op) -> Status {
    TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
    op.operands = {v};
    TL_ASSIGN_OR_RETURN(Sharding s, ParseSdyShardingBody(p));
    op.attrs["sharding"] = Attribute::Opaque(s.ToSdy());
    return ParseAttrDictAndResultType(p, op);
  };
  r.Register(std::move(d));
}

}  // namespace tlaloc::ops
