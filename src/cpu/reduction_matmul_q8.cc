// The q8_0 activation mode of int8 products (reduction_matmul_q8.h). Without VNNI, AVX2 CPUs
// run reduction_matmul_q8_avx2.cc instead of the portable loop. Layout of the VNNI path:
//
// - Activations: each row rounded to int8 per 32-block (QuantizeRowQ8_0), its scale dx kept as
//   the f32 value of its f16, and per block the correction -128 * sum(q_x).
// - vpdpbusd multiplies unsigned bytes by signed bytes. The weights become the unsigned side:
//   w ^ 0x80 = w + 128 in [1, 255], so the sum over a block of (w + 128) * q_x is
//   sum(w * q_x) + 128 * sum(q_x), and starting the int32 accumulator at the correction leaves
//   the exact block sum (|sum| <= 32 * 127 * 127, far inside int32 and exact in f32).
// - Row stream (decode, up to four activation rows): w is read in place, 64 bytes (two blocks)
//   per step; the sixteen int32 lanes hold partial sums of four bytes, lanes 0-7 of the first
//   block and 8-15 of the second, converted to f32 and multiplied-added with dx * dw laid out
//   the same way.
// - Tiles (prefill): 32 rows of w repacked so that one 64-byte vector holds four consecutive
//   bytes of sixteen rows; a four-byte group of one activation row broadcast against it gives
//   sixteen outputs at once, eight steps complete a block, and one convert and FMA per block
//   and 16 outputs apply dx * dw. Up to six activation rows share each loaded weight vector.
#include "reduction_matmul_q8.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "reduction_matmul.h"
#include "reduction_matmul_q8_avx2.h"
#include "reduction_matmul_q8_internal.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

#if defined(__x86_64__)
#define TLALOC_AVX512_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#endif

namespace tlaloc::cpu {

using q8_internal::kBlock;
using q8_internal::kTileCols;
using q8_internal::QuantizedRows;
using q8_internal::QuantizeRows;

namespace {

bool DetectVnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return HasAvx512Core() && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

}  // namespace

int32_t q8_internal::QuantizeBlockPortable(const float* x, int8_t* q, float* dx, uint16_t* d_bits) {
  float amax = 0;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t bits = FloatToHalfBits(amax / 127.f);
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    const float v = std::nearbyint(x[i] * id);  // the default rounding: half to even
    q[i] = static_cast<int8_t>(std::clamp(v, -127.f, 127.f));
    sum += q[i];
  }
  if (dx) *dx = HalfBitsToFloat(bits);
  if (d_bits) *d_bits = bits;
  return sum;
}

namespace {

#if defined(__x86_64__)
TLALOC_AVX512_CORE_TARGET int32_t QuantizeBlockAvx512(const float* x, int8_t* q, float* dx,
                                                      uint16_t* d_bits) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const uint16_t bits = FloatToHalfBits(amax / 127.f);
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  // cvtps_epi32 rounds with MXCSR's mode, half to even by default, as ggml's round does.
  const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
  const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(i0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(i1));
  if (dx) *dx = HalfBitsToFloat(bits);
  if (d_bits) *d_bits = bits;
  return _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
}
#endif

int32_t QuantizeBlock(const float* x, int8_t* q, float* dx, uint16_t* d_bits) {
#if defined(__x86_64__)
  if (HasAvx512Core()) return QuantizeBlockAvx512(x, q, dx, d_bits);
  if (q8_internal::Q8UsesAvx2()) return q8_internal::QuantizeBlockAvx2(x, q, dx, d_bits);
#endif
  return q8_internal::QuantizeBlockPortable(x, q, dx, d_bits);
}

