// sdy.manual_computation (its terminator sdy.return is core.cc's return entry): a region of a
// global (Shardy-annotated) program that XLA's partitioner does not partition. The body is the
// per-device computation over each operand's local part along the manual axes (a kernel's custom
// call, which the partitioner cannot look into); in_shardings / out_shardings say how the global
// operands and results are split. On one device the interpreter runs the body once per position
// along the axes that split something, on that position's parts, and assembles the results (bodies
// with collectives need the per-device lowering).
#include <algorithm>
#include <map>

#include "collective_manual_vjp.h"
#include "op_areas.h"
#include "op_helpers.h"
#include "sdy_syntax.h"
#include "tlaloc/ir/sharding.h"

namespace tlaloc::ops {

namespace {

StatusOr<std::vector<Sharding>> ShardingList(const AttrDict& attrs, const std::string& name) {
  const Attribute* a = FindAttr(attrs, name);
  if (!a || a->kind() != Attribute::Kind::kArray)
    return InvalidArgument("expected an '" + name + "' attribute (a list of #sdy.sharding)");
  std::vector<Sharding> out;
  for (const Attribute& e : a->as_array()) {
    if (e.kind() != Attribute::Kind::kOpaque)
      return InvalidArgument("'" + name + "' holds something other than #sdy.sharding<...>");
    TL_ASSIGN_OR_RETURN(Sharding s, Sharding::FromSdy(e.as_string()));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> ManualAxes(const AttrDict& attrs) {
  std::vector<std::string> axes;
  if (const Attribute* a = FindAttr(attrs, "manual_axes");
      a && a->kind() == Attribute::Kind::kArray)
    for (const Attribute& e : a->as_array()) axes.push_back(e.as_string());
  return axes;
}

bool IsManual(const std::vector<std::string>& manual, const std::string& axis) {
  return std::find(manual.begin(), manual.end(), axis) != manual.end();
}

// A global value and its local part in the body: same element type and rank; a dimension split
// over manual axes divides, any other dimension is whole.
Status CheckLocal(const Type& global, const Type& local, const Sharding& s,
                  const std::vector<std::string>& manual, const std::string& what) {
  const TensorType& g = global.tensor;
  const TensorType& l = local.tensor;
  if (g.element_type != l.element_type || g.rank() != l.rank() ||
      static_cast<int64_t>(s.dims.size()) != g.rank())
    return InvalidArgument(what + ": global " + global.ToString() + ", local " + local.ToString() +
                           " and sharding " + s.ToSdyBody() + " do not agree in rank and type");
  for (int64_t d = 0; d < g.rank(); ++d) {
    bool split = false;
    for (const std::string& axis : s.dims[d]) split |= IsManual(manual, axis);
    const bool fits = split ? l.dims[d] > 0 && g.dims[d] % l.dims[d] == 0 : l.dims[d] == g.dims[d];
    if (!fits)
      return InvalidArgument(
          what + ": dimension " + std::to_string(d) + " is " + std::to_string(g.dims[d]) +
          " globally and " + std::to_string(l.dims[d]) + " in the body (" +
          (split ? "split over manual axes" : "not split over manual axes") + ")");
  }
  return OkStatus();
}

const Block& Body(const Operation& op) { return op.region(0).front(); }

// Copies the box of `small` (dims `sdims`) at `offsets` of `big` (dims `bdims`) out of `big`
// (into_big false) or into it, `bytes` per element, a row at a time.
void CopyBox(std::byte* big, const std::vector<int64_t>& bdims, std::byte* small,
             const std::vector<int64_t>& sdims, const std::vector<int64_t>& offsets, int64_t bytes,
             bool into_big) {
  const int64_t rank = static_cast<int64_t>(sdims.size());
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= sdims[d];
  const int64_t row = rank > 0 ? sdims[rank - 1] : 1;
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (int64_t d = 0; d < rank; ++d) at = at * bdims[d] + index[d] + offsets[d];
    std::byte* b = big + at * bytes;
    std::byte* s = small + r * row * bytes;
    if (into_big)
      std::copy_n(s, row * bytes, b);
    else
      std::copy_n(b, row * bytes, s);
    for (int64_t d = rank - 2; d >= 0; --d) {  // next row
      if (++index[d] < sdims[d]) break;
      index[d] = 0;
    }
  }
}

// The size of each manual axis that splits a dimension, read from the global and local shapes.
Status AxisSizes(const std::vector<Type>& globals, const std::vector<Type>& locals,
                 const std::vector<Sharding>& shardings, const std::vector<std::string>& manual,
                 std::map<std::string, int64_t>& sizes) {
  for (size_t i = 0; i < globals.size(); ++i) {
    for (size_t d = 0; d < shardings[i].dims.size(); ++d) {
      std::vector<std::string> axes;
      for (const std::string& axis : shardings[i].dims[d])
        if (IsManual(manual, axis)) axes.push_back(axis);
      if (axes.empty()) continue;
      if (axes.size() > 1)
        return Unimplemented("sdy.manual_computation on one device: dimension " +
                             std::to_string(d) +
                             " is split over several manual axes, whose "
                             "sizes the shapes do not tell apart");
      const int64_t size = globals[i].tensor.dims[d] / locals[i].tensor.dims[d];
      auto [it, added] = sizes.emplace(axes[0], size);
      if (!added && it->second != size)
        return InvalidArgument("sdy.manual_computation: axis '" + axes[0] + "' splits by " +
                               std::to_string(it->second) + " in one place and by " +
                               std::to_string(size) + " in another");
    }
  }
  return OkStatus();
}

// Offsets of a value's part at `coords` (each manual axis's position).
std::vector<int64_t> PartOffsets(const Sharding& s, const Type& local,
                                 const std::map<std::string, int64_t>& coords) {
  std::vector<int64_t> offsets(s.dims.size(), 0);
  for (size_t d = 0; d < s.dims.size(); ++d)
    for (const std::string& axis : s.dims[d])
      if (auto it = coords.find(axis); it != coords.end())
        offsets[d] = it->second * local.tensor.dims[d];
  return offsets;
}

Status EvalManualComputation(const Operation& op, std::span<const Literal> operands,
                             std::vector<Literal>& results, EvalContext& ctx) {
  TL_ASSIGN_OR_RETURN(auto in, ShardingList(op.attrs(), "in_shardings"));
  TL_ASSIGN_OR_RETURN(auto out, ShardingList(op.attrs(), "out_shardings"));
  const std::vector<std::string> manual = ManualAxes(op.attrs());
  const Block& body = Body(op);
  std::vector<Type> operand_types, arg_types, result_types, return_types;
  for (int i = 0; i < op.num_operands(); ++i) {
    operand_types.push_back(op.operand(i).type());
    arg_types.push_back(body.argument(i).type());
  }
  for (int i = 0; i < op.num_results(); ++i) {
    result_types.push_back(op.result(i).type());
    return_types.push_back(body.terminator()->operand(i).type());
  }
  std::map<std::string, int64_t> sizes;
  TL_RETURN_IF_ERROR(AxisSizes(operand_types, arg_types, in, manual, sizes));
  TL_RETURN_IF_ERROR(AxisSizes(result_types, return_types, out, manual, sizes));
  std::map<std::string, int64_t> coords;
  for (const auto& [axis, size] : sizes) coords[axis] = 0;
  while (true) {
    std::vector<Literal> args;
    for (int i = 0; i < op.num_operands(); ++i) {
      Literal part(arg_types[i].tensor);
      CopyBox(const_cast<std::byte*>(operands[i].data()), operand_types[i].tensor.dims, part.data(),
              arg_types[i].tensor.dims, PartOffsets(in[i], arg_types[i], coords),
              ElementSize(part.element_type()), false);
      args.push_back(std::move(part));
    }
    TL_ASSIGN_OR_RETURN(std::vector<Literal> parts, ctx.RunRegion(op.region(0), std::move(args)));
    for (int i = 0; i < op.num_results(); ++i)
      CopyBox(results[i].data(), result_types[i].tensor.dims,
              const_cast<std::byte*>(parts[i].data()), return_types[i].tensor.dims,
              PartOffsets(out[i], return_types[i], coords), ElementSize(results[i].element_type()),
              true);
    // The next position, the last axis fastest.
    auto it = coords.rbegin();
    for (; it != coords.rend(); ++it) {
      if (++it->second < sizes[it->first]) break;
      it->second = 0;
    }
    if (it == coords.rend()) break;
  }
  return OkStatus();
}

StatusOr<std::vector<Type>> InferManualComputation(const InferInput& in) {
  TL_RETURN_IF_ERROR(ExpectTensorOperands(in));
  if (in.regions.size() != 1 || in.regions[0]->blocks().size() != 1)
    return InvalidArgument("expected one region of one block (the per-device body)");
  TL_ASSIGN_OR_RETURN(auto ins, ShardingList(in.attrs, "in_shardings"));
  TL_ASSIGN_OR_RETURN(auto outs, ShardingList(in.attrs, "out_shardings"));
  const std::vector<std::string> manual = ManualAxes(in.attrs);
  for (size_t i = 0; i < manual.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (manual[i] == manual[j]) return InvalidArgument("manual axis '" + manual[i] + "' twice");
  const Block& body = in.regions[0]->front();
  if (ins.size() != in.operand_types.size() ||
      body.num_arguments() != static_cast<int>(in.operand_types.size()))
    return InvalidArgument(std::to_string(in.operand_types.size()) + " operand(s), " +
                           std::to_string(ins.size()) + " in_shardings and " +
                           std::to_string(body.num_arguments()) +
                           " body argument(s): expected one of each per operand");
  for (size_t i = 0; i < ins.size(); ++i)
    TL_RETURN_IF_ERROR(CheckLocal(in.operand_types[i], body.argument(static_cast<int>(i)).type(),
                                  ins[i], manual, "operand " + std::to_string(i)));
  if (!in.declared_results)
    return InvalidArgument("sdy.manual_computation needs its global result types declared");
  const std::vector<Type>& results = *in.declared_results;
  if (outs.size() != results.size())
    return InvalidArgument(std::to_string(results.size()) + " result(s) and " +
                           std::to_string(outs.size()) + " out_shardings");
  // While the builder fills the body there is no terminator yet.
  if (const Operation* term = body.terminator()) {
    if (term->num_operands() != static_cast<int>(results.size()))
      return InvalidArgument("the body returns " + std::to_string(term->num_operands()) +
                             " value(s) for " + std::to_string(results.size()) + " result(s)");
    for (size_t i = 0; i < results.size(); ++i)
      TL_RETURN_IF_ERROR(CheckLocal(results[i], term->operand(static_cast<int>(i)).type(), outs[i],
                                    manual, "result " + std::to_string(i)));
  }
  return results;
}

void PrintShardingList(OpPrinter& p, const AttrDict& attrs, const std::string& name) {
  p.Print(" " + name + "=[");
  auto list = ShardingList(attrs, name);
  if (list.ok()) {
    for (size_t i = 0; i < list->size(); ++i) p.Print((i ? ", " : "") + (*list)[i].ToSdyBody());
  }
  p.Print("]");
}

// %r = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"data"}, {}]>]
//        out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"data"} (%arg1: tensor<4x8xf32>) {
//   ...
//   sdy.return %x : tensor<4x8xf32>
// } : (tensor<8x8xf32>) -> tensor<8x8xf32>
void PrintManualComputation(const Operation& op, OpPrinter& p) {
  p.Print("(");
  p.PrintOperands(op.operands());
  p.Print(")");
  PrintShardingList(p, op.attrs(), "in_shardings");
  PrintShardingList(p, op.attrs(), "out_shardings");
  p.Print(" manual_axes={");
  const std::vector<std::string> manual = ManualAxes(op.attrs());
  for (size_t i = 0; i < manual.size(); ++i) p.Print((i ? ", \"" : "\"") + manual[i] + "\"");
  p.Print("} (");
  const Block& body = Body(op);
  for (int i = 0; i < body.num_arguments(); ++i) {
    if (i) p.Print(", ");
    p.PrintOperand(body.argument(i));
    p.Print(": ");
    p.PrintType(body.argument(i).type());
  }
  p.Print(") ");
  p.PrintRegion(op.region(0), /*print_arguments=*/false);
  p.PrintOptionalAttrDict(op.attrs(), {"in_shardings", "out_shardings", "manual_axes"});
  p.Print(" : ");
  p.PrintFunctionalType(op);
}

Status ParseShardingList(OpParser& p, const std::string& name, AttrDict& attrs) {
  TL_RETURN_IF_ERROR(p.ParseKeyword(name));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  TL_RETURN_IF_ERROR(p.ParsePunct("["));
  std::vector<Attribute> list;
  if (!p.ParseOptionalPunct("]")) {
    do {
      TL_ASSIGN_OR_RETURN(Sharding s, ParseSdyShardingBody(p));
      list.push_back(Attribute::Opaque(s.ToSdy()));
    } while (p.ParseOptionalPunct(","));
    TL_RETURN_IF_ERROR(p.ParsePunct("]"));
  }
  attrs[name] = Attribute::Array(std::move(list));
  return OkStatus();
}

Status ParseManualComputation(OpParser& p, ParsedOp& op) {
  TL_RETURN_IF_ERROR(p.ParsePunct("("));
  TL_ASSIGN_OR_RETURN(op.operands, p.ParseOperandList());
  TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  TL_RETURN_IF_ERROR(ParseShardingList(p, "in_shardings", op.attrs));
  TL_RETURN_IF_ERROR(ParseShardingList(p, "out_shardings", op.attrs));
  TL_RETURN_IF_ERROR(p.ParseKeyword("manual_axes"));
  TL_RETURN_IF_ERROR(p.ParsePunct("="));
  std::vector<std::string> manual;
  TL_RETURN_IF_ERROR(ParseSdyAxisSet(p, manual));
  std::vector<Attribute> axes;
  for (std::string& axis : manual) axes.push_back(Attribute::String(std::move(axis)));
  op.attrs["manual_axes"] = Attribute::Array(std::move(axes));
  // The body's arguments, declared before its braces.
  std::vector<std::pair<std::string, Type>> args;
  TL_RETURN_IF_ERROR(p.ParsePunct("("));
  if (!p.ParseOptionalPunct(")")) {
    do {
      TL_ASSIGN_OR_RETURN(std::string name, p.ParseIdentifier());
      TL_RETURN_IF_ERROR(p.ParsePunct(":"));
      TL_ASSIGN_OR_RETURN(Type t, p.ParseType());
      args.emplace_back(std::move(name), t);
    } while (p.ParseOptionalPunct(","));
    TL_RETURN_IF_ERROR(p.ParsePunct(")"));
  }
  TL_ASSIGN_OR_RETURN(auto body, p.ParseRegion(&args));
  op.regions.push_back(std::move(body));
  TL_RETURN_IF_ERROR(p.ParseOptionalAttrDict(op.attrs));
  TL_RETURN_IF_ERROR(p.ParsePunct(":"));
  std::vector<Type> inputs;
  TL_RETURN_IF_ERROR(p.ParseFunctionalType(inputs, op.result_types));
  if (inputs.size() != op.operands.size())
    return p.Error("the type lists " + std::to_string(inputs.size()) + " operand(s) for " +
                   std::to_string(op.operands.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!(inputs[i] == op.operands[i].type()))
      return p.Error("operand " + std::to_string(i) + " is " + op.operands[i].type().ToString() +
                     " but the type lists " + inputs[i].ToString());
  return OkStatus();
}

}  // namespace

void RegisterManualComputationOps(OpRegistry& r) {
  OpDef d;
  d.name = "sdy.manual_computation";
  d.num_regions = 1;
  d.infer = InferManualComputation;
  d.eval = EvalManualComputation;
  d.vjp = ManualComputationVjp;
  d.print = PrintManualComputation;
  d.parse = ParseManualComputation;
  r.Register(std::move(d));
}

}  // namespace tlaloc::ops
