#include "tlaloc/generate/memory_check.h"

#include <string>

namespace tlaloc::generate {

Status CheckStepFits(Backend& backend, CompiledProgram& program, const models::StepShape& shape,
                     int64_t resident_bytes, int device) {
  const bool prefill = shape.kind == models::StepKind::kPrefill;
  MemoryBudgetRequest request;
  request.program =
      std::string(prefill ? "prefill" : "decode-step") + " (" + std::to_string(shape.batch) +
      " row(s)" + (prefill ? " x " + std::to_string(shape.prompt_len) + " tokens" : "") + ", " +
      (shape.paged() ? "attending over " + std::to_string(shape.table_blocks) + " block(s) of " +
                           std::to_string(shape.page_size) + " positions)"
                     : std::to_string(shape.slots()) + " slot(s) x " +
                           std::to_string(shape.max_len) + " positions)");
  request.resident_bytes = resident_bytes;
  request.device = device;
  request.hint = "a shorter context (--ctx-size) or prompt, fewer slots";
  if (shape.dtype == ElementType::kF32) request.hint += ", bf16 weights (--dtype bf16)";
  request.hint += ", or more devices";
  return CheckMemoryBudget(backend, program, request);
}

Status CheckCacheFits(Backend& backend, const TensorType& cache_type, int64_t buffers,
                      const models::StepShape& shape, int device) {
  MemoryBudgetRequest request;
  request.device = device;
  request.program =
      "the KV cache (" + std::to_string(buffers) + " x " + cache_type.ToString() + ": " +
      (shape.paged() ? std::to_string(shape.num_blocks) + " block(s) of " +
                           std::to_string(shape.page_size) + " positions for "
                     : std::string()) +
      std::to_string(shape.slots()) + " slot(s) x " + std::to_string(shape.max_len) + " positions)";
  request.hint = "a shorter context (--ctx-size) or fewer new tokens (-n), fewer slots";
  if (shape.paged()) request.hint += " or KV blocks (--kv-blocks)";
  if (shape.cache_dtype() == ElementType::kF32)
    request.hint += ", a bf16 cache (--kv-dtype bf16, or --dtype bf16)";
  request.hint += ", or more devices";
  return CheckAllocationBudget(backend, buffers * cache_type.byte_size(), request);
}

}  // namespace tlaloc::generate
