// One registration function per op area file in src/ops/. RegisterBuiltinOps calls them all.
#pragma once

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

void RegisterCoreOps(OpRegistry& r);    // core.cc: constant, return, call
void RegisterComposite(OpRegistry& r);  // composite.cc: stablehlo.composite (from core.cc)
void RegisterElementwiseOps(
    OpRegistry& r);  // elementwise*.cc: math, bitwise, compare, convert, iota
void RegisterDataMovementOps(OpRegistry& r);  // data_movement*.cc: broadcast ... gather, scatter
void RegisterReductionOps(OpRegistry& r);     // reduction*.cc: dot_general, reduce*, sort
void RegisterControlFlowOps(OpRegistry& r);   // control_flow*.cc: while, case, custom_call, rng
void RegisterCollectiveOps(OpRegistry& r);    // collective*.cc: all_reduce ... replica_id, sdy ops

}  // namespace tlaloc::ops
