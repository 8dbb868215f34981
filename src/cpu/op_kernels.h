// The CPU layer's op kernels, which kernel_table.cc registers under their ops' names. Each has
// the EvalFn signature and hands the cases it does not take to the op's reference
// (op.def().eval).
#pragma once

#include <span>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::cpu {

// stablehlo.dot_general and stablehlo.dot (dot_kernels.cc).
Status DotKernel(const Operation& op, std::span<const Literal> operands,
                 std::vector<Literal>& results, EvalContext& ctx);
// chlo.ragged_dot (dot_kernels.cc).
Status RaggedDotKernel(const Operation& op, std::span<const Literal> operands,
                       std::vector<Literal>& results, EvalContext& ctx);
// stablehlo.reduce of f32 rows over trailing dimensions (kernel_table.cc).
Status ReduceKernel(const Operation& op, std::span<const Literal> operands,
                    std::vector<Literal>& results, EvalContext& ctx);

}  // namespace tlaloc::cpu
