// kernels.lock: the exact commit and per-variant hash of each kernel repository a project uses.
//
//   [{"repo": "https://host/org/rmsnorm.git", "commit": "<40 hex>",
//     "variants": {"tlaloc-universal": {"hash": "sha256-<hex>", "hash-type": "git-tree-files"}}}]
//
// The Hugging Face `kernels` package (0.17) writes another form, which is read as well (no variant
// hashes: its entries pin the commit only) and written by LockfileToHubJson / WriteLockfile(...,
// kHub):
//
//   [{"dependency": {"repo-id": "org/rmsnorm", "version": 1}, "lock": {"commit": "<40 hex>"}}]
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::kernels {

struct LockEntry {
  std::string repo;
  std::string commit;
  std::map<std::string, std::string> variant_hashes;  // variant -> "sha256-<hex>"
  // What was asked for (the hub form's "dependency"): a version, else a revision, else neither.
  std::optional<int> version = std::nullopt;
  std::string revision = "";
};

enum class LockfileFormat { kTlaloc, kHub };

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
// The hub's form: without the variant hashes (its lock entries have no field for them; its reader
// refuses unknown fields) and with a version or revision per entry, which its reader requires.
StatusOr<std::string> LockfileToHubJson(const Lockfile& lock);
Status WriteLockfile(const Lockfile& lock, const std::filesystem::path& path,
                     LockfileFormat format = LockfileFormat::kTlaloc);

}  // namespace tlaloc::kernels
