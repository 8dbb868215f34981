// Which kernel set OpenBLAS loaded for the interpreter's f32 matrix products. OpenBLAS picks it
// from the CPU model when the library loads and falls back to old SSE3 ("Prescott") kernels on
// a model newer than itself (Debian 12's OpenBLAS does so on Sapphire Rapids), several times
// slower; it can only be chosen again through OPENBLAS_CORETYPE before the library loads. The
// interpreter then sends f32 products to oneDNN instead, and the CLI re-runs itself with the
// fitting core type.
#pragma once

#include <string>

namespace tlaloc::cpu {

// The kernel set OpenBLAS loaded ("SkylakeX", "Haswell", "Prescott", ...).
std::string OpenBlasCoreName();
// The OPENBLAS_CORETYPE this CPU's vector unit fits ("SkylakeX", "Haswell"), or "" when any
// kernel set will do.
std::string PreferredOpenBlasCore();
// Whether the loaded kernel set uses this CPU's vector unit.
bool OpenBlasCoreFitsCpu();

}  // namespace tlaloc::cpu
