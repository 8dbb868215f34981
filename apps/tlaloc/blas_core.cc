#include "blas_core.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tlaloc/cpu/blas_kernels.h"

namespace tlaloc::cli {

namespace {
constexpr const char* kReexecGuard = "TLALOC_BLAS_REEXEC";

// After the re-exec: the process keeps the name it was started under (argv[0]'s file name, as
// the kernel gave it first), whatever path the re-exec went through.
void KeepProcessName() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string argv0;
  if (!std::getline(f, argv0, '\0') || argv0.empty()) return;
  const std::string name = std::filesystem::path(argv0).filename().string();
  if (!name.empty()) prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);  // the kernel keeps 15 bytes
}
}  // namespace

std::string BlasCoreName() { return cpu::OpenBlasCoreName(); }

void ReexecWithFittingBlasCore() {
  const std::string core = BlasCoreName(), preferred = cpu::PreferredOpenBlasCore();
  // A user's own OPENBLAS_CORETYPE choice that fits is kept; the guard stops a second re-run.
  if (std::getenv(kReexecGuard)) {
    KeepProcessName();
    return;
  }
  if (cpu::OpenBlasCoreFitsCpu()) return;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> parts;
  for (size_t start = 0; start < raw.size();) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    parts.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  if (parts.empty()) return;
  std::vector<char*> argv;
  for (auto& p : parts) argv.push_back(p.data());
  argv.push_back(nullptr);
  // The one setting that has to travel as an environment variable: OpenBLAS picks its kernel
  // set in its load-time constructor, before main, and reads nothing else; it is set for the
  // re-executed process only.
  setenv("OPENBLAS_CORETYPE", preferred.c_str(), 1);
  setenv(kReexecGuard, "1", 1);
  // The binary's own path, not /proc/self/exe: the kernel names the process (its comm, what top
  // and pgrep show) after the file executed, and "exe" is no name. /proc/self/exe stays the
  // fallback for a binary replaced or deleted since it started.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self, ec)) execv(self.c_str(), argv.data());
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "tlaloc: re-running with OPENBLAS_CORETYPE=%s failed; using %s kernels\n",
               preferred.c_str(), core.c_str());
}

}  // namespace tlaloc::cli
