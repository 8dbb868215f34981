// The q8_0 kernels on AVX2 + FMA CPUs (reduction_matmul_q8_avx2.h). Each gives each output its
// blocks' exact int32 sums times f32(dx * dw), rounded, then added in block order (the portable
// loop's bits). Layout:
//
// - Tiles (Tile8): eight weight rows packed so that one 32-byte vector holds four consecutive
//   bytes of each (PackRows8), in chunks of four blocks with the rows' f16 scales after them
//   (Avx2PackTile). One activation row's four bytes broadcast against a vector give the eight
//   rows' partial sums in eight int32 lanes, so a block's eight steps add up lane-wise, without
//   horizontal adds. The products use the sign trick: vpmaddubsw takes |w| as its unsigned side
//   (128 for -128) and sign(x, w) = x * sgn(w) as its signed side (32 products an instruction),
//   vpmaddwd by ones widens the pairs to int32. That is exact for every weight, -128 included,
//   as long as no activation is -128 (-x would wrap; the quantisers here clamp to [-127, 127],
//   and a call with a -128 anywhere takes a widening kernel). The packed copy kept per weight
//   (Avx2PackedGroups: decode and prefill, one stream per thread) or, with no copy, panels
//   packed per call from kTileMinRows activation rows (Avx2Groups' prefill).
// - PackedRows8: the tiles' fallback for a -128 activation. Each weight vector is widened to
//   int16 in halves and vpmaddwd pairs it with the widened activations, exact for every s8.
// - Rows8 (decode's few rows read in place, and the in-place fallback): the activations are
//   widened to int16 once per call; a weight block's 32 bytes are widened as they are loaded
//   (vpmovsxbw) and vpmaddwd multiplies and pairs them into int32. Each of eight weight rows
//   leaves eight int32 partial sums per activation row; a tree of horizontal adds reduces the
//   eight rows' vectors to one vector of their eight block sums, so that the f32 work (convert,
//   times dx * dw, add) runs on eight outputs at once and each output lane receives its blocks'
//   terms in block order, as the portable loop adds them (the product rounded, then added: no
//   FMA). Up to four activation rows share each widened weight block; the weight rows are read
//   in place (with a prefetch a row group ahead).
#include "reduction_matmul_q8_avx2.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "reduction_matmul.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

#define TLALOC_Q8_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

namespace tlaloc::cpu::q8_internal {

namespace {

constexpr int kRowGroup = 8;  // weight rows per kernel call (one ymm of f32 outputs)

// acc + f32(sums) * (dx * dw): a block's eight sums scaled, each product rounded before the add
// (the empty asm keeps the compiler from contracting into an FMA), as the portable loop adds it.
TLALOC_Q8_AVX2_TARGET inline __m256 AddScaledBlock(__m256 acc, __m256i sums, float dx, __m256 dw) {
  __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(_mm256_set1_ps(dx), dw));
  __asm__("" : "+x"(p));
  return _mm256_add_ps(acc, p);
}

// S activation rows (x: widened q, dx: scales) against the eight weight rows w (dw: their f32
// scales, [blocks][8]); out [S][8].
template <int S>
TLALOC_Q8_AVX2_TARGET void Rows8(const int16_t* const* x, const float* const* dx,
                                 const int8_t* const* w, const float* dw, int64_t blocks,
                                 int64_t prefetch_ahead, float* out) {
  __m256 acc[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) acc[s] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t e = b * kBlock;
    __m256i h[S][4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      __m256i v[2][S];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int8_t* row = w[2 * p + half] + e;
        if (prefetch_ahead)
          _mm_prefetch(reinterpret_cast<const char*>(row + prefetch_ahead), _MM_HINT_T0);
        const __m256i lo =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
        const __m256i hi =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16)));
#pragma GCC unroll 4
        for (int s = 0; s < S; ++s)
          v[half][s] = _mm256_add_epi32(
              _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[s] + e))),
              _mm256_madd_epi16(
                  hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[s] + e + 16))));
      }
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) h[s][p] = _mm256_hadd_epi32(v[0][s], v[1][s]);
    }
    const __m256 dwb = _mm256_loadu_ps(dw + b * kRowGroup);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      // h01: rows 0-3's sums of elements 0-3 of each 8-lane partial, then of 4-7; h23: rows 4-7.
      const __m256i h01 = _mm256_hadd_epi32(h[s][0], h[s][1]);
      const __m256i h23 = _mm256_hadd_epi32(h[s][2], h[s][3]);
      const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(h01, h23, 0x20),
                                            _mm256_permute2x128_si256(h01, h23, 0x31));
      acc[s] = AddScaledBlock(acc[s], sums, dx[s][b], dwb);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) _mm256_storeu_ps(out + s * kRowGroup, acc[s]);
}

