#include "ragged_dot_grouped.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "reduction_matmul.h"
#include "support/avx512_intrinsics.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/support/cpu_features.h"

#if defined(__x86_64__)
#define TLALOC_AVX512_BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define TLALOC_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

namespace tlaloc::cpu {

namespace {

// Output columns per task: enough tasks to balance (a 768-wide expert is 8), few enough that
// the lhs rows of a group are read from L2 for each tile of weight rows.
constexpr int64_t kBf16ColumnBlock = 96;
// The register tile: kTileRows rows of lhs times kTileCols weight rows, 24 accumulators plus
// the 4 lhs vectors and one weight vector in AVX-512's 32 registers.
constexpr int kTileRows = 4, kTileCols = 6;

#if defined(__x86_64__)
// The sums of four vectors' lanes, each added in the order of GCC's _mm512_reduce_add_ps
// (lane i + lane i + 8, then + 4, then + 2, then + 1), in lanes 0, 4, 8 and 12: 13 shuffles and
// adds for four sums instead of about 36, which at 16-row groups were a tenth of the tile's work.
TLALOC_AVX512_TARGET inline __m512 SumsOfFour(__m512 a, __m512 b, __m512 c, __m512 d) {
  // [x.q0 + x.q2, x.q1 + x.q3] for x = a, b (then c, d): lane i + lane i + 8.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  // The 128-bit lanes hold a, b, c, d's lane i + 4 sums.
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 h = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(h, _mm512_permute_ps(h, _MM_SHUFFLE(2, 3, 0, 1)));
}

// c[r * ldc + j] = the lane sum of acc[r][j], four accumulators at a time.
template <int R, int C>
TLALOC_AVX512_TARGET inline void StoreSums(const __m512 (&acc)[R][C], float* c, int64_t ldc) {
  constexpr int kCount = R * C;
  int i = 0;
#pragma GCC unroll 6
  for (; i + 4 <= kCount; i += 4) {
    alignas(64) float s[16];
    _mm512_store_ps(s, SumsOfFour(acc[i / C][i % C], acc[(i + 1) / C][(i + 1) % C],
                                  acc[(i + 2) / C][(i + 2) % C], acc[(i + 3) / C][(i + 3) % C]));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) c[(i + q) / C * ldc + (i + q) % C] = s[4 * q];
  }
#pragma GCC unroll 3
  for (; i < kCount; ++i) c[i / C * ldc + i % C] = _mm512_reduce_add_ps(acc[i / C][i % C]);
}

// One cache line of each of C rows at `p` (stride ld elements) into L2: the next tile's weight
// rows, fetched from memory while this tile's first rows are computed (T1 as the matrix-vector
// kernel does: T0 prefetches fill the L1 miss buffers the demand loads need).
template <int C, typename T>
inline void Prefetch(const T* p, int64_t ld) {
#pragma GCC unroll 6
  for (int j = 0; j < C; ++j) _mm_prefetch(reinterpret_cast<const char*>(p + j * ld), _MM_HINT_T1);
}

// Calls fn(std::integral_constant<int, n>{}) for n in [1, N]: a tile kernel templated on its
// shape, picked once per tile.
template <int N, typename Fn>
inline void WithCount(int n, const Fn& fn) {
  if constexpr (N > 1) {
    if (n < N) return WithCount<N - 1>(n, fn);
  }
  fn(std::integral_constant<int, N>{});
}

// c's [rows, n] in tiles of up to kTileRows rows x kTileCols weight rows, weight-row tiles outer
// (read from memory by the first row tile, from cache by the later ones): calls
// tile(R, C, r, j, next) with R and C the tile's shape as integral constants, (r, j) its corner
// and `next` whether a next tile of weight rows follows (the first row tile prefetches it).
template <typename Tile>
void ForEachTile(int64_t rows, int64_t n, const Tile& tile) {
  for (int64_t j = 0; j < n; j += kTileCols) {
    const int cols = static_cast<int>(std::min<int64_t>(kTileCols, n - j));
    for (int64_t r = 0; r < rows; r += kTileRows) {
      const int tile_rows = static_cast<int>(std::min<int64_t>(kTileRows, rows - r));
      const bool next = r == 0 && j + kTileCols < n;
      WithCount<kTileRows>(tile_rows, [&](auto rc) {
        WithCount<kTileCols>(cols, [&](auto cc) { tile(rc, cc, r, j, next); });
      });
    }
  }
}

// c[r, j] = sum_k a[r, k] w[j, k] for R rows and C weight rows, 32 elements per step: vdpbf16ps
// multiplies bf16 pairs exactly and adds them into 16 f32 lanes, which are summed at the end.
template <int R, int C>
TLALOC_AVX512_BF16_TARGET void TileBf16(const uint16_t* a, int64_t lda, const uint16_t* w,
                                        int64_t ldw, int64_t k, float* c, int64_t ldc,
                                        const uint16_t* next) {
  __m512 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    __m512i av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = _mm512_loadu_si512(a + r * lda + i);
    if (next) Prefetch<C>(next + i, ldw);
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) {
      const __m512i wv = _mm512_loadu_si512(w + j * ldw + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)av[r], (__m512bh)wv);
    }
  }
  if (i < k) {  // the tail, zero-filled by the masked loads
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (k - i)) - 1);
    __m512i av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = _mm512_maskz_loadu_epi16(m, a + r * lda + i);
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) {
      const __m512i wv = _mm512_maskz_loadu_epi16(m, w + j * ldw + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r][j] = _mm512_dpbf16_ps(acc[r][j], (__m512bh)av[r], (__m512bh)wv);
    }
  }
  StoreSums<R, C>(acc, c, ldc);
}

