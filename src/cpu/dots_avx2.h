// The matrix-vector kernel's dot products (reduction_matmul.cc's DotsAvx512) on AVX2 + FMA CPUs,
// with the same bits: each 512-bit accumulator of the AVX-512 kernel is two 256-bit halves
// here, every lane receives the same fused multiply-adds in the same order, and the lanes are
// folded as SumLanes folds them. So a product gives the same result on an AVX2 CPU as on an
// AVX-512 one, and both read the weights at memory speed (the portable loop's one serial sum
// held bf16 decode to a few percent of the bandwidth). Also the column kernel of vectors times
// rows stored with their columns contiguous (decode attention's probabilities times V), with the
// AVX-512 column kernel's bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "support/avx512_intrinsics.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

#define TLALOC_AVX2_TARGET __attribute__((target("avx2,fma")))

// One 512-bit accumulator as its low (lanes 0-7) and high (lanes 8-15) halves.
struct Avx2Acc {
  __m256 lo, hi;
};

// 16 consecutive f32 from p in DotsAvx512's lane order (PermutePair: the low vector holds
// elements {0-3, 8-11, 16-19, 24-27} of 32, the high one the others): elements p[0-3, 8-11] are
// lanes 0-7 of one half, p[4-7, 12-15] lanes 0-7 of the other.
TLALOC_AVX2_TARGET inline void PermuteHalf(const float* p, __m256& lo, __m256& hi) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  lo = _mm256_permute2f128_ps(a, b, 0x20);
  hi = _mm256_permute2f128_ps(a, b, 0x31);
}

// 16 consecutive elements of a row (f32, or bf16 bits) in the same order: widening bf16 by
// interleaving it with zeros within each 128-bit lane gives that order directly.
template <typename W>
TLALOC_AVX2_TARGET inline void LoadRowHalf(const W* p, __m256& lo, __m256& hi) {
  if constexpr (std::is_same_v<W, uint16_t>) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
  } else {
    PermuteHalf(p, lo, hi);
  }
}

// SumLanes(a, b) of the AVX-512 kernel, on the halves.
TLALOC_AVX2_TARGET inline float SumLanesAvx2(Avx2Acc a, Avx2Acc b) {
  const __m256 s8 = _mm256_add_ps(_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// One 32-element step at i of S vectors against a row's 32 widened elements (w0: the first 16's
// lo and hi halves, w1: the last 16's): of 32 elements, AVX-512's low vector is (first 16's lo,
// last 16's lo), its high one the two hi halves.
template <int S>
TLALOC_AVX2_TARGET inline void FmaStep32(const float* const* x, int64_t i, __m256 w0l, __m256 w1l,
                                         __m256 w0h, __m256 w1h, Avx2Acc* acc0, Avx2Acc* acc1) {
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    __m256 x0l, x1l, x0h, x1h;
    PermuteHalf(x[s] + i, x0l, x1l);
    PermuteHalf(x[s] + i + 16, x0h, x1h);
    acc0[s].lo = _mm256_fmadd_ps(x0l, w0l, acc0[s].lo);
    acc0[s].hi = _mm256_fmadd_ps(x0h, w0h, acc0[s].hi);
    acc1[s].lo = _mm256_fmadd_ps(x1l, w1l, acc1[s].lo);
    acc1[s].hi = _mm256_fmadd_ps(x1h, w1h, acc1[s].hi);
  }
}

// out[s] = x[s] . row over k, for S vectors, with DotsAvx512<S, W>'s bits. S is kept small by the
// caller's dispatch (four 256-bit accumulators per vector).
template <int S, typename W>
TLALOC_AVX2_TARGET void DotsAvx2(const float* const* x, const W* row, int64_t k, float* out) {
  Avx2Acc acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m256 w0l, w1l, w0h, w1h;
    LoadRowHalf(row + i, w0l, w1l);
    LoadRowHalf(row + i + 16, w0h, w1h);
    FmaStep32<S>(x, i, w0l, w1l, w0h, w1h, acc0, acc1);
  }
  // The tail in steps of 16 in natural lane order into the first accumulator, lanes past k
  // multiplying zeros (as the AVX-512 kernel's zero-masked loads do).
  for (; i < k; i += 16) {
    const int64_t rem = std::min<int64_t>(16, k - i);
    alignas(32) float w[16] = {}, xs[16];
    for (int64_t j = 0; j < rem; ++j) {
      if constexpr (std::is_same_v<W, uint16_t>) {
        w[j] = Bf16BitsToFloat(row[i + j]);
      } else {
        w[j] = row[i + j];
      }
    }
    const __m256 wl = _mm256_load_ps(w), wh = _mm256_load_ps(w + 8);
    for (int s = 0; s < S; ++s) {
      std::fill(xs, xs + 16, 0.0f);
      std::memcpy(xs, x[s] + i, static_cast<size_t>(rem) * sizeof(float));
      acc0[s].lo = _mm256_fmadd_ps(_mm256_load_ps(xs), wl, acc0[s].lo);
      acc0[s].hi = _mm256_fmadd_ps(_mm256_load_ps(xs + 8), wh, acc0[s].hi);
    }
  }
  for (int s = 0; s < S; ++s) out[s] = SumLanesAvx2(acc0[s], acc1[s]);
}

