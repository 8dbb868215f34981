// The train-step program's memory budget (tlaloc/runtime/memory_budget.h), checked by the
// Trainer after compiling train_step and before its first execution, and by the ShardedTrainer
// on each device it holds.
#pragma once

#include <cstdint>

#include "tlaloc/runtime/memory_budget.h"  // ResidentBytes for the callers
#include "tlaloc/shard/plan.h"
#include "tlaloc/support/status.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// `resident_bytes`: the master weights and moments already on the backend. The refusal names
// what would make a step of batch x seq_len fit with these options.
Status CheckTrainStepFits(Backend& backend, CompiledProgram& step_program,
                          const TrainOptions& options, int64_t batch, int64_t seq_len,
                          int64_t resident_bytes);

// The sharded trainer's per-device step (ShardedTrainer), checked on device `device` after
// compiling it and before the first step: `resident_bytes` is that device's part of the weights
// and moments. The refusal names the plan and mesh and what would make the step fit (a smaller
// batch, more devices, fsdp, bf16, remat).
Status CheckDeviceStepFits(Backend& backend, CompiledProgram& step_program,
                           const TrainOptions& options, const shard::ShardingPlan& plan,
                           int64_t seq_len, int device, int64_t resident_bytes);

}  // namespace tlaloc::train
