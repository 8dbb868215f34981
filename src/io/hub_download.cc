#include "tlaloc/io/hub_download.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "io/hub_http.h"
#include "tlaloc/io/hf_cache.h"

namespace tlaloc::io {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::optional<std::string> NonEmptyEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Megabytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1000000)
    std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

// huggingface_hub's _normalize_etag: W/"x" and "x" both give x.
std::string NormalizeEtag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// An LFS file's ETag is the sha256 of its bytes (64 hex digits); a git file's is its blob sha1.
bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

StatusOr<std::string> Sha256OfFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return Internal("OpenSSL: cannot start a sha256 digest");
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

// The error for a Hub response that is not a success, in the words a user can act on.
Status HubHttpError(const hub::HttpResponse& r, const std::string& url, const std::string& repo,
                    const std::string& what) {
  const std::string code = r.Header("x-error-code");
  std::string detail = r.Header("x-error-message");
  if (detail.empty() && !r.body.empty() && r.body.size() < 400) detail = Trim(r.body);
  const std::string where = what + ": HTTP " + std::to_string(r.status) + " from " + url +
                            (detail.empty() ? "" : " (" + detail + ")");
  const bool has_token = HubToken().has_value();
  if (r.status == 401)
    return Status(StatusCode::kPermissionDenied,
                  where + ": " + repo + " is private or gated, or does not exist" +
                      (has_token ? "; the token sent (HF_TOKEN or the token file) was refused"
                                 : "; set HF_TOKEN to a token of an account with access"));
  if (r.status == 403)
    return Status(StatusCode::kPermissionDenied,
                  where + ": access to " + repo +
                      " is refused; a gated model needs its terms accepted on its Hub page and "
                      "HF_TOKEN set to a token of that account");
  if (r.status == 404) {
    if (code == "RevisionNotFound")
      return NotFound(where + ": the revision is not found in " + repo);
    if (code == "EntryNotFound") return NotFound(where + ": the file is not in " + repo);
    return NotFound(where + ": repository " + repo + " (or that revision of it) is not found");
  }
  return Status(StatusCode::kUnavailable, where);
}

bool Retryable(const Status& s) { return s.code() == StatusCode::kUnavailable; }

std::vector<std::string> AuthHeaders() {
  std::vector<std::string> h;
  if (auto token = HubToken()) h.push_back("Authorization: Bearer " + *token);
  return h;
}

// What a HEAD of resolve/{commit}/{file} tells: where the bytes are, their etag and size.
struct FileMeta {
  std::string name;
  std::string etag;
  std::optional<uint64_t> size;
  std::string download_url;
  bool cached = false;  // blobs/<etag> already there
};

// Progress of the bytes of all files: a redrawn line on a terminal, a line per event otherwise.
class Progress {
 public:
  Progress(bool enabled, uint64_t total, int files)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), total_(total), files_(files) {
    if (enabled_ && tty_) drawer_ = std::thread([this] { DrawLoop(); });
  }
  ~Progress() { Finish(); }

  void Add(uint64_t bytes) { done_ += bytes; }
  uint64_t Done() const { return done_; }

  void Line(const std::string& text) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(print_mu_);
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
  }

  void FileDone(const std::string& name, uint64_t bytes, double seconds) {
    ++files_done_;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "hub: %s: %s in %.2f s (%.1f MB/s) [%d/%d]", name.c_str(),
                  Megabytes(bytes).c_str(), seconds, seconds > 0 ? bytes / 1e6 / seconds : 0.0,
                  files_done_.load(), files_);
    Line(buf);
  }

  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    if (drawer_.joinable()) drawer_.join();
  }

 private:
  void DrawLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
      const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
      const uint64_t done = done_;
      const int width = 30;
      const int filled = total_ ? static_cast<int>(width * std::min(1.0, 1.0 * done / total_)) : 0;
      std::lock_guard<std::mutex> print(print_mu_);
      std::fprintf(stderr, "\r\033[Khub: [%s%s] %s / %s  %.1f MB/s",
                   std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                   Megabytes(done).c_str(), Megabytes(total_).c_str(),
                   seconds > 0 ? done / 1e6 / seconds : 0.0);
      std::fflush(stderr);
    }
    std::lock_guard<std::mutex> print(print_mu_);
    std::fprintf(stderr, "\r\033[K");
  }

  const bool enabled_;
  const bool tty_;
  const uint64_t total_;
  const int files_;
  const Clock::time_point start_ = Clock::now();
  std::atomic<uint64_t> done_{0};
  std::atomic<int> files_done_{0};
  std::mutex mu_, print_mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread drawer_;
};

