#include "blas_core.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "tlaloc/ir/blas_kernels.h"

namespace tlaloc::cli {

namespace {
constexpr const char* kReexecGuard = "TLALOC_BLAS_REEXEC";
}  // namespace

std::string BlasCoreName() { return OpenBlasCoreName(); }

void ReexecWithFittingBlasCore() {
  const std::string core = BlasCoreName(), preferred = PreferredOpenBlasCore();
  // A user's own OPENBLAS_CORETYPE choice that fits is kept; the guard stops a second re-run.
  if (OpenBlasCoreFitsCpu() || std::getenv(kReexecGuard)) return;
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
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "tlaloc: re-running with OPENBLAS_CORETYPE=%s failed; using %s kernels\n",
               preferred.c_str(), core.c_str());
}

}  // namespace tlaloc::cli
