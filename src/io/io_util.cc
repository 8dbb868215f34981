#include "io/io_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace tlaloc::io {

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(message);
    case EACCES:
    case EPERM:
      return Status(StatusCode::kPermissionDenied, message);
    case ENOSPC:
    case ENOMEM:
      return ResourceExhausted(message);
    default:
      return Status(StatusCode::kUnavailable, message);
  }
}

StatusOr<std::string> ReadFileToString(const std::filesystem::path& path) {
  const std::string src = path.string();
  int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, src + ": cannot open");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(src + ": not a regular file");
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, src + ": cannot read");
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomically(const std::filesystem::path& path,
                           const std::function<Status(const ByteSink&)>& write) {
  const std::string final_name = path.string();
  std::random_device rd;
  const std::string tmp_name = final_name + ".tmp" + std::to_string(rd() % 1000000);
  int fd = ::open(tmp_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, final_name + ": cannot create");
  ByteSink sink = [&](std::span<const std::byte> bytes) -> Status {
    const std::byte* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      ssize_t w = ::write(fd, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, final_name + ": cannot write");
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    return OkStatus();
  };
  Status status = write(sink);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, final_name + ": cannot write");
  if (status.ok() && std::rename(tmp_name.c_str(), final_name.c_str()) != 0)
    status = ErrnoStatus(errno, final_name + ": cannot rename the temporary file into place");
  if (!status.ok()) ::unlink(tmp_name.c_str());
  return status;
}

Status WriteStringAtomically(const std::filesystem::path& path, const std::string& text) {
  return WriteFileAtomically(path, [&](const ByteSink& sink) {
    return sink({reinterpret_cast<const std::byte*>(text.data()), text.size()});
  });
}

}  // namespace tlaloc::io
