// Module, function and operation text of the StableHLO printer; implements OpPrinter for the
// ops' pretty-syntax hooks.
#include "tlaloc/stablehlo/printer.h"

#include <algorithm>
#include <unordered_map>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc {

namespace shlo {
std::string PrintAttrDictText(const AttrDict& d);
std::string QuoteString(const std::string& s);
bool IsBareIdentifier(const std::string& s);
}  // namespace shlo

namespace {

class Printer : public OpPrinter {
 public:
  // Names every value of `fn`: %argN for arguments and region arguments, %N for op results.
  // Sibling regions reuse numbers (they cannot see each other), as MLIR's printer does.
  void NameFunction(const Function& fn) {
    names_.clear();
    int next_arg = 0, next_id = 0;
    for (const Value& v : fn.entry().arguments())
      names_[v.impl()] = "%arg" + std::to_string(next_arg++);
    NameBlockOps(fn.entry(), next_id, next_arg);
  }

  void PrintFunctionText(const Function& fn) {
    NameFunction(fn);
    Indent();
    out_ += "func.func ";
    out_ += fn.is_public() ? "public " : "private ";
    out_ += "@" + (shlo::IsBareIdentifier(fn.name()) ? fn.name() : shlo::QuoteString(fn.name()));
    out_ += "(";
    for (int i = 0; i < fn.num_arguments(); ++i) {
      if (i) out_ += ", ";
      Value a = fn.entry().argument(i);
      out_ += names_[a.impl()] + ": " + a.type().ToString();
      if (!fn.arg_attrs(i).empty()) out_ += " " + shlo::PrintAttrDictText(fn.arg_attrs(i));
    }
    out_ += ")";
    const auto& results = fn.result_types();
    bool any_attrs = false;
    for (size_t i = 0; i < results.size(); ++i) any_attrs |= !fn.result_attrs(i).empty();
    if (results.size() == 1 && !any_attrs) {
      out_ += " -> " + results[0].ToString();
    } else if (!results.empty()) {
      out_ += " -> (";
      for (size_t i = 0; i < results.size(); ++i) {
        if (i) out_ += ", ";
        out_ += results[i].ToString();
        if (!fn.result_attrs(i).empty()) out_ += " " + shlo::PrintAttrDictText(fn.result_attrs(i));
      }
      out_ += ")";
    }
    if (!fn.attrs().empty()) out_ += " attributes " + shlo::PrintAttrDictText(fn.attrs());
    out_ += " {\n";
    indent_ += 2;
    for (const auto& op : fn.entry().operations()) PrintOp(*op);
    indent_ -= 2;
    Indent();
    out_ += "}\n";
  }

  void PrintOp(const Operation& op) {
    Indent();
    if (op.num_results() > 0) {
      Value r0 = op.result(0);
      std::string base = names_[r0.impl()];
      if (op.num_results() > 1)
        base = base.substr(0, base.find('#')) + ":" + std::to_string(op.num_results());
      out_ += base + " = ";
    }
    const OpDef& def = op.def();
    if (def.print) {
      // The short func names resolve only directly inside a func.func body: MLIR's default
      // dialect does not reach into stablehlo regions (a call inside a while body).
      const Region* parent = op.parent_block() ? op.parent_block()->parent_region() : nullptr;
      const bool in_function_body = parent && parent->parent_op() == nullptr;
      if (op.name() == "func.return" && in_function_body)
        out_ += "return";
      else if (op.name() == "func.call" && in_function_body)
        out_ += "call";
      else
        out_ += op.name();
      def.print(op, *this);
    } else {
      out_ += shlo::QuoteString(op.name()) + "(";
      PrintOperands(op.operands());
      out_ += ")";
      // MLIR's generic form puts the regions before the attribute dictionary.
      if (op.num_regions() > 0) {
        out_ += " (";
        for (int i = 0; i < op.num_regions(); ++i) {
          if (i) out_ += ", ";
          PrintRegion(op.region(i), true);
        }
        out_ += ")";
      }
      if (!op.attrs().empty()) out_ += " " + shlo::PrintAttrDictText(op.attrs());
      out_ += " : ";
      PrintFunctionalType(op);
    }
    out_ += "\n";
  }

