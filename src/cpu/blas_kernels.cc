#include "tlaloc/cpu/blas_kernels.h"

#include <cblas.h>

#include "tlaloc/support/cpu_features.h"

namespace tlaloc::cpu {

std::string OpenBlasCoreName() { return openblas_get_corename(); }

std::string PreferredOpenBlasCore() {
  if (HasAvx512Core()) return "SkylakeX";
  if (HasAvx2()) return "Haswell";
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

}  // namespace tlaloc::cpu
