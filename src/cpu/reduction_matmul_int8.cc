// Products with int8 weight matrices (f16 scales per block of 32 along the contraction:
// io::WeightQuantization), for the interpreter's fused int8 kernel (interp/fusion.h). The
// matrix-vector kernel dequantises each 32-element block in registers (one widening, one
// convert, one multiply by the block's scale, all exact) and then runs exactly the f32 kernel's
// arithmetic of reduction_matmul.cc (the same lane order, FMAs and horizontal sum), so its
// results are bit for bit those of the f32 product with the dequantised matrix, while reading
// 1.06 bytes per weight instead of 4 (f32) or 2 (bf16).
#include <algorithm>
#include <vector>

#include "dots_avx2.h"
#include "reduction_matmul.h"
#include "sum_lanes.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

namespace {

constexpr int64_t kBlock = kQ8_0BlockElements;  // the q8_0 block (ir/quant_format.h)

const bool kAvx512 = HasAvx512Core();
const bool kAvx2 = HasAvx2();

// The f32 kernel's lane order (reduction_matmul.cc): elements {0-3, 8-11, 16-19, 24-27} of a
// 32-element step in `lo`, the others in `hi`.
inline constexpr int kLoLanes[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
inline constexpr int kHiLanes[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};

TLALOC_AVX512_CORE_TARGET inline void LoadVectorPair(const float* p, __m512& lo, __m512& hi) {
  const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + 16);
  lo = _mm512_permutex2var_ps(a, _mm512_loadu_si512(kLoLanes), b);
  hi = _mm512_permutex2var_ps(a, _mm512_loadu_si512(kHiLanes), b);
}

// One 32-element block of int8 values times its scale, in the same lane order: widening to 16
// bits keeps the natural order, and interleaving with zeros within each 128-bit lane gives the
// 32-bit lanes {0-3, 8-11, ...} / {4-7, 12-15, ...} holding q * 2^16 (the value in the high
// half). That converts exactly, and times `scale16` = scale * 2^-16 (exact: a power of two
// apart, far from f32's limits) it is q * scale exactly, as the unfused chain computes it.
TLALOC_AVX512_CORE_TARGET inline void LoadInt8Block(const int8_t* p, __m512 scale16, __m512& lo,
                                                    __m512& hi) {
  const __m512i w16 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512i zero = _mm512_setzero_si512();
  lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_unpacklo_epi16(zero, w16)), scale16);
  hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_unpackhi_epi16(zero, w16)), scale16);
}

// R rows (R = 4 or 1) against S vectors: each (row, vector) pair's arithmetic is the f32
// kernel's DotsAvx512 / Dot4RowsAvx512 on the dequantised row.
template <int R, int S>
TLALOC_AVX512_CORE_TARGET void Int8RowsAvx512(const float* const* x, const int8_t* const* rows,
                                              const uint16_t* const* scales, int64_t k, float* out,
                                              int64_t out_s, bool prefetch) {
  // Every loop over R and S is unrolled: with constant indices the accumulators stay in
  // registers (a rolled init or final loop keeps the arrays in memory, and then every FMA of
  // the main loop also stored its accumulator back to the stack).
  __m512 acc0[R][S], acc1[R][S];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < S; ++v) acc0[r][v] = acc1[r][v] = _mm512_setzero_ps();
  // Each row's scales, sixteen at a time, widened from f16 exactly (vcvtph2ps), times 2^-16.
  alignas(64) float sc[R][16];
  const int64_t blocks = k / kBlock;
  for (int64_t i = 0; i < k; i += kBlock) {
    const int64_t blk = i / kBlock;
    if ((blk & 15) == 0) {
      const int64_t left = std::min<int64_t>(16, blocks - blk);
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
      const __m512 two_m16 = _mm512_set1_ps(1.0f / 65536.0f);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        _mm512_store_ps(
            sc[r],
            _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, scales[r] + blk)), two_m16));
    }
    __m512 x0[S], x1[S];
#pragma GCC unroll 4
    for (int v = 0; v < S; ++v) LoadVectorPair(x[v] + i, x0[v], x1[v]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Once per line (blocks are half a line).
      if (prefetch && (i & 63) == 0)
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + i + kInt8PrefetchRowsAhead * k),
                     _MM_HINT_T1);
      __m512 w0, w1;
      LoadInt8Block(rows[r] + i, _mm512_set1_ps(sc[r][blk & 15]), w0, w1);
