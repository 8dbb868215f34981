#include "tlaloc/ir/blas_kernels.h"

#include <cblas.h>

namespace tlaloc {

std::string OpenBlasCoreName() { return openblas_get_corename(); }

std::string PreferredOpenBlasCore() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return "";
}

bool OpenBlasCoreFitsCpu() {
  static const bool fits = [] {
    const std::string core = OpenBlasCoreName(), preferred = PreferredOpenBlasCore();
    if (preferred == "SkylakeX")
      return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
    if (preferred == "Haswell")
      return core == "Haswell" || core == "Zen" || core == "SkylakeX" || core == "Cooperlake";
    return true;
  }();
  return fits;
}

}  // namespace tlaloc