// huggingface_hub's lock on a blob: .locks/models--ORG--NAME/<etag>.lock held with flock (what
// its filelock takes), so a Python download and Tlaloc's of one blob take turns instead of
// writing one .incomplete file together. Released when destroyed.
class BlobLock {
 public:
  ~BlobLock() {
    if (fd_ >= 0) {
      flock(fd_, LOCK_UN);
      close(fd_);
    }
  }
  Status Acquire(const fs::path& path, const std::string& name, Progress* progress) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
    if (fd_ < 0)
      return Status(StatusCode::kPermissionDenied, "cannot open the lock " + path.string());
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return OkStatus();
    progress->Line("hub: " + name + ": waiting for another download of it (" + path.string() + ")");
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) return Internal("cannot lock " + path.string());
    return OkStatus();
  }

 private:
  int fd_ = -1;
};

// Runs fn(0..n-1) on up to `threads` threads; the first error stops the rest from starting and
// sets `cancel` for those running.
Status RunParallel(size_t n, int threads, std::atomic<bool>* cancel,
                   const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  auto worker = [&] {
    while (!*cancel) {
      const size_t i = next++;
      if (i >= n) break;
      Status s = fn(i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = s;
        *cancel = true;
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t count = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  for (size_t t = 0; t < count; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return first;
}

class SnapshotDownload {
 public:
  SnapshotDownload(std::string repo, std::string revision, const HubDownloadOptions& options)
      : repo_(std::move(repo)), revision_(std::move(revision)), options_(options) {
    const size_t slash = repo_.find('/');
    entry_ = HuggingFaceHubCache() /
             ("models--" + repo_.substr(0, slash) + "--" + repo_.substr(slash + 1));
  }

  StatusOr<fs::path> Run();

 private:
  Status ResolveRevision();
  Status Head(FileMeta* meta);
  Status Fetch(const FileMeta& meta, Progress* progress);
  Status FetchOnce(const FileMeta& meta, const fs::path& part, Progress* progress,
                   uint64_t* fetched);
  Status Link(const FileMeta& meta);

  std::string repo_, revision_;
  HubDownloadOptions options_;
  fs::path entry_;
  std::string commit_;
  std::vector<FileMeta> files_;
  std::atomic<bool> cancel_{false};
};

Status SnapshotDownload::ResolveRevision() {
  const std::string url =
      HubEndpoint() + "/api/models/" + repo_ + "/revision/" + hub::UrlEscape(revision_);
  hub::HttpRequest req{"GET", url, AuthHeaders(), /*follow_redirects=*/true, std::nullopt};
  TL_ASSIGN_OR_RETURN(hub::HttpResponse r, hub::HttpFetch(req));
  if (r.status != 200) return HubHttpError(r, url, repo_, repo_ + "@" + revision_);
  nlohmann::json info = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string())
    return DataLoss(url + ": expected a JSON object with the commit \"sha\" and \"siblings\"");
  commit_ = info["sha"].get<std::string>();
  if (commit_.empty() || commit_.find('/') != std::string::npos || commit_[0] == '.')
    return DataLoss(url + ": the commit \"" + commit_ + "\" is not a commit hash");
  for (const auto& s : info.value("siblings", nlohmann::json::array())) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    const std::string name = s["rfilename"].get<std::string>();
    if (IsModelRunFile(name)) files_.push_back(FileMeta{name, "", std::nullopt, "", false});
  }
  if (files_.empty())
    return NotFound(url + ": " + repo_ + "@" + revision_ +
                    " lists no config, tokenizer or *.safetensors file to download");
  return OkStatus();
}

Status SnapshotDownload::Head(FileMeta* meta) {
  std::string url =
      HubEndpoint() + "/" + repo_ + "/resolve/" + commit_ + "/" + hub::UrlEscape(meta->name);
  std::vector<std::string> headers = AuthHeaders();
  headers.push_back("Accept-Encoding: identity");  // the real size, not a compressed one
  // As huggingface_hub: follow redirects that stay on the Hub's host (a renamed repository);
  // one to another host (the CDN) carries the file's metadata itself and is where the bytes are.
  for (int hop = 0;; ++hop) {
    TL_ASSIGN_OR_RETURN(hub::HttpResponse r, hub::HttpFetch({"HEAD", url, headers, false, {}}));
    const std::string location = r.Header("location");
    const bool redirect = r.status >= 300 && r.status < 400 && !location.empty();
    if (!redirect && r.status != 200) return HubHttpError(r, url, repo_, meta->name);
    const std::string target = redirect ? hub::ResolveUrl(url, location) : url;
    if (redirect && hop < 5 && hub::UrlOrigin(target) == hub::UrlOrigin(url)) {
      url = target;
      continue;
    }
    const std::string commit = r.Header("x-repo-commit");
    if (!commit.empty() && commit != commit_)
      return DataLoss(url + ": X-Repo-Commit " + commit + ", expected " + commit_);
    std::string etag = r.Header("x-linked-etag");
    if (etag.empty()) etag = r.Header("etag");
    meta->etag = NormalizeEtag(etag);
    if (meta->etag.empty() || meta->etag.find('/') != std::string::npos || meta->etag[0] == '.')
      return DataLoss(url + ": no usable ETag or X-Linked-Etag header (got '" + etag + "')");
    std::string size = r.Header("x-linked-size");
    if (size.empty() && !redirect) size = r.Header("content-length");
    if (!size.empty()) meta->size = std::strtoull(size.c_str(), nullptr, 10);
    if (target.empty()) return DataLoss(url + ": unusable Location '" + location + "'");
    meta->download_url = target;
    std::error_code ec;
    meta->cached = fs::is_regular_file(entry_ / "blobs" / meta->etag, ec);
    return OkStatus();
  }
}

// One GET of a file into `part`, from the byte `part` already holds; `fetched` and the progress
// count the bytes that came over the network.
Status SnapshotDownload::FetchOnce(const FileMeta& meta, const fs::path& part, Progress* progress,
                                   uint64_t* fetched) {
  std::error_code ec;
  uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  if (meta.size && have > *meta.size) {  // not a prefix of this file: start over
    fs::remove(part, ec);
    have = 0;
  }
  if (meta.size && have == *meta.size) return OkStatus();  // complete, only not yet checked
  if (have > 0) progress->Line("hub: " + meta.name + ": resuming at byte " + std::to_string(have));
  std::FILE* out = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
  if (out == nullptr) return Status(StatusCode::kPermissionDenied, "cannot write " + part.string());
  std::string error_body;
  bool started = false;
  auto sink = [&](long status, const char* data, size_t n) {
    if (cancel_) return false;
    if (status != 200 && status != 206) {  // an error page: keep a little of it for the message
      if (error_body.size() < 400) error_body.append(data, std::min<size_t>(n, 400));
      return true;
    }
    if (!started && status == 200 && have > 0) {  // the Range was ignored: the whole file comes
      have = 0;
      if (std::freopen(part.c_str(), "wb", out) == nullptr) return false;
    }
    started = true;
    if (std::fwrite(data, 1, n, out) != n) return false;
    progress->Add(n);
    *fetched += n;
    return true;
  };
  std::optional<uint64_t> range;
  if (have > 0) range = have;
  // The token goes to the Hub only: a CDN URL is signed, and libcurl keeps the header from the
  // hosts a redirect leads to.
  const bool on_hub = hub::UrlOrigin(meta.download_url) == hub::UrlOrigin(HubEndpoint());
  const std::vector<std::string> headers = on_hub ? AuthHeaders() : std::vector<std::string>{};
  auto r = hub::HttpFetch({"GET", meta.download_url, headers, true, range}, sink);
  const bool closed = std::fclose(out) == 0;
  if (cancel_) return Status(StatusCode::kAborted, "cancelled after another file failed");
  if (!r.ok()) return r.status();
  if (!closed) return DataLoss("cannot finish writing " + part.string());
  if (r->status == 416) {  // the partial file is no prefix the server knows: start over
    fs::remove(part, ec);
    return Status(StatusCode::kUnavailable, meta.download_url + ": HTTP 416 resuming at byte " +
                                                std::to_string(have) + "; starting over");
  }
  if (r->status != 200 && r->status != 206) {
    r->body = error_body;
    Status s = HubHttpError(*r, meta.download_url, repo_, meta.name);
    // A server error or rate limit is worth another try; a refusal is not.
    if (r->status < 500 && r->status != 429)
      return Status(s.code() == StatusCode::kUnavailable ? StatusCode::kInternal : s.code(),
                    s.message());
    return s;
  }
  return OkStatus();
}

Status SnapshotDownload::Fetch(const FileMeta& meta, Progress* progress) {
  const fs::path blob = entry_ / "blobs" / meta.etag;
  const fs::path part = entry_ / "blobs" / (meta.etag + ".incomplete");
  BlobLock lock;
  TL_RETURN_IF_ERROR(
      lock.Acquire(entry_.parent_path() / ".locks" / entry_.filename() / (meta.etag + ".lock"),
                   meta.name, progress));
  std::error_code exists_ec;
  if (fs::is_regular_file(blob, exists_ec)) {  // the other download finished it
    progress->FileDone(meta.name, 0, 0.0);
    return OkStatus();
  }
  const auto start = Clock::now();
  uint64_t fetched = 0;
  Status status;
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    status = FetchOnce(meta, part, progress, &fetched);
    if (status.ok() || !Retryable(status) || cancel_) break;
    std::error_code ec;
    const uint64_t have = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
    if (attempt < options_.retries) {
      progress->Line("hub: " + meta.name + ": " + status.message() + "; retrying (" +
                     std::to_string(attempt + 1) + "/" + std::to_string(options_.retries) +
                     ") from byte " + std::to_string(have));
      std::this_thread::sleep_for(std::chrono::milliseconds(500 * (attempt + 1)));
    }
  }
  if (!status.ok())
    return status.WithContext(repo_ + ": downloading " + meta.name + " (the bytes so far stay in " +
                              part.string() + " and a next run resumes there)");
  std::error_code ec;
  const uint64_t got = fs::file_size(part, ec);
  if (meta.size && got != *meta.size) {
    fs::remove(part, ec);
    return DataLoss(meta.download_url + ": got " + std::to_string(got) + " bytes of " + meta.name +
                    ", expected " + std::to_string(*meta.size) + "; removed it");
  }
  if (IsSha256Hex(meta.etag)) {
    TL_ASSIGN_OR_RETURN(std::string sha, Sha256OfFile(part));
    if (sha != meta.etag) {
      fs::remove(part, ec);
      return DataLoss(repo_ + ": " + meta.name + " from " + meta.download_url + " has sha256 " +
                      sha + ", but its ETag says " + meta.etag +
                      "; the corrupt download is removed, nothing was linked");
    }
  }
  fs::rename(part, blob, ec);
  if (ec)
    return Internal("cannot move " + part.string() + " to " + blob.string() + ": " + ec.message());
  progress->FileDone(meta.name, fetched,
                     std::chrono::duration<double>(Clock::now() - start).count());
  return OkStatus();
}

// snapshots/<commit>/<name> -> ../../blobs/<etag> (one more ../ per folder in the name), as
// huggingface_hub's relative links.
Status SnapshotDownload::Link(const FileMeta& meta) {
  const fs::path link = entry_ / "snapshots" / commit_ / meta.name;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  const fs::path target = fs::relative(entry_ / "blobs" / meta.etag, link.parent_path(), ec);
  if (ec) return Internal("cannot relate " + link.string() + " to its blob: " + ec.message());
  fs::remove(link, ec);
  fs::create_symlink(target, link, ec);
  if (ec)
    return Internal("cannot link " + link.string() + " -> " + target.string() + ": " +
                    ec.message());
  return OkStatus();
}

StatusOr<fs::path> SnapshotDownload::Run() {
  const auto start = Clock::now();
  TL_RETURN_IF_ERROR(ResolveRevision());
  std::error_code ec;
  fs::create_directories(entry_ / "blobs", ec);
  if (ec)
    return Status(StatusCode::kPermissionDenied,
                  "cannot create " + (entry_ / "blobs").string() + ": " + ec.message());
  TL_RETURN_IF_ERROR(RunParallel(files_.size(), options_.parallel_files, &cancel_,
                                 [&](size_t i) { return Head(&files_[i]); }));
  uint64_t total = 0;
  int to_fetch = 0;
  for (const FileMeta& f : files_) {
    if (f.cached) continue;
    std::error_code size_ec;
    const fs::path part = entry_ / "blobs" / (f.etag + ".incomplete");
    const uint64_t have = fs::exists(part, size_ec) ? fs::file_size(part, size_ec) : 0;
    total += f.size.value_or(0) - std::min<uint64_t>(have, f.size.value_or(0));
    ++to_fetch;
  }
  Progress progress(options_.progress, total, to_fetch);
  progress.Line("hub: " + repo_ + "@" + revision_ + " is commit " + commit_ + ": " +
                std::to_string(to_fetch) + " of " + std::to_string(files_.size()) + " files (" +
                Megabytes(total) + ") to download from " + HubEndpoint() + " into " +
                entry_.string());
  std::vector<size_t> pending;
  for (size_t i = 0; i < files_.size(); ++i)
    if (!files_[i].cached) pending.push_back(i);
  Status fetched = RunParallel(pending.size(), options_.parallel_files, &cancel_,
                               [&](size_t i) { return Fetch(files_[pending[i]], &progress); });
  progress.Finish();
  TL_RETURN_IF_ERROR(fetched);
  // Only now does the snapshot appear, then the ref naming it: never a half snapshot.
  for (const FileMeta& f : files_) TL_RETURN_IF_ERROR(Link(f));
  if (revision_ != commit_) {
    const fs::path ref = entry_ / "refs" / revision_;
    fs::create_directories(ref.parent_path(), ec);
    const fs::path tmp = ref.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << commit_;
      if (!out) return Internal("cannot write " + tmp.string());
    }
    fs::rename(tmp, ref, ec);
    if (ec) return Internal("cannot write " + ref.string() + ": " + ec.message());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  char buf[96];
  std::snprintf(buf, sizeof(buf), " in %.2f s (%.1f MB/s)", seconds,
                seconds > 0 ? progress.Done() / 1e6 / seconds : 0.0);
  progress.Line("hub: " + repo_ + "@" + revision_ + ": " + Megabytes(progress.Done()) +
                " downloaded" + buf + "; snapshot " + (entry_ / "snapshots" / commit_).string());
  return entry_ / "snapshots" / commit_;
}

}  // namespace

