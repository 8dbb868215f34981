#include "io/io_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tlaloc::io {

Status ErrnoStatus(int err, const std::string& what) { return ErrnoError(err, what); }

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
  return WriteFileAtomic(path, write);
}

Status WriteStringAtomically(const std::filesystem::path& path, const std::string& text) {
  return WriteStringAtomic(path, text);
}

}  // namespace tlaloc::io