// The eight rows' bytes, rearranged for Tile8: for block b and four-byte group g, the 32 bytes at
// packed + (b * 8 + g) * 32 are bytes 4g..4g+3 of block b of rows 0..7 (an 8 x 8 transpose of
// int32 lanes per block).
TLALOC_Q8_AVX2_TARGET void PackRows8(const int8_t* const* w, int64_t blocks, int8_t* packed) {
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[j] + b * kBlock));
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
      t[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
    }
    // u[q] (q < 4): group q of rows 0-3 in its low half, group q + 4 in its high half; u[q + 4]
    // the same for rows 4-7.
#pragma GCC unroll 2
    for (int h = 0; h < 8; h += 4) {
      u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
      u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
      u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
      u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    __m256i* out = reinterpret_cast<__m256i*>(packed + b * kBlock * kRowGroup);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      _mm256_storeu_si256(out + q, _mm256_permute2x128_si256(u[q], u[q + 4], 0x20));
      _mm256_storeu_si256(out + q + 4, _mm256_permute2x128_si256(u[q], u[q + 4], 0x31));
    }
  }
}

// The packed tile's layout (reduction_matmul_q8_avx2.h): chunks of four blocks, each block's 256
// bytes in PackRows8's order, then the chunk's f16 scales. 1088 bytes: a multiple of 64, so
// every chunk starts on a cache line.
static_assert(kRowGroup == kAvx2TileRows);
constexpr int64_t kChunkBlocks = 4;
constexpr int64_t kChunkWeightBytes = kChunkBlocks * kBlock * kRowGroup;
constexpr int64_t kChunkBytes = kChunkWeightBytes + kChunkBlocks * kRowGroup * 2;

// Where block b of a packed tile lies: its 256 weight bytes, and its eight rows' f16 scales.
inline const uint8_t* BlockWeights(const uint8_t* tile, int64_t b) {
  return tile + b / kChunkBlocks * kChunkBytes + b % kChunkBlocks * (kBlock * kRowGroup);
}
inline const uint8_t* BlockScales(const uint8_t* tile, int64_t b) {
  return tile + b / kChunkBlocks * kChunkBytes + kChunkWeightBytes +
         b % kChunkBlocks * kRowGroup * 2;
}

// S activation rows (x: their int8 q, dx: scales) against one packed tile (its `blocks` blocks);
// out [S][8]. Lane j of every vector is weight row j, so a block's sum needs no horizontal adds:
// vpmaddubsw multiplies |w| (unsigned, 128 for -128) by sign(x, w) = x * sgn(w) and adds pairs to
// int16, vpmaddwd by ones adds those to int32 (four bytes per lane), eight such steps give the
// block. Exact when no x is -128 (then -x would wrap): |w| * |x| <= 128 * 127, a pair <= 32512,
// inside int16. prefetch_ahead (bytes, 0 for none): decode streams the tiles once, and asks for
// the bytes that far on (past the tile's end, the next tile's, which the same thread reads next).
template <int S>
TLALOC_Q8_AVX2_TARGET void Tile8(const int8_t* const* x, const float* const* dx,
                                 const uint8_t* tile, int64_t blocks, int64_t prefetch_ahead,
                                 float* out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[S];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) acc[s] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i sums[S];
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) sums[s] = _mm256_setzero_si256();
    const uint8_t* wb = BlockWeights(tile, b);
    if (prefetch_ahead) {
#pragma GCC unroll 4
      for (int line = 0; line < 4; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(wb + prefetch_ahead + 64 * line), _MM_HINT_T0);
      if (b % kChunkBlocks == 0)
        _mm_prefetch(reinterpret_cast<const char*>(BlockScales(tile, b) + prefetch_ahead),
                     _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int g = 0; g < 8; ++g) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 32 * g));
      const __m256i u = _mm256_abs_epi8(w);
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) {
        int32_t four;
        std::memcpy(&four, x[s] + b * kBlock + 4 * g, sizeof four);
        const __m256i t = _mm256_sign_epi8(_mm256_set1_epi32(four), w);
        sums[s] = _mm256_add_epi32(sums[s], _mm256_madd_epi16(_mm256_maddubs_epi16(u, t), ones));
      }
    }
    const __m256 dwb =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(BlockScales(tile, b))));
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      acc[s] = AddScaledBlock(acc[s], sums[s], dx[s][b], dwb);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) _mm256_storeu_ps(out + s * kRowGroup, acc[s]);
}

