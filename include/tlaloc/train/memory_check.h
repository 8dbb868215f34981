// The train-step program's memory budget (tlaloc/runtime/memory_budget.h), checked by the
// Trainer after compiling train_step and before its first execution.
#pragma once

#include <cstdint>

#include "tlaloc/runtime/memory_budget.h"  // ResidentBytes for the callers
#include "tlaloc/support/status.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// `resident_bytes`: the master weights and moments already on the backend. The refusal names
// what would make a step of batch x seq_len fit with these options.
Status CheckTrainStepFits(Backend& backend, CompiledProgram& step_program,
                          const TrainOptions& options, int64_t batch, int64_t seq_len,
                          int64_t resident_bytes);

}  // namespace tlaloc::train
