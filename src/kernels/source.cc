// Kernel sources: local folders, git URLs through the git CLI with a cache, overrides, trust.
#include "tlaloc/kernels/source.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc::kernels {
namespace fs = std::filesystem;

namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool IsUrl(const std::string& s) {
  return s.find("://") != std::string::npos || s.rfind("git@", 0) == 0;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path CacheDir(const LoaderOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  if (std::string e = Env("TLALOC_KERNELS_CACHE"); !e.empty()) return e;
  std::string home = Env("HOME");
  return fs::path(home.empty() ? "/tmp" : home) / ".cache" / "tlaloc" / "kernels";
}

bool Offline(const LoaderOptions& o) {
  std::string e = Env("TLALOC_KERNELS_OFFLINE");
  return o.offline || e == "1" || e == "true";
}

// A folder name for a URL: its readable tail plus a hash of the whole, so two hosts never clash.
std::string CacheKey(const std::string& url) {
  std::string tail;
  for (char c :
       url.substr(url.find_last_of('/') == std::string::npos ? 0 : url.find_last_of('/') + 1))
    tail += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return tail + "-" + Sha256Hex(url).substr(0, 12);
}

std::optional<fs::path> LocalOverride(const std::string& repo, const LoaderOptions& o) {
  std::string spec = o.local_overrides.empty() ? Env("TLALOC_LOCAL_KERNELS") : o.local_overrides;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(':', start);
    // A URL's "://" is part of the key, not a separator.
    while (end != std::string::npos && spec.compare(end, 3, "://") == 0)
      end = spec.find(':', end + 3);
    std::string item =
        spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == repo) return fs::path(item.substr(eq + 1));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

std::string RefFor(const KernelSource& s) {
  if (s.version) return "refs/heads/v" + std::to_string(*s.version);
  return s.revision.empty() ? "HEAD" : s.revision;
}

StatusOr<std::string> ResolveCommit(const fs::path& git_dir, const KernelSource& s) {
  std::string ref = RefFor(s);
  auto out = RunCommand({"git", "--git-dir=" + git_dir.string(), "rev-parse", "--verify", "--quiet",
                         ref + "^{commit}"});
  if (!out.ok() || out->size() < 40) {
    std::string what = s.version ? "version " + std::to_string(*s.version) + " (branch v" +
                                       std::to_string(*s.version) + ")"
                                 : "revision '" + ref + "'";
    auto branches = RunCommand({"git", "--git-dir=" + git_dir.string(), "for-each-ref",
                                "--format=%(refname:short)", "refs/heads"});
    std::string list = branches.ok() ? *branches : "";
    for (char& c : list)
      if (c == '\n') c = ' ';
    return NotFound("kernel repository " + s.repo + " has no " + what +
                    "; its branches: " + (list.empty() ? "(none)" : list));
  }
  return out->substr(0, 40);
}

// Exports the tree of `commit` into dest (once; a finished export carries a marker file).
Status ExportCommit(const fs::path& git_dir, const std::string& commit, const fs::path& dest) {
  if (fs::exists(dest / ".tlaloc-export-complete")) return OkStatus();
  fs::remove_all(dest);
  fs::create_directories(dest);
  std::string cmd = "git --git-dir=" + Quote(git_dir.string()) + " archive --format=tar " +
                    Quote(commit) + " | tar -xf - -C " + Quote(dest.string());
  if (std::system(cmd.c_str()) != 0)
    return Internal("could not export commit " + commit + " of " + git_dir.string());
  // The marker says the export is whole, so it must never exist half-written.
  return WriteStringAtomic(dest / ".tlaloc-export-complete", commit + "\n");
}

StatusOr<Checkout> FetchGit(const KernelSource& source, const std::string& url, bool is_local_repo,
                            const LoaderOptions& options) {
  Checkout c;
  c.repo = source.repo;
  c.origin = "git";
  fs::path base = CacheDir(options) / CacheKey(url);
  fs::path mirror = base / "repo.git";
  bool have = fs::exists(mirror / "HEAD");
  if (Offline(options)) {
    if (!have)
      return NotFound("kernel repository " + source.repo + " is not in the cache " + base.string() +
                      " and loading is offline (TLALOC_KERNELS_OFFLINE)");
  } else if (!have) {
    fs::create_directories(base);
    auto r = RunCommand({"git", "clone", "--quiet", "--mirror", url, mirror.string()});
    if (!r.ok()) {
      fs::remove_all(mirror);
      return Status(StatusCode::kUnavailable,
                    "cannot clone kernel repository " + source.repo + ": " + r.status().message());
    }
  } else {
    auto r = RunCommand(
        {"git", "--git-dir=" + mirror.string(), "fetch", "--quiet", "--prune", "origin"});
    if (!r.ok())
      return Status(StatusCode::kUnavailable,
                    "cannot update kernel repository " + source.repo + ": " + r.status().message());
  }
  TL_ASSIGN_OR_RETURN(c.commit, ResolveCommit(mirror, source));
  c.root = base / c.commit;
  TL_RETURN_IF_ERROR(ExportCommit(mirror, c.commit, c.root));
  c.local = is_local_repo;
  return c;
}

}  // namespace

StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + Quote(a);
  char err_path[] = "/tmp/tlaloc-cmd-XXXXXX";
  int fd = mkstemp(err_path);
  if (fd < 0) return Internal("cannot create a temporary file for " + argv[0]);
  close(fd);
  cmd += " 2>" + Quote(err_path);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return Internal("cannot run " + argv[0]);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = pclose(p);
  std::string err;
  {
    std::ifstream e(err_path);
    std::getline(e, err, '\0');
  }
  std::remove(err_path);
  if (rc != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return Internal(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") + " failed (exit " +
                    std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) + "): " + err);
  }
  return out;
}

StatusOr<KernelSource> KernelSource::Parse(std::string_view text) {
  KernelSource s;
  std::string t(text);
  if (t.empty()) return InvalidArgument("empty kernel repository");
  // '@' after the last '/' separates a revision (git@host: URLs keep theirs).
  size_t slash = t.find_last_of('/');
  size_t at = t.find('@', slash == std::string::npos ? 0 : slash);
  if (at != std::string::npos && t.rfind("git@", 0) != 0) {
    std::string rev = t.substr(at + 1);
    s.repo = t.substr(0, at);
    if (rev.size() > 1 && rev[0] == 'v' &&
        rev.find_first_not_of("0123456789", 1) == std::string::npos)
      s.version = std::stoi(rev.substr(1));
    else
      s.revision = rev;
  } else {
    s.repo = t;
  }
  return s;
}

std::string KernelSource::ToString() const {
  if (version) return repo + "@v" + std::to_string(*version);
  return revision.empty() ? repo : repo + "@" + revision;
}

StatusOr<Checkout> FetchRepository(const KernelSource& source, const LoaderOptions& options) {
  if (source.version && !source.revision.empty())
    return InvalidArgument("kernel repository " + source.repo +
                           ": give a version or a revision, not both");
  KernelSource s = source;
  // A lockfile pins the commit unless the caller asked for another revision explicitly.
  if (options.lockfile && !s.version && s.revision.empty())
    if (const LockEntry* e = options.lockfile->Find(s.repo)) s.revision = e->commit;
  if (auto path = LocalOverride(s.repo, options)) {
    if (!fs::is_directory(*path))
      return NotFound("TLALOC_LOCAL_KERNELS maps " + s.repo + " to " + path->string() +
                      ", which is not a folder");
    return Checkout{s.repo, *path, "local", true, "TLALOC_LOCAL_KERNELS"};
  }
  if (!IsUrl(s.repo)) {
    fs::path path(s.repo);
    if (!fs::is_directory(path))
      return NotFound("kernel repository " + s.repo + " is neither a folder nor a git URL");
    if (!s.version && s.revision.empty())
      return Checkout{s.repo, path, "local", true, "local folder"};
    // A local git repository at a version or revision: read through git like any URL.
    if (!fs::exists(path / ".git") && !fs::exists(path / "HEAD"))
      return InvalidArgument("kernel repository " + s.repo +
                             " is a plain folder; a version or revision needs a git repository");
    TL_ASSIGN_OR_RETURN(Checkout c, FetchGit(s, fs::absolute(path).string(), true, options));
    c.origin = "local git repository";
    return c;
  }
  return FetchGit(s, s.repo, false, options);
}

