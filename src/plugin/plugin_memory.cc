// Device memory of Tlaloc's plugin: every buffer's bytes are counted on its device while it
// holds its storage, and PJRT_Device_MemoryStats reports them with a limit, so that a client
// can refuse a program that cannot fit before running it (runtime/memory_budget.h).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "plugin/plugin_internal.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc::plugin {

void HoldLiteral(PJRT_Buffer* b, Literal literal) {
  DropLiteral(b);
  b->literal = std::move(literal);
  b->counted_bytes = b->literal.valid() ? b->literal.byte_size() : 0;
  if (b->device == nullptr || b->counted_bytes == 0) return;
  const int64_t now = b->device->bytes_in_use.fetch_add(b->counted_bytes) + b->counted_bytes;
  int64_t peak = b->device->peak_bytes_in_use.load();
  while (now > peak && !b->device->peak_bytes_in_use.compare_exchange_weak(peak, now)) {
  }
}

void DropLiteral(PJRT_Buffer* b) {
  b->literal = Literal();
  if (b->device != nullptr && b->counted_bytes != 0)
    b->device->bytes_in_use.fetch_sub(b->counted_bytes);
  b->counted_bytes = 0;
}

namespace {

// TLALOC_PLUGIN_MEMORY_BYTES: each device's limit in bytes (tests, or a share of a machine
// set by hand); unset or 0: what the process can still take, shared by this node's devices.
StatusOr<int64_t> ConfiguredLimit() {
  const char* env = std::getenv("TLALOC_PLUGIN_MEMORY_BYTES");
  if (env == nullptr || *env == '\0') return int64_t{0};
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0)
    return InvalidArgument("TLALOC_PLUGIN_MEMORY_BYTES='" + std::string(env) +
                           "': expected a byte count >= 0");
  return static_cast<int64_t>(v);
}

}  // namespace

// Reads and writes only the fields up to bytes_limit_is_set, so a client with an older header
// (a shorter struct) is served too.
PJRT_Error* Plugin_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args) {
  constexpr const char* fn = "PJRT_Device_MemoryStats";
  if (PJRT_Error* e = CheckArgs(args, args ? args->struct_size : 0,
                                PJRT_Device_MemoryStats_Args_LIMIT_SIZE, fn))
    return e;
  TL_PLUGIN_REQUIRE(args->device != nullptr, INVALID_ARGUMENT, std::string(fn) + ": null device");
  PJRT_Device& device = *args->device;
  auto limit = ConfiguredLimit();
  if (!limit.ok()) return FromStatus(limit.status().WithContext(fn));
  const int64_t in_use = device.bytes_in_use.load();
  args->bytes_in_use = in_use;
  args->peak_bytes_in_use = device.peak_bytes_in_use.load();
  args->peak_bytes_in_use_is_set = true;
  args->bytes_limit_is_set = true;
  if (*limit > 0) {
    args->bytes_limit = *limit;
    return nullptr;
  }
  // The buffers in use are already allocated: the limit is them plus this device's share of
  // what the process can still take.
  const std::optional<uint64_t> available = AvailableMemoryBytes();
  if (!available) {
    args->bytes_limit_is_set = false;
    return nullptr;
  }
  const size_t local_devices =
      std::max<size_t>(device.client ? device.client->device_list.size() : 1, 1);
  args->bytes_limit =
      in_use + static_cast<int64_t>(std::min<uint64_t>(*available / local_devices, INT64_MAX / 2));
  return nullptr;
}

}  // namespace tlaloc::plugin
