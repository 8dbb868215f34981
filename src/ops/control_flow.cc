// Control flow and opaque calls: stablehlo.while, case, if, optimization_barrier, after_all,
// custom_call; rng_bit_generator lives in control_flow_rng.cc.
#include "op_areas.h"
#include "op_helpers.h"
#include "reduction_kernels.h"

namespace tlaloc::ops {

void RegisterRngOps(OpRegistry& r);  // control_flow_rng.cc

namespace {

std::string TypeListString(const std::vector<Type>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].ToString();
  return s + ")";
}

Status CheckRegionSignature(const Region& region, const std::vector<Type>& args,
                            const std::string& what) {
  if (region.empty()) return InvalidArgument(what + " is empty");
  std::vector<Type> got = region.front().argument_types();
  if (got != args)
    return InvalidArgument(what + " takes " + TypeListString(got) + ", expected " +
                           TypeListString(args));
  return OkStatus();
}

bool ScalarPredTrue(const Literal& l) {
  return l.element_type() == ElementType::kPred && l.num_elements() == 1 && l.span<bool>()[0];
}

// ---- while -----------------------------------------------------------------------------------

StatusOr<std::vector<Type>> InferWhile(const InferInput& in) {
  if (in.regions.size() == 2 && !in.regions[0]->empty() && !in.regions[1]->empty()) {
    TL_RETURN_IF_ERROR(CheckRegionSignature(*in.regions[0], in.operand_types, "the cond region"));
    TL_RETURN_IF_ERROR(CheckRegionSignature(*in.regions[1], in.operand_types, "the body region"));
    if (in.regions[0]->front().terminator()) {
      TL_ASSIGN_OR_RETURN(std::vector<Type> c, RegionReturnTypes(*in.regions[0]));
      if (c.size() != 1 || !(c[0] == Type(TensorType(ElementType::kPred, {}))))
        return InvalidArgument("the cond region must return one tensor<i1>, returns " +
                               TypeListString(c));
    }
    if (in.regions[1]->front().terminator()) {
      TL_ASSIGN_OR_RETURN(std::vector<Type> b, RegionReturnTypes(*in.regions[1]));
      if (b != in.operand_types)
        return InvalidArgument("the body region returns " + TypeListString(b) + ", expected " +
                               TypeListString(in.operand_types));
    }
  }
  return in.operand_types;
}

Status EvalWhile(const Operation& op, std::span<const Literal> operands,
                 std::vector<Literal>& results, EvalContext& ctx) {
  std::vector<Literal> state(operands.begin(), operands.end());
  while (true) {
    TL_ASSIGN_OR_RETURN(std::vector<Literal> c, ctx.RunRegion(op.region(0), state));
    if (c.size() != 1) return InvalidArgument("the cond region must return one value");
    if (!ScalarPredTrue(c[0])) break;
    TL_ASSIGN_OR_RETURN(state, ctx.RunRegion(op.region(1), std::move(state)));
    if (state.size() != operands.size())
      return InvalidArgument("the body region returned " + std::to_string(state.size()) +
                             " values, expected " + std::to_string(operands.size()));
  }
  results = std::move(state);
  return OkStatus();
}

// Pretty form: "(%iterArg = %0, ...) : t, ... cond { ... } do { ... }". The iteration
// arguments are the block arguments of both regions; the printer names sibling regions' block
// arguments alike, so printing the cond region's names declares the body's too (the
// round-trip tests check this).
void PrintWhile(const Operation& op, OpPrinter& p) {
  if (op.region(0).empty() || op.region(0).front().num_arguments() != op.num_operands()) {
    // Unverified ops only: print the regions with their own arguments rather than crash.
    p.Print("(");
    p.PrintOperands(op.operands());
    p.Print(") cond ");
    p.PrintRegion(op.region(0));
    p.Print(" do ");
    p.PrintRegion(op.region(1));
    return;
  }
  const Block& cond = op.region(0).front();
  p.Print("(");
  for (int i = 0; i < op.num_operands(); ++i) {
    if (i) p.Print(", ");
    p.PrintOperand(cond.argument(i));
    p.Print(" = ");
    p.PrintOperand(op.operand(i));
  }
  p.Print(")");
  if (op.num_operands() > 0) {
    p.Print(" : ");
    for (int i = 0; i < op.num_operands(); ++i) {
      if (i) p.Print(", ");
      p.PrintType(op.operand(i).type());
    }
  }
  if (!op.attrs().empty()) {
    p.Print(" attributes");
    p.PrintOptionalAttrDict(op.attrs(), {});
  }
  p.Print(" cond ");
  p.PrintRegion(op.region(0), /*print_arguments=*/false);
  p.Print(" do ");
  p.PrintRegion(op.region(1), /*print_arguments=*/false);
}

Status ParseWhile(OpParser& p, ParsedOp& op) {
  std::vector<std::pair<std::string, Type>> args;
  TL_RETURN_IF_ERROR(p.ParsePunct("("));
  std::vector<std::string> names;
  if (!p.ParseOptionalPunct(")")) {
    do {
      TL_ASSIGN_OR_RETURN(std::string name, p.ParseIdentifier());
      TL_RETURN_IF_ERROR(p.ParsePunct("="));
      TL_ASSIGN_OR_RETURN(Value v, p.ParseOperand());
      names.push_back(std::move(name));
      op.operands.push_back(v);
    } while (p.ParseOptionalPunct(","));
    TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  }
  if (p.ParseOptionalPunct(":")) {
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (i) TL_RETURN_IF_ERROR(p.ParsePunct(","));
      TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
      if (!(t == op.operands[i].type()))
        return p.Error("iteration argument " + std::to_string(i) + " is declared " + t.ToString() +
                       " but its initial value is " + op.operands[i].type().ToString());
    }
  } else if (!op.operands.empty()) {
    return p.Error("expected ':' and the iteration argument types");
  }
  for (size_t i = 0; i < names.size(); ++i) args.emplace_back(names[i], op.operands[i].type());
  if (p.ParseOptionalKeyword("attributes")) TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParseKeyword("cond"));
  TL_ASSIGN_OR_RETURN(auto cond, p.ParseRegion(&args));
  TL_RETURN_IF_ERROR(p.ParseKeyword("do"));
  TL_ASSIGN_OR_RETURN(auto body, p.ParseRegion(&args));
  op.regions.push_back(std::move(cond));
  op.regions.push_back(std::move(body));
  for (const Value& v : op.operands) op.result_types.push_back(v.type());
  return OkStatus();
}

