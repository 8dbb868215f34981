// The CLI re-runs itself once with the OPENBLAS_CORETYPE the CPU's vector unit fits when
// OpenBLAS loaded older kernels (see tlaloc/cpu/blas_kernels.h): OpenBLAS's f32 products are
// faster than the oneDNN ones the library falls back to.
#pragma once

#include <string>

namespace tlaloc::cli {

// The kernel set OpenBLAS loaded ("SkylakeX", "Haswell", "Prescott", ...).
std::string BlasCoreName();

// Re-executes this process with a fitting OPENBLAS_CORETYPE when OpenBLAS chose kernels the CPU
// outgrows; returns when nothing needs doing (or the re-exec failed, said on stderr).
void ReexecWithFittingBlasCore();

}  // namespace tlaloc::cli