// S activation rows (x: widened q, dx: scales) against one packed tile (its `blocks` blocks);
// out [S][8]. Each 32-byte weight vector (four bytes of each of eight rows) is widened to int16
// in two halves, rows 0-3 and 4-7, and vpmaddwd against the row's four activations (repeated
// per 64 bits) leaves two int32 pair sums per weight row: exact for every s8 on both sides (no
// -128 exception, unlike the sign trick). A block's eight steps add up lane-wise; one hadd and
// a permute put the eight rows' block sums in row order, and the f32 work is Rows8's.
template <int S>
TLALOC_Q8_AVX2_TARGET void PackedRows8(const int16_t* const* x, const float* const* dx,
                                       const uint8_t* tile, int64_t blocks, float* out) {
  // hadd leaves rows 0 1 4 5 | 2 3 6 7.
  const __m256i row_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  __m256 acc[S];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) acc[s] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* wb = BlockWeights(tile, b);
    __m256i lo[S], hi[S];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) lo[s] = hi[s] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i w03 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 32 * g)));
      const __m256i w47 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 32 * g + 16)));
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        int64_t four;
        std::memcpy(&four, x[s] + b * kBlock + 4 * g, sizeof four);
        const __m256i xv = _mm256_set1_epi64x(four);
        lo[s] = _mm256_add_epi32(lo[s], _mm256_madd_epi16(w03, xv));
        hi[s] = _mm256_add_epi32(hi[s], _mm256_madd_epi16(w47, xv));
      }
    }
    const __m256 dwb =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(BlockScales(tile, b))));
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m256i sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo[s], hi[s]), row_order);
      acc[s] = AddScaledBlock(acc[s], sums, dx[s][b], dwb);
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) _mm256_storeu_ps(out + s * kRowGroup, acc[s]);
}

// dw [blocks][8] (f32) from the eight rows' f16 scales: F16C converts eight blocks of a row at
// once (exactly, as HalfBitsToFloat does; the software conversion per scale cost as much as
// the kernel at decode), and an 8 x 8 transpose puts the rows side by side.
TLALOC_Q8_AVX2_TARGET void WidenScales8(const uint16_t* const* scales, int64_t blocks, float* dw) {
  int64_t b0 = 0;
  for (; b0 + 8 <= blocks; b0 += 8) {
    __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      r[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[j] + b0)));
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
#pragma GCC unroll 2
    for (int q = 0; q < 8; q += 4) {
      u[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
      u[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
      u[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
      u[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
    }
    // u[p] (p < 4): block b0 + p of rows 0-3 in its low half, block b0 + p + 4 in its high
    // half; u[p + 4] the same for rows 4-7.
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      _mm256_storeu_ps(dw + (b0 + p) * kRowGroup, _mm256_permute2f128_ps(u[p], u[p + 4], 0x20));
      _mm256_storeu_ps(dw + (b0 + p + 4) * kRowGroup, _mm256_permute2f128_ps(u[p], u[p + 4], 0x31));
    }
  }
  for (; b0 < blocks; ++b0)
    for (int j = 0; j < kRowGroup; ++j) dw[b0 * kRowGroup + j] = _cvtsh_ss(scales[j][b0]);
}

// xq's rows widened to int16 [rows][k].
TLALOC_Q8_AVX2_TARGET std::vector<int16_t> Widen(const QuantizedRows& xq, int64_t rows) {
  std::vector<int16_t> x(rows * xq.k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < xq.k; i += 16)
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(x.data() + r * xq.k + i),
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq.Q(r) + i))));
  return x;
}

}  // namespace

bool Q8UsesAvx2() {
  static const bool avx2 = HasAvx2() && HasF16c();
  return avx2;
}