// ---- case / if -------------------------------------------------------------------------------

// Result types of branch regions: every branch must return the same types; with none
// returning yet (the builder fills regions later) the declared types are used.
StatusOr<std::vector<Type>> BranchResults(const InferInput& in) {
  std::optional<std::vector<Type>> out;
  for (size_t i = 0; i < in.regions.size(); ++i) {
    const Region& r = *in.regions[i];
    if (r.empty() || !r.front().terminator()) continue;
    if (r.front().num_arguments() != 0)
      return InvalidArgument("branch " + std::to_string(i) + " must take no arguments");
    TL_ASSIGN_OR_RETURN(std::vector<Type> t, RegionReturnTypes(r));
    if (!out) {
      out = t;
    } else if (*out != t) {
      return InvalidArgument("branch " + std::to_string(i) + " returns " + TypeListString(t) +
                             ", branch 0 returns " + TypeListString(*out));
    }
  }
  if (out) return *out;
  if (in.declared_results) return *in.declared_results;
  return InvalidArgument("the result types cannot be inferred from empty branches");
}

StatusOr<std::vector<Type>> InferCase(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
  if (!(in.operand_types[0] == Type(TensorType(ElementType::kS32, {}))))
    return InvalidArgument("the index must be tensor<i32>, got " + in.operand_types[0].ToString());
  if (in.regions.empty()) return InvalidArgument("expected at least one branch region");
  return BranchResults(in);
}

StatusOr<std::vector<Type>> InferIf(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectOperandCount(in, 1));
  if (!(in.operand_types[0] == Type(TensorType(ElementType::kPred, {}))))
    return InvalidArgument("the predicate must be tensor<i1>, got " +
                           in.operand_types[0].ToString());
  return BranchResults(in);
}

