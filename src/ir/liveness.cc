#include "tlaloc/ir/liveness.h"

namespace tlaloc {

BlockUses::BlockUses(const Block& block) {
  const auto& ops = block.operations();
  for (size_t i = 0; i < ops.size(); ++i) {
    const int at = static_cast<int>(i);
    for (Value v : ops[i]->operands()) users_[v.impl()].push_back(at);
    AddRegionUses(*ops[i], at);
  }
}

// Values defined inside the regions get entries too; callers only ask about values of `block`.
void BlockUses::AddRegionUses(const Operation& op, int owner) {
  for (const auto& region : op.regions())
    for (const auto& inner : region->blocks())
      for (const auto& inner_op : inner->operations()) {
        for (Value v : inner_op->operands()) users_[v.impl()].push_back(owner);
        AddRegionUses(*inner_op, owner);
      }
}

const std::vector<int>& BlockUses::Users(Value v) const {
  static const std::vector<int> none;
  auto it = users_.find(v.impl());
  return it == users_.end() ? none : it->second;
}

int BlockUses::OnlyUser(Value v) const {
  const std::vector<int>& users = Users(v);
  return users.size() == 1 ? users[0] : -1;
}

int BlockUses::LastUse(Value v) const {
  const std::vector<int>& users = Users(v);
  return users.empty() ? -1 : users.back();
}

}  // namespace tlaloc
