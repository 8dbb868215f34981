// kernels.lock: the exact commit and per-variant hash of each kernel repository a project uses.
//
//   [{"repo": "https://host/org/rmsnorm.git", "commit": "<40 hex>",
//     "variants": {"tlaloc-universal": {"hash": "sha256-<hex>", "hash-type": "git-tree-files"}}}]
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::kernels {

struct LockEntry {
  std::string repo;
  std::string commit;
  std::map<std::string, std::string> variant_hashes;  // variant -> "sha256-<hex>"
};

struct Lockfile {
  std::vector<LockEntry> entries;
  const LockEntry* Find(const std::string& repo) const;
  void Upsert(LockEntry entry);
};

// Parses kernels.lock text; `source` (the file) is named in every error.
StatusOr<Lockfile> ParseLockfile(std::string_view text, std::string_view source = "kernels.lock");
StatusOr<Lockfile> ReadLockfile(const std::filesystem::path& path);
// The JSON text WriteLockfile writes.
std::string LockfileToJson(const Lockfile& lock);
Status WriteLockfile(const Lockfile& lock, const std::filesystem::path& path);

}  // namespace tlaloc::kernels
