// A generation step program's memory budget (tlaloc/runtime/memory_budget.h), checked by the
// Engine after compiling a prefill or decode-step program and before running it.
#pragma once

#include <cstdint>
#include <string>

#include "tlaloc/models/family.h"
#include "tlaloc/runtime/memory_budget.h"  // ResidentBytes for the callers
#include "tlaloc/support/status.h"

namespace tlaloc::generate {

// `resident_bytes`: the weights and KV caches already on `device` (each device of a
// tensor-parallel engine holds its part). The refusal names what would make a step of `shape` fit.
Status CheckStepFits(Backend& backend, CompiledProgram& program, const models::StepShape& shape,
                     int64_t resident_bytes, int device = 0);

// Checked before allocating the KV cache: `buffers` caches of `cache_type` for `shape`'s slots
// and positions on `device`.
Status CheckCacheFits(Backend& backend, const TensorType& cache_type, int64_t buffers,
                      const models::StepShape& shape, int device = 0);

}  // namespace tlaloc::generate
