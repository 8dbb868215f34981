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

namespace {

bool IsCommit(const std::string& s) {
  return s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// {"dependency": {"repo-id": R, "version": N | "revision": REV}, "lock": {"commit": C}}
StatusOr<LockEntry> ParseHubEntry(const json& e, std::string_view source) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("lockfile " + std::string(source) + " (the kernels hub's form): " + why);
  };
  const json& dep = e["dependency"];
  const json& lock = e["lock"];
  if (!dep.is_object() || !dep.contains("repo-id") || !dep["repo-id"].is_string())
    return bad("each \"dependency\" needs a \"repo-id\" string");
  LockEntry entry;
  entry.repo = dep["repo-id"].get<std::string>();
  if (dep.contains("version")) {
    if (!dep["version"].is_number_integer())
      return bad("\"version\" of " + entry.repo + " must be an integer");
    entry.version = dep["version"].get<int>();
  } else if (dep.contains("revision") && dep["revision"].is_string()) {
    entry.revision = dep["revision"].get<std::string>();
  } else {
    return bad("the dependency " + entry.repo + " needs a \"version\" or a \"revision\"");
  }
  if (!lock.is_object() || !lock.contains("commit") || !lock["commit"].is_string())
    return bad("the lock of " + entry.repo + " needs a \"commit\" string");
  entry.commit = lock["commit"].get<std::string>();
  if (!IsCommit(entry.commit))
    return bad("commit of " + entry.repo + " is not a full 40-hex commit id");
  return entry;
}

}  // namespace

StatusOr<Lockfile> ParseLockfile(std::string_view text, std::string_view source) {
  json j = json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("lockfile " + std::string(source) + ": " + why);
  };
  if (j.is_discarded() || !j.is_array()) return bad("expected a JSON list of locked repositories");
  Lockfile lock;
  for (const auto& e : j) {
    if (e.is_object() && e.contains("dependency") && e.contains("lock")) {
      TL_ASSIGN_OR_RETURN(LockEntry entry, ParseHubEntry(e, source));
      lock.entries.push_back(std::move(entry));
      continue;
    }
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

StatusOr<std::string> LockfileToHubJson(const Lockfile& lock) {
  json j = json::array();
  for (const auto& e : lock.entries) {
    json dep = {{"repo-id", e.repo}};
    if (e.version)
      dep["version"] = *e.version;
    else if (!e.revision.empty())
      dep["revision"] = e.revision;
    else
      return InvalidArgument("lockfile entry " + e.repo +
                             " has no version or revision, which the kernels hub's form needs");
    j.push_back({{"dependency", dep}, {"lock", {{"commit", e.commit}}}});
  }
  return j.dump(2) + "\n";
}

Status WriteLockfile(const Lockfile& lock, const std::filesystem::path& path,
                     LockfileFormat format) {
  std::string text;
  if (format == LockfileFormat::kHub) {
    TL_ASSIGN_OR_RETURN(text, LockfileToHubJson(lock));
  } else {
    text = LockfileToJson(lock);
  }
  return WriteStringAtomic(path, text).WithContext("lockfile");
}

}  // namespace tlaloc::kernels