  // ---- OpPrinter ----
  void Print(std::string_view text) override { out_ += text; }
  void PrintOperand(Value v) override {
    auto it = names_.find(v.impl());
    out_ += it == names_.end() ? "%<<unknown value>>" : it->second;
  }
  void PrintOperands(std::span<const Value> values) override {
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) out_ += ", ";
      PrintOperand(values[i]);
    }
  }
  void PrintType(const Type& type) override { out_ += type.ToString(); }
  void PrintAttribute(const Attribute& attr) override { out_ += tlaloc::PrintAttribute(attr); }
  void PrintFunctionalType(const Operation& op) override {
    out_ += "(";
    for (int i = 0; i < op.num_operands(); ++i) {
      if (i) out_ += ", ";
      out_ += op.operand(i).type().ToString();
    }
    out_ += ") -> ";
    if (op.num_results() == 1 && !op.result(0).type().ToString().empty()) {
      out_ += op.result(0).type().ToString();
      return;
    }
    out_ += "(";
    for (int i = 0; i < op.num_results(); ++i) {
      if (i) out_ += ", ";
      out_ += op.result(i).type().ToString();
    }
    out_ += ")";
  }
  void PrintOptionalAttrDict(const AttrDict& attrs,
                             const std::vector<std::string>& elided) override {
    AttrDict rest;
    for (const auto& [k, v] : attrs)
      if (std::find(elided.begin(), elided.end(), k) == elided.end()) rest[k] = v;
    if (!rest.empty()) out_ += " " + shlo::PrintAttrDictText(rest);
  }
  void PrintRegion(const Region& region, bool print_arguments) override {
    out_ += "{\n";
    indent_ += 2;
    for (const auto& block : region.blocks()) {
      if (print_arguments && block->num_arguments() > 0) {
        out_.append(indent_ - 2, ' ');  // block labels sit at the op's indentation, as in MLIR
        out_ += "^bb0(";
        for (int i = 0; i < block->num_arguments(); ++i) {
          if (i) out_ += ", ";
          Value a = block->argument(i);
          PrintOperand(a);
          out_ += ": " + a.type().ToString();
        }
        out_ += "):\n";
      }
      for (const auto& op : block->operations()) PrintOp(*op);
    }
    indent_ -= 2;
    Indent();
    out_ += "}";
  }
  void PrintIntList(const std::vector<int64_t>& values) override {
    out_ += "[";
    for (size_t i = 0; i < values.size(); ++i) out_ += (i ? ", " : "") + std::to_string(values[i]);
    out_ += "]";
  }

  std::string& out() { return out_; }
  int& indent() { return indent_; }

 private:
  void Indent() { out_.append(indent_, ' '); }

  void NameBlockOps(const Block& block, int next_id, int next_arg) {
    for (const auto& op : block.operations()) {
      if (op->num_results() == 1) {
        names_[op->result(0).impl()] = "%" + std::to_string(next_id++);
      } else if (op->num_results() > 1) {
        std::string base = "%" + std::to_string(next_id++);
        for (int i = 0; i < op->num_results(); ++i)
          names_[op->result(i).impl()] = base + "#" + std::to_string(i);
      }
    }
    for (const auto& op : block.operations()) {
      for (const auto& region : op->regions()) {
        int arg = next_arg;
        for (const auto& b : region->blocks()) {
          for (const Value& v : b->arguments()) names_[v.impl()] = "%arg" + std::to_string(arg++);
        }
        for (const auto& b : region->blocks()) NameBlockOps(*b, next_id, arg);
      }
    }
  }

  std::string out_;
  int indent_ = 0;
  std::unordered_map<const ValueImpl*, std::string> names_;
};

}  // namespace

std::string PrintModule(const Module& module) {
  Printer p;
  std::string& out = p.out();
  out += "module";
  if (!module.name().empty())
    out += " @" + (shlo::IsBareIdentifier(module.name()) ? module.name()
                                                         : shlo::QuoteString(module.name()));
  // Shardy meshes (ir/sharding.h) are module-level sdy.mesh ops, not module attributes.
  AttrDict attrs = module.attrs();
  const auto meshes = attrs.find("sdy.meshes");
  std::string mesh_ops;
  if (meshes != attrs.end() && meshes->second.kind() == Attribute::Kind::kDict) {
    for (const auto& [name, body] : meshes->second.as_dict())
      mesh_ops += "  sdy.mesh @" + name + " = " + body.as_string() + "\n";
    attrs.erase(meshes);
  }
  if (!attrs.empty()) out += " attributes " + shlo::PrintAttrDictText(attrs);
  out += " {\n" + mesh_ops;
  p.indent() = 2;
  for (const auto& fn : module.functions()) p.PrintFunctionText(*fn);
  out += "}\n";
  return out;
}

std::string PrintFunction(const Function& function) {
  Printer p;
  p.PrintFunctionText(function);
  return p.out();
}

}  // namespace tlaloc
