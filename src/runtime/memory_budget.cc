#include "tlaloc/runtime/memory_budget.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "tlaloc/support/buffer_cache.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc {

namespace {

bool CheckDisabledByEnvironment() {
  const char* env = std::getenv("TLALOC_MEMORY_CHECK");
  return env && std::string(env) == "0";
}

std::string Bytes(int64_t bytes) {
  return FormatBytes(static_cast<uint64_t>(std::max<int64_t>(bytes, 0))) + " (" +
         std::to_string(bytes) + " bytes)";
}

// A skipped check is said once per process, not at every program an engine compiles.
void NoteSkipped(const std::string& why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr, "note: memory budget not checked: %s\n", why.c_str());
}

}  // namespace

int64_t HostOverheadBytes(int64_t live_peak_bytes) {
  const int64_t margin =
      kAllocatorMarginBytes + std::max<int64_t>(live_peak_bytes, 0) / kAllocatorMarginDivisor;
  if (AddressSpaceLimitBinds()) return margin;
  const BufferCache::Stats cache = BufferCache::Global().stats();
  const int64_t cache_headroom = static_cast<int64_t>(BufferCache::Global().capacity_bytes()) -
                                 static_cast<int64_t>(cache.cached_bytes);
  return margin + std::max<int64_t>(cache_headroom, 0);
}

int64_t PredictedPeakBytes(const ProgramMemoryStats& stats) {
  return stats.argument_bytes + stats.output_bytes + stats.temp_bytes - stats.alias_bytes +
         stats.overhead_bytes;
}

Status CheckMemoryFits(const ProgramMemoryStats& stats, int64_t available_bytes,
                       const MemoryBudgetRequest& request) {
  const int64_t peak = PredictedPeakBytes(stats);
  const int64_t needed = peak - std::min(request.resident_bytes, peak);
  if (needed <= available_bytes) return OkStatus();
  std::string message =
      "the " + request.program + " program needs about " + Bytes(peak) +
      " at its peak (arguments " + FormatBytes(stats.argument_bytes) + ", outputs " +
      FormatBytes(stats.output_bytes) + ", temporaries " + FormatBytes(stats.temp_bytes) +
      ", aliased " + FormatBytes(stats.alias_bytes) +
      (stats.overhead_bytes > 0
           ? ", buffer cache and allocator " + FormatBytes(stats.overhead_bytes)
           : std::string()) +
      "); " + Bytes(request.resident_bytes) + " of it is already allocated, so it needs " +
      Bytes(needed) + " more, but only " + Bytes(available_bytes) + " is available";
  if (!request.hint.empty()) message += ". To fit, try " + request.hint;
  message += " (TLALOC_MEMORY_CHECK=0 runs it anyway)";
  return ResourceExhausted(message);
}

Status CheckMemoryBudget(Backend& backend, CompiledProgram& program,
                         const MemoryBudgetRequest& request) {
  if (CheckDisabledByEnvironment()) return OkStatus();
  StatusOr<ProgramMemoryStats> stats = backend.MemoryStats(program);
  if (!stats.ok()) {
    NoteSkipped(backend.name() + " gives no memory statistics for " + request.program + " (" +
                stats.status().message() + ")");
    return OkStatus();
  }
  StatusOr<int64_t> available = backend.AvailableDeviceMemory(request.device);
  if (!available.ok()) {
    NoteSkipped(available.status().message());
    return OkStatus();
  }
  return CheckMemoryFits(*stats, *available, request);
}

Status CheckAllocationBudget(Backend& backend, int64_t bytes, const MemoryBudgetRequest& request) {
  if (CheckDisabledByEnvironment()) return OkStatus();
  StatusOr<int64_t> available = backend.AvailableDeviceMemory(request.device);
  if (!available.ok()) {
    NoteSkipped(available.status().message());
    return OkStatus();
  }
  if (bytes <= *available) return OkStatus();
  std::string message = request.program + " needs " + Bytes(bytes) + ", but only " +
                        Bytes(*available) + " is available";
  if (!request.hint.empty()) message += ". To fit, try " + request.hint;
  message += " (TLALOC_MEMORY_CHECK=0 allocates it anyway)";
  return ResourceExhausted(message);
}

int64_t ResidentBytes(const std::vector<std::unique_ptr<DeviceBuffer>>& buffers) {
  int64_t bytes = 0;
  for (const auto& b : buffers)
    if (b && !b->is_deleted()) bytes += b->type().byte_size();
  return bytes;
}

}  // namespace tlaloc