// The f32 tile: c[r, j] = sum_k a[r, k] w[j, k], 16 lanes of fused multiply-adds per step
// summed at the end (the bf16 tile's shape and order, one element per lane instead of a pair).
template <int R, int C>
TLALOC_AVX512_TARGET void TileF32(const float* a, int64_t lda, const float* w, int64_t ldw,
                                  int64_t k, float* c, int64_t ldc, const float* next) {
  __m512 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = _mm512_loadu_ps(a + r * lda + i);
    if (next) Prefetch<C>(next + i, ldw);
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) {
      const __m512 wv = _mm512_loadu_ps(w + j * ldw + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(av[r], wv, acc[r][j]);
    }
  }
  if (i < k) {  // the tail, zero-filled by the masked loads
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 av[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) av[r] = _mm512_maskz_loadu_ps(m, a + r * lda + i);
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, w + j * ldw + i);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(av[r], wv, acc[r][j]);
    }
  }
  StoreSums<R, C>(acc, c, ldc);
}

// The int8 tile: TileF32's products in TileF32's order on weight rows dequantised in registers,
// each s8 value times its block's f16 scale, exact in f32 and the very values DequantiseRows
// writes (ragged_dot_int8.cc), so the sums are bit for bit TileF32's on the dequantised rows.
// k is a multiple of 32 (the scales' blocks), so there is no tail.
template <int R, int C>
TLALOC_AVX512_TARGET void TileInt8(const float* a, int64_t lda, const int8_t* w, int64_t ldw,
                                   const uint16_t* scales, int64_t lds, int64_t k, float* c,
                                   int64_t ldc, const int8_t* next) {
  __m512 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
  // Each row's scales, sixteen blocks at a time, widened from f16 exactly (vcvtph2ps, the value
  // HalfBitsToFloat gives).
  alignas(64) float sc[C][16];
  for (int64_t i = 0; i < k; i += 32) {
    const int64_t blk = i / 32;
    if ((blk & 15) == 0) {
      const int64_t left = std::min<int64_t>(16, lds - blk);
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
#pragma GCC unroll 6
      for (int j = 0; j < C; ++j)
        _mm512_store_ps(sc[j],
                        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, scales + j * lds + blk)));
    }
    __m512 d[C];
#pragma GCC unroll 6
    for (int j = 0; j < C; ++j) d[j] = _mm512_set1_ps(sc[j][blk & 15]);
    if (next && i % 64 == 0) Prefetch<C>(next + i, ldw);  // a cache line holds 64 values
#pragma GCC unroll 2
    for (int64_t at = i; at < i + 32; at += 16) {
      __m512 av[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) av[r] = _mm512_loadu_ps(a + r * lda + at);
#pragma GCC unroll 6
      for (int j = 0; j < C; ++j) {
        const __m512i q = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j * ldw + at)));
        const __m512 wv = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d[j]);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(av[r], wv, acc[r][j]);
      }
    }
  }
  StoreSums<R, C>(acc, c, ldc);
}

#endif

bool F32KernelAvailable() {
#if defined(__x86_64__)
  return HasAvx512Core();
#else
  return false;
#endif
}

// TLALOC_BF16_MATMUL=blas turns this kernel off with oneDNN's: both count subnormal bf16
// inputs as zero.
bool Bf16KernelAvailable() {
#if defined(__x86_64__)
  return HasAvx512Bf16() && DnnlBf16Available();
#else
  return false;
#endif
}

