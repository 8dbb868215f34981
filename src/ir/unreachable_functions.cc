// Module::RemoveUnreachableFunctions: a mark-and-sweep over the module's symbol references.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

namespace {

// Every function name an attribute may carry. Any string or symbol counts: a reference the
// walk cannot tell from plain text keeps its function rather than leaving a dangling symbol.
void CollectNames(const Attribute& a, std::vector<std::string>& out) {
  switch (a.kind()) {
    case Attribute::Kind::kString:
    case Attribute::Kind::kSymbol:
      out.push_back(a.as_string());
      break;
    case Attribute::Kind::kArray:
      for (const Attribute& e : a.as_array()) CollectNames(e, out);
      break;
    case Attribute::Kind::kDict:
    case Attribute::Kind::kStruct:
      for (const auto& [key, v] : a.as_dict()) CollectNames(v, out);
      break;
    default:
      break;
  }
}

void CollectNames(const Block& block, std::vector<std::string>& out) {
  for (const auto& op : block.operations()) {
    for (const auto& [key, a] : op->attrs()) CollectNames(a, out);
    for (const auto& region : op->regions())
      for (const auto& b : region->blocks()) CollectNames(*b, out);
  }
}

}  // namespace

int Module::RemoveUnreachableFunctions(const std::set<std::string>& candidates) {
  std::map<std::string, const Function*> by_name;
  for (const auto& f : functions_) by_name.emplace(f->name(), f.get());
  std::set<const Function*> reached;
  std::vector<const Function*> todo;
  for (const auto& f : functions_)
    if ((f->is_public() || !candidates.count(f->name())) && reached.insert(f.get()).second)
      todo.push_back(f.get());
  while (!todo.empty()) {
    const Function* f = todo.back();
    todo.pop_back();
    std::vector<std::string> names;
    for (const auto& b : f->body().blocks()) CollectNames(*b, names);
    for (const std::string& name : names) {
      auto it = by_name.find(name);
      if (it != by_name.end() && reached.insert(it->second).second) todo.push_back(it->second);
    }
  }
  const size_t before = functions_.size();
  std::erase_if(functions_,
                [&](const std::unique_ptr<Function>& f) { return !reached.count(f.get()); });
  return static_cast<int>(before - functions_.size());
}

}  // namespace tlaloc
