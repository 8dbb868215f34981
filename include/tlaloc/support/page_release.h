// Giving a range of memory's pages back to the kernel while keeping what they hold: for a copy
// (a repacked weight) whose source is no longer read, so that the two are not both resident.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tlaloc {

// A page-aligned address range [begin, end); empty when end <= begin.
struct PageBounds {
  uintptr_t begin = 0, end = 0;
  size_t bytes() const { return end > begin ? end - begin : 0; }
};

// The system's page size (sysconf, read once).
uintptr_t PageSize();
// The pages wholly inside [p, p + bytes): what can be released without touching a neighbour.
PageBounds PagesInside(const void* p, size_t bytes);
// Every page [p, p + bytes) touches, partial ones at its ends included.
PageBounds PagesTouching(const void* p, size_t bytes);

// How ReleasePagesKeepingContents gave the pages back.
enum class PageRelease {
  kNone,      // nothing: an empty range, or the kernel refused
  kUnmapped,  // clean file pages: unmapped, still in the page cache (a later read is a minor fault)
  kPagedOut,  // anything else: reclaimed with MADV_PAGEOUT (written back or swapped if need be)
};

// Takes the pages wholly inside [p, p + bytes) out of this process's resident set without
// losing their contents. Where every one of them is a file page this process never wrote (or
// is not mapped at all), MADV_DONTNEED unmaps them and the page cache keeps them: a later read
// maps them again at a minor fault. Otherwise (anonymous memory, written copy-on-write pages, no
// /proc/self/pagemap) MADV_PAGEOUT, which keeps every page's contents but evicts clean file pages
// from the page cache, so that a later read goes back to the disk.
PageRelease ReleasePagesKeepingContents(const void* p, size_t bytes);

}  // namespace tlaloc
