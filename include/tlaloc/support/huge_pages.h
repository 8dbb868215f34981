// Memory on 2 MiB pages where the kernel gives them (transparent huge pages). Decode reads every
// weight once per token, and on 4 KiB pages each 4 KiB of it costs a TLB miss and a page walk:
// the LM head of Qwen3-0.6B (311 MB in bf16) read at 19.6 GB/s on 4 KiB pages and at 29 GB/s on
// 2 MiB pages on a 2-core Zen 3 (docs/performance.md).
#pragma once

#include <cstddef>

namespace tlaloc {

// True unless the kernel's transparent huge pages are off ("[never]" in
// /sys/kernel/mm/transparent_hugepage/enabled) or cannot be read (not Linux).
bool HugePagesOffered();

// `bytes` (rounded up to whole 2 MiB pages) aligned to 2 MiB and advised onto huge pages
// (madvise MADV_HUGEPAGE: a hint; where refused, the memory is ordinary). Free with std::free;
// nullptr for 0 bytes or when the allocation fails.
std::byte* AllocateOnHugePages(size_t bytes);

}  // namespace tlaloc