// TLALOC_RAGGED_DOT picks the path, to measure the kernels against each other:
//   unset, "grouped" or "f32_tiles": every group of every size, decode's rows too, through the
//                       tile kernels (weights stored [G, N, K]) in one pass over the pool;
//   "large": groups of more than kMaxVectors rows only (smaller ones: the matrix-vector kernel);
//   "sgemm": as "large", f32 through one sgemm per (group, 256 columns) (the earlier path);
//   "per_group": every group one product of its own (the path before that).
// The f32 tile kernel sums in another order than sgemm (16 lanes, then a tree). It was opt-in
// for large f32 groups while cli.finetune_moe's outcome hung on that last bit; the test's
// recipe now converges under every order (tests/cli/finetune_moe_test.sh says how).
enum class GroupedPath { kAllGroups, kLargeGroups, kSgemm, kPerGroup };

GroupedPath PathFromEnv() {
  static const GroupedPath path = [] {
    const char* env = std::getenv("TLALOC_RAGGED_DOT");
    if (!env) return GroupedPath::kAllGroups;
    if (std::strcmp(env, "per_group") == 0) return GroupedPath::kPerGroup;
    if (std::strcmp(env, "sgemm") == 0) return GroupedPath::kSgemm;
    if (std::strcmp(env, "large") == 0) return GroupedPath::kLargeGroups;
    return GroupedPath::kAllGroups;
  }();
  return path;
}

bool TileKernelTakes(const Literal& lhs, const Literal& rhs, int64_t rhs_contract) {
  const ElementType lt = lhs.element_type(), rt = rhs.element_type();
  if (rhs_contract != 2 || lt != rt) return false;
  if (lt == ElementType::kBF16) return Bf16KernelAvailable();
  return lt == ElementType::kF32 && F32KernelAvailable() && PathFromEnv() != GroupedPath::kSgemm;
}

// One single-thread sgemm per call, as BlasMatmulViews runs its blocks: OpenBLAS's own threads
// would compete with the pool's.
void UseSingleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

bool GroupedBf16(const Literal& lhs, const Literal& rhs, const std::vector<RowGroup>& groups,
                 float* c, EvalContext& ctx) {
  const int64_t k = lhs.dims()[1], n = rhs.dims()[1];
  const auto* a = reinterpret_cast<const uint16_t*>(lhs.data());
  const auto* w = reinterpret_cast<const uint16_t*>(rhs.data());
  const int64_t blocks = (n + kBf16ColumnBlock - 1) / kBf16ColumnBlock;
  ForEachTask(ctx, static_cast<int64_t>(groups.size()) * blocks, [&](int64_t task) {
    const RowGroup& g = groups[task / blocks];
    const int64_t j0 = task % blocks * kBf16ColumnBlock;
    const int64_t nb = std::min(kBf16ColumnBlock, n - j0);
    Bf16RowsTimesRowsT(a + g.start * k, k, g.rows, w + (g.group * n + j0) * k, k, nb, k,
                       c + g.start * n + j0, n);
  });
  return true;
}

bool GroupedF32Sgemm(const Literal& lhs, const Literal& rhs, int64_t rhs_contract,
                     const std::vector<RowGroup>& groups, float* c, EvalContext& ctx) {
  UseSingleThreadedBlas();
  constexpr int64_t kBlock = 256;
  const int64_t k = lhs.dims()[1], n = rhs.dims()[rhs_contract == 1 ? 2 : 1];
  const float* a = lhs.span<float>().data();
  const float* w = rhs.span<float>().data();
  const bool b_trans = rhs_contract == 2;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  ForEachTask(ctx, static_cast<int64_t>(groups.size()) * blocks, [&](int64_t task) {
    const RowGroup& g = groups[task / blocks];
    const int64_t j0 = task % blocks * kBlock, nb = std::min(kBlock, n - j0);
    const float* b = w + g.group * k * n + (b_trans ? j0 * k : j0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.rows), static_cast<int>(nb), static_cast<int>(k), 1.0f,
                a + g.start * k, static_cast<int>(k), b, static_cast<int>(b_trans ? k : n), 0.0f,
                c + g.start * n + j0, static_cast<int>(n));
  });
  return true;
}

