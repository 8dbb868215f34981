// The StableHLO text a PJRT plugin receives for a module: Tlaloc's printer's output, adjusted
// where XLA's frontend is stricter than Tlaloc's parser or lacks an op. Each adjustment is a
// difference between the two recorded in docs/PJRT.md ("What XLA:CPU does differently").
#pragma once

#include <string>

#include "tlaloc/ir/ir.h"
#include "tlaloc/support/status.h"

namespace tlaloc::pjrt {

struct ProgramTextOptions {
  // A per-device program (explicit collectives, partition_id) compiled for several partitions:
  // XLA refuses num_partitions > 1 without SPMD partitioning, and partitions only what is not
  // manual, so every entry argument and result without a sharding is marked
  // mhlo.sharding = "{manual}" (the program is already partitioned, as a shard_map body is).
  bool manual_shardings = false;
  // XLA:CPU has no ragged-dot ("HLO opcode `ragged-dot` is not supported by XLA:CPU
  // ThunkEmitter"): each chlo.ragged_dot becomes a call of ExpandRaggedDot's dense form.
  bool expand_ragged_dot = false;
  // The TPU form (the runbook's "what a TPU session sends"): every f32 x f32 dot_general without
  // a precision gets precision = [HIGHEST, HIGHEST]. XLA:TPU's DEFAULT computes an f32 dot in
  // one bf16 pass; HIGHEST keeps f32 accuracy, as the interpreter computes it.
  bool f32_dots_highest = false;
};

// Prints `module` for compilation with `entry` as the program:
//  - XLA compiles the function named "main" ("conversion requires module with `main`
//    function"); Tlaloc's entry may have another name (the first public function), so the
//    entry is renamed main (a function already called main that is not the entry is renamed
//    too) and every call updated;
//  - then `options`.
StatusOr<std::string> PrintProgramText(const Module& module, const Function& entry,
                                       const ProgramTextOptions& options = {});

// Replaces every chlo.ragged_dot of `module` by a call of a private function computing it with
// dot_general over a one-hot group mask (JAX's own fallback where a backend has no grouped
// matmul): rows [M, K] x [G, K, N] (or [G, N, K]) become a [M, G, K] masked copy contracted
// per group and summed over G; the ragged contraction [M, K] x [M, N] -> [G, K, N] contracts
// the masked copy over M. Exact for every row (one group's product, other groups add zeros);
// costs G times the grouped product's arithmetic. Returns how many ops it replaced.
StatusOr<int> ExpandRaggedDot(Module& module);

}  // namespace tlaloc::pjrt
