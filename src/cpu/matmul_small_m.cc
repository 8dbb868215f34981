#include "matmul_small_m.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "matmul_small_m_avx2.h"
#include "sum_lanes.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::cpu {

namespace {

// TLALOC_SMALL_M_MATMUL=0 turns the kernel off (the products go where they went before it), for
// comparing the two.
const bool kEnabled = [] {
  const char* env = std::getenv("TLALOC_SMALL_M_MATMUL");
  return (HasAvx512Core() || HasAvx2()) && !(env && std::strcmp(env, "0") == 0);
}();
// Without AVX-512 the kernel is matmul_small_m_avx2.cc's.
const bool kAvx512 = HasAvx512Core();
// TLALOC_SMALL_M_MATMUL=fma keeps bf16 activations on the FMAs too.
const bool kBf16Dots = [] {
  const char* env = std::getenv("TLALOC_SMALL_M_MATMUL");
  return HasAvx512Bf16() && !(env && std::strcmp(env, "fma") == 0);
}();
// TLALOC_SMALL_M_TILES=pair, =group, =packed or =stream picks SmallMTiles::kDefault's tiles
// (kDefault when unset: SmallMMatmul's choice by the number of vectors).
const SmallMTiles kDefaultTiles = [] {
  const char* env = std::getenv("TLALOC_SMALL_M_TILES");
  if (env && std::strcmp(env, "pair") == 0) return SmallMTiles::kPerPair;
  if (env && std::strcmp(env, "group") == 0) return SmallMTiles::kPerGroup;
  if (env && std::strcmp(env, "packed") == 0) return SmallMTiles::kPacked;
  if (env && std::strcmp(env, "stream") == 0) return SmallMTiles::kStream;
  return SmallMTiles::kDefault;
}();

// The lane order of reduction_matmul.cc's LoadRowPair: widening 32 bf16 weights by interleaving
// them with zeros within each 128-bit lane puts elements {0-3, 8-11, 16-19, 24-27} in the low
// vector and the others in the high one. The matrix-vector kernel permutes its f32 vectors into
// that order on every row; here each vector is permuted once per call.
constexpr int kLoLanes[16] = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
constexpr int kHiLanes[16] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};

#define TLALOC_SMALL_M_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Where a tile of bf16 activations gets its weights in VDPBF16PS's operand order (below).
enum class Source {
  kUnpack,          // from the rows, unpacked in registers
  kUnpackAndStore,  // the same, and stored into the tile's buffer for the vectors after these
  kBuffer,          // from that buffer, unpacked already
};

