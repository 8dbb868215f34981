// The x86 intrinsics for the hand-vectorised kernels (ops/ and interp/), included in place of
// <immintrin.h>. GCC 12 reports the deliberately undefined lanes inside its own AVX-512
// intrinsic headers (_mm512_undefined_*) as uninitialised once they are inlined into a kernel,
// so this also turns those two warnings off for the rest of the including file. Clang has no
// -Wmaybe-uninitialized and rejects the unknown pragma under -Werror, hence GCC only. Internal:
// a public header must not change its includer's diagnostics.
#pragma once

#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