// x[0, k) (k a multiple of 32) in the order FmaStep32 reads it: per 32-element step the four
// halves PermuteHalf makes of its two 16s, one after another. A kernel that runs many rows
// against the same vectors (decode attention's keys: 576 rows of 128 per head at a 512-token
// context) permutes them once here instead of once per row.
TLALOC_AVX2_TARGET inline void PermuteForSteps32(const float* x, int64_t k, float* xp) {
  for (int64_t i = 0; i + 32 <= k; i += 32) {
    __m256 x0l, x1l, x0h, x1h;
    PermuteHalf(x + i, x0l, x1l);
    PermuteHalf(x + i + 16, x0h, x1h);
    _mm256_storeu_ps(xp + i, x0l);
    _mm256_storeu_ps(xp + i + 8, x1l);
    _mm256_storeu_ps(xp + i + 16, x0h);
    _mm256_storeu_ps(xp + i + 24, x1h);
  }
}

// DotsAvx2<S, W>(x, row, k, out)'s bits for k a multiple of 32, from the vectors as
// PermuteForSteps32 left them (xp).
template <int S, typename W>
TLALOC_AVX2_TARGET void DotsAvx2Permuted(const float* const* xp, const W* row, int64_t k,
                                         float* out) {
  Avx2Acc acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i + 32 <= k; i += 32) {
    __m256 w0l, w1l, w0h, w1h;
    LoadRowHalf(row + i, w0l, w1l);
    LoadRowHalf(row + i + 16, w0h, w1h);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const float* x = xp[s] + i;
      acc0[s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(x), w0l, acc0[s].lo);
      acc0[s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), w0h, acc0[s].hi);
      acc1[s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), w1l, acc1[s].lo);
      acc1[s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), w1h, acc1[s].hi);
    }
  }
  for (int s = 0; s < S; ++s) out[s] = SumLanesAvx2(acc0[s], acc1[s]);
}

// 8 consecutive elements of a row (f32, or bf16 bits) as f32, in natural order.
template <typename W>
TLALOC_AVX2_TARGET inline __m256 LoadRow8(const W* p) {
  if constexpr (std::is_same_v<W, uint16_t>) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  } else {
    return _mm256_loadu_ps(p);
  }
}

// The columns per call of ColumnsAvx2At (four 256-bit accumulators per vector).
inline constexpr int64_t kAvx2Columns = 32;

// c[s * n + j] = sum over p of vecs[s * k + p] * row_at(p)[j] for S vectors and nb <= 32 columns,
// each output accumulated from 0 with one FMA per position in position order: the bits of the
// AVX-512 column kernel (reduction_matmul.cc's ColumnsAvx512At) and of its portable loop, whose
// std::fma is a library call per element on a CPU target without FMA.
template <int S, typename RowAt>
TLALOC_AVX2_TARGET void ColumnsAvx2At(const RowAt& row_at, const float* vecs, int64_t k, int64_t nb,
                                      float* c, int64_t n) {
  using W = std::remove_cv_t<std::remove_pointer_t<decltype(row_at(int64_t{0}))>>;
  __m256 acc[S][4];
  for (int s = 0; s < S; ++s)
    for (int v = 0; v < 4; ++v) acc[s][v] = _mm256_setzero_ps();
  const int full = static_cast<int>(nb / 8), tail = static_cast<int>(nb % 8);
  // The row 16 positions on is asked for ahead of use: decode attention's values read 64 bytes
  // of each cached row, rows 256 bytes apart and pages scattered, which the hardware prefetcher
  // does not follow (108 -> 72 us a layer at a 576-slot cache, qwen3-0.6b bf16 on Zen 3).
  constexpr int64_t kAhead = 16;
  for (int64_t p = 0; p < k; ++p) {
    const W* row = row_at(p);
    if (p + kAhead < k)
      _mm_prefetch(reinterpret_cast<const char*>(row_at(p + kAhead)), _MM_HINT_T0);
    __m256 w[4];
    if (nb == kAvx2Columns) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) w[v] = LoadRow8(row + 8 * v);
    } else {
      for (int v = 0; v < 4; ++v) w[v] = _mm256_setzero_ps();
      for (int v = 0; v < full; ++v) w[v] = LoadRow8(row + 8 * v);
      if (tail > 0) {
        W padded[8] = {};
        std::memcpy(padded, row + 8 * full, static_cast<size_t>(tail) * sizeof(W));
        w[full] = LoadRow8(padded);
      }
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m256 xs = _mm256_set1_ps(vecs[s * k + p]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[s][v] = _mm256_fmadd_ps(xs, w[v], acc[s][v]);
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int v = 0; v < full; ++v) _mm256_storeu_ps(c + s * n + 8 * v, acc[s][v]);
    if (tail > 0) {
      alignas(32) float last[8];
      _mm256_store_ps(last, acc[s][full]);
      std::memcpy(c + s * n + 8 * full, last, static_cast<size_t>(tail) * sizeof(float));
    }
  }
}

}  // namespace tlaloc::cpu