// R weight rows times S vectors: per (row, vector) the FMAs of DotsAvx512 in its order, the
// R x S results kept in registers over all of k. Elements [0, k64) go through VDPBF16PS two
// 32-blocks at a time (kDp; bf16 vectors `xb`, xb_step words apart), [k64, k32) through f32 FMAs
// (vectors `x`, x_step floats apart, whole 32-blocks permuted into the weights' lane order), the
// tail past k32 through masked FMAs (x in place). out[s * out_s + r] gets (vector s, row r).
// `packed` (kDp, kSrc other than kUnpack) holds the R rows' [0, k64) unpacked: for each pair of
// blocks, row by row, the two interleaved halves (64 words a row), 64-byte aligned. With
// `prefetch_ahead` (elements) the rows whose bits are set in `prefetch_rows` are prefetched that
// far on as the tile goes over them.
//
// Why VDPBF16PS gives the FMAs' bits: it adds to each f32 lane the products of its odd bf16 pair
// element, then of its even one, each add rounded to nearest (Intel's definition; checked on Zen
// 4 against two FMAs), and a product of two bf16 values is exact in f32, so it is
// fma(even, fma(odd, acc)). Interleaving the weights of block t + 1 (even) with those of block t
// (odd) in the lane order above, and the vectors likewise, makes one instruction the two FMAs the
// matrix-vector kernel runs on that lane for blocks t and t + 1. It flushes subnormal inputs and
// results to zero, which the FMAs do not: bits agree unless a product or partial sum is below
// 2^-126, which activations and weights of a trained model do not reach.
template <int R, int S, bool kDp, Source kSrc>
TLALOC_SMALL_M_TARGET void Tile(const uint16_t* const* rows, uint16_t* packed, const uint16_t* xb,
                                int64_t xb_step, const float* x, int64_t x_step, int64_t k,
                                int64_t k64, int64_t k32, float* out, int64_t out_s,
                                int64_t prefetch_ahead, unsigned prefetch_rows) {
  // (Unrolled, so that the accumulators start and end in registers, not on the stack.)
  __m512 acc0[R][S], acc1[R][S];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) acc0[r][s] = acc1[r][s] = _mm512_setzero_ps();
  int64_t i = 0;
  if constexpr (kDp) {
    for (; i < k64; i += 64) {
      __m512bh w0[R], w1[R];
      // This pair of blocks' R x 64 words in the buffer (none when unpacking alone: `packed` is
      // null then, and offsetting a null pointer is undefined).
      uint16_t* p = kSrc == Source::kUnpack ? nullptr : packed + i * R;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        if (prefetch_ahead && (prefetch_rows >> r & 1u)) {
          const char* ahead = reinterpret_cast<const char*>(rows[r] + i + prefetch_ahead);
          _mm_prefetch(ahead, _MM_HINT_T1);
          _mm_prefetch(ahead + 64, _MM_HINT_T1);
        }
        if constexpr (kSrc == Source::kBuffer) {
          w0[r] = reinterpret_cast<__m512bh>(_mm512_load_si512(p + 64 * r));
          w1[r] = reinterpret_cast<__m512bh>(_mm512_load_si512(p + 64 * r + 32));
          continue;
        }
        const __m512i even = _mm512_loadu_si512(rows[r] + i + 32);  // block t + 1
        const __m512i odd = _mm512_loadu_si512(rows[r] + i);        // block t
        const __m512i lo = _mm512_unpacklo_epi16(even, odd), hi = _mm512_unpackhi_epi16(even, odd);
        if constexpr (kSrc == Source::kUnpackAndStore) {
          _mm512_store_si512(p + 64 * r, lo);
          _mm512_store_si512(p + 64 * r + 32, hi);
        }
        w0[r] = reinterpret_cast<__m512bh>(lo);
        w1[r] = reinterpret_cast<__m512bh>(hi);
      }
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) {
        const __m512bh x0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + s * xb_step + i));
        const __m512bh x1 =
            reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb + s * xb_step + i + 32));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          acc0[r][s] = _mm512_dpbf16_ps(acc0[r][s], x0, w0[r]);
          acc1[r][s] = _mm512_dpbf16_ps(acc1[r][s], x1, w1[r]);
        }
      }
    }
  }
  for (; i < k32; i += 32) {
    __m512 w0[R], w1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (prefetch_ahead && (prefetch_rows >> r & 1u))
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + i + prefetch_ahead), _MM_HINT_T1);
      const __m512i v = _mm512_loadu_si512(rows[r] + i);
      w0[r] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
      w1[r] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
    }
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const __m512 x0 = _mm512_loadu_ps(x + s * x_step + i);
      const __m512 x1 = _mm512_loadu_ps(x + s * x_step + i + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        acc0[r][s] = _mm512_fmadd_ps(x0, w0[r], acc0[r][s]);
        acc1[r][s] = _mm512_fmadd_ps(x1, w1[r], acc1[r][s]);
      }
    }
  }
  for (; i < k; i += 16) {
    const int64_t rem = std::min<int64_t>(16, k - i);
    const __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i h = _mm256_maskz_loadu_epi16(m, rows[r] + i);
      const __m512 w = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s)
        acc0[r][s] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + s * x_step + i), w, acc0[r][s]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) out[s * out_s + r] = SumLanes(acc0[r][s], acc1[r][s]);
}

// The per-pair tiles (SmallMTiles::kPerPair, and f32 activations' tiles): 2 x R x S
// accumulators, R x 2 weight vectors and two vector halves within the 32 registers.
constexpr int kRows = 4;
constexpr int kVectors = 2;
// The tiles of kPerGroup and kPacked (bf16 activations only): 24 accumulators, 6 weight vectors,
// vector halves loaded as the dot products use them; each weight vector serves 4 vectors, not 2.
// With the accumulators in registers from start to end (the unrolled loops in Tile), on one Zen 4
// thread at 16 rows, k = 1024, weights from the buffer: 3 x 4 +14%, 4 x 2 +5%, 4 x 3 and 2 x 6
// -5%, against 4 x 2 unpacking (an earlier measurement, accumulators set up on the stack, had
// found 4 x 2 and 3 x 4 alike).
constexpr int kGroupRows = 3;
constexpr int kGroupVectors = 4;

// The operands of one product, as the tiles read them.
struct Operands {
  const uint16_t* xb;  // bf16 vectors for [0, k64), pairs of blocks interleaved
  int64_t xb_step;
  const float* x;  // f32 vectors for [k64, k)
  int64_t x_step, k, k64, k32;
};

