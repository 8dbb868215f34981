#include "tlaloc/support/memory_info.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tlaloc {

namespace {

std::optional<uint64_t> ReadNumber(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<uint64_t> MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

// What the process's cgroup still allows (v2 first, then v1), if it has a limit.
std::optional<uint64_t> CgroupRoom() {
  if (auto max = ReadNumber("/sys/fs/cgroup/memory.max")) {
    const uint64_t used = ReadNumber("/sys/fs/cgroup/memory.current").value_or(0);
    return *max > used ? *max - used : 0;
  }
  if (auto limit = ReadNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes");
      limit && *limit < (uint64_t{1} << 60)) {
    const uint64_t used = ReadNumber("/sys/fs/cgroup/memory/memory.usage_in_bytes").value_or(0);
    return *limit > used ? *limit - used : 0;
  }
  return std::nullopt;
}

// What `ulimit -v` leaves beyond the address space already mapped.
std::optional<uint64_t> AddressSpaceRoom() {
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream in("/proc/self/statm");
  uint64_t pages = 0;
  in >> pages;
  const uint64_t mapped = pages * 4096;
  return lim.rlim_cur > mapped ? lim.rlim_cur - mapped : 0;
}

}  // namespace

std::optional<uint64_t> AvailableMemoryBytes() {
  std::optional<uint64_t> best = MemAvailable();
  for (std::optional<uint64_t> other : {CgroupRoom(), AddressSpaceRoom()})
    if (other) best = best ? std::min(*best, *other) : *other;
  return best;
}

bool AddressSpaceLimitBinds() {
  const std::optional<uint64_t> room = AddressSpaceRoom();
  if (!room) return false;
  for (std::optional<uint64_t> other : {MemAvailable(), CgroupRoom()})
    if (other && *other < *room) return false;
  return true;
}

std::string FormatBytes(uint64_t bytes, int decimals) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 ? 0 : decimals, v, units[u]);
  return buf;
}

}  // namespace tlaloc
