#include "tlaloc/train/memory_check.h"

#include <string>

namespace tlaloc::train {

Status CheckTrainStepFits(Backend& backend, CompiledProgram& step_program,
                          const TrainOptions& options, int64_t batch, int64_t seq_len,
                          int64_t resident_bytes) {
  MemoryBudgetRequest request;
  request.program =
      "train_step (batch " + std::to_string(batch) + " x seq_len " + std::to_string(seq_len) + ")";
  request.resident_bytes = resident_bytes;
  request.hint = "a smaller batch (--batch) or sequence length (--seq-len)";
  if (!options.remat_layers) request.hint += ", recomputing layers in the backward pass (--remat)";
  if (options.compute_dtype == ElementType::kF32) request.hint += ", bf16 compute";
  request.hint += ", or more devices";
  return CheckMemoryBudget(backend, step_program, request);
}

Status CheckDeviceStepFits(Backend& backend, CompiledProgram& step_program,
                           const TrainOptions& options, const shard::ShardingPlan& plan,
                           int64_t seq_len, int device, int64_t resident_bytes) {
  MemoryBudgetRequest request;
  request.program = "train_step on device " + std::to_string(device) + " (plan " +
                    std::string(plan.name()) + " over mesh " + plan.mesh().ToString() + ", batch " +
                    std::to_string(plan.batch()) + " x seq_len " + std::to_string(seq_len) + ", " +
                    std::to_string(plan.local_batch()) + " row(s) on this device)";
  request.resident_bytes = resident_bytes;
  request.device = device;
  request.hint = "a smaller batch (--batch) or sequence length (--seq-len), more devices (--mesh)";
  if (plan.kind() != shard::PlanKind::kFsdp)
    request.hint += ", the fsdp plan (--plan fsdp: weights and moments split over the devices)";
  if (options.compute_dtype == ElementType::kF32) request.hint += ", bf16 compute";
  if (!options.remat_layers) request.hint += ", or recomputing layers in the backward pass (remat)";
  return CheckMemoryBudget(backend, step_program, request);
}

}  // namespace tlaloc::train
