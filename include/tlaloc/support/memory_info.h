// How much memory this process can still take: the kernel's MemAvailable, lowered by a cgroup
// (v2 memory.max - memory.current, or v1 limit - usage) and RLIMIT_AS when those are tighter. Used
// to refuse work that cannot fit before allocating, instead of being killed or aborting with
// std::bad_alloc half-way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tlaloc {

// Bytes available to this process now; nullopt when nothing can be read (not Linux).
std::optional<uint64_t> AvailableMemoryBytes();

// True when `ulimit -v` (RLIMIT_AS) gives the smallest of AvailableMemoryBytes' figures: running
// out then makes an allocation fail (and the buffer cache give back its blocks) rather than the
// kernel kill the process.
bool AddressSpaceLimitBinds();

// "1.5 GiB", "300.0 MiB" (binary units, `decimals` after the point): sizes in messages.
std::string FormatBytes(uint64_t bytes, int decimals = 1);

}  // namespace tlaloc
