// OpenBLAS chooses its kernel set from the CPU model when the library loads, and falls back to
// old SSE3 ("Prescott") kernels on a model newer than the library (as Debian 12's OpenBLAS does
// on Sapphire Rapids), which runs matrix products several times slower. The only way to choose
// again is the OPENBLAS_CORETYPE variable before the library loads, so the CLI re-runs itself
// once with the core type the CPU's vector unit fits.
#pragma once

#include <string>

namespace tlaloc::cli {

// The kernel set OpenBLAS loaded ("SkylakeX", "Haswell", "Prescott", ...).
std::string BlasCoreName();

// Re-executes this process with a fitting OPENBLAS_CORETYPE when OpenBLAS chose kernels the CPU
// outgrows; returns when nothing needs doing (or the re-exec failed, said on stderr).
void ReexecWithFittingBlasCore();

}  // namespace tlaloc::cli