// The scalar loop: exact block sums, scaled and added in block order (the decomposition's
// bits: the product is rounded, then added; no FMA, as the baseline x86-64 target has none).
void PortableRows(const QuantizedRows& xq, int64_t m, const int8_t* w, const uint16_t* scales,
                  int64_t n, int64_t k, float* c, EvalContext& ctx) {
  const int64_t blocks = k / kBlock;
  ctx.ParallelFor(n, std::max<int64_t>(1, 4096 / k), [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          int32_t sum = 0;
          for (int64_t e = b * kBlock; e < (b + 1) * kBlock; ++e)
            sum += int32_t{xq.Q(i)[e]} * int32_t{w[j * k + e]};
          float p =
              static_cast<float>(sum) * (xq.Dx(i)[b] * HalfBitsToFloat(scales[j * blocks + b]));
#if defined(__x86_64__)
          __asm__("" : "+x"(p));  // no contraction into an FMA where the target has one
#elif defined(__aarch64__)
          __asm__("" : "+w"(p));
#endif
          acc += p;
        }
        c[i * n + j] = acc;
      }
  });
}

#if defined(__x86_64__)

// Lane l of step `c` of a 16-block group takes the scale of block 2c + (l >= 8).
alignas(64) constexpr int32_t kPairLanes[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

// R weight rows against S activation rows, streaming the rows of w in place.
template <int R, int S>
TLALOC_AVX512_VNNI_TARGET void RowStreamVnni(const QuantizedRows& xq, const int64_t* xs,
                                             const int8_t* const* rows,
                                             const uint16_t* const* scales, float* out,
                                             int64_t out_s, bool prefetch) {
  const int64_t k = xq.k, blocks = k / kBlock;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][S];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) acc[r][s] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < blocks; blk += 16) {
    const int64_t left = std::min<int64_t>(16, blocks - blk);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    __m512 prod[R][S];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, scales[r] + blk));
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s)
        prod[r][s] = _mm512_mul_ps(dw, _mm512_loadu_ps(xq.Dx(xs[s]) + blk));
    }
    const int steps = static_cast<int>((left + 1) / 2);
    for (int step = 0; step < steps; ++step) {
      const int64_t i = (blk + 2 * step) * kBlock;
      // The last step of an odd block count reads one block: the other half stays zero, and
      // zero activations and a zero correction add nothing.
      const __mmask64 bytes = (i + 64 <= k) ? ~__mmask64{0} : __mmask64{0xffffffffu};
      const __m512i lanes = _mm512_load_si512(kPairLanes[step]);
      __m512i wu[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        if (prefetch)
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + i + kInt8PrefetchRowsAhead * k),
                       _MM_HINT_T1);
        wu[r] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, rows[r] + i), flip);
      }
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const __m512i xv = _mm512_loadu_si512(xq.Q(xs[s]) + i);
        const __m512i corr = _mm512_maskz_expand_epi32(
            0x0101, _mm512_castsi128_si512(_mm_loadl_epi64(
                        reinterpret_cast<const __m128i*>(xq.Correction(xs[s]) + blk + 2 * step))));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i sums = _mm512_dpbusd_epi32(corr, wu[r], xv);
          acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums),
                                      _mm512_permutexvar_ps(lanes, prod[r][s]), acc[r][s]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) out[r + s * out_s] = _mm512_reduce_add_ps(acc[r][s]);
}

template <int S>
TLALOC_AVX512_VNNI_TARGET void RowStreamDispatch(const QuantizedRows& xq, const int64_t* xs,
                                                 const int8_t* const* rows,
                                                 const uint16_t* const* scales, float* out,
                                                 int64_t out_s, bool four, bool prefetch) {
  if (four)
    RowStreamVnni<4, S>(xq, xs, rows, scales, out, out_s, prefetch);
  else
    RowStreamVnni<1, S>(xq, xs, rows, scales, out, out_s, prefetch);
}

