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

}  // namespace tlaloc::train
