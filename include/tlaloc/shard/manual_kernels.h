// Kernels in the global (Shardy-annotated) form of a generation step program. XLA's partitioner
// cannot look into a kernel's stablehlo.custom_call, so each goes inside an
// sdy.manual_computation over every mesh axis: the call runs per device on its operands' local
// parts, and the op's in/out shardings tell the partitioner how the global values are split.
// (Universal kernels are StableHLO functions reached by func.call, which the partitioner
// partitions like any other StableHLO: they stay as they are.)
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/models/signature.h"
#include "tlaloc/shard/plan.h"

namespace tlaloc::shard {

// The step program `function` of `signature` as the global program of `plan`: the plan's mesh
// (sdy.mesh @mesh), each weight's and KV pool's sdy.sharding (pools [blocks, kv_heads, page,
// head_dim]: kv heads over `model`), the other arguments and results replicated, the updated
// pools as their arguments. Build the program with ParallelHooks::annotate set to the plan's
// activation constraints (GenerationAnnotateHook) for the intermediates.
Status AnnotateGenerationStep(Module& module, const std::string& function,
                              const models::ProgramSignature& signature, const ShardingPlan& plan);
// The hook that marks q/k/v ("heads") and the residual stream ("hidden") with `plan`'s shardings.
std::function<Tensor(std::string_view what, const Tensor&)> GenerationAnnotateHook(
    const ShardingPlan& plan);

// The sharding the program gives `v`: an argument's sdy.sharding, an sdy.sharding_constraint's,
// or that of the operand of the same shape of an elementwise op (or convert) it comes from;
// replicated when none.
Sharding ValueSharding(const Function& fn, Value v, const Mesh& mesh);

// Puts every stablehlo.custom_call in `function`'s body inside an sdy.manual_computation over
// all axes of the module's mesh @mesh. The shardings are chosen so that the per-device call
// computes its part of the global result for any kernel whose rows are independent (Tlaloc's
// kernel layers: RMSNorm, SiluAndMul, rotary, attention over batch and heads): an operand keeps
// the split the program gives it except on its last dimension (which a kernel may reduce or
// contract), a result takes the sharding of an operand of its shape, and a call where some split
// operand is not of a result's shape and sharding gets every operand and result replicated
// (the whole computation on every device: always right, at the cost of a gather). Returns how
// many calls it wrapped.
StatusOr<int> PlaceKernelsInManualComputations(Module& module, const std::string& function);

}  // namespace tlaloc::shard