bool GroupedF32Tiles(const Literal& lhs, const Literal& rhs, const std::vector<RowGroup>& groups,
                     float* c, EvalContext& ctx) {
  const int64_t k = lhs.dims()[1], n = rhs.dims()[1];
  const float* a = lhs.span<float>().data();
  const float* w = rhs.span<float>().data();
  const int64_t blocks = (n + kBf16ColumnBlock - 1) / kBf16ColumnBlock;
  ForEachTask(ctx, static_cast<int64_t>(groups.size()) * blocks, [&](int64_t task) {
    const RowGroup& g = groups[task / blocks];
    const int64_t j0 = task % blocks * kBf16ColumnBlock;
    const int64_t nb = std::min(kBf16ColumnBlock, n - j0);
    F32RowsTimesRowsT(a + g.start * k, k, g.rows, w + (g.group * n + j0) * k, k, nb, k,
                      c + g.start * n + j0, n);
  });
  return true;
}

}  // namespace

bool Bf16RowsTimesRowsT(const uint16_t* a, int64_t lda, int64_t rows, const uint16_t* w,
                        int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc) {
  if (!Bf16KernelAvailable()) return false;
#if defined(__x86_64__)
  ForEachTile(rows, n, [&](auto rc, auto cc, int64_t r, int64_t j, bool next) {
    TileBf16<decltype(rc)::value, decltype(cc)::value>(a + r * lda, lda, w + j * ldw, ldw, k,
                                                       c + r * ldc + j, ldc,
                                                       next ? w + (j + kTileCols) * ldw : nullptr);
  });
  return true;
#else
  return false;
#endif
}

bool F32RowsTimesRowsT(const float* a, int64_t lda, int64_t rows, const float* w, int64_t ldw,
                       int64_t n, int64_t k, float* c, int64_t ldc) {
  if (!F32KernelAvailable()) return false;
#if defined(__x86_64__)
  ForEachTile(rows, n, [&](auto rc, auto cc, int64_t r, int64_t j, bool next) {
    TileF32<decltype(rc)::value, decltype(cc)::value>(a + r * lda, lda, w + j * ldw, ldw, k,
                                                      c + r * ldc + j, ldc,
                                                      next ? w + (j + kTileCols) * ldw : nullptr);
  });
  return true;
#else
  return false;
#endif
}

bool Int8RowsTimesRowsT(const float* a, int64_t lda, int64_t rows, const int8_t* w,
                        const uint16_t* scales, int64_t n, int64_t k, float* c, int64_t ldc) {
  if (!F32KernelAvailable() || k % 32 != 0) return false;
#if defined(__x86_64__)
  const int64_t lds = k / 32;
  ForEachTile(rows, n, [&](auto rc, auto cc, int64_t r, int64_t j, bool next) {
    TileInt8<decltype(rc)::value, decltype(cc)::value>(
        a + r * lda, lda, w + j * k, k, scales + j * lds, lds, k, c + r * ldc + j, ldc,
        next ? w + (j + kTileCols) * k : nullptr);
  });
  return true;
#else
  return false;
#endif
}

// Follows GroupedTakesSmallGroups and GroupedRowsProduct for f32 operands, rhs_contract 2.
F32ExpertKernel F32ExpertKernelFor(int64_t rows) {
  const GroupedPath path = PathFromEnv();
  if (rows <= kMaxVectors)
    return path == GroupedPath::kAllGroups && F32KernelAvailable() ? F32ExpertKernel::kTiles
                                                                   : F32ExpertKernel::kMatrixVector;
  if (path == GroupedPath::kPerGroup) return F32ExpertKernel::kViewMatmul;
  if (F32KernelAvailable() && path != GroupedPath::kSgemm) return F32ExpertKernel::kTiles;
  return OpenBlasCoreFitsCpu() ? F32ExpertKernel::kSgemm : F32ExpertKernel::kViewMatmul;
}

bool GroupedTakesSmallGroups(const Literal& lhs, const Literal& rhs, int64_t rhs_contract) {
  const GroupedPath path = PathFromEnv();
  return path == GroupedPath::kAllGroups && TileKernelTakes(lhs, rhs, rhs_contract);
}

bool GroupedRowsProduct(const Literal& lhs, const Literal& rhs, int64_t rhs_contract,
                        const std::vector<RowGroup>& groups, float* c, EvalContext& ctx) {
  const ElementType lt = lhs.element_type(), rt = rhs.element_type();
  if (PathFromEnv() == GroupedPath::kPerGroup) return false;
  if (groups.empty()) return true;
  if (TileKernelTakes(lhs, rhs, rhs_contract)) {
    if (lt == ElementType::kBF16) return GroupedBf16(lhs, rhs, groups, c, ctx);
    return GroupedF32Tiles(lhs, rhs, groups, c, ctx);
  }
  if (lt == ElementType::kF32 && rt == ElementType::kF32 && OpenBlasCoreFitsCpu())
    return GroupedF32Sgemm(lhs, rhs, rhs_contract, groups, c, ctx);
  return false;
}

}  // namespace tlaloc::cpu