Status EvalCase(const Operation& op, std::span<const Literal> operands,
                std::vector<Literal>& results, EvalContext& ctx) {
  int64_t n = op.num_regions();
  int64_t index = operands[0].span<int32_t>()[0];
  if (index < 0 || index >= n) index = n - 1;  // out of range selects the last branch
  TL_ASSIGN_OR_RETURN(results, ctx.RunRegion(op.region(static_cast<int>(index)), {}));
  return OkStatus();
}

Status EvalIf(const Operation& op, std::span<const Literal> operands, std::vector<Literal>& results,
              EvalContext& ctx) {
  int branch = ScalarPredTrue(operands[0]) ? 0 : 1;
  TL_ASSIGN_OR_RETURN(results, ctx.RunRegion(op.region(branch), {}));
  return OkStatus();
}

// ---- optimization_barrier, after_all ---------------------------------------------------------

// "op %a, %b : t1, t2" (results have the operands' types)
void PrintOperandsWithTypes(const Operation& op, OpPrinter& p) {
  if (op.num_operands() == 0) return;
  p.Print(" ");
  p.PrintOperands(op.operands());
  p.PrintOptionalAttrDict(op.attrs(), {});
  p.Print(" : ");
  for (int i = 0; i < op.num_operands(); ++i) {
    if (i) p.Print(", ");
    p.PrintType(op.operand(i).type());
  }
}

Status ParseOptimizationBarrier(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  if (op.operands.empty()) return OkStatus();
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i) TL_RETURN_IF_ERROR(p.ParsePunct(","));
    TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
    op.result_types.push_back(t);
  }
  return OkStatus();
}

// ---- custom_call -----------------------------------------------------------------------------

StatusOr<std::vector<Type>> InferCustomCall(const InferInput& in) {
  const Attribute* target = FindAttr(in.attrs, "call_target_name");
  if (!target ||
      (target->kind() != Attribute::Kind::kString && target->kind() != Attribute::Kind::kSymbol))
    return InvalidArgument("expected a 'call_target_name' string attribute");
  // The results of an opaque call cannot be derived: they are whatever was declared.
  if (!in.declared_results) return std::vector<Type>{};
  return *in.declared_results;
}

Status EvalCustomCall(const Operation& op, std::span<const Literal> operands,
                      std::vector<Literal>& results, EvalContext& ctx) {
  std::string target = GetStringAttr(op.attrs(), "call_target_name");
  const auto* handler = ctx.FindCustomCall(target);
  if (!handler)
    return NotFound("custom_call target @" + target +
                    " is not registered with the interpreter (InterpreterOptions::custom_calls)");
  Status s = (*handler)(operands, results);
  if (!s.ok()) return s.WithContext("custom_call @" + target);
  if (results.size() != static_cast<size_t>(op.num_results()))
    return Internal("custom_call @" + target + " handler produced " +
                    std::to_string(results.size()) + " results, expected " +
                    std::to_string(op.num_results()));
  for (int i = 0; i < op.num_results(); ++i) {
    const Type& t = op.result(i).type();
    if (t.is_tensor() && !(results[i].type() == t.tensor))
      return InvalidArgument("custom_call @" + target + " handler returned " +
                             results[i].type().ToString() + " for result " + std::to_string(i) +
                             ", expected " + t.ToString());
  }
  return OkStatus();
}

// "stablehlo.custom_call @target(%a, %b) {attrs} : (t, t) -> t"
void PrintCustomCall(const Operation& op, OpPrinter& p) {
  p.Print(" @" + GetStringAttr(op.attrs(), "call_target_name") + "(");
  p.PrintOperands(op.operands());
  p.Print(")");
  p.PrintOptionalAttrDict(op.attrs(), {"call_target_name"});
  p.Print(" : ");
  p.PrintFunctionalType(op);
}

