#include "tlaloc/ir/op_registry.h"

#include <cstdio>
#include <cstdlib>

namespace tlaloc {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterBuiltinOps(*r);
    return r;
  }();
  return *registry;
}

OpDef& OpRegistry::Register(OpDef def) {
  auto [it, inserted] = defs_.emplace(def.name, nullptr);
  if (!inserted) {
    std::fprintf(stderr, "tlaloc: op %s registered twice\n", def.name.c_str());
    std::abort();
  }
  it->second = std::make_unique<OpDef>(std::move(def));
  return *it->second;
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : it->second.get();
}

StatusOr<const OpDef*> OpRegistry::Get(std::string_view name) const {
  if (const OpDef* d = Find(name)) return d;
  return Unimplemented("unknown operation '" + std::string(name) + "'");
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> r;
  for (const auto& [_, d] : defs_) r.push_back(d.get());
  return r;
}

}  // namespace tlaloc