std::string HubEndpoint() {
  std::string endpoint = NonEmptyEnv("HF_ENDPOINT").value_or("https://huggingface.co");
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::optional<std::string> HubToken() {
  auto clean = [](const std::string& t) -> std::optional<std::string> {
    std::string s;
    for (char c : t)
      if (c != '\r' && c != '\n') s += c;
    s = Trim(s);
    if (s.empty()) return std::nullopt;
    return s;
  };
  if (auto t = NonEmptyEnv("HF_TOKEN")) return clean(*t);
  if (auto t = NonEmptyEnv("HUGGING_FACE_HUB_TOKEN")) return clean(*t);
  fs::path file;
  if (auto p = NonEmptyEnv("HF_TOKEN_PATH")) {
    file = *p;
  } else if (auto home = NonEmptyEnv("HF_HOME")) {
    file = fs::path(*home) / "token";
  } else if (auto xdg = NonEmptyEnv("XDG_CACHE_HOME")) {
    file = fs::path(*xdg) / "huggingface" / "token";
  } else {
    file = fs::path(NonEmptyEnv("HOME").value_or("")) / ".cache" / "huggingface" / "token";
  }
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return clean(text);
}

bool HubOfflineFromEnv() {
  for (const char* name : {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}) {
    std::string v = NonEmptyEnv(name).value_or("");
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (v == "1" || v == "ON" || v == "YES" || v == "TRUE") return true;
    if (!v.empty()) return false;  // huggingface_hub reads TRANSFORMERS_OFFLINE only when unset
  }
  return false;
}

bool IsModelRunFile(const std::string& filename) {
  if (filename.empty() || filename.find('/') != std::string::npos || filename[0] == '.')
    return false;
  for (const char* ext : {".json", ".safetensors", ".txt", ".jinja", ".model", ".tiktoken"})
    if (EndsWith(filename, ext)) return true;
  return false;
}

StatusOr<fs::path> DownloadModelSnapshot(const std::string& repo, const std::string& revision,
                                         const HubDownloadOptions& options) {
  SnapshotDownload download(repo, revision, options);
  return download.Run();
}

StatusOr<fs::path> ResolveOrDownloadModel(const std::string& ref,
                                          const HubDownloadOptions& options) {
  auto cached = ResolveModelReference(ref);
  if (cached.ok() || cached.status().code() != StatusCode::kNotFound) return cached;
  const auto parsed = ParseHubReference(ref);
  if (!parsed) return cached;  // neither a local path nor ORG/NAME: nothing to download
  if (options.offline || HubOfflineFromEnv())
    return NotFound(cached.status().message() + "; downloads are off (" +
                    (options.offline ? std::string("--offline") : "HF_HUB_OFFLINE is set") +
                    "), so " + ref + " cannot be fetched from the Hub");
  auto downloaded = DownloadModelSnapshot(parsed->repo, parsed->revision, options);
  if (!downloaded.ok())
    return downloaded.status().WithContext(
        ref + " is neither a local folder nor in the Hugging Face cache (" +
        HuggingFaceHubCache().string() + "), and downloading it from the Hub failed");
  return downloaded;
}

}  // namespace tlaloc::io
