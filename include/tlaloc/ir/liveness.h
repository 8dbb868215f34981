// Which ops of a block use each value, for planning buffer lifetimes (the interpreter, the
// PJRT plugin's memory estimate) and for matching chains of ops (the interpreter's fusion).
// A use inside an op's nested regions counts as a use by that op: the value must stay alive
// until the op that holds the region has run.
#pragma once

#include <unordered_map>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc {

class BlockUses {
 public:
  explicit BlockUses(const Block& block);

  // Indices (into block.operations()) of the ops using `v`, ascending, one entry per use: an op
  // taking v twice, or whose regions use it twice, appears twice. Empty when nothing uses v.
  const std::vector<int>& Users(Value v) const;
  // The op using `v`, when it has exactly one use; -1 when it has none or several.
  int OnlyUser(Value v) const;
  // The last op using `v` (after it, v is dead in this block), or -1 when nothing uses it.
  int LastUse(Value v) const;

 private:
  void AddRegionUses(const Operation& op, int owner);
  std::unordered_map<const ValueImpl*, std::vector<int>> users_;
};

}  // namespace tlaloc