void RowStream(const QuantizedRows& xq, int64_t m, const int8_t* w, const uint16_t* scales,
               int64_t n, int64_t k, float* c, EvalContext& ctx) {
  const int64_t blocks = k / kBlock;
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  // Each thread streams its own contiguous share of rows (ParallelShares: the prefetches run
  // ahead into rows the same thread reads next).
  ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
    for (int64_t v0 = 0; v0 < m; v0 += kMaxVectors) {
      const int s_count = static_cast<int>(std::min<int64_t>(kMaxVectors, m - v0));
      int64_t xs[kMaxVectors];
      for (int s = 0; s < s_count; ++s) xs[s] = v0 + s;
      for (int64_t r = begin; r < end;) {
        const bool four = r + 4 <= end && s_count <= 2;
        const int count = four ? 4 : 1;
        const int8_t* rows[4];
        const uint16_t* sc[4];
        for (int j = 0; j < count; ++j)
          rows[j] = w + (r + j) * k, sc[j] = scales + (r + j) * blocks;
        float* o = c + v0 * n + r;
        const bool prefetch = r + 12 <= n;
        WithVectorCount(s_count, [&](auto s) {
          RowStreamDispatch<decltype(s)::value>(xq, xs, rows, sc, o, n, four, prefetch);
        });
        r += count;
      }
    }
  });
}

// One weight row against S activation rows with the blocks in order (Q8Kernel::kInOrder for
// decode's rows): per 16 blocks, eight vpdpbusd steps of 64 bytes leave four-byte partial sums
// (lanes 0-7 of a step's first block, 8-15 of its second); three levels of integer unpacks and
// adds reduce the eight vectors to the sixteen exact block sums (in the lane order
// [0,2,4,6, 1,3,5,7, 8,10,12,14, 9,11,13,15], put back in order with one permute); each sum
// is converted, multiplied by dx * dw and the products added to the output one block after
// another, as the tlaloc.int8_linear decomposition adds them.
// R weight rows against S activation rows; the R * S output sums are added to in step, block by
// block, so their dependent adds overlap.
template <int R, int S>
TLALOC_AVX512_VNNI_TARGET void RowInOrderVnni(const QuantizedRows& xq, const int64_t* xs,
                                              const int8_t* const* rows,
                                              const uint16_t* const* scales, float* out,
                                              int64_t out_s, bool prefetch) {
  const int64_t k = xq.k, blocks = k / kBlock;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i natural = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  float acc[R][S];
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) acc[r][s] = 0.0f;
  alignas(64) float prod[R][S][16];
  for (int64_t blk = 0; blk < blocks; blk += 16) {
    const int64_t left = std::min<int64_t>(16, blocks - blk);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    for (int r = 0; r < R; ++r) {
      const __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, scales[r] + blk));
      __m512i v[S][8];
      for (int step = 0; step < 8; ++step) {
        const int64_t i = (blk + 2 * step) * kBlock;
        if (blk + 2 * step >= blocks) {
          for (int s = 0; s < S; ++s) v[s][step] = _mm512_setzero_si512();
          continue;
        }
        const __mmask64 bytes = (i + 64 <= k) ? ~__mmask64{0} : __mmask64{0xffffffffu};
        if (prefetch)
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + i + kInt8PrefetchRowsAhead * k),
                       _MM_HINT_T1);
        const __m512i wu = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, rows[r] + i), flip);
        for (int s = 0; s < S; ++s)
          v[s][step] =
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu, _mm512_loadu_si512(xq.Q(xs[s]) + i));
      }
      for (int s = 0; s < S; ++s) {
        __m512i w4[4], x2[2];
        for (int j = 0; j < 4; ++j)
          w4[j] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[s][2 * j], v[s][2 * j + 1]),
                                   _mm512_unpackhi_epi32(v[s][2 * j], v[s][2 * j + 1]));
        for (int j = 0; j < 2; ++j)
          x2[j] = _mm512_add_epi32(_mm512_unpacklo_epi64(w4[2 * j], w4[2 * j + 1]),
                                   _mm512_unpackhi_epi64(w4[2 * j], w4[2 * j + 1]));
        const __m512i t = _mm512_add_epi32(_mm512_shuffle_i32x4(x2[0], x2[1], 0x88),
                                           _mm512_shuffle_i32x4(x2[0], x2[1], 0xDD));
        const __m512i sums = _mm512_add_epi32(_mm512_permutexvar_epi32(natural, t),
                                              _mm512_loadu_si512(xq.Correction(xs[s]) + blk));
        __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(sums),
                                 _mm512_mul_ps(dw, _mm512_loadu_ps(xq.Dx(xs[s]) + blk)));
        __asm__("" : "+v"(p));
        _mm512_store_ps(prod[r][s], p);
      }
    }
    for (int64_t b = 0; b < left; ++b)
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) acc[r][s] += prod[r][s][b];
  }
  for (int r = 0; r < R; ++r)
    for (int s = 0; s < S; ++s) out[r + s * out_s] = acc[r][s];
}