// Vectors s0 to s0 + s - 1 (s <= S) through one R x s tile.
template <int R, int S, bool kDp, Source kSrc>
TLALOC_SMALL_M_TARGET void TileOf(int s, const uint16_t* const* rows, uint16_t* packed,
                                  const Operands& o, int s0, float* out, int64_t out_s,
                                  int64_t ahead, unsigned prefetch_rows = ~0u) {
  if constexpr (S > 1) {
    if (s < S)
      return TileOf<R, S - 1, kDp, kSrc>(s, rows, packed, o, s0, out, out_s, ahead, prefetch_rows);
  }
  Tile<R, S, kDp, kSrc>(rows, packed, o.xb + s0 * o.xb_step, o.xb_step, o.x + s0 * o.x_step,
                        o.x_step, o.k, o.k64, o.k32, out + s0 * out_s, out_s, ahead, prefetch_rows);
}

// The rows (a bit each, of R) whose lines ahead tile `tile` of `tiles` over the same R rows
// prefetches: row r goes to tile r % tiles. With the first tile prefetching all of them, memory
// idled while the others ran from the buffer: the LM head at 16 vectors (M 16, K 1024, N 151936,
// weights from memory, 2 threads, Zen 5) ran 356 GFLOP/s spread against 332 (medians of five
// alternated runs, 5 of 5 ahead); at K 3072 (no buffer) about even.
inline unsigned PrefetchRowsOf(int tile, int tiles, int rows) {
  unsigned mask = 0;
  for (int r = tile; r < rows; r += tiles) mask |= 1u << r;
  return mask;
}

// All m vectors against R rows, kVectors at a time, each tile unpacking the rows again.
template <int R, bool kDp>
void Rows(const uint16_t* const* rows, const Operands& o, int m, float* out, int64_t out_s,
          int64_t prefetch_ahead) {
  const int tiles = (m + kVectors - 1) / kVectors;
  for (int s0 = 0; s0 < m; s0 += kVectors)
    TileOf<R, kVectors, kDp, Source::kUnpack>(std::min(kVectors, m - s0), rows, nullptr, o, s0, out,
                                              out_s, prefetch_ahead,
                                              PrefetchRowsOf(s0 / kVectors, tiles, R));
}

// The longest k (elements) whose rows go through the buffer (R x k words: 6 KiB at R = 3):
// beyond it, at k = 2048 and 3072, the buffer's tiles ran 0-10% behind tiles unpacking the rows
// again for every 4 vectors (one Zen 4 thread; also with the buffer's tiles going over k in
// slices of 1024, all the vectors over one slice before the next).
constexpr int64_t kMaxPackedK = 1024;

// The most vectors read against one row at a time (RunTiles' stream), and how far on it
// prefetches, in elements.
constexpr int kStreamMaxRows = 4;
constexpr int64_t kStreamAhead = kRowPrefetchBytes / 2;

// All m vectors (bf16) against R rows, S at a time. With `packed` (R x k64 words) and more than
// 2 x S vectors, the first tile unpacks the rows into it as it goes and the others read them from
// there; otherwise each tile unpacks the rows again. At 8 vectors (one tile reading the buffer)
// the buffer's stores cost about what they saved (-10% to +5%, one Zen 4 thread); at 16, the
// buffer gave +10-16% with the weights from memory (the LM head), about nothing from L3. (Running
// a block's rows over 8 vectors at a time instead, so that those stay in L1, measured alike.)
template <int R, int S>
void PackedRows(const uint16_t* const* rows, uint16_t* packed, const Operands& o, int m, float* out,
                int64_t out_s, int64_t prefetch_ahead) {
  const int tiles = (m + S - 1) / S;
  if (!packed || m <= 2 * S) {
    for (int s0 = 0; s0 < m; s0 += S)
      TileOf<R, S, true, Source::kUnpack>(std::min(S, m - s0), rows, nullptr, o, s0, out, out_s,
                                          prefetch_ahead, PrefetchRowsOf(s0 / S, tiles, R));
    return;
  }
  TileOf<R, S, true, Source::kUnpackAndStore>(S, rows, packed, o, 0, out, out_s, prefetch_ahead,
                                              PrefetchRowsOf(0, tiles, R));
  for (int s0 = S; s0 < m; s0 += S)
    TileOf<R, S, true, Source::kBuffer>(std::min(S, m - s0), rows, packed, o, s0, out, out_s,
                                        prefetch_ahead, PrefetchRowsOf(s0 / S, tiles, R));
}

