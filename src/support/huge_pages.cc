#include "tlaloc/support/huge_pages.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace tlaloc {

namespace {

// PAGEMAP_SCAN's interface (linux/fs.h since 6.7; Debian 12's headers predate it).
struct PageRegion {
  uint64_t start, end, categories;
};
struct PageMapScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
      category_mask, category_anyof_mask, return_mask;
};
constexpr unsigned long kPageMapScan = _IOWR('f', 16, PageMapScanArg);
constexpr uint64_t kPageIsHuge = uint64_t{1} << 6;

}  // namespace

bool HugePagesOffered() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return false;
  return line.find("[never]") == std::string::npos;
}

std::byte* AllocateOnHugePages(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  if (rounded == 0 || rounded < bytes) return nullptr;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kHuge, rounded));
#if defined(MADV_HUGEPAGE)
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused, nothing changes
#endif
  return p;
}

std::optional<uint64_t> HugeMappedBytes(const void* begin, size_t size) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t start = reinterpret_cast<uint64_t>(begin) / page * page;
  const uint64_t end = (reinterpret_cast<uint64_t>(begin) + size + page - 1) / page * page;
  PageRegion regions[64];
  uint64_t huge = 0;
  std::optional<uint64_t> result;
  while (start < end) {
    PageMapScanArg arg{};
    arg.size = sizeof arg;
    arg.start = start;
    arg.end = end;
    arg.vec = reinterpret_cast<uint64_t>(regions);
    arg.vec_len = 64;
    arg.category_mask = kPageIsHuge;  // only regions mapped huge, reported as such
    arg.return_mask = kPageIsHuge;
    const int n = ioctl(fd, kPageMapScan, &arg);
    if (n < 0) break;  // EINVAL/ENOTTY: a kernel before 6.7
    for (int i = 0; i < n; ++i) huge += regions[i].end - regions[i].start;
    if (arg.walk_end <= start || arg.walk_end >= end) {
      result = huge;
      break;
    }
    start = arg.walk_end;
  }
  ::close(fd);
  return result;
}

}  // namespace tlaloc
