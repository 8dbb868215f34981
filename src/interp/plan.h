// The interpreter's execution plan of a block: a value slot per operand and result, the slots
// that die after each op, and the chains of ops that fused kernels replace (fusion.h).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/ir/op_registry.h"

namespace tlaloc::interp {

// Computes the one result of a chain of ops from the chain's outside operands, with the same
// bits as running the ops one by one, in a single pass that keeps intermediates in cache.
struct FusedKernel {
  std::string name;  // the profile's row, e.g. "fused.softmax"
  std::function<Status(std::span<const Literal> operands, Literal& result, EvalContext& ctx)> eval;
  // Set instead of `eval` for an op of several results (a composite mapped to its kernel): the
  // results come uninitialised and the kernel fills them all.
  std::function<Status(std::span<const Literal> operands, std::span<Literal> results,
                       EvalContext& ctx)>
      eval_results = nullptr;
};

// An op's kernel with its attributes read and its views worked out when the block was planned
// (prepared_ops.h).
using PreparedFn = std::function<Status(std::span<const Literal> operands,
                                        std::vector<Literal>& results, EvalContext& ctx)>;

struct OpPlan {
  const Operation* op;
  // What runs the op: the CPU layer's kernel for it, else its reference (OpDef::eval).
  const EvalFn* eval = nullptr;
  // Runs instead of `eval` when set: the same kernel, prepared for this op (prepared_ops.h).
  PreparedFn prepared;
  std::vector<int> operand_slots;
  std::vector<int> result_slots;
  std::vector<int> release_after;  // slots dead once this op has run
  // A fused chain ends at this op: `fused` runs instead of the op, on operand_slots; the chain's
  // other ops are marked `skip`.
  const FusedKernel* fused = nullptr;
  bool skip = false;
};

struct BlockPlan {
  std::vector<int> arg_slots;
  // Fused kernels made for this block's chains (with the chain's shapes bound in); OpPlan::fused
  // points at them or at process-wide kernels.
  std::vector<std::shared_ptr<const FusedKernel>> kernels;
  std::vector<int> release_at_start;  // unused block arguments
  std::vector<OpPlan> ops;            // the terminator included (last)
};

}  // namespace tlaloc::interp