// A thread's buffer of at least `words` 64-byte aligned words, kept for its next products.
uint16_t* PackBuffer(int64_t words) {
  thread_local std::vector<uint16_t> buffer;
  if (static_cast<int64_t>(buffer.size()) < words + 32) buffer.resize(words + 32);
  const auto at = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + ((64 - at % 64) % 64) / 2;
}

// The product over all rows of B, tiles of R rows split across the threads: S vectors per tile
// over a buffer of unpacked rows (PackedRows), or S = 0: kVectors per tile, unpacking (Rows).
// With `stream` (SmallMMatmul's kStream: VDPBF16PS, contiguous rows), rows are read one at a
// time instead.
template <int R, int S, bool kPack = true>
void RunTiles(const uint16_t* weights, const MatrixView& b, int64_t batch, int64_t m, int64_t n,
              bool dp, const Operands& o, float* c, EvalContext& ctx, bool stream = false) {
  const int64_t k = o.k, row_step = b.col_stride, total = batch * n;
  // Blocks of rows streaming about 64 KiB each (the matrix-vector kernel's), whole tiles.
  const int64_t block =
      std::max<int64_t>(R, (int64_t{1} << 16) / std::max<int64_t>(k * 2, 1) / R * R);
  // The rows about 16 KiB on are prefetched into L2 (the matrix-vector kernel's distance).
  const int64_t row_bytes = std::max<int64_t>(1, k * 2);
  const int64_t ahead_rows = std::max<int64_t>(R, (kRowPrefetchBytes + row_bytes - 1) / row_bytes);
  const int mi = static_cast<int>(m);
  ParallelShares(ctx, total, block, [&](int64_t begin, int64_t end) {
    uint16_t* packed = S > 0 && kPack && o.k64 <= kMaxPackedK ? PackBuffer(R * o.k64) : nullptr;
    for (int64_t t = begin; t < end;) {
      const int64_t bi = t / n, r = t % n;
      const uint16_t* base = weights + bi * b.batch_stride;
      Operands ob = o;
      ob.x += bi * m * o.x_step;
      ob.xb += bi * m * o.xb_step;
      float* out = c + bi * m * n + r;
      if (stream) {
        const uint16_t* one[1] = {base + r * row_step};
        const int64_t ahead = (r + 1) * k + kStreamAhead <= n * k ? kStreamAhead : 0;
        for (int s0 = 0; s0 < mi; s0 += kStreamMaxRows)  // more vectors: the row from L1
          TileOf<1, kStreamMaxRows, true, Source::kUnpack>(
              std::min(kStreamMaxRows, mi - s0), one, nullptr, ob, s0, out, n, s0 == 0 ? ahead : 0);
        ++t;
        continue;
      }
      if (t + R <= end && r + R <= n) {
        const uint16_t* rows[R];
        for (int j = 0; j < R; ++j) rows[j] = base + (r + j) * row_step;
        const int64_t ahead = r + ahead_rows + R <= n ? ahead_rows * row_step : 0;
        if constexpr (S > 0)
          PackedRows<R, S>(rows, packed, ob, mi, out, n, ahead);
        else if (dp)
          Rows<R, true>(rows, ob, mi, out, n, ahead);
        else
          Rows<R, false>(rows, ob, mi, out, n, ahead);
        t += R;
      } else {
        const uint16_t* one[1] = {base + r * row_step};
        if (dp)
          Rows<1, true>(one, ob, mi, out, n, 0);
        else
          Rows<1, false>(one, ob, mi, out, n, 0);
        ++t;
      }
    }
  });
}

}  // namespace