Status ParseCustomCall(OpParser& p, ParsedOp& op) {
  TL_ASSIGN_OR_RETURN(Attribute target, p.ParseAttribute());
  if (target.kind() != Attribute::Kind::kSymbol && target.kind() != Attribute::Kind::kString)
    return p.Error("expected the custom_call target as @name");
  op.attrs["call_target_name"] = Attribute::String(target.as_string());
  TL_RETURN_IF_ERROR(p.ParsePunct("("));
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  TL_RETURN_IF_ERROR(p.ParseFunctionalType(inputs, op.result_types));
  if (inputs.size() != op.operands.size())
    return p.Error("expected " + std::to_string(op.operands.size()) +
                   " operand types in the custom_call's functional type");
  return OkStatus();
}

void RegisterWhile(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.while";
  d.traits.writes_all_results = true;  // replaced by region values
  d.traits.replaces_results = true;
  d.num_regions = 2;
  d.infer = InferWhile;
  d.eval = EvalWhile;
  d.print = PrintWhile;
  d.parse = ParseWhile;
  r.Register(std::move(d));
}

void RegisterBranches(OpRegistry& r) {
  {
    OpDef d;
    d.name = "stablehlo.case";
    d.traits.writes_all_results = true;  // replaced by region values
    d.traits.replaces_results = true;
    d.num_regions = -1;
    d.infer = InferCase;
    d.eval = EvalCase;
    r.Register(std::move(d));
  }
  {
    OpDef d;
    d.name = "stablehlo.if";
    d.traits.writes_all_results = true;  // replaced by region values
    d.traits.replaces_results = true;
    d.num_regions = 2;
    d.infer = InferIf;
    d.eval = EvalIf;
    r.Register(std::move(d));
  }
}

void RegisterBarrierAndTokens(OpRegistry& r) {
  {
    OpDef d;
    d.name = "stablehlo.optimization_barrier";
    d.traits.writes_all_results = true;  // replaced by the operands
    d.traits.replaces_results = true;
    d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> { return in.operand_types; };
    d.eval = [](const Operation&, std::span<const Literal> operands, std::vector<Literal>& results,
                EvalContext&) -> Status {
      results.assign(operands.begin(), operands.end());  // shares the buffers, no copy
      return OkStatus();
    };
    d.vjp = [](OpBuilder&, const Operation&, const std::vector<Value>&, const std::vector<Value>&,
               const std::vector<Value>& cot) -> StatusOr<std::vector<Value>> { return cot; };
    d.print = PrintOperandsWithTypes;
    d.parse = ParseOptimizationBarrier;
    r.Register(std::move(d));
  }
  {
    OpDef d;
    d.name = "stablehlo.after_all";
    d.traits.side_effecting = true;
    d.infer = [](const InferInput& in) -> StatusOr<std::vector<Type>> {
      for (size_t i = 0; i < in.operand_types.size(); ++i)
        if (!in.operand_types[i].is_token())
          return InvalidArgument("operand " + std::to_string(i) + " must be a token, got " +
                                 in.operand_types[i].ToString());
      return std::vector<Type>{Type::Token()};
    };
    d.eval = [](const Operation&, std::span<const Literal>, std::vector<Literal>&,
                EvalContext&) -> Status { return OkStatus(); };
    d.print = [](const Operation& op, OpPrinter& p) {
      if (op.num_operands()) {
        p.Print(" ");
        p.PrintOperands(op.operands());
      }
      p.PrintOptionalAttrDict(op.attrs(), {});
      p.Print(" : ");
      p.PrintType(op.result(0).type());
    };
    d.parse = [](OpParser& p, ParsedOp& op) -> Status {
      TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
      return ParseAttrDictAndResultType(p, op);
    };
    r.Register(std::move(d));
  }
}

void RegisterCustomCall(OpRegistry& r) {
  OpDef d;
  d.name = "stablehlo.custom_call";
  d.traits.side_effecting = true;  // conservatively: has_side_effect is per call
  d.infer = InferCustomCall;
  d.eval = EvalCustomCall;
  d.print = PrintCustomCall;
  d.parse = ParseCustomCall;
  r.Register(std::move(d));
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  RegisterWhile(r);
  RegisterBranches(r);
  RegisterBarrierAndTokens(r);
  RegisterCustomCall(r);
  RegisterRngOps(r);
}

}  // namespace tlaloc::ops
