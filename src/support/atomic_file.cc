// Atomic file writes (see atomic_file.h): temporary sibling, fsync, rename, fsync of the folder.
#include "tlaloc/support/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace tlaloc {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTmpMarker = ".tmp-";

fs::path ParentOrDot(const fs::path& path) {
  fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// TLALOC_TEST_KILL_AFTER_WRITES=N (see atomic_file.h): the N-th write step SIGKILLs the process.
class KillAfterWrites {
 public:
  KillAfterWrites() {
    const char* env = std::getenv("TLALOC_TEST_KILL_AFTER_WRITES");
    limit_ = env ? std::atoll(env) : 0;
  }
  // The process ended without reaching the limit: say how many steps it had.
  ~KillAfterWrites() {
    if (limit_ > 0)
      std::fprintf(stderr, "TLALOC_TEST_KILL_AFTER_WRITES=%lld not reached: %lld write steps\n",
                   limit_, static_cast<long long>(count_.load()));
  }
  bool active() const { return limit_ > 0; }
  void Step() {
    if (limit_ > 0 && count_.fetch_add(1) + 1 == limit_) {
      std::fflush(nullptr);
      std::raise(SIGKILL);
    }
  }

 private:
  long long limit_ = 0;
  std::atomic<long long> count_{0};
};

KillAfterWrites& KillHook() {
  static KillAfterWrites hook;
  return hook;
}

Status WriteAllOnce(int fd, std::span<const std::byte> bytes, const std::string& name);

// Writes all of `bytes` to `fd`. Under the kill hook it writes in two halves, each a step, so
// that a kill can leave a torn temporary file.
Status WriteAll(int fd, std::span<const std::byte> bytes, const std::string& name) {
  KillAfterWrites& hook = KillHook();
  if (!hook.active() || bytes.size() < 2) {
    TL_RETURN_IF_ERROR(WriteAllOnce(fd, bytes, name));
    hook.Step();
    return OkStatus();
  }
  const size_t half = bytes.size() / 2;
  TL_RETURN_IF_ERROR(WriteAllOnce(fd, bytes.first(half), name));
  hook.Step();
  TL_RETURN_IF_ERROR(WriteAllOnce(fd, bytes.subspan(half), name));
  hook.Step();
  return OkStatus();
}

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
Status WriteAllOnce(int fd, std::span<const std::byte> bytes, const std::string& name) {
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, name + ": cannot write");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return OkStatus();
}

}  // namespace

Status ErrnoError(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(StatusCode::kPermissionDenied, message);
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
      return ResourceExhausted(message);
    default:
      return Status(StatusCode::kUnavailable, message);
  }
}

fs::path TemporarySibling(const fs::path& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), "%s%ld-%08llx", std::string(kTmpMarker).c_str(),
                static_cast<long>(::getpid()), static_cast<unsigned long long>(rng() & 0xffffffff));
  return path.parent_path() / ("." + path.filename().string() + suffix);
}

bool IsTemporaryName(std::string_view name) {
  return !name.empty() && name.front() == '.' && name.find(kTmpMarker) != std::string_view::npos;
}

Status SyncDirectory(const fs::path& dir) {
  const std::string name = dir.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, name + ": cannot open the folder to sync it");
  Status status;
  // Some file systems cannot sync folders (EINVAL); there is nothing more to do on those.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
    status = ErrnoError(errno, name + ": cannot sync the folder");
  ::close(fd);
  return status;
}

Status RenameDurably(const fs::path& from, const fs::path& to) {
  KillHook().Step();  // before the rename: the new file complete but unpublished
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return ErrnoError(errno, to.string() + ": cannot rename " + from.string() + " into place");
  KillHook().Step();  // after it, before the folders are synced
  const fs::path to_dir = ParentOrDot(to), from_dir = ParentOrDot(from);
  TL_RETURN_IF_ERROR(SyncDirectory(to_dir));
  std::error_code ec;
  if (!fs::equivalent(to_dir, from_dir, ec)) TL_RETURN_IF_ERROR(SyncDirectory(from_dir));
  return OkStatus();
}

Status WriteFileAtomic(const fs::path& path, const std::function<Status(const ByteSink&)>& write) {
  const std::string name = path.string();
  const fs::path tmp = TemporarySibling(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, name + ": cannot create a temporary file beside it");
  ByteSink sink = [&](std::span<const std::byte> bytes) { return WriteAll(fd, bytes, name); };
  Status status = write(sink);
  // The data must be on disk before the rename publishes it, or a crash could leave the new
  // name pointing at an empty or partial file.
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError(errno, name + ": cannot sync");
  if (::close(fd) != 0 && status.ok()) status = ErrnoError(errno, name + ": cannot write");
  if (status.ok()) status = RenameDurably(tmp, path);
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

Status WriteStringAtomic(const fs::path& path, std::string_view text) {
  return WriteFileAtomic(path, [&](const ByteSink& sink) {
    return sink({reinterpret_cast<const std::byte*>(text.data()), text.size()});
  });
}

Status CopyFileAtomic(const fs::path& from, const fs::path& to) {
  const std::string src = from.string();
  const int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return ErrnoError(errno, src + ": cannot open to copy it to " + to.string());
  Status status = WriteFileAtomic(to, [&](const ByteSink& sink) -> Status {
    std::byte buf[1 << 16];
    while (true) {
      const ssize_t r = ::read(in, buf, sizeof buf);
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, src + ": cannot read");
      }
      if (r == 0) return OkStatus();
      TL_RETURN_IF_ERROR(sink({buf, static_cast<size_t>(r)}));
    }
  });
  ::close(in);
  return status;
}

}  // namespace tlaloc