bool SmallMMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                  int64_t n, float* c, EvalContext& ctx, SmallMTiles tiles) {
  if (!kEnabled || m < 2 || m > kSmallMMaxRows || b.row_stride != 1 ||
      b.type != ElementType::kBF16 || (a.type != ElementType::kF32 && a.type != ElementType::kBF16))
    return false;
  // bf16 activations are exact as VDPBF16PS's operands; f32 ones take the FMAs all along.
  const bool dp = kAvx512 && kBf16Dots && a.type == ElementType::kBF16;
  Operands o;
  o.k = k;
  o.k32 = k / 32 * 32;
  o.k64 = dp ? k / 64 * 64 : 0;
  o.x_step = (k + 15) / 16 * 16;
  // One cache line more than a row needs: at k = 2048 the rows were 4 KiB apart, and the
  // buffer's tiles ran 10-15% behind the per-pair ones; with the line, about even (elsewhere the
  // line measured within the noise).
  o.xb_step = o.k64 > 0 ? o.k64 + 32 : 0;
  // A's rows, [batch][m][step]: f32 with whole 32-blocks permuted into the weights' lane order
  // and the tail in place; for VDPBF16PS also bf16, each pair of blocks as two 32-word halves
  // (the low lanes', then the high lanes'), block t + 1's element before block t's in each pair.
  std::vector<float> vecs(static_cast<size_t>(batch * m * o.x_step), 0.f);
  std::vector<uint16_t> vecs_bf16(static_cast<size_t>(batch * m * o.xb_step));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t s = 0; s < m; ++s) {
      const int64_t base = bi * a.batch_stride + s * a.row_stride;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t at = base + i * a.col_stride;
        if (a.type == ElementType::kF32) {
          std::memcpy(&row[i], a.data + 4 * at, 4);
        } else {
          uint16_t bits;
          std::memcpy(&bits, a.data + 2 * at, 2);
          row[i] = Bf16BitsToFloat(bits);
        }
      }
      float* dst = vecs.data() + (bi * m + s) * o.x_step;
      for (int64_t i = 0; i < o.k32; i += 32)
        for (int l = 0; l < 16; ++l) {
          dst[i + l] = row[i + kLoLanes[l]];
          dst[i + 16 + l] = row[i + kHiLanes[l]];
        }
      std::copy(row.begin() + o.k32, row.end(), dst + o.k32);
      uint16_t* pairs = vecs_bf16.data() + (bi * m + s) * o.xb_step;
      auto bits = [&](int64_t i) {
        return static_cast<uint16_t>(std::bit_cast<uint32_t>(row[i]) >> 16);
      };
      for (int64_t i = 0; i < o.k64; i += 64)
        for (int l = 0; l < 16; ++l) {
          pairs[i + 2 * l] = bits(i + 32 + kLoLanes[l]);
          pairs[i + 2 * l + 1] = bits(i + kLoLanes[l]);
          pairs[i + 32 + 2 * l] = bits(i + 32 + kHiLanes[l]);
          pairs[i + 32 + 2 * l + 1] = bits(i + kHiLanes[l]);
        }
    }
  o.x = vecs.data();
  o.xb = vecs_bf16.data();
  const auto* weights = reinterpret_cast<const uint16_t*>(b.data);
  if (!kAvx512) {
    SmallMAvx2(weights, b, batch, m, k, n, o.x, o.x_step, c, ctx,
               tiles == SmallMTiles::kPerPair ? SmallMAvx2Tiles::kTwoRowsOneVector
                                              : SmallMAvx2Tiles::kOneRowThreeVectors);
    return true;
  }
  if (tiles == SmallMTiles::kDefault) tiles = kDefaultTiles;
  // Up to kStreamMaxRows vectors: one row after another, all the vectors in one tile, prefetching
  // 16 KiB on in the stream (as the matrix-vector kernel reads one vector's rows), one stream per
  // thread instead of three. Batched decode of 4 sequences on Zen 5: 69-80 -> 81-87 tokens/s;
  // at 8 the same, at 16 slower (each row's tile does the arithmetic of all 16 vectors in four
  // passes that three-row tiles share), so the packed tiles above 4.
  if (tiles == SmallMTiles::kDefault)
    tiles = m <= kStreamMaxRows ? SmallMTiles::kStream : SmallMTiles::kPacked;
  // Streaming needs contiguous rows (rows of other layouts take the packed tiles).
  if (tiles == SmallMTiles::kStream && b.col_stride != k) tiles = SmallMTiles::kPacked;
  // f32 activations run the FMAs, which have no unpacking to save.
  if (!dp) tiles = SmallMTiles::kPerPair;
  switch (tiles) {
    case SmallMTiles::kStream:
      RunTiles<kGroupRows, kGroupVectors, false>(weights, b, batch, m, n, dp, o, c, ctx, true);
      break;
    case SmallMTiles::kPacked:
      RunTiles<kGroupRows, kGroupVectors, true>(weights, b, batch, m, n, dp, o, c, ctx);
      break;
    case SmallMTiles::kPerGroup:
      RunTiles<kGroupRows, kGroupVectors, false>(weights, b, batch, m, n, dp, o, c, ctx);
      break;
    default:
      RunTiles<kRows, 0>(weights, b, batch, m, n, dp, o, c, ctx);
      break;
  }
  return true;
}

}  // namespace tlaloc::cpu
