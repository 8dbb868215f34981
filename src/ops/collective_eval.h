// Interpreter semantics of the collective ops (collective.cc registers them). Each device
// thread evaluates its own copy of the op: it hands its operands to the group through the
// thread's CollectiveContext (ir/collectives.h), receives every member's operands and computes
// its own results from them. Reductions fold the members in ascending device id, whatever the
// group's written order, so every member gets the same bits and no result depends on which
// thread arrived first.
#pragma once

#include "tlaloc/ir/op_registry.h"

namespace tlaloc::ops {

Status EvalAllReduce(const Operation& op, std::span<const Literal> operands,
                     std::vector<Literal>& results, EvalContext& ctx);
Status EvalAllGather(const Operation& op, std::span<const Literal> operands,
                     std::vector<Literal>& results, EvalContext& ctx);
Status EvalReduceScatter(const Operation& op, std::span<const Literal> operands,
                         std::vector<Literal>& results, EvalContext& ctx);
Status EvalAllToAll(const Operation& op, std::span<const Literal> operands,
                    std::vector<Literal>& results, EvalContext& ctx);
Status EvalCollectivePermute(const Operation& op, std::span<const Literal> operands,
                             std::vector<Literal>& results, EvalContext& ctx);
Status EvalCollectiveBroadcast(const Operation& op, std::span<const Literal> operands,
                               std::vector<Literal>& results, EvalContext& ctx);

// Checks source_target_pairs (rows of two, unique sources, unique targets, ids in [0, bound))
// and returns them; `unit` ("replica", "partition") names the ids in errors.
StatusOr<std::vector<std::pair<int64_t, int64_t>>> SourceTargetPairs(const AttrDict& attrs,
                                                                     int64_t bound,
                                                                     const std::string& unit);

}  // namespace tlaloc::ops