TLALOC_Q8_AVX2_TARGET int32_t QuantizeBlockAvx2(const float* x, int8_t* q, float* dx,
                                                uint16_t* d_bits) {
  __m256 v[4];
  for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(x + 8 * j);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 m8 =
      _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                    _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  const uint16_t bits = FloatToHalfBits(amax / 127.f);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  __m256i i[4];
  for (int j = 0; j < 4; ++j) {
    __m256 t = _mm256_mul_ps(v[j], id);
    // As the portable loop: NaN (0 times an infinite 127 / amax) to 0, then clamped; cvtps_epi32
    // rounds half to even (MXCSR's default), as std::nearbyint does.
    t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q));
    i[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(t, lo), hi));
  }
  // packs interleave 128-bit lanes: the bytes come out as four-byte groups in the order
  // [0a 1a 2a 3a 0b 1b 2b 3b] (a, b: the low and high halves of i[0..3]).
  const __m256i bytes =
      _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  if (dx) *dx = HalfBitsToFloat(bits);
  if (d_bits) *d_bits = bits;
  return _mm_cvtsi128_si32(s4);
}

namespace {

// Whether no q of xq's first `rows` rows is -128 (Tile8's condition). QuantizeBlockAvx2 and the
// portable quantiser clamp to [-127, 127]; the AVX-512 one saturates, so an infinite 127 / amax
// may give -128 there.
TLALOC_Q8_AVX2_TARGET bool NoMinimumActivation(const QuantizedRows& xq, int64_t rows) {
  const __m256i minimum = _mm256_set1_epi8(-128);
  __m256i seen = _mm256_setzero_si256();
  for (int64_t i = 0; i < rows * xq.padded_k; i += 32)  // padded_k: a multiple of 64
    seen = _mm256_or_si256(
        seen, _mm256_cmpeq_epi8(
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q.data() + i)), minimum));
  return _mm256_testz_si256(seen, seen);
}

// Prefill's shape: Tile8 on kTileRows activation rows at a time against a panel of up to
// kPanelGroups packed row groups, so that the activation rows stay in L1 while the panel (32
// rows: 32 KiB at k = 1024) comes from L2 (six rows a tile, or one row group a panel, measured
// no faster). Below kTileMinRows rows, packing the weights costs more than it saves
// (BM_Int8KernelProcessCpu: at 5 rows the tiles took 1.1x Rows8's CPU time, at 8 rows 0.9x, at
// 64 and 512 rows 0.65x).
constexpr int kTileRows = kMaxVectors;  // WithVectorCount's range
constexpr int64_t kPanelGroups = 4;
constexpr int64_t kTileMinRows = 8;
// How far on decode's tile stream asks for bytes (Tile8's prefetch_ahead): matmul_bench
// BM_Int8DecodeCold.
constexpr int64_t kPrefetchAhead = 16384;

// The rows of group g against `panel` consecutive packed tiles (c's columns j0, j0 + 8, ...):
// Tile8 on the int8 activations where `exact` (no -128 among them), else PackedRows8 on the
// widened ones (x16).
void RunPanel(const QuantizedRows& xq, const std::vector<int16_t>& x16, bool exact,
              const Q8RowGroup& g, const uint8_t* tiles, int64_t panel, int64_t tile_bytes,
              int64_t n, int64_t k, int64_t j0, int64_t prefetch_ahead, float* c) {
  const int64_t blocks = k / kBlock;
  for (int64_t i0 = g.start; i0 < g.start + g.rows; i0 += kTileRows) {
    const int s_count = static_cast<int>(std::min<int64_t>(kTileRows, g.start + g.rows - i0));
    const int8_t* x8[kTileRows];
    const int16_t* xw[kTileRows];
    const float* dxs[kTileRows];
    for (int s = 0; s < s_count; ++s) {
      x8[s] = xq.Q(i0 + s);
      xw[s] = exact ? nullptr : x16.data() + (i0 + s) * k;
      dxs[s] = xq.Dx(i0 + s);
    }
    for (int64_t p = 0; p < panel; ++p) {
      float out[kTileRows * kRowGroup];
      const uint8_t* tile = tiles + p * tile_bytes;
      WithVectorCount(s_count, [&](auto s) {
        constexpr int S = decltype(s)::value;
        if (exact)
          Tile8<S>(x8, dxs, tile, blocks, prefetch_ahead, out);
        else
          PackedRows8<S>(xw, dxs, tile, blocks, out);
      });
      const int64_t column = j0 + p * kRowGroup, live = std::min<int64_t>(kRowGroup, n - column);
      for (int s = 0; s < s_count; ++s)
        std::copy(out + s * kRowGroup, out + s * kRowGroup + live, c + (i0 + s) * n + column);
    }
  }
}

}  // namespace

