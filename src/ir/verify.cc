#include <set>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc {

namespace {

std::string TypeList(const std::vector<Type>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].ToString();
  return s + ")";
}

class Verifier {
 public:
  Verifier(const Module* module, const Function& fn) : module_(module), fn_(fn) {}

  Status VerifyBlock(const Block& block) {
    for (Value a : block.arguments()) visible_.insert(a.impl());
    for (const auto& op_ptr : block.operations()) {
      const Operation& op = *op_ptr;
      std::string where = "in @" + fn_.name() + ", " + op.name();
      for (int i = 0; i < op.num_operands(); ++i) {
        if (!op.operand(i))
          return InvalidArgument(where + ": operand " + std::to_string(i) + " is null");
        if (!visible_.count(op.operand(i).impl()))
          return InvalidArgument(where + ": operand " + std::to_string(i) +
                                 " is used before it is defined (or outside its scope)");
      }
      if (op.def().num_regions >= 0 && op.num_regions() != op.def().num_regions)
        return InvalidArgument(where + ": expected " + std::to_string(op.def().num_regions) +
                               " regions, has " + std::to_string(op.num_regions()));
      // Regions see the values defined so far (StableHLO regions are isolated in practice,
      // but nothing is lost by allowing captures).
      for (const auto& region : op.regions()) {
        if (region->blocks().size() != 1)
          return InvalidArgument(where + ": each region must have exactly one block");
        std::set<const ValueImpl*> saved = visible_;
        TL_RETURN_IF_ERROR(VerifyBlock(region->front()));
        const Operation* term = region->front().terminator();
        if (!term || !term->def().traits.terminator)
          return InvalidArgument(where + ": region does not end with a return");
        visible_ = std::move(saved);
      }
      std::vector<Type> declared = op.result_types();
      InferInput in{op.operand_types(), op.attrs(), op.regions(), &declared};
      auto inferred = op.def().infer(in);
      if (!inferred.ok()) return inferred.status().WithContext(where);
      if (!(*inferred == declared))
        return InvalidArgument(where + ": result types " + TypeList(declared) +
                               " do not match the inferred " + TypeList(*inferred));
      if (op.name() == "func.call") TL_RETURN_IF_ERROR(VerifyCall(op, where, "callee"));
      if (op.name() == "stablehlo.composite")
        TL_RETURN_IF_ERROR(VerifyCall(op, where, "decomposition"));
      for (Value r : op.results()) visible_.insert(r.impl());
      if (op.def().traits.terminator && &op != block.terminator())
        return InvalidArgument(where + ": a return must be the last operation of its block");
    }
    return OkStatus();
  }

  // A func.call's callee, or a stablehlo.composite's decomposition (`symbol` names which).
  Status VerifyCall(const Operation& op, const std::string& where, const std::string& symbol) {
    if (!module_) return OkStatus();
    std::string callee = GetStringAttr(op.attrs(), symbol);
    const Function* f = module_->Find(callee);
    if (!f) return InvalidArgument(where + ": calls unknown function @" + callee);
    if (!(f->argument_types() == op.operand_types()))
      return InvalidArgument(where + ": arguments " + TypeList(op.operand_types()) +
                             " do not match @" + callee + "'s parameters " +
                             TypeList(f->argument_types()));
    if (!(f->result_types() == op.result_types()))
      return InvalidArgument(where + ": results " + TypeList(op.result_types()) +
                             " do not match @" + callee + "'s results " +
                             TypeList(f->result_types()));
    return OkStatus();
  }

  Status Run() {
    TL_RETURN_IF_ERROR(VerifyBlock(fn_.entry()));
    const Operation* term = fn_.entry().terminator();
    if (!term || !term->def().traits.terminator)
      return InvalidArgument("@" + fn_.name() + " does not end with a return");
    if (!(term->operand_types() == fn_.result_types()))
      return InvalidArgument("@" + fn_.name() + " returns " + TypeList(term->operand_types()) +
                             " but is declared to return " + TypeList(fn_.result_types()));
    return OkStatus();
  }

 private:
  const Module* module_;
  const Function& fn_;
  std::set<const ValueImpl*> visible_;
};

}  // namespace

Status VerifyFunction(const Function& function, const Module* module) {
  return Verifier(module, function).Run();
}

Status Verify(const Module& module) {
  std::set<std::string> names;
  for (const auto& f : module.functions()) {
    if (!names.insert(f->name()).second)
      return InvalidArgument("function @" + f->name() + " is defined twice");
    TL_RETURN_IF_ERROR(VerifyFunction(*f, &module));
  }
  return OkStatus();
}

}  // namespace tlaloc
