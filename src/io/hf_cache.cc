#include "tlaloc/io/hf_cache.h"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <system_error>

namespace tlaloc::io {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// Hub repository ids: letters, digits, '-', '_' and '.', not starting with '.' (so "..", "." and
// hidden names are never taken for one).
bool IsRepoIdPart(const std::string& part) {
  if (part.empty() || part.size() > 96 || part[0] == '.') return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// A revision names a file under refs/ (branches may hold '/', "refs/pr/1"), never a way out.
bool IsRevision(const std::string& rev) {
  if (rev.empty() || rev.front() == '/' || rev.back() == '/') return false;
  size_t start = 0;
  while (start <= rev.size()) {
    size_t slash = rev.find('/', start);
    if (slash == std::string::npos) slash = rev.size();
    const std::string part = rev.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

Status NotCached(const std::string& ref, const std::string& looked_at) {
  return NotFound(ref + " is not a local folder, and " + looked_at +
                  "; nothing is downloaded: fetch it first (huggingface-cli download " +
                  ref.substr(0, ref.find('@')) +
                  "), point HF_HUB_CACHE or HF_HOME at the cache holding it, or give a folder");
}

}  // namespace

fs::path HuggingFaceHubCache() {
  if (auto hub = NonEmptyEnv("HF_HUB_CACHE")) return fs::path(*hub);
  if (auto home = NonEmptyEnv("HF_HOME")) return fs::path(*home) / "hub";
  if (auto xdg = NonEmptyEnv("XDG_CACHE_HOME")) return fs::path(*xdg) / "huggingface" / "hub";
  const std::string user_home = NonEmptyEnv("HOME").value_or("");
  return fs::path(user_home) / ".cache" / "huggingface" / "hub";
}

std::optional<HubReference> ParseHubReference(const std::string& ref) {
  const size_t at = ref.find('@');
  HubReference out{ref.substr(0, at), at == std::string::npos ? "main" : ref.substr(at + 1)};
  const size_t slash = out.repo.find('/');
  const bool repo_id =
      slash != std::string::npos && out.repo.find('/', slash + 1) == std::string::npos &&
      IsRepoIdPart(out.repo.substr(0, slash)) && IsRepoIdPart(out.repo.substr(slash + 1));
  if (!repo_id || !IsRevision(out.revision)) return std::nullopt;
  return out;
}

StatusOr<fs::path> ResolveModelReference(const std::string& ref) {
  std::error_code ec;
  if (fs::exists(ref, ec)) return fs::path(ref);

  const auto parsed = ParseHubReference(ref);
  if (!parsed)
    return NotFound(ref + " does not exist (a model is a local folder, or ORG/NAME[@REVISION] " +
                    "from the Hugging Face cache)");
  const std::string& repo = parsed->repo;
  const std::string& revision = parsed->revision;
  const size_t slash = repo.find('/');

  const fs::path cache = HuggingFaceHubCache();
  const fs::path entry =
      cache / ("models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1));
  if (!fs::is_directory(entry, ec))
    return NotCached(ref, "the Hugging Face cache has no " + entry.string());

  // A revision that is a snapshot's own commit hash needs no ref file.
  const fs::path direct = entry / "snapshots" / revision;
  if (revision.find('/') == std::string::npos && fs::is_directory(direct, ec)) return direct;

  const fs::path ref_file = entry / "refs" / revision;
  std::ifstream in(ref_file);
  if (!in)
    return NotCached(ref, "the Hugging Face cache has no revision " + revision + " (no " +
                              ref_file.string() + ", no " + direct.string() + ")");
  std::string hash;
  std::getline(in, hash);
  hash = Trim(hash);
  const fs::path snapshot = entry / "snapshots" / hash;
  if (hash.empty() || hash.find('/') != std::string::npos || !fs::is_directory(snapshot, ec))
    return NotCached(ref, ref_file.string() + " names commit '" + hash + "' but " +
                              snapshot.string() + " is not a folder");
  return snapshot;
}

}  // namespace tlaloc::io