void RowInOrder(const QuantizedRows& xq, int64_t m, const int8_t* w, const uint16_t* scales,
                int64_t n, int64_t k, float* c, EvalContext& ctx) {
  const int64_t blocks = k / kBlock;
  const int64_t block = std::max<int64_t>(4, (int64_t{1} << 16) / std::max<int64_t>(k, 1) / 4 * 4);
  ParallelShares(ctx, n, block, [&](int64_t begin, int64_t end) {
    for (int64_t v0 = 0; v0 < m; v0 += 2) {
      const int s_count = static_cast<int>(std::min<int64_t>(2, m - v0));
      const int64_t xs[2] = {v0, std::min(v0 + 1, m - 1)};
      for (int64_t r = begin; r < end;) {
        const bool four = r + 4 <= end;
        const int count = four ? 4 : 1;
        const int8_t* rows[4];
        const uint16_t* sc[4];
        for (int j = 0; j < count; ++j)
          rows[j] = w + (r + j) * k, sc[j] = scales + (r + j) * blocks;
        float* o = c + v0 * n + r;
        const bool prefetch = r + 12 <= n;
        if (four && s_count == 2)
          RowInOrderVnni<4, 2>(xq, xs, rows, sc, o, n, prefetch);
        else if (four)
          RowInOrderVnni<4, 1>(xq, xs, rows, sc, o, n, prefetch);
        else if (s_count == 2)
          RowInOrderVnni<1, 2>(xq, xs, rows, sc, o, n, prefetch);
        else
          RowInOrderVnni<1, 1>(xq, xs, rows, sc, o, n, prefetch);
        r += count;
      }
    }
  });
}

constexpr int kTileRows = 6;

// Block b of row first + r of w, or zeros past the live rows.
TLALOC_AVX512_VNNI_TARGET inline __m256i RowBlock(const int8_t* w, int64_t first, int64_t live,
                                                  int64_t k, int64_t r, int64_t b) {
  return r < live ? _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(w + (first + r) * k + b * kBlock))
                  : _mm256_setzero_si256();
}

// A tile: the weight bytes as PackTileBytes lays them out, and scales [b][h][16] in f32.
void PackTile(const int8_t* w, const uint16_t* scales, int64_t n, int64_t k, int64_t j0,
              uint8_t* packed, float* packed_scales) {
  q8_internal::PackTileBytes(w, n, k, j0, packed);
  const int64_t blocks = k / kBlock;
  for (int h = 0; h < 2; ++h) {
    const int64_t first = j0 + 16 * h;
    const int64_t live = std::clamp<int64_t>(n - first, 0, 16);
    // Scales: sixteen rows' f16 values per block, widened exactly.
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t r = 0; r < 16; ++r)
        packed_scales[(b * 2 + h) * 16 + r] =
            r < live ? HalfBitsToFloat(scales[(first + r) * blocks + b]) : 0.0f;
  }
}

}  // namespace

