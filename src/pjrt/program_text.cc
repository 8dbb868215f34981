#include "tlaloc/pjrt/program_text.h"

#include <map>

#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::pjrt {
namespace {

// Renames the callee of every func.call in `block` (and the regions below it).
void RenameCalls(Block& block, const std::map<std::string, std::string>& renamed) {
  for (auto& op : block.mutable_operations()) {
    if (op->name() == "func.call") {
      const Attribute* callee = FindAttr(op->attrs(), "callee");
      if (callee != nullptr && callee->kind() == Attribute::Kind::kSymbol) {
        auto it = renamed.find(callee->as_string());
        if (it != renamed.end()) op->attrs()["callee"] = Attribute::Symbol(it->second);
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

}  // namespace

StatusOr<std::string> PrintProgramText(const Module& module, const Function& entry) {
  std::string text = PrintModule(module);
  if (entry.name() == "main") return text;
  // A copy to rename in: the module is shared and const. Printing and parsing round-trips
  // (the printer's contract), so the copy is the same program.
  TL_ASSIGN_OR_RETURN(auto copy, ParseModule(text, module.name()));
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
  return PrintModule(*copy);
}

}  // namespace tlaloc::pjrt
