// The memory budget checked before a compiled program first runs: its predicted peak
// (Backend::MemoryStats: arguments + outputs + temporaries, an output written into a donated
// argument counted once) against what the target still has (Backend::AvailableDeviceMemory), so
// a run that cannot fit stops with the figures instead of being killed by the kernel half-way.
// TLALOC_MEMORY_CHECK=0 in the environment turns the check off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/runtime/backend.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

struct MemoryBudgetRequest {
  std::string program;  // named in the message: "train_step", "decode-step"
  // Bytes of the program's arguments that are already allocated on the target (weights, KV
  // caches, optimizer moments): the available figure was read after they were allocated.
  int64_t resident_bytes = 0;
  // What would make it fit, for the message: "a smaller --batch or --seq-len, ...".
  std::string hint;
  int device = 0;
};

// What a host-memory backend takes beyond a program's live tensors of `live_peak_bytes`: a
// stated allocator margin, kAllocatorMarginBytes plus 1/kAllocatorMarginDivisor of the peak (page
// rounding, malloc headers, thread arenas), and the freed blocks the process-wide buffer cache may
// still take in during the run (its capacity, TLALOC_BUFFER_CACHE_MB, less what it holds now,
// which is already counted as used). The cache's part is left out where `ulimit -v` is the
// binding limit (AddressSpaceLimitBinds): there a failing allocation empties the cache and
// retries, while under a cgroup or the machine's memory the kernel kills the process instead.
inline constexpr int64_t kAllocatorMarginBytes = int64_t{64} << 20;
inline constexpr int64_t kAllocatorMarginDivisor = 32;
int64_t HostOverheadBytes(int64_t live_peak_bytes);

// The bytes the program needs at its peak: argument + output + temp - alias + overhead.
int64_t PredictedPeakBytes(const ProgramMemoryStats& stats);

// OkStatus when the predicted peak, less the resident bytes, fits in `available_bytes`;
// otherwise ResourceExhausted naming the program, the predicted, resident and available bytes
// and the hint.
Status CheckMemoryFits(const ProgramMemoryStats& stats, int64_t available_bytes,
                       const MemoryBudgetRequest& request);

// Reads the program's statistics and the target's available memory from `backend` and checks
// them. A backend that reports neither is not refused (a note goes to stderr once per process);
// TLALOC_MEMORY_CHECK=0 skips the check.
Status CheckMemoryBudget(Backend& backend, CompiledProgram& program,
                         const MemoryBudgetRequest& request);

// The same for `bytes` allocated outside a program (a KV cache): ResourceExhausted naming
// request.program as the thing allocated when they exceed what the target has.
Status CheckAllocationBudget(Backend& backend, int64_t bytes, const MemoryBudgetRequest& request);

// Sum of the buffers' sizes (null or deleted ones count nothing): the resident bytes.
int64_t ResidentBytes(const std::vector<std::unique_ptr<DeviceBuffer>>& buffers);

}  // namespace tlaloc
