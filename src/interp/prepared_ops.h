// Kernels prepared when a block is planned: for the ops a decode step runs most (dot_general and
// dot, slice, transpose, broadcast_in_dim, concatenate, dynamic_slice, dynamic_update_slice),
// what the op's evaluation would read from its attributes and static types on every call
// (dimension numbers, strides, box shapes and views) is worked out once, so a call does no
// attribute lookups and allocates nothing of its own; a constant shares its attribute's bytes
// without looking it up, and an iota (up to 4 MiB) is evaluated once and shared. The op's registry
// entry stays its meaning and reference; a prepared kernel runs the same functions on the same
// views (the box copies of ops/data_movement_boxes.h, the products of cpu/reduction_matmul.h), so
// the bits are the same. TLALOC_PREPARED_OPS=0 turns them off (as TLALOC_CPU_KERNELS=0 does, with
// every other kernel).
#pragma once

#include "plan.h"

namespace tlaloc::interp {

// The prepared kernel of `op`, or null when it has none (or its case is not one a prepared
// kernel takes): OpPlan::eval runs it then.
PreparedFn PrepareOp(const Operation& op);

// TLALOC_PREPARED_OPS=0 in the environment (read each time).
bool PreparedOpsDisabledByEnvironment();

}  // namespace tlaloc::interp