// Sixteen rows of a block are a 16 x 8 matrix of four-byte groups: rows j and j + 8 share a
// vector (one per 256-bit half), and an 8 x 8 transpose in both halves at once (unpacks of 32
// and 64 bits, then one two-source permute of 128-bit pieces per output) gives the eight group
// vectors.
TLALOC_AVX512_VNNI_TARGET void q8_internal::PackTileBytes(const int8_t* w, int64_t n, int64_t k,
                                                          int64_t j0, uint8_t* packed) {
  const int64_t blocks = k / kBlock;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i low_pieces = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high_pieces = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int h = 0; h < 2; ++h) {
    const int64_t first = j0 + 16 * h;
    const int64_t live = std::clamp<int64_t>(n - first, 0, 16);
    for (int64_t b = 0; b < blocks; ++b) {
      __m512i z[8], t[8], u[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(RowBlock(w, first, live, k, j, b)),
                                  RowBlock(w, first, live, k, j + 8, b), 1);
#pragma GCC unroll 4
      for (int j = 0; j < 8; j += 2) {
        t[j] = _mm512_unpacklo_epi32(z[j], z[j + 1]);
        t[j + 1] = _mm512_unpackhi_epi32(z[j], z[j + 1]);
      }
#pragma GCC unroll 2
      for (int q = 0; q < 8; q += 4) {
        u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
        u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
        u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
        u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
      }
      // u[g] (g < 4) holds group g of rows 0-3 / 8-11 in its 128-bit pieces 0 / 2 and group
      // g + 4 in pieces 1 / 3; u[g + 4] the same for rows 4-7 / 12-15.
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m512i lo = _mm512_permutex2var_epi64(u[g], low_pieces, u[g + 4]);
        const __m512i hi = _mm512_permutex2var_epi64(u[g], high_pieces, u[g + 4]);
        _mm512_store_si512(packed + ((b * 8 + g) * 2 + h) * 64, _mm512_xor_si512(lo, flip));
        _mm512_store_si512(packed + ((b * 8 + g + 4) * 2 + h) * 64, _mm512_xor_si512(hi, flip));
      }
    }
  }
}

namespace {

// Rows i0..i0+M-1 of the activations against one packed tile.
template <int M>
TLALOC_AVX512_VNNI_TARGET void TileRows(const QuantizedRows& xq, int64_t i0, const uint8_t* packed,
                                        const float* packed_scales, int64_t n, int64_t j0,
                                        float* c) {
  const int64_t blocks = xq.k / kBlock;
  __m512 acc[M][2];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m512i sums[M][2];
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
      sums[i][0] = sums[i][1] = _mm512_set1_epi32(xq.Correction(i0 + i)[b]);
    const uint8_t* p = packed + b * 8 * 2 * 64;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i w0 = _mm512_load_si512(p + (g * 2) * 64);
      const __m512i w1 = _mm512_load_si512(p + (g * 2 + 1) * 64);
#pragma GCC unroll 6
      for (int i = 0; i < M; ++i) {
        int32_t four;
        std::memcpy(&four, xq.Q(i0 + i) + b * kBlock + 4 * g, 4);
        const __m512i xb = _mm512_set1_epi32(four);
        sums[i][0] = _mm512_dpbusd_epi32(sums[i][0], w0, xb);
        sums[i][1] = _mm512_dpbusd_epi32(sums[i][1], w1, xb);
      }
    }
    const __m512 s0 = _mm512_load_ps(packed_scales + b * 32);
    const __m512 s1 = _mm512_load_ps(packed_scales + b * 32 + 16);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512 dx = _mm512_set1_ps(xq.Dx(i0 + i)[b]);
      __m512 p0 = _mm512_mul_ps(_mm512_cvtepi32_ps(sums[i][0]), _mm512_mul_ps(s0, dx));
      __m512 p1 = _mm512_mul_ps(_mm512_cvtepi32_ps(sums[i][1]), _mm512_mul_ps(s1, dx));
      // No FMA: each block's product is rounded before it is added, block after block, as the
      // tlaloc.int8_linear decomposition's multiply and in-order reduce round it (the empty asm
      // keeps the compiler from contracting the two).
      __asm__("" : "+v"(p0), "+v"(p1));
      acc[i][0] = _mm512_add_ps(acc[i][0], p0);
      acc[i][1] = _mm512_add_ps(acc[i][1], p1);
    }
  }
  const int64_t live = std::min<int64_t>(kTileCols, n - j0);
  const __mmask16 m0 = static_cast<__mmask16>((1u << std::min<int64_t>(16, live)) - 1u);
  const __mmask16 m1 = static_cast<__mmask16>((1u << std::clamp<int64_t>(live - 16, 0, 16)) - 1u);
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i) {
    float* row = c + (i0 + i) * n + j0;
    _mm512_mask_storeu_ps(row, m0, acc[i][0]);
    if (m1) _mm512_mask_storeu_ps(row + 16, m1, acc[i][1]);
  }
}

