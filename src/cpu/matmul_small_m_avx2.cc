#include "matmul_small_m_avx2.h"

#include <algorithm>

#include "dots_avx2.h"

namespace tlaloc::cpu {

namespace {

// R weight rows times S vectors with DotsAvx2's arithmetic per pair: four 256-bit accumulators
// (DotsAvx512's two 512-bit ones as halves) kept in registers over all of k. A vector's permuted
// 32-block holds, 8 floats each, the lanes of acc0.lo, acc0.hi, acc1.lo, acc1.hi in that order
// (PermuteHalf of elements [0, 16) then [16, 32)); the tail past k32 is in place, as DotsAvx2's
// tail reads it. out[s * out_s + r] gets (vector s, row r).
template <int R, int S>
TLALOC_AVX2_TARGET void TileAvx2(const uint16_t* const* rows, const float* x, int64_t x_step,
                                 int64_t k, float* out, int64_t out_s, int64_t prefetch_ahead) {
  Avx2Acc acc0[R][S], acc1[R][S];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s)
      acc0[r][s] = acc1[r][s] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t k32 = k / 32 * 32;
  int64_t i = 0;
  for (; i < k32; i += 32) {
    // The first 16 weights feed the accumulators' low halves, the next 16 their high ones.
    __m256 w0[R], w1[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (prefetch_ahead)
        _mm_prefetch(reinterpret_cast<const char*>(rows[r] + i + prefetch_ahead), _MM_HINT_T1);
      LoadRowHalf(rows[r] + i, w0[r], w1[r]);
    }
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const float* xs = x + s * x_step + i;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        acc0[r][s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(xs), w0[r], acc0[r][s].lo);
        acc1[r][s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 16), w1[r], acc1[r][s].lo);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) LoadRowHalf(rows[r] + i + 16, w0[r], w1[r]);
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const float* xs = x + s * x_step + i;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        acc0[r][s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 8), w0[r], acc0[r][s].hi);
        acc1[r][s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 24), w1[r], acc1[r][s].hi);
      }
    }
  }
  // DotsAvx2's tail: steps of 16 in natural order into the first accumulator, the weights past k
  // zero (the vectors are zero-padded there).
  for (; i < k; i += 16) {
    const int64_t rem = std::min<int64_t>(16, k - i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      alignas(32) float w[16] = {};
      for (int64_t j = 0; j < rem; ++j) w[j] = Bf16BitsToFloat(rows[r][i + j]);
      const __m256 wl = _mm256_load_ps(w), wh = _mm256_load_ps(w + 8);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const float* xs = x + s * x_step + i;
        acc0[r][s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(xs), wl, acc0[r][s].lo);
        acc0[r][s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 8), wh, acc0[r][s].hi);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) out[s * out_s + r] = SumLanesAvx2(acc0[r][s], acc1[r][s]);
}

// All m vectors against R rows, S at a time (the last tile s < S of them). Only the first pass
// over the rows prefetches the rows after them.
template <int R, int S>
void RowsAvx2(const uint16_t* const* rows, const float* x, int64_t x_step, int64_t k, int64_t m,
              float* out, int64_t out_s, int64_t prefetch_ahead) {
  for (int64_t s0 = 0; s0 < m; s0 += S) {
    const int64_t ahead = s0 == 0 ? prefetch_ahead : 0;
    const float* xs = x + s0 * x_step;
    float* o = out + s0 * out_s;
    switch (std::min<int64_t>(S, m - s0)) {
      case 1:
        TileAvx2<R, 1>(rows, xs, x_step, k, o, out_s, ahead);
        break;
      case 2:
        if constexpr (S >= 2) TileAvx2<R, 2>(rows, xs, x_step, k, o, out_s, ahead);
        break;
      default:
        if constexpr (S >= 3) TileAvx2<R, 3>(rows, xs, x_step, k, o, out_s, ahead);
        break;
    }
  }
}

// The product over all rows of B, tiles of R rows split across the threads (matmul_small_m.cc's
// RunTiles: blocks of about 64 KiB of rows, the rows about 16 KiB on prefetched into L2).
template <int R, int S>
void RunTilesAvx2(const uint16_t* weights, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                  int64_t n, const float* x, int64_t x_step, float* c, EvalContext& ctx) {
  static_assert(S <= 3 && 4 * R * S <= 12, "the accumulators must fit the 16 ymm registers");
  const int64_t row_step = b.col_stride, total = batch * n;
  const int64_t block =
      std::max<int64_t>(R, (int64_t{1} << 16) / std::max<int64_t>(k * 2, 1) / R * R);
  const int64_t row_bytes = std::max<int64_t>(1, k * 2);
  const int64_t ahead_rows =
      std::max<int64_t>(R, ((int64_t{16} << 10) + row_bytes - 1) / row_bytes);
  // The vectors in groups of about 24 KiB, each group over the whole block of rows before the
  // next: the group stays in L1 while the block's rows (64 KiB) come from L2 again for the next
  // group. With all the vectors over each row instead, at 64 vectors every row read 256 KiB (k =
  // 1024) of vectors from L2. A pair's arithmetic does not depend on the order of the tiles.
  const int64_t group = std::max<int64_t>(S, (int64_t{24} << 10) / (4 * x_step) / S * S);
  ParallelShares(ctx, total, block, [&](int64_t begin, int64_t end) {
    for (int64_t g0 = 0; g0 < m; g0 += group) {
      const int64_t gm = std::min(group, m - g0);
      for (int64_t t = begin; t < end;) {
        const int64_t bi = t / n, r = t % n;
        const uint16_t* base = weights + bi * b.batch_stride;
        const float* xb = x + (bi * m + g0) * x_step;
        float* out = c + (bi * m + g0) * n + r;
        if (t + R <= end && r + R <= n) {
          const uint16_t* rows[R];
          for (int j = 0; j < R; ++j) rows[j] = base + (r + j) * row_step;
          // Only the first group's pass prefetches the rows after the block's.
          const int64_t ahead = g0 == 0 && r + ahead_rows + R <= n ? ahead_rows * row_step : 0;
          RowsAvx2<R, S>(rows, xb, x_step, k, gm, out, n, ahead);
          t += R;
        } else {
          const uint16_t* one[1] = {base + r * row_step};
          RowsAvx2<1, 3>(one, xb, x_step, k, gm, out, n, 0);
          ++t;
        }
      }
    }
  });
}

}  // namespace

void SmallMAvx2(const uint16_t* weights, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, const float* x, int64_t x_step, float* c, EvalContext& ctx,
                SmallMAvx2Tiles tiles) {
  if (tiles == SmallMAvx2Tiles::kTwoRowsOneVector)
    RunTilesAvx2<2, 1>(weights, b, batch, m, k, n, x, x_step, c, ctx);
  else
    RunTilesAvx2<1, 3>(weights, b, batch, m, k, n, x, x_step, c, ctx);
}

}  // namespace tlaloc::cpu