#pragma GCC unroll 4
      for (int v = 0; v < S; ++v) {
        acc0[r][v] = _mm512_fmadd_ps(x0[v], w0, acc0[r][v]);
        acc1[r][v] = _mm512_fmadd_ps(x1[v], w1, acc1[r][v]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < S; ++v) out[r + v * out_s] = SumLanes(acc0[r][v], acc1[r][v]);
}

// Without AVX-512: the f32 kernel (DotF32: AVX2's lanes, or the portable loop) on the row
// dequantised into a per-thread buffer, so the product has the unfused chain's bits there too.
#if defined(__x86_64__)
// The dequantisation below on AVX2: each element times its block's scale, rounded once, the
// same products (the scalar loop held an exact int8 decode step to 1.4 GB/s on a Zen 3).
__attribute__((target("avx2"))) void DequantiseRowAvx2(const int8_t* row, const uint16_t* scales,
                                                       int64_t k, float* dense) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const __m256 d = _mm256_set1_ps(HalfBitsToFloat(scales[b]));
    for (int64_t i = b * kBlock; i < (b + 1) * kBlock; i += 8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i));
      _mm256_storeu_ps(dense + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    }
  }
}
#endif

// One row of k (a multiple of kBlock) dequantised: each element times its block's scale.
void DequantiseRow(const int8_t* row, const uint16_t* scales, int64_t k, float* dense) {
#if defined(__x86_64__)
  if (kAvx2) return DequantiseRowAvx2(row, scales, k, dense);
#endif
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float d = HalfBitsToFloat(scales[b]);
    for (int64_t i = b * kBlock; i < (b + 1) * kBlock; ++i)
      dense[i] = static_cast<float>(row[i]) * d;
  }
}

#if defined(__x86_64__)
// 16 int8 values times their block's scale in DotsAvx2's lane order (elements {0-3, 8-11} in
// `lo`, {4-7, 12-15} in `hi`): as in LoadInt8Block, interleaving the widened values with zeros
// gives q * 2^16 per lane, and times scale * 2^-16 that is q * scale exactly.
TLALOC_AVX2_TARGET inline void LoadInt8Half(const int8_t* p, __m256 scale16, __m256& lo,
                                            __m256& hi) {
  const __m256i w16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i zero = _mm256_setzero_si256();
  lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_unpacklo_epi16(zero, w16)), scale16);
  hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_unpackhi_epi16(zero, w16)), scale16);
}

// S <= 2 dot products of one int8 row (k a multiple of 32) with DotsAvx2's arithmetic on the
// dequantised row (so DotF32's bits there), each block dequantised in registers: the row is
// read once at 1.06 bytes per weight, with no f32 copy written and read back.
template <int S>
TLALOC_AVX2_TARGET void Int8DotsAvx2(const float* const* x, const int8_t* row,
                                     const uint16_t* scales, int64_t k, float* out) {
  Avx2Acc acc0[S], acc1[S];
  for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < k; i += kBlock) {
    const __m256 scale16 = _mm256_set1_ps(HalfBitsToFloat(scales[i / kBlock]) * 0x1p-16f);
    __m256 w0l, w1l, w0h, w1h;
    LoadInt8Half(row + i, scale16, w0l, w1l);
    LoadInt8Half(row + i + 16, scale16, w0h, w1h);
    FmaStep32<S>(x, i, w0l, w1l, w0h, w1h, acc0, acc1);
  }
  for (int s = 0; s < S; ++s) out[s] = SumLanesAvx2(acc0[s], acc1[s]);
}

// Int8RowPortable's results for any number of vectors, two at a time.
void Int8RowAvx2(const float* const* x, int s_count, const int8_t* row, const uint16_t* scales,
                 int64_t k, float* out, int64_t out_s) {
  for (int s0 = 0; s0 < s_count; s0 += 2) {
    float res[2];
    const int count = std::min(2, s_count - s0);
    if (count == 2) {
      Int8DotsAvx2<2>(x + s0, row, scales, k, res);
    } else {
      Int8DotsAvx2<1>(x + s0, row, scales, k, res);
    }
    for (int s = 0; s < count; ++s) out[(s0 + s) * out_s] = res[s];
  }
}
#endif