// Rows [begin, end) of the activations (and of c) against one packed tile, up to six at a time.
void TileRowRange(const QuantizedRows& xq, int64_t begin, int64_t end, const uint8_t* packed,
                  const float* packed_scales, int64_t n, int64_t j0, float* c) {
  int64_t i = begin;
  for (; i + kTileRows <= end; i += kTileRows)
    TileRows<kTileRows>(xq, i, packed, packed_scales, n, j0, c);
  switch (end - i) {
    case 5:
      TileRows<5>(xq, i, packed, packed_scales, n, j0, c);
      break;
    case 4:
      TileRows<4>(xq, i, packed, packed_scales, n, j0, c);
      break;
    case 3:
      TileRows<3>(xq, i, packed, packed_scales, n, j0, c);
      break;
    case 2:
      TileRows<2>(xq, i, packed, packed_scales, n, j0, c);
      break;
    case 1:
      TileRows<1>(xq, i, packed, packed_scales, n, j0, c);
      break;
    default:
      break;
  }
}

// Over the pool, tasks handed out one at a time (groups differ in size, the machine is
// shared): task t packs tile t % tiles of group t / tiles's weights and runs that group's rows
// against it. A plain product is one group of every row.
void TilesOfGroups(const QuantizedRows& xq, const int8_t* w, const uint16_t* scales, int64_t n,
                   int64_t k, std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx) {
  const int64_t blocks = k / kBlock;
  const int64_t tiles = (n + kTileCols - 1) / kTileCols;
  const int64_t tasks = static_cast<int64_t>(groups.size()) * tiles;
  std::atomic<int64_t> next{0};
  ctx.ParallelFor(tasks, 1, [&](int64_t, int64_t) {
    struct Aligned {
      void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Aligned> packed(
        static_cast<uint8_t*>(std::aligned_alloc(64, blocks * 8 * 2 * 64)));
    std::unique_ptr<float, Aligned> packed_scales(
        static_cast<float*>(std::aligned_alloc(64, blocks * 32 * sizeof(float))));
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) {
      const Q8RowGroup& g = groups[t / tiles];
      const int64_t j0 = t % tiles * kTileCols;
      PackTile(w + g.expert * n * k, scales + g.expert * n * blocks, n, k, j0, packed.get(),
               packed_scales.get());
      TileRowRange(xq, g.start, g.start + g.rows, packed.get(), packed_scales.get(), n, j0, c);
    }
  });
}

void Tiles(const QuantizedRows& xq, int64_t m, const int8_t* w, const uint16_t* scales, int64_t n,
           int64_t k, float* c, EvalContext& ctx) {
  const Q8RowGroup all{0, 0, m};
  TilesOfGroups(xq, w, scales, n, k, {&all, 1}, c, ctx);
}

#endif  // __x86_64__

}  // namespace

QuantizedRows q8_internal::QuantizeRows(const float* x, int64_t m, int64_t k, EvalContext& ctx) {
  QuantizedRows rows;
  rows.k = k;
  rows.padded_k = (k + 63) / 64 * 64;
  rows.padded_blocks = (k / kBlock + 15) / 16 * 16;
  rows.q.assign(m * rows.padded_k, 0);
  rows.dx.assign(m * rows.padded_blocks, 0.0f);
  rows.correction.assign(m * rows.padded_blocks, 0);
  auto quantize = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const int32_t sum =
            QuantizeBlock(x + r * k + b * kBlock, rows.q.data() + r * rows.padded_k + b * kBlock,
                          rows.dx.data() + r * rows.padded_blocks + b, nullptr);
        rows.correction[r * rows.padded_blocks + b] = -128 * sum;
      }
  };
  // A decode step's few rows take a microsecond: waking the pool would cost more.
  if (m * k < (int64_t{1} << 16))
    quantize(0, m);
  else
    ctx.ParallelFor(m, std::max<int64_t>(1, 8192 / k), quantize);
  return rows;
}