StatusOr<LoadedVariant> LoadNamedVariant(const Checkout& checkout, const std::string& variant,
                                         const LoaderOptions& options) {
  LoadedVariant lv;
  lv.checkout = checkout;
  lv.dir = checkout.root / "build" / variant;
  if (!fs::is_directory(lv.dir))
    return NotFound("kernel repository " + checkout.repo + " has no variant " + variant);
  TL_ASSIGN_OR_RETURN(lv.meta, ReadMetadata(lv.dir));
  TL_RETURN_IF_ERROR(VerifyVariant(lv.dir, lv.meta));
  TL_ASSIGN_OR_RETURN(VariantName name, ParseVariantName(variant));
  if (name.backend != lv.meta.backend)
    return InvalidArgument("kernel variant " + variant + " of " + checkout.repo +
                           " is named for backend " + std::string(BackendName(name.backend)) +
                           " but its metadata.json says " +
                           std::string(BackendName(lv.meta.backend)));
  lv.native = lv.meta.backend != Backend::kUniversal;
  if (!lv.native) {
    lv.trusted_by = "universal StableHLO needs no trust";
    return lv;
  }
  if (checkout.local) {
    lv.trusted_by = checkout.origin;
    return lv;
  }
  if (options.lockfile) {
    if (const LockEntry* e = options.lockfile->Find(checkout.repo)) {
      if (e->commit != checkout.commit)
        return Status(StatusCode::kPermissionDenied, "kernel repository " + checkout.repo +
                                                         " is locked at commit " + e->commit +
                                                         " but " + checkout.commit +
                                                         " was fetched; run `tlaloc kernels lock` "
                                                         "to update the lockfile");
      auto it = e->variant_hashes.find(variant);
      TL_ASSIGN_OR_RETURN(std::string hash, VariantHash(lv.dir));
      if (it == e->variant_hashes.end())
        return Status(StatusCode::kPermissionDenied,
                      "lockfile entry of " + checkout.repo + " does not list variant " + variant);
      if (it->second != hash)
        return Status(StatusCode::kPermissionDenied, "variant " + variant + " of " + checkout.repo +
                                                         " hashes to " + hash +
                                                         " but the lockfile says " + it->second);
      lv.trusted_by = "lockfile";
      return lv;
    }
  }
  if (options.trust_remote_code) {
    lv.trusted_by = "trust flag";
    return lv;
  }
  return Status(StatusCode::kPermissionDenied,
                "refusing to load native kernel variant " + variant + " of " + checkout.repo +
                    ": the source is not trusted. Trust it by pinning it in a lockfile "
                    "(`tlaloc kernels lock`), passing --trust-remote-code "
                    "(LoaderOptions::trust_remote_code), or using a local folder");
}

StatusOr<LoadedVariant> LoadVariant(const KernelSource& source, const Target& target,
                                    const LoaderOptions& options) {
  TL_ASSIGN_OR_RETURN(Checkout c, FetchRepository(source, options));
  TL_ASSIGN_OR_RETURN(std::vector<std::string> variants, ListVariants(c.root));
  TL_ASSIGN_OR_RETURN(std::string variant, SelectVariant(variants, target, source.ToString()));
  return LoadNamedVariant(c, variant, options);
}

StatusOr<std::vector<LoadedVariant>> LoadDependencies(const LoadedVariant& variant,
                                                      const Target& target,
                                                      const LoaderOptions& options) {
  std::vector<LoadedVariant> out;
  std::vector<std::string> seen = {variant.checkout.repo};
  std::string hub = options.hub_url.empty() ? Env("TLALOC_KERNELS_HUB") : options.hub_url;
  auto visit = [&](const LoadedVariant& dependent) -> Status {
    for (const KernelDependency& d : dependent.meta.depends) {
      KernelSource src{d.repo_id, d.version, d.revision};
      if (!IsUrl(d.repo_id) && !fs::exists(d.repo_id)) {
        if (hub.empty())
          return NotFound("kernel dependency " + d.repo_id + " of " + dependent.checkout.repo +
                          " is a repo id, but no hub is set (LoaderOptions::hub_url or "
                          "TLALOC_KERNELS_HUB)");
        src.repo = hub + (hub.back() == '/' ? "" : "/") + d.repo_id;
      }
      if (std::find(seen.begin(), seen.end(), src.repo) != seen.end()) continue;
      seen.push_back(src.repo);
      auto loaded = LoadVariant(src, target, options);
      if (!loaded.ok())
        return loaded.status().WithContext("kernel dependency " + d.repo_id + " of " +
                                           dependent.checkout.repo);
      out.push_back(std::move(*loaded));
    }
    return OkStatus();
  };
  TL_RETURN_IF_ERROR(visit(variant));
  for (size_t i = 0; i < out.size(); ++i) {
    LoadedVariant current = out[i];  // visit() may grow `out`
    TL_RETURN_IF_ERROR(visit(current));
  }
  return out;
}

}  // namespace tlaloc::kernels
