#include "tlaloc/support/page_release.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tlaloc {

namespace {

// Whether every page in [begin, end) (page-aligned) is either not mapped in yet or a file page,
// per /proc/self/pagemap (Documentation/admin-guide/mm/pagemap.rst: bit 63 present, bit 62
// swapped, bit 61 file page or shared anonymous). A private mapping's page written
// copy-on-write is anonymous, so it fails the test; so does a swapped page.
bool OnlyFilePages(uintptr_t begin, uintptr_t end, uintptr_t page) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  constexpr uint64_t kPresent = uint64_t{1} << 63, kSwapped = uint64_t{1} << 62,
                     kFileOrShared = uint64_t{1} << 61;
  std::vector<uint64_t> entries(512);
  bool file_only = true;
  for (uintptr_t at = begin; at < end && file_only;) {
    const size_t count = std::min<size_t>(entries.size(), (end - at) / page);
    const size_t want = count * sizeof(uint64_t);
    if (::pread(fd, entries.data(), want, static_cast<off_t>(at / page * sizeof(uint64_t))) !=
        static_cast<ssize_t>(want)) {
      file_only = false;
      break;
    }
    for (size_t i = 0; i < count && file_only; ++i)
      file_only =
          !(entries[i] & kSwapped) && (!(entries[i] & kPresent) || (entries[i] & kFileOrShared));
    at += count * page;
  }
  ::close(fd);
  return file_only;
}

}  // namespace

uintptr_t PageSize() {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

PageBounds PagesInside(const void* p, size_t bytes) {
  const uintptr_t page = PageSize(), at = reinterpret_cast<uintptr_t>(p);
  return {(at + page - 1) / page * page, (at + bytes) / page * page};
}

PageBounds PagesTouching(const void* p, size_t bytes) {
  const uintptr_t page = PageSize(), at = reinterpret_cast<uintptr_t>(p);
  return {at / page * page, (at + bytes + page - 1) / page * page};
}

PageRelease ReleasePagesKeepingContents(const void* p, size_t bytes) {
  const PageBounds pages = PagesInside(p, bytes);
  if (pages.bytes() == 0) return PageRelease::kNone;
  void* at = reinterpret_cast<void*>(pages.begin);
  // Shared anonymous pages also set bit 61, and MADV_DONTNEED keeps their contents too (the
  // shared object holds them).
  if (OnlyFilePages(pages.begin, pages.end, PageSize()))
    return madvise(at, pages.bytes(), MADV_DONTNEED) == 0 ? PageRelease::kUnmapped
                                                          : PageRelease::kNone;
#if defined(MADV_PAGEOUT)
  // A hint: older kernels without MADV_PAGEOUT refuse it, which changes nothing.
  return madvise(at, pages.bytes(), MADV_PAGEOUT) == 0 ? PageRelease::kPagedOut
                                                       : PageRelease::kNone;
#else
  return PageRelease::kNone;
#endif
}

}  // namespace tlaloc
