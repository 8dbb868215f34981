// Small rewrites shared by the passes that splice operations into a block (kernelize, the
// sharding pass's manual kernels, the PJRT client's ragged-dot expansion).
#pragma once

#include "tlaloc/ir/ir.h"

namespace tlaloc {

// Replaces every use of `from` by `to` in `op`'s operands and in the operations nested in its
// regions.
void ReplaceUses(Operation& op, ValueImpl* from, Value to);

}  // namespace tlaloc
