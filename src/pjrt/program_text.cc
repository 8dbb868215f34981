#include "tlaloc/pjrt/program_text.h"

#include <algorithm>
#include <map>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/ir/rewrite.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::pjrt {
namespace {

// Renames the callee of every func.call (and the decomposition of every stablehlo.composite) in
// `block` and the regions below it.
void RenameCalls(Block& block, const std::map<std::string, std::string>& renamed) {
  for (auto& op : block.mutable_operations()) {
    if (op->name() == "func.call" || op->name() == "stablehlo.composite") {
      const char* symbol = op->name() == "func.call" ? "callee" : "decomposition";
      const Attribute* callee = FindAttr(op->attrs(), symbol);
      if (callee != nullptr && callee->kind() == Attribute::Kind::kSymbol) {
        auto it = renamed.find(callee->as_string());
        if (it != renamed.end()) op->attrs()[symbol] = Attribute::Symbol(it->second);
      }
    }
    for (int r = 0; r < op->num_regions(); ++r)
      for (auto& b : op->region(r).blocks()) RenameCalls(*b, renamed);
  }
}

// A name no function of `module` has, from `base`.
std::string FreshName(const Module& module, const std::string& base) {
  std::string name = base;
  for (int i = 1; module.Find(name) != nullptr; ++i) name = base + "_" + std::to_string(i);
  return name;
}

// Every chlo.ragged_dot of `block` and the regions below it, with its block.
void FindRaggedDots(Block& block, std::vector<std::pair<Block*, Operation*>>& out) {
  for (auto& op : block.mutable_operations()) {
    if (op->name() == "chlo.ragged_dot") out.emplace_back(&block, op.get());
    for (int r = 0; r < op->num_regions(); ++r)
      for (auto& b : op->region(r).blocks()) FindRaggedDots(*b, out);
  }
}

// Gives every f32 x f32 stablehlo.dot_general of `block` (and the regions below it) without a
// precision precision = [HIGHEST, HIGHEST]; returns how many.
int SetF32DotsHighest(Block& block) {
  int n = 0;
  for (auto& op : block.mutable_operations()) {
    if (op->name() == "stablehlo.dot_general" && op->num_operands() == 2 &&
        !op->attrs().count("precision_config")) {
      bool f32 = true;
      for (const Type& t : op->operand_types())
        f32 = f32 && t.is_tensor() && t.tensor.element_type == ElementType::kF32;
      if (f32) {
        op->attrs()["precision_config"] = Attribute::Array(
            {Attribute::Enum("HIGHEST", "precision"), Attribute::Enum("HIGHEST", "precision")});
        ++n;
      }
    }
    for (int r = 0; r < op->num_regions(); ++r)
      for (auto& b : op->region(r).blocks()) n += SetF32DotsHighest(*b);
  }
  return n;
}

std::vector<int64_t> IntField(const Attribute& strukt, const char* name) {
  const Attribute* f = FindAttr(strukt.as_dict(), name);
  return f && f->kind() == Attribute::Kind::kIntArray ? f->as_int_array() : std::vector<int64_t>{};
}

// [M, G] in x's element type: 1 where row m belongs to group g (rows grouped consecutively by
// `sizes`; rows past the last group belong to none).
Tensor GroupMask(OpBuilder& b, const Tensor& sizes, int64_t m, ElementType et) {
  const int64_t g = sizes.dim(0);
  Tensor ends = Cumsum(sizes, 0);
  Tensor starts = ends - sizes;
  Tensor row = Iota(b, {m, g}, 0, sizes.element_type());
  Tensor in = Ge(row, Reshape(starts, {1, g})) & Lt(row, Reshape(ends, {1, g}));
  return Convert(in, et);
}

// The body of one expanded chlo.ragged_dot, as a function of (lhs, rhs, group_sizes).
Status BuildDenseRaggedDot(FunctionBuilder& fb, const Attribute& dims, const Type& result) {
  Tensor x = fb.arg(0), w = fb.arg(1), sizes = fb.arg(2);
  const ElementType out = result.tensor.element_type;
  const std::vector<int64_t> rc = IntField(dims, "rhs_contracting_dimensions");
  const std::vector<int64_t> lc = IntField(dims, "lhs_contracting_dimensions");
  if (x.rank() != 2 || rc.size() != 1 || lc.size() != 1)
    return InvalidArgument(
        "chlo.ragged_dot expansion: expected lhs [M, K] and one contracting "
        "dimension each, got lhs " +
        x.type().ToString());
  const int64_t m = x.dim(0), k = x.dim(1), g = sizes.dim(0);
  Tensor mask = GroupMask(fb.ops(), sizes, m, x.element_type());
  // [M, G, K]: row m's values in its group's slot, zeros elsewhere.
  Tensor masked = Reshape(x, {m, 1, k}) * Reshape(mask, {m, g, 1});
  Tensor y;
  if (w.rank() == 3 && lc[0] == 1) {
    // Grouped rows: [M, G, K] . [G, K, N] batched over G -> [G, M, N], summed over G.
    y = Sum(DotGeneral(masked, w, {1}, {0}, {2}, {rc[0]}, out, false), {0});
  } else if (w.rank() == 2 && lc[0] == 0 && rc[0] == 0) {
    // Ragged contraction: [M, G, K] . [M, N] over M -> [G, K, N].
    y = DotGeneral(masked, w, {}, {}, {0}, {0}, out, false);
  } else {
    return InvalidArgument("chlo.ragged_dot expansion: unsupported form, lhs " +
                           x.type().ToString() + ", rhs " + w.type().ToString());
  }
  return fb.Return({y});
}

}  // namespace