void Int8MatmulQ8_0Groups(const float* x, int64_t m, const int8_t* w, const uint16_t* scales,
                          int64_t n, int64_t k, std::span<const Q8RowGroup> groups, float* c,
                          EvalContext& ctx) {
  if (m <= 0 || n <= 0 || groups.empty()) return;
#if defined(__x86_64__)
  if (Q8UsesVnni() || q8_internal::Q8UsesAvx2()) {
    // Only the groups' rows are quantised (each row on its own, as a group's own call would).
    int64_t first = m, last = 0;
    for (const Q8RowGroup& g : groups) {
      first = std::min(first, g.start);
      last = std::max(last, g.start + g.rows);
    }
    if (first >= last) return;
    const QuantizedRows xq = QuantizeRows(x + first * k, last - first, k, ctx);
    std::vector<Q8RowGroup> shifted(groups.begin(), groups.end());
    for (Q8RowGroup& g : shifted) g.start -= first;
    if (Q8UsesVnni()) return TilesOfGroups(xq, w, scales, n, k, shifted, c + first * n, ctx);
    // Without VNNI, kTiles is the AVX2 kernel (the portable loop's bits).
    return q8_internal::Avx2Groups(xq, w, scales, n, k, shifted, c + first * n, ctx);
  }
#endif
  const int64_t blocks = k / kBlock;
  for (const Q8RowGroup& g : groups)
    Int8MatmulQ8_0(x + g.start * k, g.rows, w + g.expert * n * k, scales + g.expert * n * blocks, n,
                   k, c + g.start * n, ctx, Q8Kernel::kTiles);
}

bool Q8UsesVnni() {
  static const bool vnni = DetectVnni();
  return vnni;
}

void QuantizeRowQ8_0(const float* x, int64_t k, int8_t* q, uint16_t* d) {
  for (int64_t b = 0; b < k / kBlock; ++b)
    QuantizeBlock(x + b * kBlock, q + b * kBlock, nullptr, d + b);
}

void Int8MatmulQ8_0(const float* x, int64_t m, const int8_t* w, const uint16_t* scales, int64_t n,
                    int64_t k, float* c, EvalContext& ctx, Q8Kernel kernel) {
  if (m <= 0 || n <= 0) return;
  const QuantizedRows xq = QuantizeRows(x, m, k, ctx);
#if defined(__x86_64__)
  // Without VNNI every kernel but the named portable loop is the AVX2 one: its bits are the
  // portable loop's, so kInOrder keeps the decomposition's bits.
  if (!Q8UsesVnni() && kernel != Q8Kernel::kPortable && q8_internal::Q8UsesAvx2()) {
    const Q8RowGroup all{0, 0, m};
    return q8_internal::Avx2Groups(xq, w, scales, n, k, {&all, 1}, c, ctx);
  }
#endif
  // Measured (bench/matmul_bench BM_Int8Kernel): the row stream wins at one and two rows, the
  // tiles from four (the row stream takes three or four vectors one weight row at a time).
  if (kernel == Q8Kernel::kAuto)
    kernel = m <= kQ8RowStreamMaxRows ? Q8Kernel::kRowStream : Q8Kernel::kTiles;
#if defined(__x86_64__)
  // In block order: decode's rows one weight row at a time, more rows by the tiles.
  if (Q8UsesVnni() && kernel == Q8Kernel::kInOrder && m <= kQ8RowStreamMaxRows)
    return RowInOrder(xq, m, w, scales, n, k, c, ctx);
#endif
  if (kernel == Q8Kernel::kInOrder) kernel = Q8Kernel::kTiles;  // kPortable below without VNNI
#if defined(__x86_64__)
  if (Q8UsesVnni() && kernel == Q8Kernel::kRowStream)
    return RowStream(xq, m, w, scales, n, k, c, ctx);
  if (Q8UsesVnni() && kernel == Q8Kernel::kTiles) return Tiles(xq, m, w, scales, n, k, c, ctx);
#endif
  PortableRows(xq, m, w, scales, n, k, c, ctx);
}

}  // namespace tlaloc::cpu
