#include "tlaloc/ir/rewrite.h"

namespace tlaloc {

void ReplaceUses(Operation& op, ValueImpl* from, Value to) {
  for (int i = 0; i < op.num_operands(); ++i)
    if (op.operand(i).impl() == from) op.set_operand(i, to);
  for (const auto& r : op.regions())
    for (const auto& b : r->blocks())
      for (const auto& inner : b->operations()) ReplaceUses(*inner, from, to);
}

}  // namespace tlaloc
