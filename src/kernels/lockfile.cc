// Reading and writing kernels.lock (JSON).
#include "tlaloc/kernels/lockfile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc::kernels {
using nlohmann::json;

const LockEntry* Lockfile::Find(const std::string& repo) const {
  for (const auto& e : entries)
    if (e.repo == repo) return &e;
  return nullptr;
}

void Lockfile::Upsert(LockEntry entry) {
  for (auto& e : entries)
    if (e.repo == entry.repo) {
      e = std::move(entry);
      return;
    }
  entries.push_back(std::move(entry));
}

StatusOr<Lockfile> ParseLockfile(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("lockfile " + std::string(source) + ": " + why);
  };
  if (j.is_discarded() || !j.is_array()) return bad("expected a JSON list of locked repositories");
  Lockfile lock;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("repo") || !e["repo"].is_string() || !e.contains("commit") ||
        !e["commit"].is_string())
      return bad("each entry needs \"repo\" and \"commit\" strings");
    LockEntry entry;
    entry.repo = e["repo"].get<std::string>();
    entry.commit = e["commit"].get<std::string>();
    if (entry.commit.size() != 40)
      return bad("commit of " + entry.repo + " is not a full 40-hex commit id");
    if (e.contains("variants") && e["variants"].is_object())
      for (const auto& [v, h] : e["variants"].items()) {
        if (!h.is_object() || !h.contains("hash") || !h["hash"].is_string())
          return bad("variant " + v + " of " + entry.repo + " needs a \"hash\"");
        entry.variant_hashes[v] = h["hash"].get<std::string>();
      }
    lock.entries.push_back(entry);
  }
  return lock;
}

StatusOr<Lockfile> ReadLockfile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read lockfile " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseLockfile(ss.str(), path.string());
}

std::string LockfileToJson(const Lockfile& lock) {
  json j = json::array();
  for (const auto& e : lock.entries) {
    json variants = json::object();
    for (const auto& [v, h] : e.variant_hashes)
      variants[v] = {{"hash", h}, {"hash-type", "sha256-of-file-digests"}};
    j.push_back({{"repo", e.repo}, {"commit", e.commit}, {"variants", variants}});
  }
  return j.dump(2) + "\n";
}

Status WriteLockfile(const Lockfile& lock, const std::filesystem::path& path) {
  return WriteStringAtomic(path, LockfileToJson(lock)).WithContext("lockfile");
}

}  // namespace tlaloc::kernels
