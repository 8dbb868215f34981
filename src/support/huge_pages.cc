#include "tlaloc/support/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace tlaloc {

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

}  // namespace tlaloc
