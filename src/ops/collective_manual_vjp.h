// The gradient rule of sdy.manual_computation (collective_manual_vjp.cc).
#pragma once

#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

// The operands' cotangents: a manual computation over the same manual axes whose body is the
// forward body's reverse mode on the parts (see the .cc). Integer operands get none.
StatusOr<std::vector<Value>> ManualComputationVjp(OpBuilder& b, const Operation& op,
                                                  const std::vector<Value>& operands,
                                                  const std::vector<Value>& results,
                                                  const std::vector<Value>& result_cotangents);

}  // namespace tlaloc::ops