void Avx2Groups(const QuantizedRows& xq, const int8_t* w, const uint16_t* scales, int64_t n,
                int64_t k, std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx) {
  int64_t rows = 0;
  for (const Q8RowGroup& g : groups) rows = std::max(rows, g.start + g.rows);
  const bool tiles_exact = NoMinimumActivation(xq, rows);
  // Decode's few rows take Rows8 on int16 activations; the tiles read the int8 ones.
  bool any_rows8 = !tiles_exact;
  for (const Q8RowGroup& g : groups) any_rows8 |= g.rows < kTileMinRows;
  const std::vector<int16_t> x16 = any_rows8 ? Widen(xq, rows) : std::vector<int16_t>();
  const int64_t blocks = k / kBlock, tile_bytes = Avx2TileBytes(k);
  const int64_t row_groups = (n + kRowGroup - 1) / kRowGroup;
  const int64_t tasks = static_cast<int64_t>(groups.size()) * row_groups;
  // About 64 KiB of weights per handed-out run of tasks (bench/matmul_bench BM_Int8Kernel).
  const int64_t run = std::max<int64_t>(1, (int64_t{1} << 16) / (kRowGroup * k));
  ParallelShares(ctx, tasks, run, [&](int64_t begin, int64_t end) {
    std::vector<float> dw;
    std::vector<uint8_t> packed;
    for (int64_t t = begin; t < end;) {
      const Q8RowGroup& g = groups[t / row_groups];
      const int8_t* expert = w + g.expert * n * k;
      const uint16_t* expert_scales = scales + g.expert * n * blocks;
      const int64_t j0 = t % row_groups * kRowGroup;
      if (tiles_exact && g.rows >= kTileMinRows) {
        // Prefill: a panel of row groups (all of group g) packed, then Tile8 on it.
        const int64_t panel = std::min({kPanelGroups, end - t, row_groups - t % row_groups});
        packed.resize(panel * tile_bytes);
        for (int64_t p = 0; p < panel; ++p)
          Avx2PackTile(expert, expert_scales, n, k, j0 + p * kRowGroup,
                       packed.data() + p * tile_bytes);
        RunPanel(xq, x16, true, g, packed.data(), panel, tile_bytes, n, k, j0, 0, c);
        t += panel;
        continue;
      }
      // Decode: Rows8 on one row group read in place. Rows past n repeat the last row (read,
      // never stored).
      const int64_t live = std::min<int64_t>(kRowGroup, n - j0);
      const int8_t* row[kRowGroup];
      const uint16_t* row_scales[kRowGroup];
      for (int r = 0; r < kRowGroup; ++r) {
        const int64_t j = j0 + std::min<int64_t>(r, live - 1);
        row[r] = expert + j * k;
        row_scales[r] = expert_scales + j * blocks;
      }
      dw.resize(blocks * kRowGroup);
      WidenScales8(row_scales, blocks, dw.data());
      // Decode streams the weights once: ask for the next row group's bytes ahead of use.
      const int64_t prefetch = g.rows <= kMaxVectors && j0 + 2 * kRowGroup <= n ? kRowGroup * k : 0;
      for (int64_t i0 = g.start; i0 < g.start + g.rows; i0 += kMaxVectors) {
        const int s_count = static_cast<int>(std::min<int64_t>(kMaxVectors, g.start + g.rows - i0));
        const int16_t* xs[kMaxVectors];
        const float* dxs[kMaxVectors];
        for (int s = 0; s < s_count; ++s) xs[s] = x16.data() + (i0 + s) * k, dxs[s] = xq.Dx(i0 + s);
        float out[kMaxVectors * kRowGroup];
        WithVectorCount(s_count, [&](auto s) {
          Rows8<decltype(s)::value>(xs, dxs, row, dw.data(), blocks, prefetch, out);
        });
        for (int s = 0; s < s_count; ++s)
          std::copy(out + s * kRowGroup, out + s * kRowGroup + live, c + (i0 + s) * n + j0);
      }
      ++t;
    }
  });
}

int64_t Avx2TileBytes(int64_t k) {
  return (k / kBlock + kChunkBlocks - 1) / kChunkBlocks * kChunkBytes;
}