void Int8RowPortable(const float* const* x, int s_count, const int8_t* row, const uint16_t* scales,
                     int64_t k, float* out, int64_t out_s) {
  thread_local std::vector<float> dense;
  dense.resize(static_cast<size_t>(k));
  DequantiseRow(row, scales, k, dense.data());
  for (int s = 0; s < s_count; ++s) out[s * out_s] = DotF32(x[s], dense.data(), k);
}

template <int S>
TLALOC_AVX512_CORE_TARGET void Int8RowsDispatch(const float* const* x, const int8_t* const* rows,
                                                const uint16_t* const* scales, int64_t k,
                                                float* out, int64_t out_s, bool four,
                                                bool prefetch) {
  if (four)
    Int8RowsAvx512<4, S>(x, rows, scales, k, out, out_s, prefetch);
  else
    Int8RowsAvx512<1, S>(x, rows, scales, k, out, out_s, prefetch);
}

}  // namespace

float DotInt8(const float* x, const int8_t* row, const uint16_t* scales, int64_t k) {
  float out;
  if (kAvx512 && k % kBlock == 0) Int8RowsAvx512<1, 1>(&x, &row, &scales, k, &out, 1, false);
#if defined(__x86_64__)
  else if (kAvx2 && k % kBlock == 0)
    Int8RowAvx2(&x, 1, row, scales, k, &out, 1);
#endif
  else
    Int8RowPortable(&x, 1, row, scales, k, &out, 1);
  return out;
}

void Int8Matmul(const float* x, int64_t m, const int8_t* w, const uint16_t* scales, int64_t n,
                int64_t k, float* c, EvalContext& ctx) {
  if (m > kMaxVectors) {
    // Prefill: the f32 product on the dequantised matrix, one block of 256 rows of w at a time
    // where the product is BLAS's 256 x 256 blocks anyway (the same calls, so the same bits),
    // instead of dequantising the whole matrix first (622 MB for the LM head).
    const int64_t blocks_per_row = k / kBlock;
    auto dequantise = [&](int64_t j0, int64_t nb, float* out) {
      for (int64_t r = 0; r < nb; ++r)
        DequantiseRow(w + (j0 + r) * k, scales + (j0 + r) * blocks_per_row, k, out + r * k);
    };
    if (BlasMatmulTransposedBlocks(x, m, k, n, dequantise, c, ctx)) return;
    // Otherwise the whole matrix dequantised, then ViewMatmul (one temporary), 64-byte aligned
    // like the f32 weights the unfused product reads.
    Literal dense_buffer = Literal::Uninitialized(TensorType(ElementType::kF32, {n, k}));
    float* dense = dense_buffer.span<float>().data();
    ctx.ParallelFor(
        n, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
        [&](int64_t begin, int64_t end) { dequantise(begin, end - begin, dense + begin * k); });
    MatrixView a{reinterpret_cast<const std::byte*>(x), ElementType::kF32, m * k, k, 1};
    MatrixView b{reinterpret_cast<const std::byte*>(dense), ElementType::kF32, n * k, 1, k};
    ViewMatmul(a, b, 1, m, k, n, c, ctx);
    return;
  }
  // Decode: rows of w streamed once against the m vectors, each thread through its own
  // contiguous share of rows as the f32 kernel splits them (results do not depend on the split).
  const int s_count = static_cast<int>(m);
  const int64_t blocks = k / kBlock;
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  const float* xs[kMaxVectors];
  for (int s = 0; s < s_count; ++s) xs[s] = x + s * k;
  ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end;) {
      const bool four = r + 4 <= end && s_count <= 2;
      const int count = four ? 4 : 1;
      const int8_t* rows[4];
      const uint16_t* sc[4];
      for (int j = 0; j < count; ++j) rows[j] = w + (r + j) * k, sc[j] = scales + (r + j) * blocks;
      float* o = c + r;
      if (!kAvx512) {
#if defined(__x86_64__)
        if (kAvx2 && k % kBlock == 0)
          Int8RowAvx2(xs, s_count, rows[0], sc[0], k, o, n);
        else
#endif
          Int8RowPortable(xs, s_count, rows[0], sc[0], k, o, n);
        r += 1;
        continue;
      }
      const bool prefetch = r + 12 <= n;
      WithVectorCount(s_count, [&](auto s) {
        Int8RowsDispatch<decltype(s)::value>(xs, rows, sc, k, o, n, four, prefetch);
      });
      r += count;
    }
  });
}

}  // namespace tlaloc::cpu
