// The one horizontal sum the CPU kernels share, so that every product that promises another's
// bits (the matrix-vector kernel's, the small-M kernel's, the int8 and GGUF kernels') folds its
// lanes in the same order.
#pragma once

#include "support/avx512_intrinsics.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc::cpu {

// a + b, then pairwise over the 16 lanes in a fixed order, in registers: lane l += lane l + 8,
// then l + 4, l + 2, l + 1.
TLALOC_AVX512_CORE_TARGET inline float SumLanes(__m512 a, __m512 b) {
  const __m512 v = _mm512_add_ps(a, b);
  const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), high);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

}  // namespace tlaloc::cpu