namespace {

// A chunk's scales: blocks b0..b0+3 of the eight rows, stored block by block (s[b][row]), an
// 8 x 4 transpose of 16-bit values (the per-value copy cost about as much as PackRows8 where
// the in-place prefill packs its panels per call).
TLALOC_Q8_AVX2_TARGET void PackScales8x4(const uint16_t* const* row_scales, int64_t b0,
                                         uint16_t* s) {
  __m128i r[kRowGroup];
  for (int j = 0; j < kRowGroup; ++j)
    r[j] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_scales[j] + b0));
  // Pairs of rows interleaved, then quads: lo[q] holds blocks 0-1, hi[q] blocks 2-3 of rows
  // 4q..4q+3.
  const __m128i p01 = _mm_unpacklo_epi16(r[0], r[1]), p23 = _mm_unpacklo_epi16(r[2], r[3]);
  const __m128i p45 = _mm_unpacklo_epi16(r[4], r[5]), p67 = _mm_unpacklo_epi16(r[6], r[7]);
  const __m128i lo0 = _mm_unpacklo_epi32(p01, p23), hi0 = _mm_unpackhi_epi32(p01, p23);
  const __m128i lo1 = _mm_unpacklo_epi32(p45, p67), hi1 = _mm_unpackhi_epi32(p45, p67);
  auto* out = reinterpret_cast<__m128i*>(s);
  _mm_storeu_si128(out + 0, _mm_unpacklo_epi64(lo0, lo1));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi64(lo0, lo1));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi64(hi0, hi1));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi64(hi0, hi1));
}

}  // namespace

void Avx2PackTile(const int8_t* w, const uint16_t* scales, int64_t n, int64_t k, int64_t j0,
                  uint8_t* tile) {
  const int64_t blocks = k / kBlock;
  const int8_t* row[kRowGroup];
  const uint16_t* row_scales[kRowGroup];
  for (int r = 0; r < kRowGroup; ++r) {
    const int64_t j = std::min<int64_t>(j0 + r, n - 1);
    row[r] = w + j * k;
    row_scales[r] = scales + j * blocks;
  }
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunkBlocks) {
    uint8_t* chunk = tile + b0 / kChunkBlocks * kChunkBytes;
    const int64_t count = std::min(kChunkBlocks, blocks - b0);
    if (count < kChunkBlocks) std::memset(chunk, 0, kChunkBytes);  // the tail blocks: zeros
    const int8_t* from[kRowGroup];
    for (int r = 0; r < kRowGroup; ++r) from[r] = row[r] + b0 * kBlock;
    PackRows8(from, count, reinterpret_cast<int8_t*>(chunk));
    uint16_t* s = reinterpret_cast<uint16_t*>(chunk + kChunkWeightBytes);
    if (count == kChunkBlocks) {
      PackScales8x4(row_scales, b0, s);
    } else {
      for (int64_t b = 0; b < count; ++b)
        for (int r = 0; r < kRowGroup; ++r) s[b * kRowGroup + r] = row_scales[r][b0 + b];
    }
  }
}

void Avx2PackedGroups(const QuantizedRows& xq, const uint8_t* tiles, int64_t n, int64_t k,
                      std::span<const Q8RowGroup> groups, float* c, EvalContext& ctx) {
  int64_t rows = 0;
  for (const Q8RowGroup& g : groups) rows = std::max(rows, g.start + g.rows);
  const bool exact = NoMinimumActivation(xq, rows);
  const std::vector<int16_t> x16 = exact ? std::vector<int16_t>() : Widen(xq, rows);
  const int64_t tile_bytes = Avx2TileBytes(k);
  const int64_t expert_tiles = (n + kRowGroup - 1) / kRowGroup;
  const int64_t tasks = static_cast<int64_t>(groups.size()) * expert_tiles;
  // About 64 KiB of weights per handed-out run of tasks (as Avx2Groups).
  const int64_t run = std::max<int64_t>(1, (int64_t{1} << 16) / tile_bytes);
  ParallelShares(ctx, tasks, run, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end;) {
      const Q8RowGroup& g = groups[t / expert_tiles];
      const int64_t first = t % expert_tiles;
      // A panel of tiles of one group: prefill's rows stay in L1 while the panel comes from L2.
      const int64_t panel = std::min({kPanelGroups, end - t, expert_tiles - first});
      const int64_t prefetch = g.rows <= kMaxVectors ? kPrefetchAhead : 0;
      RunPanel(xq, x16, exact, g, tiles + (g.expert * expert_tiles + first) * tile_bytes, panel,
               tile_bytes, n, k, first * kRowGroup, prefetch, c);
      t += panel;
    }
  });
}

}  // namespace tlaloc::cpu::q8_internal

#endif  // __x86_64__
