#include "tlaloc/pjrt/program_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tlaloc/support/atomic_file.h"

namespace tlaloc::pjrt {

namespace fs = std::filesystem;

std::optional<std::string> ProgramsDirFromEnvironment() {
  for (const char* name : {"TLALOC_PROGRAMS_DIR", "TLALOC_TPU_PROGRAMS_DIR"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string(v);
  }
  return std::nullopt;
}

std::string ModuleNameOf(const std::string& mlir) {
  size_t at = mlir.find("module @");
  if (at == std::string::npos) return "program";
  at += 8;
  std::string name;
  // Only characters that are safe in a file name; MLIR's bare identifiers fit.
  while (at < mlir.size() && (std::isalnum(static_cast<unsigned char>(mlir[at])) ||
                              mlir[at] == '_' || mlir[at] == '-' || mlir[at] == '.')) {
    name += mlir[at++];
  }
  return name.empty() ? "program" : name;
}

namespace {

// FNV-1a, 64 bits: a stable name for the same text and options across processes and builds
// (std::hash promises neither).
uint64_t Fnv1a(const std::string& a, const std::string& b) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string* s : {&a, &b}) {
    for (unsigned char c : *s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xFF;  // separates a from b
    h *= 1099511628211ull;
  }
  return h;
}

// Appends one line with a single write(2) on an O_APPEND descriptor, so lines from several
// processes recording into one folder do not interleave.
Status AppendLine(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "cannot open " + path.string());
  ssize_t n = ::write(fd, line.data(), line.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    return ErrnoError(n < 0 ? err : EIO, "cannot append to " + path.string());
  }
  return OkStatus();
}

}  // namespace

Status RecordProgram(const std::string& dir, const std::string& platform, const std::string& mlir,
                     const CompileOptions& options) {
  TL_ASSIGN_OR_RETURN(std::string serialized, options.Serialize());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgument("programs folder " + dir + ": " + ec.message());
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(Fnv1a(mlir, serialized)));
  const std::string stem = ModuleNameOf(mlir) + "-" + hash;
  const fs::path text_path = fs::path(dir) / (stem + ".mlir");
  if (fs::exists(text_path)) return OkStatus();  // recorded before: once is enough
  TL_RETURN_IF_ERROR(WriteStringAtomic(fs::path(dir) / (stem + ".options.pb"), serialized));
  TL_RETURN_IF_ERROR(WriteStringAtomic(text_path, mlir));
  std::ostringstream line;
  line << stem << ".mlir\t" << ModuleNameOf(mlir) << '\t' << (platform.empty() ? "-" : platform)
       << '\t' << options.num_replicas << '\t' << options.num_partitions << '\t'
       << (options.strict_precision ? 1 : 0) << '\t' << mlir.size() << '\n';
  return AppendLine(fs::path(dir) / kProgramsIndexFile, line.str());
}

StatusOr<std::vector<RecordedProgram>> ParseProgramIndex(std::string_view text,
                                                         const std::string& origin) {
  std::vector<RecordedProgram> out;
  std::set<std::string> seen;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, '\t');) cols.push_back(col);
    const std::string where = origin + ":" + std::to_string(number);
    if (cols.size() != 7) {
      return InvalidArgument(where +
                             ": expected 7 tab-separated columns (file, module, platform, "
                             "num_replicas, num_partitions, strict_precision, bytes), got " +
                             std::to_string(cols.size()));
    }
    RecordedProgram p;
    p.file = cols[0];
    p.module = cols[1];
    p.platform = cols[2];
    auto number_of = [&](const std::string& col, const char* what, int64_t lo,
                         int64_t& v) -> Status {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(col.c_str(), &end, 10);
      if (col.empty() || *end != '\0' || errno != 0 || x < lo) {
        return InvalidArgument(where + ": " + what + " '" + col +
                               "' is not a whole number >= " + std::to_string(lo));
      }
      v = x;
      return OkStatus();
    };
    int64_t strict = 0;
    TL_RETURN_IF_ERROR(number_of(cols[3], "num_replicas", 1, p.num_replicas));
    TL_RETURN_IF_ERROR(number_of(cols[4], "num_partitions", 1, p.num_partitions));
    TL_RETURN_IF_ERROR(number_of(cols[5], "strict_precision", 0, strict));
    TL_RETURN_IF_ERROR(number_of(cols[6], "bytes", 0, p.bytes));
    p.strict_precision = strict != 0;
    if (p.file.find('/') != std::string::npos || p.file.size() < 6 ||
        p.file.substr(p.file.size() - 5) != ".mlir") {
      return InvalidArgument(where + ": file '" + p.file +
                             "' is not a .mlir file name inside the folder");
    }
    if (seen.insert(p.file).second) out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<RecordedProgram>> ReadProgramIndex(const std::string& dir) {
  const fs::path path = fs::path(dir) / kProgramsIndexFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound("no programs index at " + path.string() +
                    " (record programs with TLALOC_PROGRAMS_DIR=" + dir + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  TL_ASSIGN_OR_RETURN(std::vector<RecordedProgram> out,
                      ParseProgramIndex(text.str(), path.string()));
  for (RecordedProgram& p : out) {
    const std::string options_file = p.file.substr(0, p.file.size() - 5) + ".options.pb";
    if (fs::exists(fs::path(dir) / options_file)) p.options_file = options_file;
  }
  return out;
}

}  // namespace tlaloc::pjrt