StatusOr<int> ExpandRaggedDot(Module& module) {
  std::vector<std::pair<Block*, Operation*>> found;
  for (const auto& fn : module.functions()) FindRaggedDots(fn->entry(), found);
  const OpDef* call_def = OpRegistry::Global().Find("func.call");
  if (call_def == nullptr) return Internal("func.call is not registered");
  std::map<std::string, std::string> instances;  // operand/result types + dims -> function
  for (auto [block, op] : found) {
    const Attribute* dims = FindAttr(op->attrs(), "ragged_dot_dimension_numbers");
    if (dims == nullptr || dims->kind() != Attribute::Kind::kStruct || op->num_results() != 1)
      return InvalidArgument("chlo.ragged_dot without its dimension numbers");
    std::string key = PrintAttribute(*dims);
    for (const Type& t : op->operand_types()) key += "," + PrintType(t);
    key += "->" + PrintType(op->result(0).type());
    std::string& name = instances[key];
    if (name.empty()) {
      name = FreshName(module, "ragged_dot_dense");
      FunctionBuilder fb(&module, name, op->operand_types());
      fb.function()->set_public(false);
      TL_RETURN_IF_ERROR(BuildDenseRaggedDot(fb, *dims, op->result(0).type()));
    }
    AttrDict attrs;
    attrs["callee"] = Attribute::Symbol(name);
    auto call = Operation::Create(*call_def, op->operands(), {op->result(0).type()}, attrs);
    auto& ops = block->mutable_operations();
    // clang 14 cannot capture a structured binding: the lambda takes a plain copy.
    const Operation* target = op;
    auto it =
        std::find_if(ops.begin(), ops.end(), [target](const auto& p) { return p.get() == target; });
    const size_t index = static_cast<size_t>(it - ops.begin());
    Operation* placed = block->Append(std::move(call));
    for (size_t j = index + 1; j + 1 < ops.size(); ++j)
      ReplaceUses(*ops[j], op->result(0).impl(), placed->result(0));
    std::rotate(ops.begin() + index + 1, ops.end() - 1, ops.end());
    ops.erase(ops.begin() + index);
  }
  if (!found.empty()) TL_RETURN_IF_ERROR(Verify(module).WithContext("ragged_dot expansion"));
  return static_cast<int>(found.size());
}

StatusOr<std::string> PrintProgramText(const Module& module, const Function& entry,
                                       const ProgramTextOptions& options) {
  std::string text = PrintModule(module);
  if (entry.name() == "main" && !options.manual_shardings && !options.expand_ragged_dot &&
      !options.f32_dots_highest)
    return text;
  // A copy to change: the module is shared and const. Printing and parsing round-trips (the
  // printer's contract), so the copy is the same program.
  TL_ASSIGN_OR_RETURN(auto copy, ParseModule(text, module.name()));
  if (entry.name() != "main") {
    std::map<std::string, std::string> renamed;
    if (Function* other = copy->Find("main")) {
      std::string fresh = FreshName(*copy, "main_");
      renamed["main"] = fresh;
      other->set_name(fresh);
    }
    Function* f = copy->Find(entry.name());
    if (f == nullptr)
      return Internal("entry '" + entry.name() + "' is missing from the printed module " +
                      module.name());
    renamed[entry.name()] = "main";
    f->set_name("main");
    f->set_public(true);
    for (const auto& fn : copy->functions()) RenameCalls(fn->entry(), renamed);
  }
  Function* main = copy->Find("main");
  if (options.manual_shardings) {
    const Attribute manual = Attribute::String("{manual}");
    auto mark = [&](AttrDict& attrs) {
      if (!attrs.count("mhlo.sharding") && !attrs.count("sdy.sharding"))
        attrs["mhlo.sharding"] = manual;
    };
    for (int i = 0; i < main->num_arguments(); ++i) mark(main->arg_attrs(i));
    for (size_t i = 0; i < main->result_types().size(); ++i)
      mark(main->result_attrs(static_cast<int>(i)));
  }
  if (options.expand_ragged_dot) TL_RETURN_IF_ERROR(ExpandRaggedDot(*copy).status());
  if (options.f32_dots_highest) {
    for (const auto& fn : copy->functions()) SetF32DotsHighest(fn->entry());
  }
  return PrintModule(*copy);
}

}  // namespace tlaloc::pjrt
